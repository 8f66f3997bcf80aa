//! Whether a change to an agent's tools breaks the code that calls them: each
//! change between two revisions' tools classified as `breaking` (a call valid
//! before may be refused now, or the tool is gone) or `compatible` (every call
//! valid before is still valid). The table is in `docs/contracts.md`.
//!
//! Schemas are mostly OpenAI's strict form, where every property is listed in
//! `required` and an optional one admits `null`; so an argument is *required*
//! when it is listed in `required` and does not admit `null`. Pure: no I/O.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::content::ToolContent;
use Compat::Compatible;

mod properties;
mod search;

/// How deep a schema is compared; past it a difference is `other`, breaking.
const MAX_DEPTH: usize = 32;

crate::closed_set! {
    /// What a change means for the callers of a tool.
    pub enum Compat as "compatibility" {
        /// A call that was valid before may be refused, or the tool is gone.
        Breaking = "breaking",
        /// Every call valid before is still valid.
        Compatible = "compatible",
    }
}

crate::closed_set! {
    /// What kind of change (the table in `docs/contracts.md`).
    pub enum ContractKind as "contract change" {
        ToolRemoved = "tool_removed",
        ToolAdded = "tool_added",
        RequiredArgumentAdded = "required_argument_added",
        OptionalArgumentAdded = "optional_argument_added",
        PropertyRemoved = "property_removed",
        ArgumentMadeRequired = "argument_made_required",
        ArgumentMadeOptional = "argument_made_optional",
        TypeNarrowed = "type_narrowed",
        TypeWidened = "type_widened",
        TypeChanged = "type_changed",
        EnumValueRemoved = "enum_value_removed",
        EnumValueAdded = "enum_value_added",
        EnumAdded = "enum_added",
        EnumRemoved = "enum_removed",
        ConstraintTightened = "constraint_tightened",
        ConstraintLoosened = "constraint_loosened",
        AdditionalPropertiesClosed = "additional_properties_closed",
        AdditionalPropertiesOpened = "additional_properties_opened",
        DescriptionChanged = "description_changed",
        ApprovalTierRaised = "approval_tier_raised",
        ApprovalTierLowered = "approval_tier_lowered",
        Other = "other",
    }
}

/// One classified change to one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
pub struct ContractChange {
    pub tool: String,
    /// JSON Pointer into the arguments (`/refunds/items/amount`); empty for the tool itself.
    pub path: String,
    pub kind: ContractKind,
    pub compat: Compat,
    /// In words, with before and after where they are short.
    pub detail: String,
}

/// Whether any change is breaking.
pub fn any_breaking(changes: &[ContractChange]) -> bool {
    changes.iter().any(|c| c.compat == Compat::Breaking)
}

/// The classified changes from `old` to `new` (tools matched by name), in tool
/// name order, then path order. Equal tools give nothing.
pub fn tools(old: &[ToolContent], new: &[ToolContent]) -> Vec<ContractChange> {
    let before: BTreeMap<&str, &ToolContent> = old.iter().map(|t| (t.name.as_str(), t)).collect();
    let after: BTreeMap<&str, &ToolContent> = new.iter().map(|t| (t.name.as_str(), t)).collect();
    let names: BTreeSet<&str> = before.keys().chain(after.keys()).copied().collect();
    let mut out = Vec::new();
    for name in names {
        let mut changes = Changes::new(name);
        match (before.get(name), after.get(name)) {
            (Some(_), None) => changes.tool(
                ContractKind::ToolRemoved,
                Compat::Breaking,
                "the tool is gone",
            ),
            (None, Some(_)) => {
                changes.tool(ContractKind::ToolAdded, Compat::Compatible, "a new tool")
            }
            (Some(old), Some(new)) => tool(&mut changes, old, new),
            (None, None) => {}
        }
        out.extend(changes.sorted());
    }
    out
}

/// The classified changes between two input schemas of tool `tool`.
pub fn schema(tool: &str, old: &Value, new: &Value) -> Vec<ContractChange> {
    let mut changes = Changes::new(tool);
    compare(&mut changes, "", old, new, 0);
    backstop(&mut changes, old, new);
    changes.sorted()
}

/// When the rules found nothing breaking in a changed schema, the search
/// ([`search`]) looks for an argument the old schema takes and the new one
/// refuses; one found is a breaking change of kind `other` that shows it.
fn backstop(changes: &mut Changes, old: &Value, new: &Value) {
    if old == new || changes.out.iter().any(|c| c.compat == Compat::Breaking) {
        return;
    }
    if let Some(argument) = search::counterexample(old, new, search::TRIES) {
        let mut shown = argument.to_string();
        if shown.len() > 200 {
            let cut = (0..=200)
                .rev()
                .find(|i| shown.is_char_boundary(*i))
                .unwrap_or(0);
            shown.truncate(cut);
            shown.push('…');
        }
        changes.at(
            "",
            ContractKind::Other,
            Compat::Breaking,
            format!("an argument valid before is refused now: {shown}"),
        );
    }
}

