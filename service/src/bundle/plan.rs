//! What applying a bundle would change, object by object: created, updated (with
//! the fields that differ, texts as line diffs; a dataset with its case counts and
//! the line diff of its file), removed (with `--prune`) or kept although the bundle
//! leaves it out. Pure: it compares two bundles.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::read::Current;
use super::{AgentDoc, Bundle, ChannelDoc, ConnectorDoc, HeaderValue, ToolDoc};
use crate::connectors::client::sealing;
use crate::evals::cases::Case;
use crate::releases::diff::{self, TextChange, ValueChange};
use crate::secrets::Keyring;

/// The plan format's version.
pub const PLAN_VERSION: u32 = 1;

/// What applying a bundle would do, and the state it was computed against.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConfigPlan)]
pub struct Plan {
    /// The plan format; 1.
    pub version: u32,
    /// The instance's fingerprint when the plan was made (`sha256:...`).
    pub against: String,
    /// Each object's fingerprint then, by `kind/name`.
    pub objects: BTreeMap<String, String>,
    /// The fingerprint of the configuration planned.
    pub target: String,
    /// Objects the bundle leaves out are removed (soft deletes).
    pub prune: bool,
    /// Something would change (`loadout plan` exits 2).
    pub changes_anything: bool,
    /// The objects that differ, by kind then name.
    pub changes: Vec<Change>,
    /// How many objects would stay as they are.
    pub unchanged: usize,
    /// What the plan could not compare (header values without a key or a value).
    pub warnings: Vec<String>,
    /// The environment variables `loadout plan` read header values from, as
    /// `connector/NAME header H ← $VAR` (never their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reads: Vec<String>,
}

/// The part of a plan file `apply --plan` reads.
#[derive(Debug, Deserialize)]
pub struct PlanFile {
    pub version: u32,
    pub against: String,
    pub objects: BTreeMap<String, String>,
    pub target: String,
    pub prune: bool,
}

crate::closed_set! {
    /// What happens to one object.
    pub enum Action as "action" {
        Create = "create",
        Update = "update",
        /// Soft-deleted (with `--prune`).
        Remove = "remove",
        /// Left out of the bundle but kept: it would be removed with `--prune`.
        Keep = "keep",
    }
}

/// One object's change.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConfigChange)]
pub struct Change {
    /// `agent/NAME`, `dataset/AGENT/NAME`, `tool/NAME`, `channel/NAME` or
    /// `connector/NAME`.
    pub object: String,
    pub action: Action,
    /// The fields that differ (an update), or are set (a create).
    pub fields: Vec<ValueChange>,
    /// Texts that differ, as line diffs.
    pub texts: Vec<NamedText>,
}

/// A text field's line diff.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConfigTextDiff)]
pub struct NamedText {
    pub field: String,
    pub diff: TextChange,
}

impl Change {
    fn new(object: String, action: Action) -> Self {
        Self {
            object,
            action,
            fields: Vec::new(),
            texts: Vec::new(),
        }
    }

    fn field(&mut self, name: &str, before: Value, after: Value) {
        if before != after {
            self.fields.push(ValueChange {
                field: name.to_owned(),
                before,
                after,
            });
        }
    }

