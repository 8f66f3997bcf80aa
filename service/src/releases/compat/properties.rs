//! The classification rules against a counterexample search: schema pairs are
//! generated (tool schemas as tools write them, strict and loose form, with
//! `null` admitted in each of the three ways, bounds, patterns, enums, `const`,
//! nested objects and lists) and changed by one or two edits; for each pair a
//! search generates arguments the old schema takes ([`search`]'s generator with a
//! seed of its own and more tries) and asks the `jsonschema` crate whether the new
//! schema refuses one. Wherever it does, the rules alone, without the search's
//! backstop, must say `breaking`: a gate that says "fine" wrongly is worse than none.
#![cfg(test)]

use serde_json::{Map, Value, json};

use super::search::{self, Rng};
use super::{Changes, Compat, compare};

/// Schema pairs tried.
const PAIRS: usize = 2_500;
/// Arguments the oracle tries per pair.
const TRIES: usize = 500;

/// The rules' changes alone (no backstop).
fn rules(old: &Value, new: &Value) -> Vec<super::ContractChange> {
    let mut changes = Changes::new("t");
    compare(&mut changes, "", old, new, 0);
    changes.out
}

fn leaf(rng: &mut Rng) -> Value {
    match rng.below(7) {
        0 | 1 => {
            let mut s = json!({"type": "string"});
            if rng.chance(40) {
                s["minLength"] = json!(rng.below(3));
            }
            if rng.chance(50) {
                s["maxLength"] = json!(3 + rng.below(20));
            }
            if rng.chance(15) {
                s["pattern"] = json!("^[a-z ]*$");
            }
            s
        }
        2 => {
            let mut s = json!({"type": "integer"});
            if rng.chance(50) {
                s["minimum"] = json!(rng.below(10) as i64 - 5);
            }
            if rng.chance(50) {
                s["maximum"] = json!(10 + rng.below(100));
            }
            s
        }
        3 => json!({"type": "number", "minimum": 0}),
        4 => json!({"type": "boolean"}),
        5 => json!({"type": "string", "enum": ["a", "b", "c"]}),
        _ => {
            let mut s = json!({"type": "array", "items": {"type": "integer", "maximum": 50}});
            if rng.chance(50) {
                s["maxItems"] = json!(2 + rng.below(3));
            }
            s
        }
    }
}

/// `schema` admitting `null` in one of the three ways tools write it.
fn nullable(schema: Value, rng: &mut Rng) -> Value {
    let Value::Object(mut object) = schema else {
        return schema;
    };
    match rng.below(3) {
        0 => {
            let t = object.get("type").cloned().unwrap_or(json!("string"));
            object.insert("type".into(), json!([t, "null"]));
            if let Some(Value::Array(values)) = object.get_mut("enum") {
                values.push(Value::Null);
            }
            Value::Object(object)
        }
        1 => {
            // The strict-form wrapper, some keywords beside it.
            let mut beside = Map::new();
            for key in ["maxLength", "minLength", "pattern", "maximum"] {
                if rng.chance(50)
                    && let Some(v) = object.remove(key)
                {
                    beside.insert(key.into(), v);
                }
            }
            beside.insert(
                "anyOf".into(),
                json!([Value::Object(object), {"type": "null"}]),
            );
            Value::Object(beside)
        }
        _ => {
            let t = object.get("type").cloned().unwrap_or(json!("string"));
            object.insert("type".into(), json!([t, "null"]));
            Value::Object(object)
        }
    }
}

fn object(rng: &mut Rng, depth: usize) -> Value {
    let strict = rng.chance(50);
    let mut properties = Map::new();
    let mut required = Vec::new();
    for i in 0..1 + rng.below(4) {
        let name = format!("p{i}");
        let mut schema = match depth < 1 && rng.chance(15) {
            true => object(rng, depth + 1),
            false => leaf(rng),
        };
        let optional = rng.chance(50);
        // Strict form: an optional property is nullable (and listed); otherwise
        // sometimes nullable anyway.
        if (strict && optional) || (!strict && rng.chance(20)) {
            schema = nullable(schema, rng);
        }
        if strict || !optional {
            required.push(json!(name));
        }
        properties.insert(name, schema);
    }
    let mut out = json!({"type": "object", "properties": properties, "required": required});
    if strict || rng.chance(30) {
        out["additionalProperties"] = json!(false);
    }
    out
}

/// The schema a property's edits apply to: the branch of a nullable wrapper.
fn inner(schema: &mut Value) -> &mut Value {
    let wrapped = schema
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|b| b.len() == 2);
    match wrapped {
        true => &mut schema["anyOf"][0],
        false => schema,
    }
}