fn tool(changes: &mut Changes, old: &ToolContent, new: &ToolContent) {
    if old.description != new.description {
        changes.tool(
            ContractKind::DescriptionChanged,
            Compat::Compatible,
            "description changed",
        );
    }
    let (a, b) = (tier_rank(&old.approval_tier), tier_rank(&new.approval_tier));
    if a != b {
        let detail = format!("{} → {}", old.approval_tier, new.approval_tier);
        match b > a {
            true => changes.tool(
                ContractKind::ApprovalTierRaised,
                Compatible,
                &format!("{detail}: calls are still taken, and may wait for an approver"),
            ),
            false => changes.tool(ContractKind::ApprovalTierLowered, Compatible, &detail),
        }
    }
    match (old.strict, new.strict) {
        (true, false) => changes.tool(
            ContractKind::Other,
            Compatible,
            "served loose (strict: false)",
        ),
        (false, true) => changes.tool(
            ContractKind::Other,
            Compat::Breaking,
            "now strict: extra or missing fields are refused",
        ),
        _ => {}
    }
    compare(changes, "", &old.parameters, &new.parameters, 0);
    backstop(changes, &old.parameters, &new.parameters);
}

fn tier_rank(tier: &str) -> u8 {
    match tier {
        "auto" => 0,
        "user_configurable" => 1,
        _ => 2,
    }
}

/// The changes found so far for one tool.
struct Changes {
    tool: String,
    out: Vec<ContractChange>,
}

impl Changes {
    fn new(tool: &str) -> Self {
        Changes {
            tool: tool.to_owned(),
            out: Vec::new(),
        }
    }

    fn tool(&mut self, kind: ContractKind, compat: Compat, detail: &str) {
        self.at("", kind, compat, detail.to_owned());
    }

    fn at(&mut self, path: &str, kind: ContractKind, compat: Compat, detail: String) {
        self.out.push(ContractChange {
            tool: self.tool.clone(),
            path: path.to_owned(),
            kind,
            compat,
            detail,
        });
    }

    fn sorted(mut self) -> Vec<ContractChange> {
        self.out.sort_by(|a, b| a.path.cmp(&b.path));
        self.out
    }
}

/// A JSON Pointer segment, escaped.
fn segment(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// The set of JSON types a schema admits besides `null`; `None`: any type.
fn types(schema: &Value) -> Option<BTreeSet<String>> {
    let mut set = BTreeSet::new();
    match schema.get("type") {
        Some(Value::String(t)) => {
            set.insert(t.clone());
        }
        Some(Value::Array(list)) => {
            set.extend(list.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        _ => {
            // Branches of anyOf/oneOf with types: their union.
            let branches = ["anyOf", "oneOf"]
                .iter()
                .filter_map(|k| schema.get(*k).and_then(Value::as_array))
                .flatten()
                .collect::<Vec<_>>();
            if branches.is_empty() {
                return None;
            }
            for branch in branches {
                set.extend(types(branch)?);
                if admits_null(branch) {
                    set.insert("null".to_owned());
                }
            }
        }
    }
    set.remove("null");
    Some(set)
}

/// Whether a schema admits `null`: its type says so, a branch does, or it has no type.
fn admits_null(schema: &Value) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(list)) => list.iter().any(|t| t == "null"),
        _ => {
            let branches: Vec<&Value> = ["anyOf", "oneOf"]
                .iter()
                .filter_map(|k| schema.get(*k).and_then(Value::as_array))
                .flatten()
                .collect();
            branches.is_empty() || branches.iter().any(|b| admits_null(b))
        }
    }
}

/// Whether every value of type set `a` is of type set `b` (`integer` ⊂ `number`).
fn within(a: &BTreeSet<String>, b: &BTreeSet<String>) -> bool {
    a.iter()
        .all(|t| b.contains(t) || (t == "integer" && b.contains("number")))
}

/// A type set as JSON Schema writes it: `"number"`, or `["integer", "string"]`.
fn shown(set: &BTreeSet<String>) -> String {
    let quoted: Vec<String> = set.iter().map(|t| format!("{t:?}")).collect();
    match quoted.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", quoted.join(", ")),
    }
}

