//! The definition rules: a tool definition on its own (name, tier, schema), and the
//! catalog file. Shared by the check, the admin tool endpoints and the catalog test.

use std::collections::BTreeSet;

use serde_json::Value;

use super::code::ProblemCode;
use crate::execute::arguments::compile;
use crate::registry::Tier;
use crate::registry::catalog::Catalog;
use crate::registry::formats::strict_schema;

pub const VERBS: [&str; 7] = ["get", "create", "update", "delete", "search", "set", "link"];
/// The approval tiers' stored text: [`Tier::NAMES`].
pub const TIERS: &[&str] = Tier::NAMES;

/// Why a tool name breaks the vocabulary (`verb_resource`, snake_case), or `None`.
pub fn name_problem(name: &str) -> Option<String> {
    let Some((verb, resource)) = name.split_once('_') else {
        return Some(format!(
            "{name:?} has no verb: names are verb_resource, the verb one of {}",
            VERBS.join(", ")
        ));
    };
    if !VERBS.contains(&verb) {
        return Some(format!(
            "{verb:?} is not a canonical verb; use one of {}",
            VERBS.join(", ")
        ));
    }
    let snake = resource.len() <= 60
        && resource
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_lowercase)
        && resource.split('_').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if !snake {
        return Some(format!(
            "the resource {resource:?} must be snake_case: lowercase letters and digits in words joined by '_', starting with a letter"
        ));
    }
    None
}

/// Problems with one tool definition on its own (name, tier, schema shape and strictness),
/// as `(code, message, hint)`. Used by the check and by the admin tool endpoints.
/// `singular`: the catalog marks the resource as one per user (update_instructions),
/// so create_/update_ need not take a list.
pub fn definition_problems(
    name: &str,
    tier: &str,
    schema: &Value,
    singular: bool,
) -> Vec<(&'static str, String, String)> {
    problems(name, tier, schema, singular)
        .into_iter()
        .map(|(code, message, hint)| (code.as_str(), message, hint))
        .collect()
}

/// [`definition_problems`] with typed codes.
pub(super) fn problems(
    name: &str,
    tier: &str,
    schema: &Value,
    singular: bool,
) -> Vec<(ProblemCode, String, String)> {
    let mut out = Vec::new();
    if let Some(why) = name_problem(name) {
        out.push((
            ProblemCode::NameOutsideVocabulary,
            why,
            "rename the tool to verb_resource with a canonical verb".to_owned(),
        ));
    }
    if tier.parse::<Tier>().is_err() {
        out.push((
            ProblemCode::MissingTier,
            format!(
                "approval tier {tier:?} is not one of {}",
                Tier::NAMES.join(", ")
            ),
            "set an explicit approval_tier; nothing may fall through to a default".to_owned(),
        ));
    }
    if let Some(why) = schema_problem(schema) {
        out.push((
            ProblemCode::InvalidSchema,
            why,
            "make parameters a JSON Schema object".to_owned(),
        ));
        return out;
    }
    if strict_schema(schema) != *schema {
        out.push((
            ProblemCode::SchemaNotStrict,
            "the schema is not strict: some object level lacks \"additionalProperties\": false or does not list every property in \"required\"".to_owned(),
            "add \"additionalProperties\": false and a full \"required\" list at every object level; make optional values nullable".to_owned(),
        ));
    }
    let verb = name.split('_').next().unwrap_or_default();
    match verb {
        "create" | "update"
            if !singular
                && !takes_list(schema, |items| {
                    items.get("type") == Some(&Value::from("object"))
                }) =>
        {
            out.push((
                ProblemCode::SchemaNotAList,
                format!("a {verb}_ tool must take a list of items (an array of objects)"),
                "wrap the item in an array property, e.g. {\"items\": [...]}".to_owned(),
            ));
        }
        "delete" if !takes_list(schema, is_id_schema) => {
            out.push((
                ProblemCode::SchemaNotAList,
                "a delete_ tool must take a list of ids (an array of strings or integers)"
                    .to_owned(),
                "take {\"ids\": [\"...\"]}".to_owned(),
            ));
        }
        _ => {}
    }
    out
}

fn is_id_schema(items: &Value) -> bool {
    let ok = |t: &Value| matches!(t.as_str(), Some("string" | "integer"));
    match items.get("type") {
        Some(Value::Array(types)) => types.iter().any(ok),
        Some(t) => ok(t),
        None => false,
    }
}

