#![cfg(test)]
//! Every assertion type in both polarities, on replies built here.

use serde_json::{Value, json};

use super::*;

fn assertion(kind: &str, value: Value) -> Assertion {
    Assertion {
        kind: kind.to_owned(),
        value: (!value.is_null()).then_some(value),
        threshold: None,
        metric: None,
        weight: None,
    }
}

fn text(content: &str) -> Reply<'_> {
    Reply {
        content,
        tool_calls: &[],
        finish_reason: Some("stop"),
        latency_ms: 120,
        cost: Some(0.002),
        tokens: Tokens::default(),
    }
}

fn done(scored: Scored) -> Verdict {
    match scored {
        Scored::Done(verdict) => verdict,
        Scored::Judge(ask) => panic!("asked the judge: {ask:?}"),
    }
}

/// The verdict's pass for `kind` and for `not-kind`, on `reply`.
fn both(kind: &str, value: Value, reply: &Reply<'_>) -> (bool, bool) {
    let yes = done(score(&assertion(kind, value.clone()), reply, &[])).pass;
    let no = done(score(&assertion(&format!("not-{kind}"), value), reply, &[])).pass;
    assert_ne!(yes, no, "{kind}: not- must invert");
    (yes, no)
}

fn passes(kind: &str, value: Value, content: &str) -> bool {
    both(kind, value, &text(content)).0
}

fn lookup() -> Vec<(String, Value)> {
    vec![(
        "lookup".to_owned(),
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
    )]
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        name: name.to_owned(),
        arguments: arguments.to_owned(),
    }
}

#[test]
fn equals_compares_text_exactly_and_objects_as_parsed_json() {
    assert!(passes("equals", json!("Paris"), "Paris"));
    assert!(!passes("equals", json!("Paris"), "Paris."));
    assert!(passes("equals", json!(42), "42"));
    assert!(passes(
        "equals",
        json!({"a": 1, "b": [true]}),
        r#"{"b":[true],"a":1.0}"#
    ));
    assert!(!passes("equals", json!({"a": 1}), "not json"));
}

#[test]
fn the_failure_reason_says_what_was_expected() {
    let verdict = done(score(
        &assertion("contains", json!("Rome")),
        &text("Paris"),
        &[],
    ));
    assert_eq!(
        (verdict.pass, verdict.score, verdict.reason.as_str()),
        (false, 0.0, "Expected output to contain \"Rome\"")
    );
    let verdict = done(score(
        &assertion("not-contains", json!("Par")),
        &text("Paris"),
        &[],
    ));
    assert_eq!(verdict.reason, "Expected output to not contain \"Par\"");
    let verdict = done(score(
        &assertion("contains", json!("Par")),
        &text("Paris"),
        &[],
    ));
    assert_eq!(
        (verdict.pass, verdict.score, verdict.reason.as_str()),
        (true, 1.0, "Assertion passed")
    );
}

#[test]
fn contains_and_icontains_differ_on_case() {
    assert!(passes("contains", json!("Paris"), "in Paris today"));
    assert!(!passes("contains", json!("paris"), "in Paris today"));
    assert!(passes("icontains", json!("paris"), "in PARIS today"));
    assert!(passes("contains", json!(3), "3 days"));
}

#[test]
fn contains_all_and_any_take_lists_or_comma_separated_text() {
    assert!(passes("contains-all", json!(["a", "b"]), "a and b"));
    assert!(!passes("contains-all", json!("a, c"), "a and b"));
    assert!(passes("contains-any", json!("x, b"), "a and b"));
    assert!(!passes("contains-any", json!(["x", "y"]), "a and b"));
    assert!(passes("icontains-all", json!(["A", "B"]), "a and b"));
    assert!(passes("icontains-any", json!("\"X, Y\", B"), "a and b"));
    assert!(!passes("icontains-any", json!("\"X, Y\""), "x and y"));
}