/// The non-null branch of a strict-form nullable `anyOf` (`[{...}, {"type": "null"}]`),
/// with the keywords beside the `anyOf` (`maxLength`, `pattern`, ...) moved into it:
/// they constrain every value, so they are compared as the branch's own. A keyword
/// the branch also has with another value cannot be merged: the schema is then
/// compared as written (its `anyOf` as a whole).
fn unwrapped(schema: &Value) -> Cow<'_, Value> {
    let Some(branches) = schema.get("anyOf").and_then(Value::as_array) else {
        return Cow::Borrowed(schema);
    };
    let mut real = branches
        .iter()
        .filter(|b| b.get("type") != Some(&Value::from("null")));
    let (Some(only), None) = (real.next(), real.next()) else {
        return Cow::Borrowed(schema);
    };
    let (Some(wrapper), Some(branch)) = (schema.as_object(), only.as_object()) else {
        return Cow::Borrowed(only);
    };
    let mut merged = branch.clone();
    for (key, value) in wrapper {
        if key == "anyOf" || IGNORED.contains(&key.as_str()) || key == "description" {
            continue;
        }
        match merged.get(key) {
            Some(own) if own != value => return Cow::Borrowed(schema),
            Some(_) => {}
            None => {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    Cow::Owned(Value::Object(merged))
}

fn compare(changes: &mut Changes, path: &str, old: &Value, new: &Value, depth: usize) {
    if old == new {
        return;
    }
    if depth > MAX_DEPTH {
        changes.at(
            path,
            ContractKind::Other,
            Compat::Breaking,
            "changed too deep to compare".into(),
        );
        return;
    }
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else {
        changes.at(
            path,
            ContractKind::Other,
            Compat::Breaking,
            "changed (not compared)".into(),
        );
        return;
    };
    if a.get("description") != b.get("description") && !path.is_empty() {
        changes.at(
            path,
            ContractKind::DescriptionChanged,
            Compatible,
            "description changed".into(),
        );
    }
    let (old_u, new_u) = (unwrapped(old), unwrapped(new));
    let (old_u, new_u) = (old_u.as_ref(), new_u.as_ref());
    // The nullable wrapper's own `anyOf` is compared as the branch it wraps.
    let skipped = not_compared(old, new, &["anyOf"]).or_else(|| not_compared(old_u, new_u, &[]));
    if let Some(key) = skipped {
        changes.at(
            path,
            ContractKind::Other,
            Compat::Breaking,
            format!("{key} changed (not compared)"),
        );
        return;
    }
    match (types(old_u), types(new_u)) {
        (Some(t1), Some(t2)) if t1 != t2 => {
            let detail = format!("type {} → {}", shown(&t1), shown(&t2));
            match (within(&t2, &t1), within(&t1, &t2)) {
                // The same values written two ways (`["integer", "number"]` and `"number"`).
                (true, true) => {}
                (true, false) => {
                    changes.at(path, ContractKind::TypeNarrowed, Compat::Breaking, detail);
                    return;
                }
                (false, true) => changes.at(path, ContractKind::TypeWidened, Compatible, detail),
                (false, false) => {
                    changes.at(path, ContractKind::TypeChanged, Compat::Breaking, detail);
                    return;
                }
            }
        }
        (None, None) if old_u.get("type") != new_u.get("type") => {
            changes.at(
                path,
                ContractKind::Other,
                Compat::Breaking,
                "type changed (not compared)".into(),
            );
            return;
        }
        (None, Some(t2)) => {
            changes.at(
                path,
                ContractKind::TypeNarrowed,
                Compat::Breaking,
                format!("type any → {}", shown(&t2)),
            );
            return;
        }
        (Some(t1), None) => {
            changes.at(
                path,
                ContractKind::TypeWidened,
                Compatible,
                format!("type {} → any", shown(&t1)),
            );
        }
        _ => {}
    }
    enums(changes, path, old_u, new_u);
    constraints(changes, path, old_u, new_u);
    properties(changes, path, old_u, new_u, depth);
    if let (Some(x), Some(y)) = (old_u.get("items"), new_u.get("items")) {
        let at = format!("{path}/items");
        let from = changes.out.len();
        compare(changes, &at, x, y, depth + 1);
        nullability(changes, &at, x, y, from);
    } else if old_u.get("items") != new_u.get("items") {
        let kind = match new_u.get("items") {
            Some(_) => ContractKind::ConstraintTightened,
            None => ContractKind::ConstraintLoosened,
        };
        let compat = match kind {
            ContractKind::ConstraintTightened => Compat::Breaking,
            _ => Compatible,
        };
        changes.at(path, kind, compat, "items changed".into());
    }
}

/// Keys [`compare`] and the functions it calls understand (with [`LOWER`],
/// [`UPPER`] and [`OPAQUE`]).
const COMPARED: [&str; 9] = [
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "description",
    "uniqueItems",
];

/// Annotations: they do not change which calls are valid.
const IGNORED: [&str; 5] = ["title", "examples", "default", "$comment", "deprecated"];

/// The first key, in name order, that differs between two schemas and that
/// [`compare`] does not understand (`allOf`, `oneOf`, `anyOf` other than the
/// nullable wrapper, `$ref`, `$defs`, `not`, `if`, anything unknown): such a
/// change cannot be proven compatible.
fn not_compared<'a>(old: &'a Value, new: &'a Value, skip: &[&str]) -> Option<&'a str> {
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else {
        return None;
    };
    let keys: BTreeSet<&'a str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    keys.into_iter().find(|key| {
        let understood = [
            &COMPARED[..],
            &IGNORED[..],
            &LOWER[..],
            &UPPER[..],
            &OPAQUE[..],
            skip,
        ]
        .iter()
        .any(|known| known.contains(key));
        !understood && a.get(*key) != b.get(*key)
    })
}

