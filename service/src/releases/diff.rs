//! What changed between two revisions: the texts as line diffs (hunks of `equal`,
//! `delete` and `insert` lines, the words the console's conflict diff uses), the
//! identity's fields, the tools added, removed and changed field by field, and the
//! channels. [`diff`] is pure; [`between`] reads two revisions of an agent.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use similar::{ChangeTag, TextDiff};
use utoipa::ToSchema;

use super::compat::{self, ContractChange};
use super::content::{ChannelContent, Content, ToolContent};
use super::model::ModelSettings;
use super::read;
use crate::error::Result;

/// Lines of unchanged text kept around each change.
const CONTEXT: usize = 3;

/// The most lines (of both texts together) compared line by line; past it a text
/// change says `too_large` and is not computed (a line diff's cost grows with the
/// product of the lines in the worst case).
pub const MAX_DIFF_LINES: usize = 20_000;

/// How long one line diff may search for the shortest edit; past it the diff is
/// still correct but may be longer than the shortest.
pub const DIFF_DEADLINE: std::time::Duration = std::time::Duration::from_millis(200);

/// Two revisions of an agent and what changed from the first to the second.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevisionDiff {
    pub agent: String,
    /// The revision compared from.
    pub from: i32,
    /// The revision compared to.
    pub to: i32,
    pub diff: Diff,
}

/// Everything that differs between two contents; empty parts mean "unchanged".
#[derive(Debug, Default, PartialEq, Serialize, ToSchema)]
pub struct Diff {
    /// Nothing differs.
    pub identical: bool,
    /// The identity's fields that differ, by field name.
    pub identity: Vec<ValueChange>,
    /// `null`: the soul is unchanged.
    pub soul: Option<TextChange>,
    pub operating_model: Option<TextChange>,
    pub interaction_learning: Option<TextChange>,
    /// `null`: the template is unchanged.
    pub template: Option<TemplateChange>,
    pub tools: ToolChanges,
    pub channels: ChannelChanges,
    /// `null`: the policy is unchanged; a side without one diffs as empty text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<TextChange>,
    /// The model settings that differ, by dotted path (`parameters.temperature`,
    /// `channels.voice.model`); a response schema is one value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model: Vec<ValueChange>,
    /// The carried groups whose members differ, as `tenant/group` with the sorted
    /// user ids before and after (`null`: no such group on that side).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<ValueChange>,
    /// Each tool change classified for callers (`docs/contracts.md`).
    pub contract: Vec<ContractChange>,
    /// Whether any of `contract` is breaking.
    pub breaking: bool,
}

/// A text's line diff.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct TextChange {
    /// Lines inserted, in all.
    pub inserted: usize,
    /// Lines deleted, in all.
    pub deleted: usize,
    /// The changed regions with up to 3 unchanged lines around each, in order.
    pub hunks: Vec<Hunk>,
    /// The texts have more than 20,000 lines together: not compared, no hunks;
    /// `deleted` and `inserted` count every line of each.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub too_large: bool,
}

/// One changed region, as a unified diff's `@@ -old_start,old_lines +new_start,new_lines @@`.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct Hunk {
    /// First line of the region in the old text, from 1 (0 when the region is empty there).
    pub old_start: usize,
    pub old_lines: usize,
    /// First line of the region in the new text, from 1 (0 when the region is empty there).
    pub new_start: usize,
    pub new_lines: usize,
    pub lines: Vec<Line>,
}

/// One line of a hunk, without its line ending.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct Line {
    pub kind: LineKind,
    pub text: String,
}

crate::closed_set! {
    /// A hunk line's part in the change (`' '`, `-` and `+` in a unified diff).
    pub enum LineKind as "line kind" {
        Delete = "delete",
        Equal = "equal",
        Insert = "insert",
    }
}

impl LineKind {
    /// The unified diff's prefix.
    pub fn sign(self) -> char {
        match self {
            LineKind::Delete => '-',
            LineKind::Equal => ' ',
            LineKind::Insert => '+',
        }
    }
}

/// The template's change: the text diff, a built-in side diffed as empty text.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct TemplateChange {
    /// The old revision used the built-in assembly (no template of its own).
    pub builtin_before: bool,
    /// The new revision uses the built-in assembly.
    pub builtin_after: bool,
    pub text: TextChange,
}

/// One field's old and new value; `null` where the field is absent.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct ValueChange {
    pub field: String,
    pub before: Value,
    pub after: Value,
}