#[test]
fn the_missing_items_are_named() {
    let verdict = done(score(
        &assertion("contains-all", json!(["a", "z"])),
        &text("abc"),
        &[],
    ));
    assert_eq!(
        verdict.reason,
        "Expected output to contain all of [a, z]. Missing: [z]"
    );
}

#[test]
fn starts_with_and_regex() {
    assert!(passes("starts-with", json!("Hello"), "Hello there"));
    assert!(!passes("starts-with", json!("there"), "Hello there"));
    assert!(passes("regex", json!("^\\d{3}-\\d{4}$"), "555-1234"));
    assert!(!passes("regex", json!("^\\d+$"), "12a"));
}

#[test]
fn is_json_parses_and_checks_the_schema_given_as_object_or_yaml() {
    assert!(passes("is-json", Value::Null, r#"{"a": 1}"#));
    assert!(!passes("is-json", Value::Null, "{a: 1}"));
    let schema = json!({"type": "object", "required": ["a"]});
    assert!(passes("is-json", schema.clone(), r#"{"a": 1}"#));
    assert!(!passes("is-json", schema, r#"{"b": 1}"#));
    let yaml = json!("type: object\nrequired: [a]\n");
    assert!(passes("is-json", yaml.clone(), r#"{"a": 1}"#));
    assert!(!passes("is-json", yaml, "[1]"));
}

#[test]
fn contains_json_finds_an_object_in_prose() {
    assert!(passes(
        "contains-json",
        Value::Null,
        "Sure: {\"city\": \"Paris\"} there"
    ));
    assert!(!passes("contains-json", Value::Null, "no json here"));
    let schema = json!({"type": "object", "required": ["city"]});
    assert!(passes(
        "contains-json",
        schema.clone(),
        "{\"x\": 1} then {\"city\": \"Paris\"}"
    ));
    assert!(!passes("contains-json", schema, "{\"x\": 1}"));
}

#[test]
fn a_tool_call_is_the_output_as_promptfoo_makes_it() {
    let calls = [call("lookup", r#"{"city":"Paris"}"#)];
    let reply = Reply {
        content: "",
        tool_calls: &calls,
        ..text("")
    };
    assert_eq!(
        output(&reply),
        r#"[{"type":"function","function":{"name":"lookup","arguments":"{\"city\":\"Paris\"}"}}]"#
    );
    let both_reply = Reply {
        content: "Let me look.",
        ..reply
    };
    assert!(
        output(&both_reply)
            .starts_with(r#"{"role":"assistant","content":"Let me look.","tool_calls":[{"#)
    );
    assert!(passes("contains", json!("lookup"), &output(&reply)));
}

#[test]
fn valid_openai_tools_calls_name_a_tool_and_match_its_schema() {
    let tools = lookup();
    let run = |calls: &[ToolCall]| {
        let reply = Reply {
            tool_calls: calls,
            ..text("")
        };
        done(score(
            &assertion("is-valid-openai-tools-call", Value::Null),
            &reply,
            &tools,
        ))
    };
    assert!(run(&[call("lookup", r#"{"city": "Paris"}"#)]).pass);
    assert!(!run(&[]).pass);
    assert!(
        run(&[call("other", "{}")])
            .reason
            .contains("no function with that name")
    );
    assert!(
        run(&[call("lookup", "{not json")])
            .reason
            .contains("not JSON")
    );
    assert!(
        run(&[call("lookup", r#"{"town": "Paris"}"#)])
            .reason
            .contains("does not match schema")
    );
    let reply = Reply {
        tool_calls: &[call("lookup", "{}")],
        ..text("")
    };
    assert!(
        !done(score(
            &assertion("is-valid-openai-tools-call", Value::Null),
            &reply,
            &[]
        ))
        .pass
    );
}

#[test]
fn tool_call_matches_a_name_and_a_subset_of_the_arguments() {
    let calls = [
        call("other", "{}"),
        call("lookup", r#"{"city": "Paris", "days": 3}"#),
    ];
    let reply = Reply {
        tool_calls: &calls,
        ..text("")
    };
    assert_eq!(
        both("tool-call", json!({"name": "lookup"}), &reply),
        (true, false)
    );
    assert_eq!(
        both(
            "tool-call",
            json!({"name": "lookup", "arguments": {"city": "Paris"}}),
            &reply
        ),
        (true, false)
    );
    assert_eq!(
        both(
            "tool-call",
            json!({"name": "lookup", "arguments": {"city": "Rome"}}),
            &reply
        ),
        (false, true)
    );
    assert_eq!(
        both("tool-call", json!({"name": "book"}), &reply),
        (false, true)
    );
    let broken = [call("lookup", "{oops")];
    let reply = Reply {
        tool_calls: &broken,
        ..text("")
    };
    assert_eq!(
        both(
            "tool-call",
            json!({"name": "lookup", "arguments": {}}),
            &reply
        ),
        (false, true)
    );
}

#[test]
fn finish_reason_is_normalized_and_compared_in_any_case() {
    assert_eq!(
        both("finish-reason", json!("STOP"), &text("x")),
        (true, false)
    );
    let reply = Reply {
        finish_reason: Some("tool_use"),
        ..text("x")
    };
    assert_eq!(
        both("finish-reason", json!("tool_calls"), &reply),
        (true, false)
    );
    let reply = Reply {
        finish_reason: None,
        ..text("x")
    };
    assert_eq!(both("finish-reason", json!("stop"), &reply), (false, true));
}

#[test]
fn latency_and_cost_pass_at_or_under_the_threshold() {
    let with = |kind: &str, threshold: f64, reply: &Reply<'_>| {
        let mut a = assertion(kind, Value::Null);
        a.threshold = Some(threshold);
        done(score(&a, reply, &[]))
    };
    let reply = text("x");
    assert!(with("latency", 120.0, &reply).pass);
    assert!(!with("latency", 119.0, &reply).pass);
    assert!(with("not-latency", 119.0, &reply).pass);
    assert!(with("cost", 0.01, &reply).pass);
    assert!(!with("cost", 0.001, &reply).pass);
    assert!(with("not-cost", 0.001, &reply).pass);
    let unpriced = Reply {
        cost: None,
        ..text("x")
    };
    for kind in ["cost", "not-cost"] {
        let verdict = with(kind, 1.0, &unpriced);
        assert!(
            !verdict.pass && verdict.reason.contains("the connection has no prices"),
            "{kind}"
        );
    }
}

#[test]
fn llm_rubric_is_handed_to_the_judge() {
    let mut a = assertion("not-llm-rubric", json!("is polite"));
    a.threshold = Some(0.5);
    a.metric = Some("tone".to_owned());
    let Scored::Judge(ask) = score(&a, &text("Hello"), &[]) else {
        panic!("not judged")
    };
    assert_eq!(
        ask,
        JudgeAsk {
            rubric: "is polite".into(),
            output: "Hello".into(),
            threshold: Some(0.5),
            negate: true,
            metric: Some("tone".into())
        }
    );
}

#[test]
fn the_judges_answer_is_read_as_promptfoo_reads_it() {
    let ask = JudgeAsk {
        rubric: "r".into(),
        output: "o".into(),
        threshold: None,
        negate: false,
        metric: None,
    };
    let v = judged(
        &ask,
        JudgeVerdict {
            pass: None,
            score: None,
            reason: String::new(),
        },
    );
    assert_eq!(
        (v.pass, v.score, v.reason.as_str()),
        (true, 1.0, "Grading passed")
    );
    let v = judged(
        &ask,
        JudgeVerdict {
            pass: Some(false),
            score: None,
            reason: "rude".into(),
        },
    );
    assert_eq!(
        (v.pass, v.score, v.kind.as_str()),
        (false, 0.0, "llm-rubric")
    );
    let high = JudgeAsk {
        threshold: Some(0.8),
        ..ask.clone()
    };
    let v = judged(
        &high,
        JudgeVerdict {
            pass: Some(true),
            score: Some(0.7),
            reason: String::new(),
        },
    );
    assert_eq!(
        (v.pass, v.reason.as_str()),
        (false, "Score 0.7 below threshold 0.8")
    );
    let not = JudgeAsk {
        negate: true,
        ..ask
    };
    let v = judged(
        &not,
        JudgeVerdict {
            pass: Some(true),
            score: Some(0.75),
            reason: "ok".into(),
        },
    );
    assert_eq!(
        (v.pass, v.score, v.kind.as_str()),
        (false, 0.25, "not-llm-rubric")
    );
    let v = judged(
        &not,
        JudgeVerdict {
            pass: Some(true),
            score: Some(f64::NAN),
            reason: "ok".into(),
        },
    );
    assert_eq!(v.score, 0.0);
}

#[test]
fn the_judge_is_asked_with_the_output_and_the_rubric() {
    let ask = JudgeAsk {
        rubric: "is polite".into(),
        output: "Hi!".into(),
        threshold: None,
        negate: false,
        metric: None,
    };
    let messages = judge_messages(&ask);
    assert_eq!(
        messages.iter().map(|m| m.role).collect::<Vec<_>>(),
        ["system", "user"]
    );
    assert_eq!(
        messages[1].content,
        "<Output>\nHi!\n</Output>\n<Rubric>\nis polite\n</Rubric>"
    );
    let schema = verdict_schema();
    assert_eq!(schema["required"], json!(["pass", "score", "reason"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&json!({"pass": true, "score": 1, "reason": "x"})));
    assert!(!validator.is_valid(&json!({"pass": true, "score": 2, "reason": "x"})));
}

#[test]
fn a_weightless_assertion_always_passes() {
    let mut a = assertion("contains", json!("absent"));
    a.weight = Some(0.0);
    assert!(done(score(&a, &text("x"), &[])).pass);
    a.kind = "llm-rubric".into();
    assert!(done(score(&a, &text("x"), &[])).pass);
}

#[test]
fn an_assertion_check_refuses_fails_instead_of_panicking() {
    let verdict = done(score(
        &assertion("javascript", json!("true")),
        &text("x"),
        &[],
    ));
    assert!(!verdict.pass && verdict.reason.contains("runs no code"));
    assert!(!done(score(&assertion("regex", json!("(")), &text("x"), &[])).pass);
}

#[test]
fn a_case_passes_when_every_assertion_does() {
    let v = |pass| Verdict {
        kind: "contains".into(),
        metric: None,
        pass,
        score: 1.0,
        reason: String::new(),
    };
    assert!(case_passes(&[]));
    assert!(case_passes(&[v(true), v(true)]));
    assert!(!case_passes(&[v(true), v(false)]));
}

#[test]
fn scoring_never_panics_on_arbitrary_input() {
    // A small deterministic generator: odd texts, values and tool calls.
    let texts = [
        "",
        "{",
        "}{",
        "{{{{{",
        "{\"a\":",
        "é{ü}",
        "\u{0}",
        "[1,2",
        "null",
        "{a: [}",
        "💥{\"x\": 1}💥",
    ];
    let values = [
        Value::Null,
        json!(""),
        json!("((("),
        json!(1.5),
        json!([]),
        json!([null, {"a": 1}]),
        json!({"name": ""}),
        json!({"type": "nonsense"}),
        json!(true),
        json!("file://x.js"),
    ];
    let kinds = kinds::Kind::NAMES
        .iter()
        .flat_map(|k| [k.to_string(), format!("not-{k}")])
        .chain(["", "not-", "x"].map(String::from));
    let tools = lookup();
    for kind in kinds {
        for value in &values {
            for content in texts {
                let calls = [call("lookup", content), call(content, "{}")];
                for tool_calls in [&calls[..], &[]] {
                    let mut a = assertion(&kind, value.clone());
                    a.threshold = Some(-1.0);
                    let reply = Reply {
                        content,
                        tool_calls,
                        finish_reason: Some(content),
                        latency_ms: u64::MAX,
                        cost: Some(f64::NAN),
                        tokens: Tokens::default(),
                    };
                    let _ = score(&a, &reply, &tools);
                }
            }
        }
    }
}