/// Whether a property or list item still admits `null`, when nothing said at `at`
/// since change `from` covers it: in loose form an optional argument that stops
/// admitting `null` stays optional, yet a call sending `null` is refused.
fn nullability(changes: &mut Changes, at: &str, old: &Value, new: &Value, from: usize) {
    let covered = changes.out.iter().skip(from).any(|c| {
        c.path == at
            && (c.compat == Compat::Breaking
                || matches!(
                    c.kind,
                    ContractKind::ArgumentMadeRequired | ContractKind::ArgumentMadeOptional
                ))
    });
    if covered {
        return;
    }
    match (admits_null(old), admits_null(new)) {
        (true, false) => changes.at(
            at,
            ContractKind::TypeNarrowed,
            Compat::Breaking,
            "null no longer allowed".into(),
        ),
        (false, true) => changes.at(
            at,
            ContractKind::TypeWidened,
            Compatible,
            "null allowed".into(),
        ),
        _ => {}
    }
}

/// The values an `enum` and a `const` allow together (both present: the values
/// of the enum equal to the const), `null` included, keeping only values of a type
/// the schema's `type` admits; `None`: any.
fn allowed(schema: &Value) -> Option<Vec<Value>> {
    let listed = schema.get("enum").and_then(Value::as_array);
    let constant = schema.get("const");
    let values: Vec<Value> = match (listed, constant) {
        (Some(list), Some(c)) => list.iter().filter(|v| *v == c).cloned().collect(),
        (Some(list), None) => list.clone(),
        (None, Some(c)) => vec![c.clone()],
        (None, None) => return None,
    };
    Some(values.into_iter().filter(|v| of_type(schema, v)).collect())
}

/// Whether `value`'s JSON type is one the schema's `type` names (no `type`: any).
fn of_type(schema: &Value, value: &Value) -> bool {
    let named = |t: &str| match value {
        Value::Null => t == "null",
        Value::Bool(_) => t == "boolean",
        Value::Number(n) => {
            t == "number" || (t == "integer" && n.as_f64().is_some_and(|f| f.fract() == 0.0))
        }
        Value::String(_) => t == "string",
        Value::Array(_) => t == "array",
        Value::Object(_) => t == "object",
    };
    match schema.get("type") {
        Some(Value::String(t)) => named(t),
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).any(named),
        _ => true,
    }
}

fn enums(changes: &mut Changes, path: &str, old: &Value, new: &Value) {
    match (allowed(old), allowed(new)) {
        (None, Some(values)) => changes.at(
            path,
            ContractKind::EnumAdded,
            Compat::Breaking,
            format!("only {} allowed now", list(&values)),
        ),
        (Some(_), None) => changes.at(
            path,
            ContractKind::EnumRemoved,
            Compatible,
            "any value allowed now".into(),
        ),
        (Some(before), Some(after)) => {
            let removed: Vec<Value> = before
                .iter()
                .filter(|v| !after.contains(v))
                .cloned()
                .collect();
            let added: Vec<Value> = after
                .iter()
                .filter(|v| !before.contains(v))
                .cloned()
                .collect();
            if !removed.is_empty() {
                changes.at(
                    path,
                    ContractKind::EnumValueRemoved,
                    Compat::Breaking,
                    format!("{} no longer allowed", list(&removed)),
                );
            }
            if !added.is_empty() {
                changes.at(
                    path,
                    ContractKind::EnumValueAdded,
                    Compatible,
                    format!("{} allowed now", list(&added)),
                );
            }
        }
        (None, None) if old.get("enum") != new.get("enum") => changes.at(
            path,
            ContractKind::Other,
            Compat::Breaking,
            "enum changed (not compared)".into(),
        ),
        (None, None) => {}
    }
}

fn list(values: &[Value]) -> String {
    values
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Lower bounds: raising them tightens.
const LOWER: [&str; 5] = [
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];
/// Upper bounds: lowering them tightens.
const UPPER: [&str; 5] = [
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];
/// Compared only as equal or not: any new or changed value tightens.
const OPAQUE: [&str; 3] = ["pattern", "format", "multipleOf"];

fn constraints(changes: &mut Changes, path: &str, old: &Value, new: &Value) {
    let mut note = |key: &str, tighter: bool, before: Option<&Value>, after: Option<&Value>| {
        let shown = |v: Option<&Value>| v.map_or("none".to_owned(), Value::to_string);
        let detail = format!("{key} {} → {}", shown(before), shown(after));
        match tighter {
            true => changes.at(
                path,
                ContractKind::ConstraintTightened,
                Compat::Breaking,
                detail,
            ),
            false => changes.at(path, ContractKind::ConstraintLoosened, Compatible, detail),
        }
    };
    for (keys, lower) in [(LOWER, true), (UPPER, false)] {
        for key in keys {
            if let Some(tighter) = bound(key, lower, old, new) {
                note(key, tighter, old.get(key), new.get(key));
            }
        }
    }
    for key in OPAQUE {
        match (old.get(key), new.get(key)) {
            (a, b) if a == b => {}
            (a, None) => note(key, false, a, None),
            (a, b) => note(key, true, a, b),
        }
    }
    let unique = |v: &Value| v.get("uniqueItems") == Some(&Value::Bool(true));
    if unique(old) != unique(new) {
        note(
            "uniqueItems",
            unique(new),
            old.get("uniqueItems"),
            new.get("uniqueItems"),
        );
    }
}

/// Whether bound `key`'s change tightens (`Some(true)`) or loosens (`Some(false)`);
/// `None`: unchanged. Raising a `lower` bound tightens, lowering an upper one does; a
/// bound that is not a number is compared only as changed or not, and a change tightens.
fn bound(key: &str, lower: bool, old: &Value, new: &Value) -> Option<bool> {
    let (before, after) = (old.get(key), new.get(key));
    match (before.map(Value::as_f64), after.map(Value::as_f64)) {
        (None, None) => None,
        (Some(_), None) => Some(false),
        (None, Some(_)) => Some(true),
        (Some(Some(a)), Some(Some(b))) if a == b => None,
        (Some(Some(a)), Some(Some(b))) => Some(if lower { b > a } else { b < a }),
        _ => (before != after).then_some(true),
    }
}

/// Whether a property is required: listed in `required`. A strict-form "optional"
/// argument (listed, admitting `null`) is required too: a call must send it, if
/// only as `null`, and the call path refuses one that leaves it out.
fn required(object: &Value, name: &str) -> bool {
    object
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|n| n == name))
}