/// The tools, by name.
#[derive(Debug, Default, PartialEq, Serialize, ToSchema)]
pub struct ToolChanges {
    /// Tools only the new revision serves.
    pub added: Vec<ToolContent>,
    /// Tools only the old revision serves, as it served them.
    pub removed: Vec<ToolContent>,
    pub changed: Vec<ToolChange>,
}

/// A tool both revisions serve, differently.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct ToolChange {
    pub name: String,
    /// The fields that differ: `description`, `parameters`, `approval_tier`, `type`,
    /// `strict`, `prompt_section`, in that order.
    pub fields: Vec<ValueChange>,
}

/// The channels, by name.
#[derive(Debug, Default, PartialEq, Serialize, ToSchema)]
pub struct ChannelChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<ChannelChange>,
}

/// A channel both revisions have, differently.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct ChannelChange {
    pub name: String,
    /// The fields that differ: `guidance`, `include_operating_model`,
    /// `include_interaction_learning`, `include_session_section`.
    pub fields: Vec<ValueChange>,
}

/// Revisions `from` and `to` of the agent `name`, and their diff; 404 if either
/// is not one of its revisions.
pub async fn between(
    db: &impl sea_orm::ConnectionTrait,
    name: &str,
    from: i32,
    to: i32,
) -> Result<RevisionDiff> {
    let old = read::revision(db, name, from).await?;
    let new = read::revision(db, name, to).await?;
    let agent = new.agent;
    let diff = crate::cpu::run(move || diff(&old.content, &new.content)).await?;
    Ok(RevisionDiff {
        diff,
        agent,
        from,
        to,
    })
}

/// What changed from `old` to `new`.
pub fn diff(old: &Content, new: &Content) -> Diff {
    let template = (old.template != new.template).then(|| TemplateChange {
        builtin_before: old.template.is_none(),
        builtin_after: new.template.is_none(),
        text: lines(
            old.template.as_deref().unwrap_or(""),
            new.template.as_deref().unwrap_or(""),
        ),
    });
    let contract = compat::tools(&old.tools, &new.tools);
    Diff {
        identical: old == new,
        identity: identity(&old.identity, &new.identity),
        soul: text(&old.soul, &new.soul),
        operating_model: text(&old.operating_model, &new.operating_model),
        interaction_learning: text(&old.interaction_learning, &new.interaction_learning),
        template,
        tools: tools(&old.tools, &new.tools),
        channels: channels(&old.channels, &new.channels),
        policy: (old.policy != new.policy).then(|| {
            lines(
                old.policy.as_deref().unwrap_or(""),
                new.policy.as_deref().unwrap_or(""),
            )
        }),
        model: model(old.model.as_ref(), new.model.as_ref()),
        groups: groups(old.groups.as_ref(), new.groups.as_ref()),
        breaking: compat::any_breaking(&contract),
        contract,
    }
}

/// The carried groups whose members differ, by `tenant/group`.
fn groups(
    old: Option<&super::content::Groups>,
    new: Option<&super::content::Groups>,
) -> Vec<ValueChange> {
    let flat = |groups: Option<&super::content::Groups>| -> BTreeMap<String, Value> {
        groups
            .into_iter()
            .flatten()
            .flat_map(|(tenant, of)| {
                of.iter().map(move |(group, users)| {
                    (format!("{tenant}/{group}"), Value::from(users.clone()))
                })
            })
            .collect()
    };
    differing(&flat(old), &flat(new))
}

/// The keys whose values differ between `before` and `after` (`null` where one lacks it).
fn differing(
    before: &BTreeMap<String, Value>,
    after: &BTreeMap<String, Value>,
) -> Vec<ValueChange> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter_map(|key| {
            let b = before.get(key).cloned().unwrap_or(Value::Null);
            let a = after.get(key).cloned().unwrap_or(Value::Null);
            (b != a).then(|| ValueChange {
                field: key.clone(),
                before: b,
                after: a,
            })
        })
        .collect()
}

/// The model settings' leaves that differ, by dotted path.
fn model(old: Option<&ModelSettings>, new: Option<&ModelSettings>) -> Vec<ValueChange> {
    let (mut before, mut after) = (BTreeMap::new(), BTreeMap::new());
    leaves(
        "",
        &serde_json::to_value(old).unwrap_or(Value::Null),
        &mut before,
    );
    leaves(
        "",
        &serde_json::to_value(new).unwrap_or(Value::Null),
        &mut after,
    );
    differing(&before, &after)
}

