//! The Cedar schema of an agent's tools, generated from their strict JSON schemas,
//! and a call's arguments made into that schema's values.
//!
//! Each tool is an action of its own (`Action::"create_refunds"`, a member of the
//! group `Action::"call"`) on the resource `Tool::"create_refunds"`, by a `User`
//! that may be `in` any `Group`. Its context is `{tenant, member, arguments}`, with
//! `arguments` typed from the tool's input schema, so the validator refuses a
//! policy that reads an argument the tool does not take or compares it as the
//! wrong type.
//!
//! JSON Schema → Cedar: `string` (and a string `enum`) → `String`; `integer` and
//! `number` → `Long` (a value that is not a whole number cannot be decided, see
//! [`arguments`]); `boolean` → `Bool`; `array` → `Set`; `object` → `Record` whose
//! attributes are required where the schema requires them and does not allow
//! `null`. A property of any other shape (`anyOf`, a set of nullable items, a
//! name starting with `__`, nesting deeper than [`MAX_DEPTH`]) is left out: a
//! policy cannot read it, and the validator says so.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// The deepest nesting of objects and arrays a policy can read.
pub const MAX_DEPTH: usize = 8;

/// The action group every tool's action is in.
pub const CALL: &str = "call";

/// A Cedar type, as Cedar's JSON schema format writes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum CedarType {
    String,
    Long,
    Boolean,
    Set {
        element: Box<CedarType>,
    },
    Record {
        attributes: BTreeMap<String, Attribute>,
    },
}

/// A record's attribute: its type, and whether every value has it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attribute {
    #[serde(flatten)]
    pub of: CedarType,
    pub required: bool,
}

fn attribute(of: CedarType, required: bool) -> Attribute {
    Attribute { of, required }
}

fn empty_record() -> CedarType {
    CedarType::Record {
        attributes: BTreeMap::new(),
    }
}

/// The tool's input schema as a Cedar record type; an object with no property a
/// policy can read is an empty record.
pub fn arguments_type(parameters: &Value) -> CedarType {
    match cedar_type(parameters, 0) {
        Some((t @ CedarType::Record { .. }, _)) => t,
        _ => empty_record(),
    }
}

/// The list a list tool's call is decided by, item by item (with the item in
/// `context.item`): its one top-level property that is an array of objects (the
/// shape of every `create_` and `update_` tool: `{"tasks": [{…}, …]}`). Its name
/// and the schema of one item; `None` when there is not exactly one.
pub fn list_item(parameters: &Value) -> Option<(&str, &Value)> {
    let properties = parameters.get("properties")?.as_object()?;
    let mut lists = properties.iter().filter_map(|(name, p)| {
        let (kind, _) = base_type(p)?;
        let item = p.get("items")?;
        match (kind, base_type(item)) {
            ("array", Some(("object", false))) => Some((name.as_str(), item)),
            _ => None,
        }
    });
    match (lists.next(), lists.next()) {
        (Some(one), None) => Some(one),
        _ => None,
    }
}

#[derive(Serialize)]
struct Namespace {
    #[serde(rename = "entityTypes")]
    entity_types: BTreeMap<&'static str, EntityType>,
    actions: BTreeMap<String, Action>,
}

#[derive(Serialize)]
struct EntityType {
    #[serde(rename = "memberOfTypes", skip_serializing_if = "Vec::is_empty")]
    member_of_types: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shape: Option<CedarType>,
}

#[derive(Serialize)]
struct Action {
    #[serde(rename = "memberOf", skip_serializing_if = "Vec::is_empty")]
    member_of: Vec<ActionRef>,
    #[serde(rename = "appliesTo", skip_serializing_if = "Option::is_none")]
    applies_to: Option<AppliesTo>,
}

#[derive(Serialize)]
struct ActionRef {
    id: &'static str,
}

#[derive(Serialize)]
struct AppliesTo {
    #[serde(rename = "principalTypes")]
    principal_types: Vec<&'static str>,
    #[serde(rename = "resourceTypes")]
    resource_types: Vec<&'static str>,
    context: CedarType,
}

