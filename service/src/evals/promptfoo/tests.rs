#![cfg(test)]
//! promptfoo suites as teams write them, in YAML and JSON.

use serde_json::json;

use super::*;

const SUITE: &str = r#"
# yaml-language-server: $schema=https://promptfoo.dev/config-schema.json
description: Support assistant
prompts:
  - "Customer {{ name }} asks: {{question}}"
providers:
  - id: openai:gpt-4.1-mini
    config:
      temperature: 0
defaultTest:
  vars:
    name: Ada
  assert:
    - type: not-icontains
      value: as an AI language model
    - type: latency
      threshold: 5000
tests:
  - description: refund window
    vars:
      question: How long do I have to return shoes?
    assert:
      - type: contains-any
        value: "30 days, thirty days"
      - type: llm-rubric
        value: Mentions the return window to {{name}}
        threshold: 0.7
        metric: helpfulness
  - vars:
      question: Where is order 1234?
      name: Grace
      order: 1234
    metadata:
      channel: voice
      user_id: u-42
    assert:
      - type: tool-call
        value:
          name: track_order
          arguments: {order_id: "1234"}
      - type: is-valid-openai-tools-call
"#;

fn problems(text: &str) -> String {
    let error = import(text, "web").unwrap_err();
    assert_eq!(error.code, "invalid_dataset");
    error.message
}

#[test]
fn a_realistic_yaml_suite_imports_as_it_is() {
    let cases = import(SUITE, "web").unwrap();
    assert_eq!(cases.len(), 2);
    let first = &cases[0];
    assert_eq!(
        (first.channel.as_str(), first.description.as_deref()),
        ("web", Some("refund window"))
    );
    assert_eq!(
        first.messages,
        vec![Message {
            role: MessageRole::User,
            content: "Customer {{ name }} asks: {{question}}".into()
        }]
    );
    let kinds: Vec<&str> = first.assert.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["not-icontains", "latency", "contains-any", "llm-rubric"]
    );
    assert_eq!(
        (first.assert[3].threshold, first.assert[3].metric.as_deref()),
        (Some(0.7), Some("helpfulness"))
    );
    let rendered = cases::substitute(first);
    assert_eq!(
        rendered.messages[0].content,
        "Customer Ada asks: How long do I have to return shoes?"
    );
    assert_eq!(
        rendered.assert[3].value,
        Some(json!("Mentions the return window to Ada"))
    );
    let second = &cases[1];
    assert_eq!(
        (second.channel.as_str(), second.user_id.as_deref()),
        ("voice", Some("u-42"))
    );
    assert_eq!(second.vars["name"], "Grace");
    assert_eq!(second.vars["order"], "1234");
}

#[test]
fn a_json_list_of_tests_imports_with_the_input_var_as_the_message() {
    let text = r#"[
        {"vars": {"input": "Hi"}, "assert": [{"type": "icontains", "value": "hello"}]},
        {"description": "json", "vars": {"input": "Give JSON", "n": 2.0}, "assert": [{"type": "is-json", "value": {"type": "object"}}]}
    ]"#;
    let cases = import(text, "web").unwrap();
    assert_eq!(cases[0].messages[0].content, DEFAULT_PROMPT);
    assert_eq!(
        cases::substitute(&cases[1]).messages[0].content,
        "Give JSON"
    );
    assert_eq!(cases[1].vars["n"], "2");
}

#[test]
fn a_chat_prompt_becomes_the_conversation() {
    let text = r#"
prompts:
  - '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "{{q}}"}]'
tests:
  - vars: {q: "Bye"}
"#;
    let cases = import(text, "web").unwrap();
    let roles: Vec<MessageRole> = cases[0].messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [MessageRole::User, MessageRole::Assistant, MessageRole::User]
    );
}

#[test]
fn everything_loadout_cannot_honour_is_listed_in_one_refusal() {
    let text = r#"
prompts: [file://prompt.txt]
scenarios: []
tests:
  - vars: {q: [a, b]}
    threshold: 0.5
    options: {provider: openai:gpt-4.1, runSerially: true}
    assert:
      - type: javascript
        value: output.length > 3
      - type: contains
        value: x
        transform: output.trim()
      - type: similar
        value: hi
"#;
    let message = problems(text);
    for expected in [
        "scenarios: not read by loadout",
        "prompts: loadout reads no files",
        "tests[0].vars.q: a list",
        "tests[0].threshold: a test threshold",
        "tests[0].options.provider",
        "tests[0].assert[0]: \"javascript\" assertions are not supported: loadout runs no code",
        "tests[0].assert[1]: `transform` runs code",
        "tests[0].assert[2]: \"similar\" assertions are not supported",
    ] {
        assert!(
            message.contains(expected),
            "missing {expected:?} in:\n{message}"
        );
    }
    assert!(!message.contains("runSerially"));
}

#[test]
fn a_long_list_of_problems_is_cut_in_the_message_and_whole_in_the_details() {
    let tests: Vec<String> = (0..15)
        .map(|i| format!("  - {{vars: {{input: x}}, assert: [{{type: python, value: v{i}}}]}}"))
        .collect();
    let error = import(&format!("tests:\n{}\n", tests.join("\n")), "web").unwrap_err();
    assert!(
        error.message.contains("(15 problems)") && error.message.ends_with("- and 5 more"),
        "{}",
        error.message
    );
    assert_eq!(error.details["problems"].as_array().map(Vec::len), Some(15));
}

#[test]
fn several_prompts_are_refused_with_the_reason() {
    let message = problems("prompts: ['a {{x}}', 'b {{x}}']\ntests: [{vars: {x: 1}}]\n");
    assert!(message.contains("prompts: 2 prompts"), "{message}");
}

#[test]
fn nunjucks_beyond_simple_variables_is_refused() {
    assert!(
        problems("prompts: ['{{ q | upper }}']\ntests: [{vars: {q: a}}]\n")
            .contains("needs nunjucks")
    );
    assert!(
        problems("prompts: ['{% if q %}x{% endif %}']\ntests: [{vars: {q: a}}]\n")
            .contains("needs nunjucks")
    );
}

#[test]
fn a_suite_without_a_prompt_needs_input_vars() {
    assert!(problems("tests: [{vars: {question: a}}]\n").contains("needs an `input` var"));
}

#[test]
fn a_bad_regex_in_a_test_is_refused_at_import() {
    let message = problems("tests: [{vars: {input: a}, assert: [{type: regex, value: '(a'}]}]\n");
    assert!(
        message.contains("tests[0].assert[0]: the pattern does not compile"),
        "{message}"
    );
}

#[test]
fn text_that_is_not_yaml_is_refused() {
    assert!(problems("tests: [unclosed").starts_with("the suite is not YAML or JSON"));
}