/// Each leaf of `value` by dotted path; a response schema is one leaf.
fn leaves(at: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(fields) if !at.ends_with("response_schema") => {
            for (key, value) in fields {
                let path = match at.is_empty() {
                    true => key.clone(),
                    false => format!("{at}.{key}"),
                };
                leaves(&path, value, out);
            }
        }
        Value::Null => {}
        leaf => {
            out.insert(at.to_owned(), leaf.clone());
        }
    }
}

fn text(old: &str, new: &str) -> Option<TextChange> {
    (old != new).then(|| lines(old, new))
}

/// The line diff of two texts (which may be equal: then no hunks), within
/// [`MAX_DIFF_LINES`] and [`DIFF_DEADLINE`]. CPU-bound: callers on the async
/// workers go through `crate::cpu::run`.
pub fn lines(old: &str, new: &str) -> TextChange {
    let (old_count, new_count) = (old.lines().count(), new.lines().count());
    if old != new && old_count + new_count > MAX_DIFF_LINES {
        return TextChange {
            inserted: new_count,
            deleted: old_count,
            hunks: Vec::new(),
            too_large: true,
        };
    }
    let diff = TextDiff::configure()
        .deadline(std::time::Instant::now() + DIFF_DEADLINE)
        .diff_lines(old, new);
    let mut change = TextChange {
        inserted: 0,
        deleted: 0,
        hunks: Vec::new(),
        too_large: false,
    };
    for group in diff.grouped_ops(CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let old_range = first.old_range().start..last.old_range().end;
        let new_range = first.new_range().start..last.new_range().end;
        let mut hunk = Hunk {
            old_start: start(&old_range),
            old_lines: old_range.len(),
            new_start: start(&new_range),
            new_lines: new_range.len(),
            lines: Vec::new(),
        };
        for op in &group {
            for line in diff.iter_changes(op) {
                let kind = match line.tag() {
                    ChangeTag::Equal => LineKind::Equal,
                    ChangeTag::Delete => LineKind::Delete,
                    ChangeTag::Insert => LineKind::Insert,
                };
                match kind {
                    LineKind::Delete => change.deleted += 1,
                    LineKind::Insert => change.inserted += 1,
                    LineKind::Equal => {}
                }
                let text = line.value();
                let text = text.strip_suffix('\n').unwrap_or(text);
                let text = text.strip_suffix('\r').unwrap_or(text);
                hunk.lines.push(Line {
                    kind,
                    text: text.to_owned(),
                });
            }
        }
        change.hunks.push(hunk);
    }
    change
}

/// A unified diff's start line: from 1, or 0 for an empty region (as `diff -u` writes it).
fn start(range: &std::ops::Range<usize>) -> usize {
    if range.is_empty() {
        range.start
    } else {
        range.start + 1
    }
}

fn identity(old: &Value, new: &Value) -> Vec<ValueChange> {
    let (empty_old, empty_new) = (serde_json::Map::new(), serde_json::Map::new());
    let old = old.as_object().unwrap_or(&empty_old);
    let new = new.as_object().unwrap_or(&empty_new);
    let fields: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    fields
        .into_iter()
        .filter_map(|field| {
            let before = old.get(field).cloned().unwrap_or(Value::Null);
            let after = new.get(field).cloned().unwrap_or(Value::Null);
            (before != after).then(|| ValueChange {
                field: field.clone(),
                before,
                after,
            })
        })
        .collect()
}

fn tools(old: &[ToolContent], new: &[ToolContent]) -> ToolChanges {
    let old: BTreeMap<&str, &ToolContent> = old.iter().map(|t| (t.name.as_str(), t)).collect();
    let new: BTreeMap<&str, &ToolContent> = new.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut changes = ToolChanges::default();
    for (name, tool) in &old {
        match new.get(name) {
            None => changes.removed.push((*tool).clone()),
            Some(after) => {
                let fields = tool_fields(tool, after);
                if !fields.is_empty() {
                    changes.changed.push(ToolChange {
                        name: (*name).to_owned(),
                        fields,
                    });
                }
            }
        }
    }
    changes.added = new
        .iter()
        .filter(|(name, _)| !old.contains_key(*name))
        .map(|(_, tool)| (*tool).clone())
        .collect();
    changes
}

