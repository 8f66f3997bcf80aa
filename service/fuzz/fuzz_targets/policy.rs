//! Feeds arbitrary text to the policy path as loadout runs it: the bounds first
//! (`src/policies/bounds.rs`, included as the service compiles it), then, for a
//! text they let through, Cedar's parser, validator, JSON form, printer and
//! authorizer on a thread of the stack loadout gives a compile; and a policy the
//! exact depth bound lets through is evaluated and dropped on a request worker's
//! 2 MiB stack. Nothing may panic or overflow a stack (which aborts the run).

#![no_main]

#[path = "../../src/policies/bounds.rs"]
#[allow(dead_code)]
mod bounds;

use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Entities, EntityUid, PolicySet, Request, Schema, ValidationMode, Validator,
};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// A schema like the one loadout generates: one tool, in `Action::"call"`.
fn schema() -> Schema {
    Schema::from_json_value(json!({"": {
        "entityTypes": {"User": {"memberOfTypes": ["Group"]}, "Group": {},
            "Tool": {"shape": {"type": "Record", "attributes": {
                "name": {"type": "String", "required": true}, "tier": {"type": "String", "required": true}}}}},
        "actions": {"call": {}, "get_page": {"memberOf": [{"id": "call"}], "appliesTo": {
            "principalTypes": ["User"], "resourceTypes": ["Tool"],
            "context": {"type": "Record", "attributes": {
                "tenant": {"type": "String", "required": true},
                "member": {"type": "String", "required": true},
                "arguments": {"type": "Record", "required": true, "attributes": {
                    "n": {"type": "Long", "required": true},
                    "q": {"type": "String", "required": true}}}}}}}}
    }}))
    .expect("a valid schema")
}

/// The JSON form's depth, without recursion (as `policies::reads` measures it).
fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, d + 1))),
            Value::Object(fields) => stack.extend(fields.values().map(|i| (i, d + 1))),
            _ => {}
        }
    }
    deepest
}

fn decide(set: &PolicySet) {
    let uid = |s: &str| EntityUid::from_str(s).expect("a uid");
    let entities = Entities::from_json_value(
        json!([
            {"uid": {"type": "User", "id": "u"}, "attrs": {}, "parents": [{"type": "Group", "id": "ops"}]},
            {"uid": {"type": "Tool", "id": "get_page"}, "attrs": {"name": "get_page", "tier": "auto"}, "parents": []},
            {"uid": {"type": "Action", "id": "get_page"}, "attrs": {}, "parents": [{"type": "Action", "id": "call"}]},
        ]),
        None,
    )
    .expect("entities");
    let context = Context::from_json_value(
        json!({"tenant": "default", "member": "m", "arguments": {"n": 1, "q": "x"}}),
        None,
    )
    .expect("a context");
    let request = Request::new(
        uid(r#"User::"u""#),
        uid(r#"Action::"get_page""#),
        uid(r#"Tool::"get_page""#),
        context,
        None,
    )
    .expect("a request");
    let response = Authorizer::new().is_authorized(&request, set, &entities);
    for error in response.diagnostics().errors() {
        let _ = error.to_string();
    }
}

fn compile(text: &str) {
    let Ok(set) = PolicySet::from_str(text) else {
        return;
    };
    let validated = Validator::new(schema()).validate(&set, ValidationMode::Strict);
    for error in validated.validation_errors() {
        let _ = error.to_string();
    }
    let mut shallow = PolicySet::new();
    for policy in set.policies() {
        let _ = policy.to_string();
        let Ok(json) = policy.to_json() else { continue };
        // Two JSON levels per AST level, three around the condition.
        if depth(&json).saturating_sub(3) / 2 <= bounds::MAX_EXPRESSION_DEPTH {
            let _ = shallow.add(policy.clone());
        }
    }
    decide(&set);
    // What a save accepts is decided and dropped on a request worker's stack.
    std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(move || {
            decide(&shallow);
            drop(shallow);
        })
        .expect("a thread")
        .join()
        .expect("decided on a worker's stack");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = bounds::group_names(text);
    if bounds::measure(text).is_err() {
        return;
    }
    let text = text.to_owned();
    std::thread::Builder::new()
        .stack_size(bounds::STACK_BYTES)
        .spawn(move || compile(&text))
        .expect("a thread")
        .join()
        .expect("compiled on the deep stack");
});