/// Whether a top-level property is an array whose `items` pass `item_ok`.
fn takes_list(schema: &Value, item_ok: impl Fn(&Value) -> bool) -> bool {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return false;
    };
    properties.values().any(|p| {
        let is_array = match p.get("type") {
            Some(Value::String(t)) => t == "array",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
            _ => false,
        };
        is_array && p.get("items").is_some_and(&item_ok)
    })
}

const TYPE_NAMES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Why a value is not a usable JSON Schema object, or `None`. Checks the root shape
/// and, recursively, that `type`, `properties`, `required` and `items` are well formed
/// (naming the property path), then compiles it as a tool call would: the meta-schema
/// of its draft (2020-12 unless `$schema` says otherwise), patterns, and `$ref`s.
pub fn schema_problem(schema: &Value) -> Option<String> {
    let Some(root) = schema.as_object() else {
        return Some("not a JSON object".to_owned());
    };
    if root.get("type") != Some(&Value::from("object")) {
        return Some("the root must have \"type\": \"object\"".to_owned());
    }
    fn walk(path: &str, node: &Value) -> Option<String> {
        let Some(object) = node.as_object() else {
            return if node.is_boolean() {
                None
            } else {
                Some(format!("{path}: a schema must be an object"))
            };
        };
        if let Some(t) = object.get("type") {
            let names: Vec<&Value> = match t {
                Value::Array(ts) => ts.iter().collect(),
                other => vec![other],
            };
            if names
                .iter()
                .any(|n| !n.as_str().is_some_and(|n| TYPE_NAMES.contains(&n)))
            {
                return Some(format!("{path}: \"type\" {t} is not a JSON Schema type"));
            }
        }
        if let Some(required) = object.get("required") {
            let names = required
                .as_array()
                .is_some_and(|r| r.iter().all(Value::is_string));
            if !names {
                return Some(format!(
                    "{path}: \"required\" must be a list of property names"
                ));
            }
        }
        if let Some(properties) = object.get("properties") {
            let Some(properties) = properties.as_object() else {
                return Some(format!("{path}: \"properties\" must be an object"));
            };
            for (name, child) in properties {
                if let Some(why) = walk(&format!("{path}.{name}"), child) {
                    return Some(why);
                }
            }
        }
        if let Some(items) = object.get("items")
            && let Some(why) = walk(&format!("{path}[]"), items)
        {
            return Some(why);
        }
        None
    }
    if let Some(why) = walk("parameters", schema) {
        return Some(why);
    }
    compile(schema)
        .err()
        .map(|why| format!("parameters is not valid JSON Schema: {why}"))
}