fn tool_fields(old: &ToolContent, new: &ToolContent) -> Vec<ValueChange> {
    let mut fields = Vec::new();
    field(
        &mut fields,
        "description",
        &old.description,
        &new.description,
    );
    field(&mut fields, "parameters", &old.parameters, &new.parameters);
    field(
        &mut fields,
        "approval_tier",
        &old.approval_tier,
        &new.approval_tier,
    );
    field(&mut fields, "type", &old.tool_type, &new.tool_type);
    field(&mut fields, "strict", &old.strict, &new.strict);
    field(
        &mut fields,
        "prompt_section",
        &old.prompt_section,
        &new.prompt_section,
    );
    field(&mut fields, "connector", &old.connector, &new.connector);
    fields
}

fn channels(
    old: &BTreeMap<String, ChannelContent>,
    new: &BTreeMap<String, ChannelContent>,
) -> ChannelChanges {
    let mut changes = ChannelChanges::default();
    for (name, channel) in old {
        match new.get(name) {
            None => changes.removed.push(name.clone()),
            Some(after) => {
                let mut fields = Vec::new();
                field(&mut fields, "guidance", &channel.guidance, &after.guidance);
                field(
                    &mut fields,
                    "include_operating_model",
                    &channel.include_operating_model,
                    &after.include_operating_model,
                );
                field(
                    &mut fields,
                    "include_interaction_learning",
                    &channel.include_interaction_learning,
                    &after.include_interaction_learning,
                );
                field(
                    &mut fields,
                    "include_session_section",
                    &channel.include_session_section,
                    &after.include_session_section,
                );
                if !fields.is_empty() {
                    changes.changed.push(ChannelChange {
                        name: name.clone(),
                        fields,
                    });
                }
            }
        }
    }
    changes.added = new
        .keys()
        .filter(|name| !old.contains_key(*name))
        .cloned()
        .collect();
    changes
}