/// Whether the object refuses properties it does not name.
fn closed(object: &Value) -> bool {
    object.get("additionalProperties") == Some(&Value::Bool(false))
}

fn properties(changes: &mut Changes, path: &str, old: &Value, new: &Value, depth: usize) {
    let empty = Map::new();
    let a = old
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let b = new
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let names: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for name in names {
        let at = format!("{path}/{}", segment(name));
        match (a.get(name), b.get(name)) {
            (None, Some(_)) => match required(new, name) {
                true => changes.at(
                    &at,
                    ContractKind::RequiredArgumentAdded,
                    Compat::Breaking,
                    "a new required argument".into(),
                ),
                false => changes.at(
                    &at,
                    ContractKind::OptionalArgumentAdded,
                    Compatible,
                    "a new optional argument".into(),
                ),
            },
            (Some(_), None) => match closed(new) {
                true => changes.at(
                    &at,
                    ContractKind::PropertyRemoved,
                    Compat::Breaking,
                    "removed: a call still sending it is refused".into(),
                ),
                false => changes.at(
                    &at,
                    ContractKind::PropertyRemoved,
                    Compatible,
                    "removed (extra properties are still allowed)".into(),
                ),
            },
            (Some(x), Some(y)) => {
                let from = changes.out.len();
                match (required(old, name), required(new, name)) {
                    (false, true) => changes.at(
                        &at,
                        ContractKind::ArgumentMadeRequired,
                        Compat::Breaking,
                        "optional → required".into(),
                    ),
                    (true, false) => changes.at(
                        &at,
                        ContractKind::ArgumentMadeOptional,
                        Compatible,
                        "required → optional".into(),
                    ),
                    _ => {}
                }
                compare(changes, &at, x, y, depth + 1);
                nullability(changes, &at, x, y, from);
            }
            (None, None) => {}
        }
    }
    // A name `required` lists without declaring it: a call must send it all the same.
    let listed = |v: &Value| -> BTreeSet<String> {
        v.get("required")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before, after) = (listed(old), listed(new));
    for name in after.difference(&before) {
        if !a.contains_key(name) && !b.contains_key(name) {
            changes.at(
                &format!("{path}/{}", segment(name)),
                ContractKind::ArgumentMadeRequired,
                Compat::Breaking,
                "required now (listed in `required`)".into(),
            );
        }
    }
    let is_object =
        |v: &Value| v.get("properties").is_some() || v.get("type") == Some(&Value::from("object"));
    if is_object(old) && is_object(new) {
        let key = "additionalProperties";
        extra(changes, path, old.get(key), new.get(key));
    }
}