    fn text(&mut self, name: &str, before: Option<&str>, after: Option<&str>) {
        if before != after {
            self.texts.push(NamedText {
                field: name.to_owned(),
                diff: diff::lines(before.unwrap_or(""), after.unwrap_or("")),
            });
            if before.is_none() != after.is_none() {
                self.field(
                    &format!("{name} present"),
                    v(before.is_some()),
                    v(after.is_some()),
                );
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.texts.is_empty()
    }
}

/// Compares what the database holds with `target`. Header values given as values
/// are compared with the stored ones when `keyring` opens them.
pub fn compute(current: &Current, target: &Bundle, prune: bool, keyring: Option<&Keyring>) -> Plan {
    let before = &current.bundle;
    let state = before.state();
    let mut changes = Vec::new();
    let mut unchanged = 0;
    let warnings = Vec::new();
    let mut tally = |change: Option<Change>| match change {
        Some(c) => changes.push(c),
        None => unchanged += 1,
    };
    for (name, (old, new)) in pair(&before.agents, &target.agents, |a| &a.name) {
        tally(object("agent", name, old, new, prune, |c, o, n| {
            agent(c, o, n, prune)
        }));
    }
    for (name, (old, new)) in pair(&before.channels, &target.channels, |c| &c.name) {
        tally(object("channel", name, old, new, prune, channel));
    }
    for (name, (old, new)) in pair(&before.connectors, &target.connectors, |c| &c.name) {
        let change = object("connector", name, old, new, prune, connector);
        let values = match (old, new) {
            (Some(old), Some(new)) => header_values(current, old, new, keyring),
            _ => None,
        };
        tally(match (change, values) {
            (Some(mut c), Some(v)) => {
                c.fields.extend(v.fields);
                Some(c)
            }
            (None, Some(v)) => Some(v),
            (change, None) => change,
        });
    }
    let (held, wanted) = (datasets_of(before), datasets_of(target));
    for (key, (old, new)) in pair(&held, &wanted, |d| &d.0) {
        let name = key.strip_prefix("dataset/").unwrap_or(key);
        tally(object("dataset", name, old, new, prune, |c, o, n| {
            dataset(c, o.map(|o| o.1), n.1)
        }));
    }
    for (name, (old, new)) in pair(&before.tools, &target.tools, |t| &t.name) {
        tally(object("tool", name, old, new, prune, tool));
    }
    let changes_anything = changes.iter().any(|c| c.action != Action::Keep);
    Plan {
        version: PLAN_VERSION,
        against: state.instance,
        objects: state.objects,
        target: target.state().instance,
        prune,
        changes_anything,
        changes,
        unchanged,
        warnings,
        reads: Vec::new(),
    }
}

/// The objects of both lists by name: (old, new).
fn pair<'a, T>(
    old: &'a [T],
    new: &'a [T],
    name: impl Fn(&T) -> &String,
) -> BTreeMap<&'a str, (Option<&'a T>, Option<&'a T>)> {
    let mut out: BTreeMap<&str, (Option<&T>, Option<&T>)> = BTreeMap::new();
    for item in old {
        out.entry(name(item).as_str()).or_default().0 = Some(item);
    }
    for item in new {
        out.entry(name(item).as_str()).or_default().1 = Some(item);
    }
    out
}

/// The change of one object, `None` when it stays as it is.
fn object<T>(
    kind: &str,
    name: &str,
    old: Option<&T>,
    new: Option<&T>,
    prune: bool,
    fields: impl Fn(&mut Change, Option<&T>, &T),
) -> Option<Change> {
    let key = format!("{kind}/{name}");
    match (old, new) {
        (None, Some(new)) => {
            let mut change = Change::new(key, Action::Create);
            fields(&mut change, None, new);
            Some(change)
        }
        (Some(old), Some(new)) => {
            let mut change = Change::new(key, Action::Update);
            fields(&mut change, Some(old), new);
            (!change.is_empty()).then_some(change)
        }
        (Some(_), None) => Some(Change::new(
            key,
            if prune { Action::Remove } else { Action::Keep },
        )),
        (None, None) => None,
    }
}

/// Every agent's datasets as `(dataset/AGENT/NAME, cases)`.
fn datasets_of(bundle: &Bundle) -> Vec<(String, &[Case])> {
    bundle
        .agents
        .iter()
        .flat_map(|a| {
            a.datasets
                .iter()
                .map(|(name, cases)| (super::dataset_key(&a.name, name), cases.as_slice()))
        })
        .collect()
}

/// A dataset's change: how many cases before and after, and (an update) the line
/// diff of its file. Cases are compared as canonical JSON: key order is no change.
fn dataset(c: &mut Change, old: Option<&[Case]>, new: &[Case]) {
    let canonical = |cases: &[Case]| super::sorted(&v(cases));
    if old.is_some_and(|old| canonical(old) == canonical(new)) {
        return;
    }
    c.fields.push(ValueChange {
        field: "cases".to_owned(),
        before: old.map_or(Value::Null, |o| v(o.len())),
        after: v(new.len()),
    });
    if let Some(old) = old {
        let text = |cases: &[Case]| super::dataset_text(cases).unwrap_or_default();
        c.texts.push(NamedText {
            field: "cases".to_owned(),
            diff: diff::lines(&text(old), &text(new)),
        });
    }
}