/// The schema of `tools` (name, input schema), in Cedar's JSON schema format.
pub fn schema<'a>(tools: impl Iterator<Item = (&'a str, &'a Value)>) -> Value {
    let mut actions = BTreeMap::new();
    let group = Action {
        member_of: Vec::new(),
        applies_to: None,
    };
    actions.insert(CALL.to_owned(), group);
    for (name, parameters) in tools {
        let mut arguments = arguments_type(parameters);
        let mut item = None;
        if let Some((list, one)) = list_item(parameters) {
            // Decided item by item: the list is `context.item`, one at a time.
            if let CedarType::Record { attributes } = &mut arguments {
                attributes.remove(list);
            }
            item = Some(arguments_type(one));
        }
        let mut attributes = BTreeMap::from([
            ("tenant".to_owned(), attribute(CedarType::String, true)),
            ("member".to_owned(), attribute(CedarType::String, true)),
            ("arguments".to_owned(), attribute(arguments, true)),
        ]);
        if let Some(item) = item {
            attributes.insert("item".to_owned(), attribute(item, true));
        }
        let action = Action {
            member_of: vec![ActionRef { id: CALL }],
            applies_to: Some(AppliesTo {
                principal_types: vec!["User"],
                resource_types: vec!["Tool"],
                context: CedarType::Record { attributes },
            }),
        };
        actions.insert(name.to_owned(), action);
    }
    let tool = CedarType::Record {
        attributes: BTreeMap::from([
            ("name".to_owned(), attribute(CedarType::String, true)),
            ("tier".to_owned(), attribute(CedarType::String, true)),
        ]),
    };
    let entity_types = BTreeMap::from([
        (
            "Group",
            EntityType {
                member_of_types: Vec::new(),
                shape: None,
            },
        ),
        (
            "User",
            EntityType {
                member_of_types: vec!["Group"],
                shape: None,
            },
        ),
        (
            "Tool",
            EntityType {
                member_of_types: Vec::new(),
                shape: Some(tool),
            },
        ),
    ]);
    let namespace = Namespace {
        entity_types,
        actions,
    };
    serde_json::to_value(BTreeMap::from([("", namespace)])).unwrap_or(Value::Null)
}

/// The one type of a schema's `type` besides `"null"`, and whether it allows `null`.
fn base_type(schema: &Value) -> Option<(&str, bool)> {
    match schema.get("type") {
        Some(Value::String(t)) => Some((t.as_str(), false)),
        Some(Value::Array(types)) => {
            let nullable = types.iter().any(|t| t == "null");
            let mut rest = types
                .iter()
                .filter_map(Value::as_str)
                .filter(|t| *t != "null");
            match (rest.next(), rest.next()) {
                (Some(one), None) => Some((one, nullable)),
                _ => None,
            }
        }
        None => {
            let values = schema.get("enum")?.as_array()?;
            match values.iter().all(Value::is_string) && !values.is_empty() {
                true => Some(("string", false)),
                false => None,
            }
        }
        _ => None,
    }
}

/// A JSON Schema as a Cedar type, and whether the value may be `null`; `None` when
/// a policy cannot read it.
fn cedar_type(schema: &Value, depth: usize) -> Option<(CedarType, bool)> {
    if depth > MAX_DEPTH {
        return None;
    }
    let (kind, nullable) = base_type(schema)?;
    let t = match kind {
        "string" => CedarType::String,
        "integer" | "number" => CedarType::Long,
        "boolean" => CedarType::Boolean,
        "array" => {
            let (element, element_nullable) = cedar_type(schema.get("items")?, depth + 1)?;
            if element_nullable {
                return None;
            }
            CedarType::Set {
                element: Box::new(element),
            }
        }
        "object" => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut attributes = BTreeMap::new();
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, property) in properties.into_iter().flatten() {
                if name.starts_with("__") {
                    continue;
                }
                let Some((t, nullable)) = cedar_type(property, depth + 1) else {
                    continue;
                };
                let needed = required.contains(&name.as_str()) && !nullable;
                attributes.insert(name.clone(), attribute(t, needed));
            }
            CedarType::Record { attributes }
        }
        _ => return None,
    };
    Some((t, nullable))
}

/// `value` (valid for `parameters`) as the Cedar value of [`arguments_type`]: what a
/// policy cannot read is left out, `null` is an absent attribute. An error names
/// the argument that cannot be decided (a number that is not a whole number
/// within ±2^63, or a value of another type than the schema says).
pub fn arguments(parameters: &Value, value: &Value) -> Result<Value, String> {
    let nothing = || Value::Object(Map::new());
    if !matches!(
        cedar_type(parameters, 0),
        Some((CedarType::Record { .. }, _))
    ) {
        return Ok(nothing());
    }
    Ok(convert(parameters, value, 0, "")?.unwrap_or_else(nothing))
}