/// One edit somewhere in `schema` (an object schema).
fn edit(schema: &mut Value, rng: &mut Rng) {
    let names: Vec<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    let Some(name) = rng.pick(&names).cloned() else {
        return;
    };
    if schema["properties"][&name].get("properties").is_some() && rng.chance(50) {
        return edit(&mut schema["properties"][&name], rng);
    }
    match rng.below(12) {
        0 => {
            // A property added: required, optional, or strict-form optional.
            let mut added = leaf(rng);
            let listed = rng.chance(60);
            if listed && rng.chance(50) {
                added = nullable(added, rng);
            }
            schema["properties"]["q"] = added;
            if listed && let Some(r) = schema["required"].as_array_mut() {
                r.push(json!("q"));
            }
        }
        1 => {
            if let Some(p) = schema["properties"].as_object_mut() {
                p.remove(&name);
            }
            if rng.chance(50)
                && let Some(r) = schema["required"].as_array_mut()
            {
                r.retain(|n| n != name.as_str());
            }
        }
        2 => {
            if let Some(r) = schema["required"].as_array_mut() {
                match r.iter().position(|n| n == name.as_str()) {
                    Some(at) => {
                        r.remove(at);
                    }
                    None => r.push(json!(name)),
                }
            }
        }
        3 => {
            let closed = schema.get("additionalProperties") == Some(&json!(false));
            if let Some(o) = schema.as_object_mut() {
                match closed {
                    true => o.remove("additionalProperties"),
                    false => o.insert("additionalProperties".into(), json!(false)),
                };
            }
        }
        4 => {
            let property = &mut schema["properties"][&name];
            *property = match property.get("anyOf") {
                Some(_) => property["anyOf"][0].clone(),
                None => nullable(property.clone(), rng),
            };
        }
        5 => {
            // `null` dropped from a type list or an enum.
            let property = &mut schema["properties"][&name];
            if let Some(Value::Array(types)) = property.get_mut("type") {
                types.retain(|t| t != "null");
            } else if let Some(Value::Array(values)) = property.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
        }
        6 => {
            // A keyword beside the wrapper, or on the property.
            let property = &mut schema["properties"][&name];
            let key = *rng
                .pick(&["maxLength", "minLength", "maximum", "minimum", "pattern"])
                .unwrap_or(&"maxLength");
            let value = match key {
                "pattern" => json!("^[a-c]*$"),
                "minimum" | "minLength" => json!(1 + rng.below(4)),
                _ => json!(rng.below(8)),
            };
            property[key] = value;
        }
        7 => {
            let target = inner(&mut schema["properties"][&name]);
            for key in ["maxLength", "maximum", "maxItems", "minLength", "minimum"] {
                if let Some(n) = target.get(key).and_then(Value::as_i64) {
                    let delta = rng.below(6) as i64 - 3;
                    target[key] = json!((n + delta).max(0));
                }
            }
        }
        8 => {
            let target = inner(&mut schema["properties"][&name]);
            match target.get("enum").and_then(Value::as_array).cloned() {
                Some(values) if rng.chance(50) => {
                    target["const"] = rng.pick(&values).cloned().unwrap_or(Value::Null);
                }
                Some(mut values) => {
                    match rng.chance(50) {
                        true => values.truncate(values.len().saturating_sub(1)),
                        false => values.push(json!("d")),
                    }
                    target["enum"] = Value::Array(values);
                }
                None => target["const"] = json!("a"),
            }
        }
        9 => {
            let target = inner(&mut schema["properties"][&name]);
            let next = match target.get("type").and_then(Value::as_str) {
                Some("integer") => "number",
                Some("number") => "integer",
                Some("string") => "integer",
                _ => "string",
            };
            if target.get("type").is_some_and(Value::is_string) {
                target["type"] = json!(next);
            }
        }
        10 => {
            // A keyword moved from the branch to beside the wrapper: no change in meaning.
            let property = &mut schema["properties"][&name];
            if property.get("anyOf").is_some()
                && let Some(v) = property["anyOf"][0]
                    .as_object_mut()
                    .and_then(|b| b.remove("maxLength"))
            {
                property["maxLength"] = v;
            }
        }
        _ => {
            let target = inner(&mut schema["properties"][&name]);
            if let Some(o) = target.as_object_mut() {
                for key in ["maxLength", "maximum", "pattern", "minimum", "maxItems"] {
                    if o.remove(key).is_some() {
                        break;
                    }
                }
            }
        }
    }
}

#[test]
fn wherever_an_argument_valid_before_is_refused_after_the_rules_say_breaking() {
    let mut rng = Rng(51);
    let (mut found, mut missed) = (0, Vec::new());
    for _ in 0..PAIRS {
        let old = object(&mut rng, 0);
        let mut new = old.clone();
        for _ in 0..1 + rng.below(2) {
            edit(&mut new, &mut rng);
        }
        let Some(argument) = search::counterexample_seeded(&old, &new, TRIES, rng.next()) else {
            continue;
        };
        found += 1;
        let said = rules(&old, &new);
        if !said.iter().any(|c| c.compat == Compat::Breaking) {
            missed.push(format!(
                "old {old}\nnew {new}\nrefused now: {argument}\nrules said: {said:?}"
            ));
        }
        // With the backstop the answer is breaking whatever the rules say.
        assert!(super::any_breaking(&super::schema("t", &old, &new)));
    }
    assert!(
        found > PAIRS / 5,
        "the search found only {found} breaking pairs"
    );
    assert!(
        missed.is_empty(),
        "{} of {found} breaking pairs were not called breaking by the rules; the first:\n{}",
        missed.len(),
        missed
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

#[test]
fn the_backstop_names_an_argument_the_new_schema_refuses() {
    let old =
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let new = json!({"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 0}}}, "required": ["n"]});
    assert_eq!(
        search::counterexample(&old, &new, search::TRIES),
        Some(json!({"n": 0}))
    );
    // Given no finding of the rules, the backstop adds one that shows the argument.
    let mut changes = Changes::new("t");
    super::backstop(&mut changes, &old, &new);
    assert_eq!(changes.out.len(), 1, "{:?}", changes.out);
    assert_eq!(changes.out[0].compat, Compat::Breaking);
    assert_eq!(changes.out[0].kind, super::ContractKind::Other);
    assert!(
        changes.out[0].detail.ends_with(r#"{"n":0}"#),
        "{}",
        changes.out[0].detail
    );
    // A widening: nothing to find.
    let wider =
        json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]});
    let mut changes = Changes::new("t");
    super::backstop(&mut changes, &old, &wider);
    assert!(changes.out.is_empty(), "{:?}", changes.out);
}