fn text_value(text: &Option<String>) -> Value {
    v(text)
}

fn agent(c: &mut Change, old: Option<&AgentDoc>, new: &AgentDoc, prune: bool) {
    let identity_old = old.map(|o| super::canonical(&o.identity));
    let identity_new = super::canonical(&new.identity);
    let keys: BTreeSet<&String> = identity_old
        .iter()
        .filter_map(Value::as_object)
        .flat_map(|m| m.keys())
        .chain(identity_new.as_object().into_iter().flat_map(|m| m.keys()))
        .collect();
    for key in keys {
        let before = identity_old
            .as_ref()
            .and_then(|i| i.get(key))
            .cloned()
            .unwrap_or(Value::Null);
        let after = identity_new.get(key).cloned().unwrap_or(Value::Null);
        c.field(&format!("identity.{key}"), before, after);
    }
    c.field(
        "release_mode",
        old.map_or(Value::Null, |o| v(&o.release_mode)),
        v(&new.release_mode),
    );
    let links_old: BTreeSet<&String> = old.iter().flat_map(|o| o.tools.iter()).collect();
    let links_new: BTreeSet<&String> = new.tools.iter().collect();
    for tool in links_old.union(&links_new) {
        // Without --prune a link the bundle leaves out stays: no change.
        if !prune && !links_new.contains(tool) {
            continue;
        }
        c.field(
            &format!("link {tool}"),
            v(links_old.contains(tool)),
            v(links_new.contains(tool)),
        );
    }
    c.text("soul", old.map(|o| o.soul.as_str()), Some(&new.soul));
    c.text(
        "template",
        old.and_then(|o| o.template.as_deref()),
        new.template.as_deref(),
    );
    c.text(
        "operating_model",
        old.and_then(|o| o.operating_model.as_deref()),
        new.operating_model.as_deref(),
    );
    c.text(
        "interaction_learning",
        old.and_then(|o| o.interaction_learning.as_deref()),
        new.interaction_learning.as_deref(),
    );
    c.text(
        "policy",
        old.and_then(|o| o.policy.as_deref()),
        new.policy.as_deref(),
    );
    let tests = |t: &[crate::policies::cases::Case]| match t.is_empty() {
        true => Value::Null,
        false => serde_json::to_value(t).unwrap_or(Value::Null),
    };
    c.field(
        "policy_tests",
        old.map_or(Value::Null, |o| tests(&o.policy_tests)),
        tests(&new.policy_tests),
    );
    c.field(
        "model",
        old.map_or(Value::Null, |o| v(&o.model)),
        v(&new.model),
    );
}

fn tool(c: &mut Change, old: Option<&ToolDoc>, new: &ToolDoc) {
    let get = |f: fn(&ToolDoc) -> Value| old.map_or(Value::Null, f);
    c.field("type", get(|t| v(&t.tool_type)), v(&new.tool_type));
    c.field(
        "description",
        get(|t| v(&t.description)),
        v(&new.description),
    );
    c.field(
        "approval_tier",
        get(|t| v(&t.approval_tier)),
        v(&new.approval_tier),
    );
    c.field(
        "parameters",
        get(|t| super::sorted(&t.parameters)),
        super::sorted(&new.parameters),
    );
    c.field(
        "prompt_section",
        get(|t| text_value(&t.prompt_section)),
        text_value(&new.prompt_section),
    );
    c.field(
        "connector",
        get(|t| text_value(&t.connector)),
        text_value(&new.connector),
    );
    c.field("strict", get(|t| v(t.strict)), v(new.strict));
    c.field("active", get(|t| v(t.active)), v(new.active));
}

fn channel(c: &mut Change, old: Option<&ChannelDoc>, new: &ChannelDoc) {
    let get = |f: fn(&ChannelDoc) -> Value| old.map_or(Value::Null, f);
    c.field(
        "description",
        get(|t| v(&t.description)),
        v(&new.description),
    );
    c.text(
        "guidance",
        old.map(|o| o.guidance.as_str()),
        Some(&new.guidance),
    );
    c.field(
        "include_operating_model",
        get(|t| v(t.include_operating_model)),
        v(new.include_operating_model),
    );
    c.field(
        "include_interaction_learning",
        get(|t| v(t.include_interaction_learning)),
        v(new.include_interaction_learning),
    );
    c.field(
        "include_session_section",
        get(|t| v(t.include_session_section)),
        v(new.include_session_section),
    );
}