fn convert(schema: &Value, value: &Value, depth: usize, at: &str) -> Result<Option<Value>, String> {
    let Some((kind, _)) = base_type(schema) else {
        return Ok(None);
    };
    if value.is_null() {
        return Ok(None);
    }
    let mismatch = || format!("argument {} is not of its schema's type", pointer(at));
    match kind {
        "string" if value.is_string() => Ok(Some(value.clone())),
        "boolean" if value.is_boolean() => Ok(Some(value.clone())),
        "integer" | "number" => whole(value).map(|n| Some(Value::from(n))).ok_or_else(|| {
            format!(
                "argument {} is not a whole number a policy can compare",
                pointer(at)
            )
        }),
        "array" => {
            let items = value.as_array().ok_or_else(mismatch)?;
            let Some(element) = schema.get("items") else {
                return Ok(None);
            };
            if cedar_type(schema, depth).is_none() {
                return Ok(None);
            }
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                match convert(element, item, depth + 1, &format!("{at}/{i}"))? {
                    Some(v) => out.push(v),
                    None => return Err(format!("argument {at}/{i} is null")),
                }
            }
            Ok(Some(Value::Array(out)))
        }
        "object" => {
            let object = value.as_object().ok_or_else(mismatch)?;
            let Some((CedarType::Record { attributes }, _)) = cedar_type(schema, depth) else {
                return Ok(None);
            };
            let properties = schema.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            for (name, property) in properties.into_iter().flatten() {
                if !attributes.contains_key(name) {
                    continue;
                }
                let Some(v) = object.get(name) else { continue };
                let path = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
                if let Some(v) = convert(property, v, depth + 1, &path)? {
                    out.insert(name.clone(), v);
                }
            }
            Ok(Some(Value::Object(out)))
        }
        _ => Err(mismatch()),
    }
}

fn pointer(at: &str) -> &str {
    if at.is_empty() { "/" } else { at }
}

/// A JSON number as a whole `i64`: `100` and `100.0` are, `100.5` and `1e300` are not.
fn whole(value: &Value) -> Option<i64> {
    if let Some(n) = value.as_i64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    // i64::MAX as f64 rounds up to 2^63, which is out of range: compare with `<`.
    (f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64).then_some(f as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refunds() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["amount", "reason", "note", "tags", "meta"],
            "properties": {
                "amount": {"type": "integer"},
                "reason": {"type": "string", "enum": ["late", "broken"]},
                "note": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "meta": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            }
        })
    }

    #[test]
    fn a_strict_schema_becomes_a_record_with_what_a_policy_can_read() {
        let t = serde_json::to_value(arguments_type(&refunds())).expect("json");
        let attributes = t["attributes"].as_object().expect("attributes");
        assert_eq!(
            attributes["amount"],
            json!({"type": "Long", "required": true})
        );
        assert_eq!(
            attributes["reason"],
            json!({"type": "String", "required": true})
        );
        // Nullable: the attribute is absent when the argument is null.
        assert_eq!(
            attributes["note"],
            json!({"type": "String", "required": false})
        );
        assert_eq!(
            attributes["tags"],
            json!({"type": "Set", "element": {"type": "String"}, "required": true})
        );
        assert!(attributes.get("meta").is_none(), "anyOf is left out");
    }

    #[test]
    fn arguments_keep_what_the_schema_types_and_drop_nulls() {
        let value =
            json!({"amount": 100.0, "reason": "late", "note": null, "tags": ["a"], "meta": 3});
        assert_eq!(
            arguments(&refunds(), &value).expect("converts"),
            json!({"amount": 100, "reason": "late", "tags": ["a"]})
        );
    }

    #[test]
    fn a_number_that_is_not_whole_cannot_be_decided() {
        let value = json!({"amount": 100.5, "reason": "late", "note": null, "tags": [], "meta": 3});
        let error = arguments(&refunds(), &value).expect_err("not whole");
        assert!(error.contains("/amount"), "{error}");
        let huge = json!({"amount": 1e300, "reason": "late", "note": null, "tags": [], "meta": 3});
        assert!(arguments(&refunds(), &huge).is_err());
    }

    #[test]
    fn too_deep_a_schema_is_left_out() {
        let mut schema = json!({"type": "string"});
        for _ in 0..=MAX_DEPTH + 1 {
            schema = json!({"type": "object", "required": ["x"], "properties": {"x": schema}});
        }
        let t = serde_json::to_value(arguments_type(&schema)).expect("json");
        let mut at = &t;
        let mut depth = 0;
        while let Some(next) = at["attributes"].get("x") {
            at = next;
            depth += 1;
        }
        assert!(depth <= MAX_DEPTH, "{depth}");
    }
}