/// Problems with the catalog file itself: unique names, vocabulary, tiers, strict schemas,
/// list-shaped create/update/delete, and renamed targets that exist.
pub fn catalog_problems(catalog: &Catalog) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for tool in &catalog.tools {
        if !seen.insert(tool.name.as_str()) {
            out.push(format!("{}: listed twice", tool.name));
        }
        if name_problem(&tool.name).is_some() || !tool.name.starts_with(&format!("{}_", tool.verb))
        {
            out.push(format!(
                "{}: name does not match verb {:?} and the vocabulary",
                tool.name, tool.verb
            ));
        }
        for (code, message, _) in
            problems(&tool.name, &tool.tier, &tool.schema_json(), tool.singular)
        {
            out.push(format!("{}: {message} [{code}]", tool.name));
        }
    }
    for (old, new) in &catalog.renamed {
        if !seen.contains(new.as_str()) {
            out.push(format!(
                "renamed {old} -> {new}: {new} is not a catalog tool"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::catalog::Seeds;

    #[test]
    fn the_embedded_catalog_is_clean() {
        let seeds = Seeds::embedded().expect("seeds");
        assert_eq!(catalog_problems(&seeds.catalog), Vec::<String>::new());
    }

    #[test]
    fn the_embedded_catalog_declares_the_canonical_verbs() {
        let seeds = Seeds::embedded().expect("seeds");
        assert_eq!(seeds.catalog.vocabulary, VERBS);
    }

    #[test]
    fn names_with_a_canonical_verb_and_a_snake_case_resource_pass() {
        for good in [
            "get_tasks",
            "link_memories",
            "search_gmail_threads",
            "set_project2",
        ] {
            assert_eq!(name_problem(good), None, "{good}");
        }
    }

    #[test]
    fn names_outside_the_vocabulary_are_refused_with_the_reason() {
        for (bad, why) in [
            ("tasks", "has no verb"),
            ("fetch_tasks", "not a canonical verb"),
            ("get_", "snake_case"),
            ("get_Tasks", "snake_case"),
            ("get_tasks__x", "snake_case"),
            ("get_2tasks", "snake_case"),
        ] {
            let problem = name_problem(bad).unwrap_or_default();
            assert!(problem.contains(why), "{bad}: {problem}");
        }
    }

    fn codes(name: &str, tier: &str, schema: Value) -> Vec<&'static str> {
        definition_problems(name, tier, &schema, false)
            .into_iter()
            .map(|(code, _, _)| code)
            .collect()
    }

    fn strict_ids() -> Value {
        json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ids"], "additionalProperties": false})
    }

    fn one_id() -> Value {
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false})
    }

    #[test]
    fn a_strict_list_shaped_definition_has_no_problems() {
        assert_eq!(
            codes("delete_tasks", "requires_approval", strict_ids()),
            Vec::<&str>::new()
        );
    }

    #[test]
    fn a_definition_without_a_tier_is_a_missing_tier() {
        assert_eq!(codes("delete_tasks", "", strict_ids()), ["missing_tier"]);
    }

    #[test]
    fn a_delete_tool_taking_one_id_is_not_a_list() {
        assert_eq!(
            codes("delete_tasks", "auto", one_id()),
            ["schema_not_a_list"]
        );
    }

    #[test]
    fn a_create_tool_taking_one_item_is_not_a_list() {
        assert_eq!(
            codes("create_tasks", "auto", one_id()),
            ["schema_not_a_list"]
        );
    }

    #[test]
    fn a_get_tool_need_not_take_a_list() {
        assert_eq!(codes("get_tasks", "auto", one_id()), Vec::<&str>::new());
    }

    #[test]
    fn a_schema_without_additional_properties_false_is_not_strict() {
        let loose = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        assert_eq!(codes("get_tasks", "auto", loose), ["schema_not_strict"]);
    }

    #[test]
    fn a_property_of_an_unknown_type_is_an_invalid_schema() {
        let text = json!({"type": "object", "properties": {"x": {"type": "text"}}});
        assert_eq!(codes("get_tasks", "auto", text), ["invalid_schema"]);
    }

    #[test]
    fn a_keyword_of_the_wrong_type_is_an_invalid_schema() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}, "required": ["n"], "additionalProperties": false});
        let problem = schema_problem(&schema).unwrap_or_default();
        assert!(problem.contains("/properties/n/minimum"), "{problem}");
        assert_eq!(codes("get_tasks", "auto", schema), ["invalid_schema"]);
    }

    #[test]
    fn a_pattern_that_is_not_a_regular_expression_is_an_invalid_schema() {
        let schema = json!({"type": "object", "properties": {"s": {"type": "string", "pattern": "(unclosed"}}, "required": ["s"], "additionalProperties": false});
        assert_eq!(codes("get_tasks", "auto", schema), ["invalid_schema"]);
    }

    #[test]
    fn a_ref_to_a_missing_definition_is_an_invalid_schema() {
        let schema = json!({"type": "object", "properties": {"s": {"$ref": "#/$defs/missing"}}, "required": ["s"], "additionalProperties": false});
        assert_eq!(codes("get_tasks", "auto", schema), ["invalid_schema"]);
    }

    #[test]
    fn a_schema_using_the_whole_of_draft_2020_12_is_valid() {
        let schema = json!({
            "type": "object",
            "$defs": {"when": {"type": "string", "format": "date-time"}},
            "properties": {
                "at": {"$ref": "#/$defs/when"},
                "email": {"type": "string", "format": "email", "maxLength": 254},
                "count": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"oneOf": [{"const": "fast"}, {"const": "slow"}]}
            },
            "required": ["at", "email", "count", "mode"],
            "additionalProperties": false
        });
        assert_eq!(schema_problem(&schema), None);
    }

    #[test]
    fn an_invalid_schema_stops_the_schema_rules_but_not_the_name_rule() {
        assert_eq!(
            codes("fetch_tasks", "auto", json!([])),
            ["name_outside_vocabulary", "invalid_schema"]
        );
    }
}