/// `additionalProperties`: absent and `true` are open, `false` closed, anything
/// else a schema extra properties must match (not compared).
fn extra(changes: &mut Changes, path: &str, old: Option<&Value>, new: Option<&Value>) {
    let open = |v: Option<&Value>| matches!(v, None | Some(Value::Bool(true)));
    let shut = |v: Option<&Value>| v == Some(&Value::Bool(false));
    if old == new || (open(old) && open(new)) {
        return;
    }
    if shut(new) {
        changes.at(
            path,
            ContractKind::AdditionalPropertiesClosed,
            Compat::Breaking,
            "additionalProperties closed".into(),
        );
    } else if shut(old) || open(new) {
        changes.at(
            path,
            ContractKind::AdditionalPropertiesOpened,
            Compatible,
            "additionalProperties opened".into(),
        );
    } else {
        changes.at(
            path,
            ContractKind::Other,
            Compat::Breaking,
            "additionalProperties changed (not compared)".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(properties: Value, required: &[&str]) -> Value {
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
    }

    fn kinds(changes: &[ContractChange]) -> Vec<(String, &'static str, &'static str)> {
        changes
            .iter()
            .map(|c| (c.path.clone(), c.kind.as_str(), c.compat.as_str()))
            .collect()
    }

    fn one(old: Value, new: Value) -> Vec<(String, &'static str, &'static str)> {
        kinds(&schema("t", &old, &new))
    }

    #[test]
    fn required_and_optional_arguments_added_in_strict_and_loose_form() {
        let base = object(json!({"a": {"type": "string"}}), &["a"]);
        let strict_required = object(
            json!({"a": {"type": "string"}, "b": {"type": "string"}}),
            &["a", "b"],
        );
        let strict_optional = object(
            json!({"a": {"type": "string"}, "b": {"type": ["string", "null"]}}),
            &["a", "b"],
        );
        let loose_optional = object(
            json!({"a": {"type": "string"}, "b": {"type": "string"}}),
            &["a"],
        );
        assert_eq!(
            one(base.clone(), strict_required),
            [("/b".into(), "required_argument_added", "breaking")]
        );
        // Strict form's "optional" is listed: a call must send it, if only as null,
        // so every recorded call that leaves it out is refused.
        assert_eq!(
            one(base.clone(), strict_optional),
            [("/b".into(), "required_argument_added", "breaking")]
        );
        assert_eq!(
            one(base, loose_optional),
            [("/b".into(), "optional_argument_added", "compatible")]
        );
    }

    #[test]
    fn removal_breaks_a_closed_object_and_required_ness_changes_both_ways() {
        let two = object(
            json!({"a": {"type": "string"}, "b": {"type": ["string", "null"]}}),
            &["a", "b"],
        );
        let one_left = object(json!({"a": {"type": "string"}}), &["a"]);
        assert_eq!(
            one(two.clone(), one_left),
            [("/b".into(), "property_removed", "breaking")]
        );
        let required_b = object(
            json!({"a": {"type": "string"}, "b": {"type": "string"}}),
            &["a", "b"],
        );
        // Listed in `required` both times: only `null` goes, and comes back.
        assert_eq!(
            one(two.clone(), required_b.clone()),
            [("/b".into(), "type_narrowed", "breaking")]
        );
        assert_eq!(one(required_b.clone(), two)[0].2, "compatible");
        let optional_b = object(
            json!({"a": {"type": "string"}, "b": {"type": "string"}}),
            &["a"],
        );
        assert_eq!(
            one(optional_b.clone(), required_b.clone()),
            [("/b".into(), "argument_made_required", "breaking")]
        );
        assert_eq!(
            one(required_b, optional_b)[0],
            ("/b".into(), "argument_made_optional", "compatible")
        );
    }

    #[test]
    fn types_narrow_widen_and_change() {
        let at = |t: Value| object(json!({"n": {"type": t}}), &["n"]);
        assert_eq!(
            one(at(json!("number")), at(json!("integer"))),
            [("/n".into(), "type_narrowed", "breaking")]
        );
        assert_eq!(
            one(at(json!("integer")), at(json!("number"))),
            [("/n".into(), "type_widened", "compatible")]
        );
        assert_eq!(
            one(at(json!("string")), at(json!("boolean"))),
            [("/n".into(), "type_changed", "breaking")]
        );
        assert_eq!(
            one(at(json!("string")), at(json!(["string", "integer"]))),
            [("/n".into(), "type_widened", "compatible")]
        );
    }

    #[test]
    fn enums_constraints_and_additional_properties() {
        let e = |values: Value| object(json!({"s": {"type": "string", "enum": values}}), &["s"]);
        assert_eq!(
            one(e(json!(["a", "b"])), e(json!(["a"]))),
            [("/s".into(), "enum_value_removed", "breaking")]
        );
        assert_eq!(
            one(e(json!(["a"])), e(json!(["a", "b"]))),
            [("/s".into(), "enum_value_added", "compatible")]
        );
        let plain = object(json!({"s": {"type": "string"}}), &["s"]);
        assert_eq!(
            one(plain.clone(), e(json!(["a"]))),
            [("/s".into(), "enum_added", "breaking")]
        );
        assert_eq!(
            one(e(json!(["a"])), plain.clone()),
            [("/s".into(), "enum_removed", "compatible")]
        );
        let max = |n: u64| object(json!({"s": {"type": "string", "maxLength": n}}), &["s"]);
        assert_eq!(
            one(max(10), max(5)),
            [("/s".into(), "constraint_tightened", "breaking")]
        );
        assert_eq!(
            one(max(5), max(10)),
            [("/s".into(), "constraint_loosened", "compatible")]
        );
        let pattern = object(json!({"s": {"type": "string", "pattern": "^a"}}), &["s"]);
        assert_eq!(
            one(plain.clone(), pattern.clone()),
            [("/s".into(), "constraint_tightened", "breaking")]
        );
        assert_eq!(
            one(pattern, plain),
            [("/s".into(), "constraint_loosened", "compatible")]
        );
        let open =
            json!({"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]});
        let shut = object(json!({"s": {"type": "string"}}), &["s"]);
        assert_eq!(
            one(open.clone(), shut.clone()),
            [("".into(), "additional_properties_closed", "breaking")]
        );
        assert_eq!(
            one(shut, open),
            [("".into(), "additional_properties_opened", "compatible")]
        );
    }

    #[test]
    fn list_items_are_compared_at_their_path() {
        let list = |amount: Value| {
            let item = object(
                json!({"amount": amount, "reason": {"type": "string"}}),
                &["amount", "reason"],
            );
            object(
                json!({"refunds": {"type": "array", "items": item}}),
                &["refunds"],
            )
        };
        let changes = one(
            list(json!({"type": "number"})),
            list(json!({"type": "integer"})),
        );
        assert_eq!(
            changes,
            [("/refunds/items/amount".into(), "type_narrowed", "breaking")]
        );
    }

    fn tool(name: &str, parameters: Value) -> ToolContent {
        ToolContent {
            name: name.into(),
            description: format!("Does {name}."),
            parameters,
            strict: true,
            approval_tier: "auto".into(),
            tool_type: "builtin".into(),
            prompt_section: None,
            connector: None,
        }
    }

    #[test]
    fn tools_removed_added_retiered_and_unchanged() {
        let p = object(json!({}), &[]);
        let (a, b) = (tool("get_a", p.clone()), tool("get_b", p.clone()));
        assert!(tools(std::slice::from_ref(&a), std::slice::from_ref(&a)).is_empty());
        let changes = tools(std::slice::from_ref(&a), std::slice::from_ref(&b));
        assert_eq!(
            kinds(&changes),
            [
                ("".into(), "tool_removed", "breaking"),
                ("".into(), "tool_added", "compatible")
            ]
        );
        assert!(any_breaking(&changes));
        let mut raised = a.clone();
        raised.approval_tier = "requires_approval".into();
        raised.description = "Other words.".into();
        let changes = tools(&[a], &[raised]);
        assert!(!any_breaking(&changes));
        assert_eq!(changes.len(), 2, "{changes:?}");
    }

    #[test]
    fn strict_served_loose_is_compatible_and_newly_strict_is_breaking() {
        let p = object(json!({}), &[]);
        let strict = tool("get_a", p.clone());
        let mut loose = tool("get_a", p);
        loose.strict = false;
        assert_eq!(
            kinds(&tools(
                std::slice::from_ref(&strict),
                std::slice::from_ref(&loose)
            )),
            [("".into(), "other", "compatible")]
        );
        assert_eq!(
            kinds(&tools(&[loose], &[strict])),
            [("".into(), "other", "breaking")]
        );
    }

    #[test]
    fn a_lowered_tier_is_compatible() {
        let mut before = tool("get_a", object(json!({}), &[]));
        before.approval_tier = "requires_approval".into();
        let mut after = before.clone();
        after.approval_tier = "user_configurable".into();
        assert_eq!(
            kinds(&tools(&[before], &[after])),
            [("".into(), "approval_tier_lowered", "compatible")]
        );
    }

    #[test]
    fn an_argument_description_change_is_compatible_at_its_path() {
        let d = |text: &str| {
            object(
                json!({"s": {"type": "string", "description": text}}),
                &["s"],
            )
        };
        let changes = schema("t", &d("Old words."), &d("New words."));
        assert_eq!(
            kinds(&changes),
            [("/s".into(), "description_changed", "compatible")]
        );
        assert_eq!(changes[0].detail, "description changed");
    }

    #[test]
    fn a_property_removed_from_an_open_object_is_compatible() {
        let open = |properties: Value| json!({"type": "object", "properties": properties});
        assert_eq!(
            one(
                open(json!({"a": {"type": "string"}, "b": {"type": "string"}})),
                open(json!({"a": {"type": "string"}}))
            ),
            [("/b".into(), "property_removed", "compatible")]
        );
    }

    #[test]
    fn const_is_a_one_value_enum() {
        let c = |value: &str| object(json!({"s": {"type": "string", "const": value}}), &["s"]);
        let e = object(json!({"s": {"type": "string", "enum": ["a", "b"]}}), &["s"]);
        assert_eq!(
            one(e.clone(), c("a")),
            [("/s".into(), "enum_value_removed", "breaking")]
        );
        assert_eq!(
            one(c("a"), e),
            [("/s".into(), "enum_value_added", "compatible")]
        );
    }

    #[test]
    fn issue_51s_four_misses_are_breaking() {
        // `null` dropped from an enum.
        let e = |values: Value| {
            object(
                json!({"s": {"type": ["string", "null"], "enum": values}}),
                &["s"],
            )
        };
        assert_eq!(
            one(e(json!(["a", "b", null])), e(json!(["a", "b"]))),
            [("/s".into(), "enum_value_removed", "breaking")]
        );
        // Keywords beside a nullable anyOf: a bound tightened, a pattern added.
        let wrapped = |beside: Value| {
            let mut s = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
            for (k, v) in beside.as_object().into_iter().flatten() {
                s[k] = v.clone();
            }
            object(json!({ "s": s }), &["s"])
        };
        assert_eq!(
            one(
                wrapped(json!({"maxLength": 20})),
                wrapped(json!({"maxLength": 3}))
            ),
            [("/s".into(), "constraint_tightened", "breaking")]
        );
        assert_eq!(
            one(wrapped(json!({})), wrapped(json!({"pattern": "^[a-z]+$"}))),
            [("/s".into(), "constraint_tightened", "breaking")]
        );
        // Moving a keyword from the branch to beside the wrapper changes nothing.
        let inside = object(
            json!({"s": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}}),
            &["s"],
        );
        assert_eq!(one(inside, wrapped(json!({"maxLength": 5}))), []);
        // `const` beside an `enum`: only the const is allowed.
        let both = object(
            json!({"s": {"type": "string", "enum": ["a", "b"], "const": "a"}}),
            &["s"],
        );
        let plain = object(json!({"s": {"type": "string", "enum": ["a", "b"]}}), &["s"]);
        assert_eq!(
            one(plain, both),
            [("/s".into(), "enum_value_removed", "breaking")]
        );
        // A name required without being declared.
        let open = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let mut listed = open.clone();
        listed["required"] = json!(["z"]);
        assert_eq!(
            one(open, listed),
            [("/z".into(), "argument_made_required", "breaking")]
        );
    }

    #[test]
    fn lower_bounds_raised_and_unique_items_required_tighten() {
        let min = |n: f64| object(json!({"n": {"type": "number", "minimum": n}}), &["n"]);
        assert_eq!(
            one(min(0.0), min(1.5)),
            [("/n".into(), "constraint_tightened", "breaking")]
        );
        assert_eq!(
            one(min(1.0), min(0.0)),
            [("/n".into(), "constraint_loosened", "compatible")]
        );
        let list = |unique: bool| {
            object(
                json!({"l": {"type": "array", "items": {"type": "string"}, "uniqueItems": unique}}),
                &["l"],
            )
        };
        assert_eq!(
            one(list(false), list(true)),
            [("/l".into(), "constraint_tightened", "breaking")]
        );
    }

    #[test]
    fn a_changed_any_of_branch_is_other_and_breaking() {
        let either = |max: u64| {
            let s = json!({"anyOf": [{"type": "string", "maxLength": max}, {"type": "integer"}]});
            object(json!({"s": s}), &["s"])
        };
        assert_eq!(
            one(either(10), either(5)),
            [("/s".into(), "other", "breaking")]
        );
    }

    #[test]
    fn a_description_change_beside_an_unchanged_one_of_is_only_a_description_change() {
        let s = |text: &str| {
            let s =
                json!({"oneOf": [{"type": "string"}, {"type": "integer"}], "description": text});
            object(json!({"s": s}), &["s"])
        };
        assert_eq!(
            one(s("a"), s("b")),
            [("/s".into(), "description_changed", "compatible")]
        );
    }

    #[test]
    fn changed_definitions_behind_an_unchanged_ref_are_other_and_breaking() {
        let with = |t: &str| {
            let mut s = object(json!({"a": {"$ref": "#/$defs/a"}}), &["a"]);
            s["$defs"] = json!({"a": {"type": t}});
            s
        };
        assert_eq!(
            one(with("number"), with("integer")),
            [("".into(), "other", "breaking")]
        );
    }

    #[test]
    fn a_changed_additional_properties_schema_is_other_and_breaking() {
        let with_extra = |t: &str| json!({"type": "object", "properties": {}, "additionalProperties": {"type": t}});
        assert_eq!(
            one(with_extra("string"), with_extra("integer")),
            [("".into(), "other", "breaking")]
        );
    }

    #[test]
    fn a_nullable_argument_or_item_that_stops_admitting_null_is_narrowed() {
        let loose = |t: Value| json!({"type": "object", "properties": {"s": {"type": t}}});
        assert_eq!(
            one(loose(json!(["string", "null"])), loose(json!("string"))),
            [("/s".into(), "type_narrowed", "breaking")]
        );
        let list = |t: Value| {
            object(
                json!({"l": {"type": "array", "items": {"type": t}}}),
                &["l"],
            )
        };
        assert_eq!(
            one(list(json!(["string", "null"])), list(json!("string"))),
            [("/l/items".into(), "type_narrowed", "breaking")]
        );
        assert_eq!(
            one(list(json!("string")), list(json!(["string", "null"]))),
            [("/l/items".into(), "type_widened", "compatible")]
        );
    }

    #[test]
    fn the_same_types_written_two_ways_give_nothing() {
        let at = |t: Value| object(json!({"n": {"type": t}}), &["n"]);
        assert!(one(at(json!(["integer", "number"])), at(json!("number"))).is_empty());
    }

    #[test]
    fn a_type_change_says_before_and_after() {
        let at = |t: &str| object(json!({"n": {"type": t}}), &["n"]);
        let changes = schema("t", &at("number"), &at("integer"));
        assert_eq!(changes[0].detail, "type \"number\" → \"integer\"");
    }

    #[test]
    fn garbage_schemas_do_not_panic_and_count_as_breaking() {
        for (old, new) in [
            (json!(1), json!("x")),
            (json!({"type": 7}), json!({"type": [1, null]})),
            (json!({"properties": 3}), json!({"properties": {"a": 1}})),
            (json!({"anyOf": "x"}), json!({"oneOf": [1]})),
        ] {
            let _ = schema("t", &old, &new);
        }
        assert!(any_breaking(&schema("t", &json!(1), &json!("x"))));
        let mut deep = json!({"type": "string"});
        for _ in 0..40 {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let mut deeper = json!({"type": "integer"});
        for _ in 0..40 {
            deeper = json!({"type": "object", "properties": {"x": deeper}});
        }
        assert!(any_breaking(&schema("t", &deep, &deeper)));
    }
}
