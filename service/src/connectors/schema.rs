//! A remote tool's input schema in loadout's strict form, and the way back.
//!
//! MCP servers publish schemas the way JSON Schema is usually written (the Python
//! SDK's FastMCP, from pydantic): inline, with optional properties, `default`s,
//! `title`s and `anyOf` with `null` for `Optional`, and no `additionalProperties`.
//! [`normalize`] rewrites such a schema into strict form without letting through
//! anything the remote would refuse:
//!
//! - every object gets `"additionalProperties": false` (it declared none; this
//!   narrows what is accepted, which is safe) and lists every property in
//!   `required`; a property that was optional becomes nullable (the rules of
//!   [`strict_schema`]), and before a call
//!   [`drop_nulls`](crate::connectors::client::nulls::drop_nulls) removes the nulls
//!   sent for those properties, so the remote receives only what it declared;
//! - `"default": null` is dropped (a nullable property says the same); other
//!   `default`s, `title`s and descriptions are kept (they tell the model what an
//!   omitted value means);
//! - what strict mode cannot express is refused with the reason: open maps
//!   (`additionalProperties` other than `false`, an object property with no
//!   `properties`), the keywords in [`INEXPRESSIBLE`], an `allOf` of several
//!   schemas (closing each would refuse every value), a `$ref` outside the schema,
//!   and a `required` name the object does not declare (strict mode could never
//!   send it).
//!
//! The normalized schema accepts a value only if the remote's schema accepts it
//! once the nulls are dropped; it may accept less (no extra properties).

use serde_json::{Map, Value};

use crate::registry::formats::strict_schema;

/// Largest input schema a sync takes, serialized: 64 KiB. A schema is sent to the
/// model with every request that offers the tool; the largest in the catalog is
/// under 2 KiB, and 64 KiB is some 16,000 tokens, far past any useful tool.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// Keywords strict mode has no form for: pattern-keyed or conditional shapes, counts
/// of properties, and dynamic references. A schema using any of them is refused.
pub const INEXPRESSIBLE: [&str; 18] = [
    "patternProperties",
    "propertyNames",
    "unevaluatedProperties",
    "minProperties",
    "maxProperties",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "if",
    "then",
    "else",
    "not",
    "contains",
    "unevaluatedItems",
    "additionalItems",
    "$dynamicRef",
    "$recursiveRef",
    "$dynamicAnchor",
];

/// The remote's schema in strict form, or why strict mode cannot express it.
pub fn normalize(remote: &Value) -> Result<Value, String> {
    let mut schema = remote.clone();
    check(&schema, "the schema", true)?;
    drop_null_defaults(&mut schema);
    Ok(strict_schema(&schema))
}

/// Refuses what strict mode cannot express, naming where it is.
fn check(node: &Value, path: &str, root: bool) -> Result<(), String> {
    let Value::Object(schema) = node else {
        return Ok(());
    };
    if let Some(keyword) = INEXPRESSIBLE.iter().find(|k| schema.contains_key(**k)) {
        return Err(format!(
            "{path} uses {keyword:?}, which strict mode cannot express"
        ));
    }
    match schema.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(format!(
                "{path} is an open map (\"additionalProperties\" other than false), which strict mode cannot express"
            ));
        }
    }
    if let Some(Value::String(reference)) = schema.get("$ref")
        && !reference.starts_with('#')
    {
        return Err(format!("{path} refers to {reference:?} outside the schema"));
    }
    if let Some(Value::Array(all)) = schema.get("allOf")
        && all.len() > 1
    {
        return Err(format!(
            "{path} is an \"allOf\" of {} schemas; strict mode closes each, so no value could pass",
            all.len()
        ));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    if is_object(schema) {
        if !root && properties.is_none() && schema.get("additionalProperties").is_none() {
            return Err(format!(
                "{path} is an object without \"properties\" (an open map), which strict mode cannot express"
            ));
        }
        if let Some(Value::Array(required)) = schema.get("required")
            && let Some(missing) = required
                .iter()
                .filter_map(Value::as_str)
                .find(|name| !properties.is_some_and(|p| p.contains_key(*name)))
        {
            return Err(format!(
                "{path} requires {missing:?} but does not declare it, so strict mode could never send it"
            ));
        }
    }
    for (key, children) in ["properties", "$defs", "definitions"]
        .iter()
        .filter_map(|key| Some((*key, schema.get(*key)?.as_object()?)))
    {
        for (name, child) in children {
            let path = match key {
                "properties" => format!("{path}.{name}"),
                other => format!("{path} {other}/{name}"),
            };
            check(child, &path, false)?;
        }
    }
    for key in ["items", "prefixItems", "anyOf", "oneOf", "allOf"] {
        match schema.get(key) {
            Some(Value::Array(members)) => {
                for member in members {
                    check(member, &format!("{path} {key}"), false)?;
                }
            }
            Some(child @ Value::Object(_)) => check(child, &format!("{path}[]"), false)?,
            _ => {}
        }
    }
    Ok(())
}