fn connector(c: &mut Change, old: Option<&ConnectorDoc>, new: &ConnectorDoc) {
    let get = |f: fn(&ConnectorDoc) -> Value| old.map_or(Value::Null, f);
    c.field("kind", get(|t| v(&t.kind)), v(&new.kind));
    c.field("url", get(|t| v(&t.url)), v(&new.url));
    c.field("method", get(|t| v(&t.method)), v(&new.method));
    c.field("timeout_ms", get(|t| v(t.timeout_ms)), v(new.timeout_ms));
    if let Some(trusted) = new.trusted {
        let before = match old {
            None => v(false),
            Some(old) => v(old.trusted.unwrap_or(false)),
        };
        c.field("trusted", before, v(trusted));
    }
    let names_old: BTreeSet<&String> = old.iter().flat_map(|o| o.headers.keys()).collect();
    let names_new: BTreeSet<&String> = new.headers.keys().collect();
    for name in names_old.union(&names_new) {
        c.field(
            &format!("header {name}"),
            v(names_old.contains(name)),
            v(names_new.contains(name)),
        );
    }
}

/// The headers whose given value differs from the stored one (never the values:
/// `before` and `after` say only "stored" and "changed"). Without `keyring`
/// nothing is compared and every value given is "replaced".
fn header_values(
    current: &Current,
    old: &ConnectorDoc,
    new: &ConnectorDoc,
    keyring: Option<&Keyring>,
) -> Option<Change> {
    let row = current.connectors.get(&new.name)?;
    let stored = sealing::stored(row);
    let mut change = Change::new(format!("connector/{}", new.name), Action::Update);
    for (name, value) in &new.headers {
        let HeaderValue::Value { value } = value else {
            continue;
        };
        if !old.headers.contains_key(name) {
            continue;
        }
        let Some(keyring) = keyring else {
            // Not compared: a plan over the API must not tell a right guess of a
            // stored secret from a wrong one, so any value given is "replaced".
            change.field(&format!("header {name} value"), v("stored"), v("replaced"));
            continue;
        };
        let same = stored
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|held| sealing::open(keyring, row.id, std::slice::from_ref(held)).ok())
            .is_some_and(|opened| opened.first().is_some_and(|(_, s)| s.expose() == value));
        if !same {
            change.field(&format!("header {name} value"), v("stored"), v("changed"));
        }
    }
    (!change.is_empty()).then_some(change)
}

/// A field's value in a change.
fn v(value: impl Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cases(value: Value) -> Vec<Case> {
        serde_json::from_value(value).expect("cases")
    }

    fn one(schema: Value) -> Vec<Case> {
        cases(
            json!([{"channel": "web", "messages": [{"role": "user", "content": "Hi"}],
            "assert": [{"type": "contains-json", "value": schema}]}]),
        )
    }

    #[test]
    fn a_dataset_whose_keys_come_in_another_order_is_unchanged() {
        let before = one(json!({"type": "object", "required": ["a"]}));
        let after = one(json!({"required": ["a"], "type": "object"}));
        let mut change = Change::new("dataset/a/b".into(), Action::Update);
        dataset(&mut change, Some(&before), &after);
        assert!(change.is_empty(), "{change:?}");
    }

    #[test]
    fn a_changed_dataset_says_its_case_counts_and_a_new_one_only_its_count() {
        let before = one(json!({"type": "object"}));
        let mut after = one(json!({"type": "array"}));
        after.extend(one(json!({"type": "string"})));
        let mut change = Change::new("dataset/a/b".into(), Action::Update);
        dataset(&mut change, Some(&before), &after);
        assert_eq!(
            (
                change.fields[0].before.clone(),
                change.fields[0].after.clone()
            ),
            (json!(1), json!(2))
        );
        assert_eq!(change.texts.len(), 1);

        let mut created = Change::new("dataset/a/b".into(), Action::Create);
        dataset(&mut created, None, &after);
        assert_eq!(
            (created.fields[0].before.clone(), created.texts.len()),
            (Value::Null, 0)
        );
    }
}
