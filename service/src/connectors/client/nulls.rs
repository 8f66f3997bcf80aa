//! The nulls a strict schema made the model send, dropped before an MCP call: a
//! property the remote's schema left optional is nullable in loadout's strict form
//! (`connectors::schema::normalize`), and the remote receives only what it
//! declared. What a call needs at run time lives here, below the registry; making
//! the schema strict at sync is `connectors::schema`'s.

use serde_json::{Map, Value};

/// How many schemas [`drop_nulls`] follows (through `$ref`, `anyOf`, `oneOf`,
/// `allOf`) for one value, so a recursive schema cannot make it loop.
const MAX_BRANCHES: usize = 64;

/// Removes from `arguments` every `null` given for a property the remote's schema
/// (`remote`) left optional, at every depth, so the remote receives only what it
/// declared. Where several schemas may apply (`anyOf`, `oneOf`, `allOf`, `$ref`), a
/// null is dropped only when one of them declares the property and none requires it.
pub fn drop_nulls(arguments: &mut Value, remote: &Value) {
    prune(arguments, &[remote], remote);
}

fn prune(value: &mut Value, schemas: &[&Value], root: &Value) {
    let branches = branches(schemas, root);
    if branches.is_empty() {
        return;
    }
    match value {
        Value::Object(fields) => {
            let optional = |name: &str| {
                let declared = branches.iter().any(|b| property(b, name).is_some());
                let required = branches.iter().any(|b| {
                    b.get("required")
                        .and_then(Value::as_array)
                        .is_some_and(|r| r.iter().any(|n| n == name))
                });
                declared && !required
            };
            fields.retain(|name, value| !(value.is_null() && optional(name)));
            for (name, value) in fields.iter_mut() {
                let children: Vec<&Value> =
                    branches.iter().filter_map(|b| property(b, name)).collect();
                prune(value, &children, root);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                let children: Vec<&Value> = branches
                    .iter()
                    .filter_map(|b| item_schema(b, index))
                    .collect();
                prune(item, &children, root);
            }
        }
        _ => {}
    }
}

fn property<'a>(schema: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    schema.get("properties")?.as_object()?.get(name)
}

/// The schema of the item at `index`: `prefixItems`, else `items` (a schema, or a
/// draft-07 tuple).
fn item_schema(schema: &Map<String, Value>, index: usize) -> Option<&Value> {
    if let Some(Value::Array(prefix)) = schema.get("prefixItems")
        && let Some(item) = prefix.get(index)
    {
        return Some(item);
    }
    match schema.get("items")? {
        Value::Array(tuple) => tuple.get(index),
        items => Some(items),
    }
}

/// Every schema object that applies to a value of `schemas`: each one, what its
/// local `$ref` points at, and the members of its `anyOf`, `oneOf` and `allOf`;
/// at most [`MAX_BRANCHES`].
fn branches<'a>(schemas: &[&'a Value], root: &'a Value) -> Vec<&'a Map<String, Value>> {
    let mut pending: Vec<&Value> = schemas.to_vec();
    let mut found = Vec::new();
    let mut followed = 0;
    while let Some(next) = pending.pop() {
        followed += 1;
        if followed > MAX_BRANCHES {
            break;
        }
        let Value::Object(schema) = next else {
            continue;
        };
        found.push(schema);
        if let Some(target) = schema
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
            .and_then(|pointer| root.pointer(pointer))
        {
            pending.push(target);
        }
        for key in ["anyOf", "oneOf", "allOf"] {
            if let Some(Value::Array(members)) = schema.get(key) {
                pending.extend(members.iter());
            }
        }
    }
    found
}