/// An object schema in [`strict_schema`]'s sense: typed `object`, or with `properties`.
fn is_object(schema: &Map<String, Value>) -> bool {
    let typed = match schema.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || schema.contains_key("properties")
}

/// Removes `"default": null` wherever a schema may be (the keys [`check`] walks).
fn drop_null_defaults(node: &mut Value) {
    let Value::Object(schema) = node else {
        return;
    };
    if schema.get("default").is_some_and(Value::is_null) {
        schema.remove("default");
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = schema.get_mut(key) {
            children.values_mut().for_each(drop_null_defaults);
        }
    }
    for key in ["items", "prefixItems", "anyOf", "oneOf", "allOf"] {
        match schema.get_mut(key) {
            Some(Value::Array(members)) => members.iter_mut().for_each(drop_null_defaults),
            Some(child) => drop_null_defaults(child),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::connectors::client::nulls::drop_nulls;

    /// What FastMCP (pydantic) publishes for
    /// `def search(query: str, limit: int = 10, tag: str | None = None, near: Place | None = None)`.
    fn fastmcp() -> Value {
        json!({
            "type": "object",
            "title": "searchArguments",
            "properties": {
                "query": {"type": "string", "title": "Query"},
                "limit": {"type": "integer", "title": "Limit", "default": 10},
                "tag": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Tag"},
                "near": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}], "default": null}
            },
            "required": ["query"],
            "$defs": {
                "Place": {
                    "type": "object",
                    "title": "Place",
                    "properties": {
                        "city": {"type": "string", "description": "A city name."},
                        "radius_km": {"type": "number", "default": 5}
                    },
                    "required": ["city"]
                }
            }
        })
    }

    #[test]
    fn a_fastmcp_schema_becomes_strict_with_its_optional_properties_nullable() {
        let strict = normalize(&fastmcp()).expect("normalizes");
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "title": "searchArguments",
                "properties": {
                    "query": {"type": "string", "title": "Query"},
                    "limit": {"type": ["integer", "null"], "title": "Limit", "default": 10},
                    "tag": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Tag"},
                    "near": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}]}
                },
                "required": ["query", "limit", "near", "tag"],
                "additionalProperties": false,
                "$defs": {
                    "Place": {
                        "type": "object",
                        "title": "Place",
                        "properties": {
                            "city": {"type": "string", "description": "A city name."},
                            "radius_km": {"type": ["number", "null"], "default": 5}
                        },
                        "required": ["city", "radius_km"],
                        "additionalProperties": false
                    }
                }
            })
        );
        assert_eq!(strict_schema(&strict), strict, "the result is strict");
    }

    #[test]
    fn a_strict_schema_comes_back_unchanged() {
        let schema = json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ids"], "additionalProperties": false});
        assert_eq!(normalize(&schema), Ok(schema));
    }

    #[test]
    fn a_tool_without_parameters_takes_an_empty_object() {
        assert_eq!(
            normalize(&json!({"type": "object"})),
            Ok(
                json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
            )
        );
    }

    fn refused(schema: Value) -> String {
        normalize(&schema).expect_err("refused")
    }

    #[test]
    fn open_maps_are_refused_with_where_they_are() {
        let why = refused(
            json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}}),
        );
        assert!(why.contains("schema.labels is an open map"), "{why}");
        let why = refused(json!({"type": "object", "additionalProperties": true}));
        assert!(why.contains("open map"), "{why}");
        let why = refused(json!({"type": "object", "properties": {"extra": {"type": "object"}}}));
        assert!(why.contains("schema.extra is an object without"), "{why}");
    }

    #[test]
    fn keywords_strict_mode_cannot_express_are_refused_by_name() {
        for keyword in INEXPRESSIBLE {
            let why = refused(json!({
                "type": "object",
                "properties": {"a": {"type": "object", "properties": {}, keyword: {}}}
            }));
            assert!(
                why.contains(&format!("{keyword:?}")) && why.contains("schema.a"),
                "{keyword}: {why}"
            );
        }
        let why =
            refused(json!({"type": "object", "patternProperties": {"^x": {"type": "string"}}}));
        assert!(why.contains("\"patternProperties\""), "{why}");
    }

    #[test]
    fn a_keyword_as_a_property_name_is_only_a_name() {
        let schema = json!({"type": "object", "properties": {"if": {"type": "string"}, "not": {"type": "boolean"}}, "required": ["if", "not"], "additionalProperties": false});
        assert_eq!(normalize(&schema), Ok(schema));
    }

    #[test]
    fn several_all_of_members_a_remote_ref_and_an_undeclared_required_are_refused() {
        let why = refused(
            json!({"type": "object", "properties": {"a": {"allOf": [{"type": "object", "properties": {}}, {"type": "object", "properties": {}}]}}}),
        );
        assert!(why.contains("allOf"), "{why}");
        let why = refused(
            json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}}),
        );
        assert!(why.contains("outside the schema"), "{why}");
        let why = refused(
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}),
        );
        assert!(why.contains("\"ghost\""), "{why}");
    }

    #[test]
    fn nulls_of_optional_properties_are_dropped_at_every_depth() {
        let mut arguments = json!({
            "query": "rain",
            "limit": null,
            "tag": null,
            "near": {"city": "Berlin", "radius_km": null}
        });
        drop_nulls(&mut arguments, &fastmcp());
        assert_eq!(
            arguments,
            json!({"query": "rain", "near": {"city": "Berlin"}})
        );
    }

    #[test]
    fn a_null_the_remote_requires_is_kept() {
        let remote = json!({
            "type": "object",
            "properties": {"note": {"type": ["string", "null"]}, "other": {"type": "string"}},
            "required": ["note"]
        });
        let mut arguments = json!({"note": null, "other": null});
        drop_nulls(&mut arguments, &remote);
        assert_eq!(arguments, json!({"note": null}));
    }

    #[test]
    fn nulls_inside_array_items_are_dropped() {
        let remote = json!({
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}, "due": {"type": "string"}}, "required": ["title"]}}},
            "required": ["items"]
        });
        let mut arguments =
            json!({"items": [{"title": "a", "due": null}, {"title": "b", "due": "2026-12-01"}]});
        drop_nulls(&mut arguments, &remote);
        assert_eq!(
            arguments,
            json!({"items": [{"title": "a"}, {"title": "b", "due": "2026-12-01"}]})
        );
    }

    #[test]
    fn a_null_one_branch_requires_is_kept() {
        let remote = json!({
            "type": "object",
            "properties": {"target": {"anyOf": [
                {"type": "object", "properties": {"id": {"type": ["string", "null"]}}, "required": ["id"]},
                {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}
            ]}},
            "required": ["target"]
        });
        let mut arguments = json!({"target": {"id": null, "name": null}});
        drop_nulls(&mut arguments, &remote);
        assert_eq!(arguments, json!({"target": {"id": null}}));
    }

    #[test]
    fn a_recursive_schema_does_not_loop() {
        let remote = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}},
            "required": ["node"],
            "$defs": {"Node": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}, "x": {"type": "integer"}}}]}}
        });
        let mut arguments = json!({"node": {"x": null, "next": {"x": 1, "next": null}}});
        drop_nulls(&mut arguments, &remote);
        assert_eq!(arguments, json!({"node": {"next": {"x": 1}}}));
    }
}
