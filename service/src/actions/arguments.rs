//! Validates tool-call arguments against a tool's strict JSON Schema.
//!
//! Covers the subset strict tool schemas use (what `loadout check` enforces):
//! `type` (a name or a list of names), `enum`, `properties`, `required`,
//! `additionalProperties: false`, `items` and `minItems`/`maxItems`. The first
//! problem is reported with a JSON path such as `$.tasks[1].title`.

use serde_json::Value;

/// Why a value does not match its schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SchemaError {
    pub path: String,
    pub message: String,
}

/// Checks `value` against `schema`.
pub fn validate(schema: &Value, value: &Value) -> Result<(), SchemaError> {
    walk(schema, value, "$")
}

fn fail(path: &str, message: String) -> Result<(), SchemaError> {
    Err(SchemaError {
        path: path.to_owned(),
        message,
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, value: &Value) -> bool {
    let actual = type_name(value);
    actual == expected || (expected == "number" && actual == "integer")
}

fn walk(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(schema) = schema.as_object() else {
        // `true` accepts anything; `false` nothing.
        return if schema == &Value::Bool(false) {
            fail(path, "no value is allowed here".into())
        } else {
            Ok(())
        };
    };
    if let Some(expected) = schema.get("type") {
        let names: Vec<&str> = match expected {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() && !names.iter().any(|name| type_matches(name, value)) {
            return fail(
                path,
                format!("expected {}, got {}", names.join(" or "), type_name(value)),
            );
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum")
        && !allowed.contains(value)
    {
        let shown: Vec<String> = allowed.iter().map(Value::to_string).collect();
        return fail(path, format!("must be one of {}", shown.join(", ")));
    }
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !object.contains_key(name) {
                        return fail(path, format!("missing required property {name:?}"));
                    }
                }
            }
            for (name, child) in object {
                let child_path = format!("{path}.{name}");
                match properties.and_then(|p| p.get(name)) {
                    Some(child_schema) => walk(child_schema, child, &child_path)?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return fail(&child_path, "unknown property".into());
                    }
                    None => {
                        if let Some(extra) = schema.get("additionalProperties") {
                            walk(extra, child, &child_path)?;
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let count = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && count < min
            {
                return fail(path, format!("needs at least {min} items"));
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && count > max
            {
                return fail(path, format!("allows at most {max} items"));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tasks() -> Value {
        json!({
            "type": "object",
            "properties": {"tasks": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "priority": {"type": ["string", "null"], "enum": ["low", "high", null]}
                },
                "required": ["title", "priority"],
                "additionalProperties": false
            }}},
            "required": ["tasks"],
            "additionalProperties": false
        })
    }

    fn error(value: Value) -> String {
        validate(&tasks(), &value).expect_err("invalid").to_string()
    }

    #[test]
    fn valid_arguments_pass() {
        let ok = json!({"tasks": [{"title": "Buy milk", "priority": null}, {"title": "Call", "priority": "high"}]});
        assert_eq!(validate(&tasks(), &ok), Ok(()));
    }

    #[test]
    fn problems_are_reported_with_their_json_path() {
        assert_eq!(error(json!({})), "$: missing required property \"tasks\"");
        assert_eq!(
            error(json!({"tasks": [], "x": 1})),
            "$.tasks: needs at least 1 items"
        );
        assert_eq!(
            error(json!({"tasks": [{"title": "a", "priority": null}], "x": 1})),
            "$.x: unknown property"
        );
        assert_eq!(
            error(
                json!({"tasks": [{"title": "a", "priority": null}, {"title": 5, "priority": null}]})
            ),
            "$.tasks[1].title: expected string, got integer"
        );
        assert_eq!(
            error(json!({"tasks": [{"title": "a", "priority": "urgent"}]})),
            "$.tasks[0].priority: must be one of \"low\", \"high\", null"
        );
        assert_eq!(
            error(json!({"tasks": [{"title": "a"}]})),
            "$.tasks[0]: missing required property \"priority\""
        );
        assert_eq!(error(json!([1])), "$: expected object, got array");
    }
}