/// Adds `name`'s change when `old` and `new` differ.
fn field<T: PartialEq + Serialize>(out: &mut Vec<ValueChange>, name: &str, old: &T, new: &T) {
    if old != new {
        out.push(ValueChange {
            field: name.to_owned(),
            // Strings, booleans, options of them and JSON values always serialise.
            before: serde_json::to_value(old).unwrap_or(Value::Null),
            after: serde_json::to_value(new).unwrap_or(Value::Null),
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str) -> ToolContent {
        ToolContent {
            name: name.to_owned(),
            description: format!("Does {name}."),
            parameters: json!({"type": "object", "properties": {}}),
            strict: true,
            approval_tier: "auto".to_owned(),
            tool_type: "builtin".to_owned(),
            prompt_section: None,
            connector: None,
        }
    }

    fn channel() -> ChannelContent {
        ChannelContent {
            guidance: "Be brief.".to_owned(),
            include_operating_model: true,
            include_interaction_learning: false,
            include_session_section: true,
        }
    }

    fn content() -> Content {
        Content {
            identity: json!({"display_name": "Assistant", "role": "helps", "description": "d"}),
            soul: "one\ntwo\nthree\n".to_owned(),
            operating_model: String::new(),
            interaction_learning: String::new(),
            template: None,
            tools: vec![tool("get_tasks"), tool("read_memory")],
            channels: BTreeMap::from([("web".to_owned(), channel())]),
            policy: None,
            model: None,
            groups: None,
        }
    }

    /// The hunk lines as a unified diff writes them.
    fn unified(change: &TextChange) -> Vec<String> {
        change
            .hunks
            .iter()
            .flat_map(|h| {
                let header = format!(
                    "@@ -{},{} +{},{} @@",
                    h.old_start, h.old_lines, h.new_start, h.new_lines
                );
                std::iter::once(header).chain(
                    h.lines
                        .iter()
                        .map(|l| format!("{}{}", l.kind.sign(), l.text)),
                )
            })
            .collect()
    }

    #[test]
    fn equal_contents_are_identical_and_nothing_is_listed() {
        assert_eq!(
            diff(&content(), &content()),
            Diff {
                identical: true,
                ..Diff::default()
            }
        );
    }

    #[test]
    fn a_changed_soul_line_is_one_deleted_and_one_inserted_line_with_context() {
        let mut new = content();
        new.soul = "one\n2\nthree\n".to_owned();
        let d = diff(&content(), &new);
        assert!(!d.identical);
        let soul = d.soul.expect("the soul changed");
        assert_eq!((soul.inserted, soul.deleted), (1, 1));
        assert_eq!(
            unified(&soul),
            ["@@ -1,3 +1,3 @@", " one", "-two", "+2", " three"]
        );
        assert_eq!(d.template, None);
        assert_eq!(d.tools, ToolChanges::default());
    }

    #[test]
    fn changes_far_apart_are_separate_hunks_with_three_lines_of_context() {
        let old: String = (1..=20).map(|n| format!("{n}\n")).collect();
        let new: String = (1..=20)
            .map(|n| match n {
                2 => "two\n".to_owned(),
                18 => "eighteen\n".to_owned(),
                n => format!("{n}\n"),
            })
            .collect();
        let change = lines(&old, &new);
        let headers: Vec<String> = unified(&change)
            .into_iter()
            .filter(|l| l.starts_with("@@"))
            .collect();
        assert_eq!(headers, ["@@ -1,5 +1,5 @@", "@@ -15,6 +15,6 @@"]);
    }

    #[test]
    fn a_template_replacing_the_built_in_assembly_is_all_inserted() {
        let mut new = content();
        new.template = Some("$soul\n$tools\n".to_owned());
        let template = diff(&content(), &new).template.expect("changed");
        assert!(template.builtin_before);
        assert!(!template.builtin_after);
        assert_eq!(
            unified(&template.text),
            ["@@ -0,0 +1,2 @@", "+$soul", "+$tools"]
        );
    }

    #[test]
    fn identity_fields_that_differ_are_listed_with_before_and_after() {
        let mut new = content();
        new.identity =
            json!({"display_name": "Helper", "role": "helps", "description": "d", "emoji": "x"});
        assert_eq!(
            diff(&content(), &new).identity,
            [
                ValueChange {
                    field: "display_name".to_owned(),
                    before: json!("Assistant"),
                    after: json!("Helper"),
                },
                ValueChange {
                    field: "emoji".to_owned(),
                    before: Value::Null,
                    after: json!("x"),
                },
            ]
        );
    }

    #[test]
    fn tools_are_added_removed_and_changed_by_name() {
        let mut new = content();
        new.tools.remove(0);
        new.tools.push(tool("set_reminder"));
        let d = diff(&content(), &new).tools;
        let names =
            |tools: &[ToolContent]| tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&d.added), ["set_reminder"]);
        assert_eq!(names(&d.removed), ["get_tasks"]);
        assert_eq!(d.changed, []);
    }

    #[test]
    fn a_changed_tool_names_each_field_that_differs_with_before_and_after() {
        let mut new = content();
        let t = &mut new.tools[0];
        t.parameters = json!({"type": "object", "properties": {"limit": {"type": "integer"}}});
        t.approval_tier = "requires_approval".to_owned();
        t.strict = false;
        t.prompt_section = Some("Use it.".to_owned());
        let d = diff(&content(), &new).tools;
        assert_eq!(d.changed.len(), 1);
        let change = &d.changed[0];
        assert_eq!(change.name, "get_tasks");
        let fields: Vec<&str> = change.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            ["parameters", "approval_tier", "strict", "prompt_section"]
        );
        assert_eq!(change.fields[1].before, json!("auto"));
        assert_eq!(change.fields[1].after, json!("requires_approval"));
        assert_eq!(change.fields[3].before, Value::Null);
    }

    #[test]
    fn a_tool_whose_description_and_type_changed_lists_both() {
        let mut new = content();
        new.tools[1].description = "Reads.".to_owned();
        new.tools[1].tool_type = "mcp".to_owned();
        let d = diff(&content(), &new).tools;
        let fields: Vec<&str> = d.changed[0]
            .fields
            .iter()
            .map(|f| f.field.as_str())
            .collect();
        assert_eq!(fields, ["description", "type"]);
    }

    #[test]
    fn channels_are_added_removed_and_changed_by_name() {
        let mut new = content();
        new.channels
            .get_mut("web")
            .expect("web")
            .include_session_section = false;
        new.channels.insert("sms".to_owned(), channel());
        let d = diff(&content(), &new).channels;
        assert_eq!(d.added, ["sms"]);
        assert_eq!(d.removed, Vec::<String>::new());
        assert_eq!(d.changed.len(), 1);
        assert_eq!(d.changed[0].fields[0].field, "include_session_section");
        let gone = diff(&new, &content()).channels;
        assert_eq!(gone.removed, ["sms"]);
    }

    #[test]
    fn the_diff_serialises_hunk_lines_with_their_kind() {
        let change = lines("a\n", "b\n");
        let json = serde_json::to_value(&change).expect("json");
        assert_eq!(
            json["hunks"][0]["lines"],
            json!([{"kind": "delete", "text": "a"}, {"kind": "insert", "text": "b"}])
        );
    }
}
