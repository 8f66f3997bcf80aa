//! What an approver reads: a one-line description of a proposed call and one
//! preview row per field it would set.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// One field a call would set (old values are not known to loadout).
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct PreviewRow {
    /// A path such as `tasks[1].title`.
    pub field: String,
    /// Any JSON value.
    pub new: Value,
}

/// "create_tasks" → "Create tasks".
fn humanize(tool: &str) -> String {
    let words = tool.replace('_', " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// The first string field of an item: its title, name or text, by convention.
fn label(item: &Value) -> Option<String> {
    match item {
        Value::String(s) => Some(s.clone()),
        Value::Object(fields) => ["title", "name", "text", "content", "instructions"]
            .iter()
            .find_map(|k| fields.get(*k).and_then(Value::as_str))
            .or_else(|| fields.values().find_map(Value::as_str))
            .map(str::to_owned),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn shorten(text: &str) -> String {
    let mut out: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// "Create tasks: Buy groceries, Call the dentist", and one preview row per field
/// (`{field, new}`; old values are not known to loadout).
pub fn describe(tool: &str, arguments: &Value) -> (String, Vec<PreviewRow>) {
    // Fields by name, whatever order the caller sent them in.
    let arguments = &crate::digest::sorted(arguments);
    let mut labels = Vec::new();
    let mut preview = Vec::new();
    if let Some(fields) = arguments.as_object() {
        for (name, value) in fields {
            match value {
                Value::Array(items) => {
                    labels.extend(items.iter().filter_map(label));
                    for (i, item) in items.iter().enumerate() {
                        match item.as_object() {
                            Some(inner) => {
                                for (field, v) in inner.iter().filter(|(_, v)| !v.is_null()) {
                                    preview.push(row(format!("{name}[{i}].{field}"), v));
                                }
                            }
                            None => preview.push(row(format!("{name}[{i}]"), item)),
                        }
                    }
                }
                Value::Null => {}
                other => {
                    if let Some(text) = label(other) {
                        labels.push(text);
                    }
                    preview.push(row(name.clone(), other));
                }
            }
        }
    }
    let labels: Vec<String> = labels.iter().map(|l| shorten(l)).collect();
    let description = if labels.is_empty() {
        humanize(tool)
    } else {
        format!("{}: {}", humanize(tool), labels.join(", "))
    };
    (description, preview)
}

fn row(field: String, new: &Value) -> PreviewRow {
    PreviewRow {
        field,
        new: new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_description_names_each_item_of_a_list() {
        let arguments =
            json!({"tasks": [{"title": "Buy groceries"}, {"title": "Call the dentist"}]});
        let (text, _) = describe("create_tasks", &arguments);
        assert_eq!(text, "Create tasks: Buy groceries, Call the dentist");
    }

    #[test]
    fn the_preview_has_one_row_per_set_field_and_skips_nulls() {
        let arguments = json!({"tasks": [{"title": "Buy groceries", "due_date": null}, {"title": "Call the dentist", "due_date": "2026-12-01"}]});
        let (_, preview) = describe("create_tasks", &arguments);
        assert_eq!(
            serde_json::to_value(preview).expect("serialises"),
            json!([
                {"field": "tasks[0].title", "new": "Buy groceries"},
                {"field": "tasks[1].due_date", "new": "2026-12-01"},
                {"field": "tasks[1].title", "new": "Call the dentist"}
            ])
        );
    }

    #[test]
    fn a_description_quotes_a_single_text_field() {
        let (text, _) = describe(
            "update_instructions",
            &json!({"instructions": "Reply in French."}),
        );
        assert_eq!(text, "Update instructions: Reply in French.");
    }

    #[test]
    fn a_description_lists_plain_ids() {
        let (text, _) = describe("delete_tasks", &json!({"ids": ["t1", "t2"]}));
        assert_eq!(text, "Delete tasks: t1, t2");
    }

    #[test]
    fn a_long_label_is_shortened_to_80_characters() {
        let long = "x".repeat(100);
        let (text, _) = describe("create_notes", &json!({"text": long}));
        assert_eq!(text, format!("Create notes: {}…", "x".repeat(80)));
    }
}
