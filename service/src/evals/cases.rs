//! A dataset's cases: what the user says on which channel, with which variables,
//! and what the reply must satisfy. The shape is loadout's; promptfoo's test
//! format is read into it by [`super::promptfoo`].
//!
//! Variables are substituted as promptfoo substitutes simple ones: `{{name}}` or
//! `{{ name }}` in a message's content and in an assertion's value (a string, or
//! the strings of a list; promptfoo renders nothing deeper). A name the case does
//! not define renders as nothing, as nunjucks renders an undefined variable. Any
//! other `{{...}}` text is left as it is. Pure: no I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::kinds;
use crate::error::{Error, Result};

/// The most cases in one dataset (a run makes two model calls per case, or more).
pub const MAX_CASES: usize = 1000;
/// The most messages in one case: a turn, or a short conversation.
pub const MAX_MESSAGES: usize = 20;
/// The most assertions on one case.
pub const MAX_ASSERTIONS: usize = 32;
/// The most bytes in one message's content, or one assertion's value as JSON.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// The most bytes in a whole dataset, as JSON.
pub const MAX_DATASET_BYTES: usize = 4 * 1024 * 1024;

/// The code of every refusal here.
pub const INVALID_DATASET: &str = "invalid_dataset";

crate::closed_set! {
    /// Who says a message in a case. The agent's prompt is the system message, so a
    /// case holds no system turn.
    pub enum MessageRole as "message role" {
        User = "user",
        Assistant = "assistant",
    }
}

/// One case of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = EvalCase)]
#[serde(deny_unknown_fields)]
pub struct Case {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The agent's channel whose prompt is rendered (the caller checks it exists).
    pub channel: String,
    /// The end user, whose instructions are rendered into the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Substituted as `{{name}}` in the messages and the assertions' values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, String>,
    /// The user's turn, or a short conversation that ends with one.
    pub messages: Vec<Message>,
    /// Passed to the model: `"auto"`, `"required"`, `"none"` or
    /// `{"type": "function", "function": {"name": ...}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default)]
    pub assert: Vec<Assertion>,
}

/// One turn of a case's conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = EvalMessage)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: MessageRole,
    pub content: String,
}

/// What a reply must satisfy, in promptfoo's terms.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[schema(as = EvalAssertion)]
#[serde(deny_unknown_fields)]
pub struct Assertion {
    /// promptfoo's type (`contains`, `llm-rubric`, ...), possibly with `not-`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Any JSON: a string, a number, a list or a schema, as the type takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// `latency` (ms), `cost`, and `llm-rubric`'s lowest passing score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// promptfoo's named metric; kept, and counted apart in comparisons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// promptfoo's weight; 0 makes the assertion always pass, as in promptfoo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

impl Assertion {
    /// What `kinds::check` reads.
    pub fn shape(&self) -> kinds::Shape<'_> {
        kinds::Shape {
            kind: &self.kind,
            value: self.value.as_ref(),
            threshold: self.threshold,
            weight: self.weight,
        }
    }
}

/// 422 `invalid_dataset` naming the first problem (`cases[3].assert[1]: ...`).
/// Assertions are checked as they will be scored: with the case's vars substituted.
pub fn check(cases: &[Case]) -> Result<()> {
    if cases.len() > MAX_CASES {
        return Err(refused(format!(
            "a dataset holds at most {MAX_CASES} cases; this one has {}",
            cases.len()
        )));
    }
    let size = serde_json::to_vec(cases)
        .map_err(Error::internal_from)?
        .len();
    if size > MAX_DATASET_BYTES {
        return Err(refused(format!(
            "the dataset is {size} bytes as JSON; the limit is {MAX_DATASET_BYTES}"
        )));
    }
    for (i, case) in cases.iter().enumerate() {
        check_case(case).map_err(|e| refused(format!("cases[{i}]{e}")))?;
    }
    Ok(())
}

/// The 422 of [`check`] with `message`.
pub fn refused(message: impl Into<String>) -> Error {
    Error::refused(INVALID_DATASET, message)
}

/// One case; the error starts with the place inside the case (`.messages[2]: ...`).
fn check_case(case: &Case) -> std::result::Result<(), String> {
    if case.channel.trim().is_empty() {
        return Err(".channel: a case needs the channel whose prompt is rendered".to_owned());
    }
    if let Some(user) = &case.user_id {
        crate::error::check_id("user_id", user).map_err(|e| format!(".user_id: {e}"))?;
    }
    if let Some(name) = case.vars.keys().find(|n| !is_identifier(n)) {
        return Err(format!(
            ".vars: {name:?} is not a variable name: use [A-Za-z_][A-Za-z0-9_]*"
        ));
    }
    check_messages(&case.messages)?;
    if let Some(choice) = &case.tool_choice {
        check_tool_choice(choice).map_err(|e| format!(".tool_choice: {e}"))?;
    }
    if case.assert.len() > MAX_ASSERTIONS {
        return Err(format!(
            ".assert: a case holds at most {MAX_ASSERTIONS} assertions; this one has {}",
            case.assert.len()
        ));
    }
    let rendered = substitute(case);
    for (j, assertion) in rendered.assert.iter().enumerate() {
        let size = assertion.value.as_ref().map_or(0, |v| v.to_string().len());
        if size > MAX_TEXT_BYTES {
            return Err(format!(
                ".assert[{j}]: the value is {size} bytes; the limit is {MAX_TEXT_BYTES}"
            ));
        }
        kinds::check(assertion.shape()).map_err(|e| format!(".assert[{j}]: {e}"))?;
    }
    Ok(())
}

/// At least one message, at most [`MAX_MESSAGES`], the last the user's.
fn check_messages(messages: &[Message]) -> std::result::Result<(), String> {
    if messages.len() > MAX_MESSAGES {
        return Err(format!(
            ".messages: a case holds at most {MAX_MESSAGES} messages; this one has {}",
            messages.len()
        ));
    }
    if let Some(k) = messages
        .iter()
        .position(|m| m.content.len() > MAX_TEXT_BYTES)
    {
        return Err(format!(
            ".messages[{k}]: the content is over {MAX_TEXT_BYTES} bytes"
        ));
    }
    match messages.last() {
        Some(last) if last.role == MessageRole::User => Ok(()),
        Some(_) => Err(".messages: the conversation must end with a user turn".to_owned()),
        None => Err(".messages: a case needs the user's turn".to_owned()),
    }
}

/// OpenAI's `tool_choice`: a mode, or one function by name.
fn check_tool_choice(choice: &Value) -> std::result::Result<(), String> {
    let shape = "use \"auto\", \"required\", \"none\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
    match choice {
        Value::String(mode) if ["auto", "required", "none"].contains(&mode.as_str()) => Ok(()),
        Value::Object(map)
            if map.get("type").and_then(Value::as_str) == Some("function")
                && map.len() == 2
                && map
                    .get("function")
                    .and_then(Value::as_object)
                    .is_some_and(|f| {
                        f.len() == 1
                            && f.get("name")
                                .and_then(Value::as_str)
                                .is_some_and(|n| !n.is_empty())
                    }) =>
        {
            Ok(())
        }
        _ => Err(shape.to_owned()),
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `case` with its vars substituted into the messages and the assertions' values.
pub fn substitute(case: &Case) -> Case {
    let mut out = case.clone();
    for message in &mut out.messages {
        message.content = render(&message.content, &case.vars);
    }
    for assertion in &mut out.assert {
        assertion.value = assertion.value.take().map(|v| render_value(v, &case.vars));
    }
    out
}

/// A value as promptfoo renders an assertion's: a string, or each string of a list.
pub fn render_value(value: Value, vars: &BTreeMap<String, String>) -> Value {
    match value {
        Value::String(s) => Value::String(render(&s, vars)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| match item {
                    Value::String(s) => Value::String(render(&s, vars)),
                    other => other,
                })
                .collect(),
        ),
        other => other,
    }
}

/// `text` with each `{{ name }}` replaced by the var (nothing when undefined), in
/// one pass: a var's value is not rendered again.
pub fn render(text: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        match placeholder(after) {
            Some((name, len)) => {
                out.push_str(vars.get(name).map_or("", String::as_str));
                rest = &after[len..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The variable of a placeholder whose `{{` is just before `text`, and how many
/// bytes of `text` it takes through its `}}`.
fn placeholder(text: &str) -> Option<(&str, usize)> {
    let close = text.find("}}")?;
    let name = text[..close].trim_matches([' ', '\t']);
    is_identifier(name).then_some((name, close + 2))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn case(value: Value) -> Case {
        serde_json::from_value(value).unwrap()
    }

    fn simple() -> Value {
        json!({
            "channel": "web",
            "vars": {"city": "Paris"},
            "messages": [{"role": "user", "content": "Weather in {{city}}?"}],
            "assert": [{"type": "icontains", "value": "{{ city }}"}]
        })
    }

    fn message_of(result: Result<()>) -> String {
        let error = result.unwrap_err();
        assert_eq!(error.code, INVALID_DATASET);
        error.message
    }

    #[test]
    fn a_well_formed_case_passes_the_check() {
        check(&[case(simple())]).unwrap();
    }

    #[test]
    fn vars_are_substituted_in_messages_and_assertion_values() {
        let rendered = substitute(&case(simple()));
        assert_eq!(rendered.messages[0].content, "Weather in Paris?");
        assert_eq!(rendered.assert[0].value, Some(json!("Paris")));
    }

    #[test]
    fn an_undefined_var_renders_as_nothing_like_nunjucks() {
        let vars = BTreeMap::new();
        assert_eq!(render("a{{ missing }}b", &vars), "ab");
    }

    #[test]
    fn text_that_is_not_a_placeholder_is_left_as_it_is() {
        let vars = BTreeMap::from([("x".to_owned(), "1".to_owned())]);
        assert_eq!(
            render("{{ a.b }} {{x}} {{ x | upper }} {{", &vars),
            "{{ a.b }} 1 {{ x | upper }} {{"
        );
    }

    #[test]
    fn a_var_value_is_not_rendered_again() {
        let vars = BTreeMap::from([
            ("a".to_owned(), "{{b}}".to_owned()),
            ("b".to_owned(), "no".to_owned()),
        ]);
        assert_eq!(render("{{a}}", &vars), "{{b}}");
    }

    #[test]
    fn list_values_are_substituted_item_by_item_and_objects_are_not() {
        let mut value = simple();
        value["assert"] = json!([
            {"type": "contains-any", "value": ["{{city}}", 3]},
            {"type": "equals", "value": {"c": "{{city}}"}}
        ]);
        let rendered = substitute(&case(value));
        assert_eq!(rendered.assert[0].value, Some(json!(["Paris", 3])));
        assert_eq!(rendered.assert[1].value, Some(json!({"c": "{{city}}"})));
    }

    #[test]
    fn a_code_assertion_is_refused_with_the_reason() {
        let mut value = simple();
        value["assert"] =
            json!([{"type": "contains", "value": "x"}, {"type": "javascript", "value": "1"}]);
        let message = message_of(check(&[case(simple()), case(value)]));
        assert!(message.starts_with("cases[1].assert[1]: \"javascript\" assertions are not supported: loadout runs no code"), "{message}");
    }

    #[test]
    fn a_bad_regex_is_refused() {
        let mut value = simple();
        value["assert"] = json!([{"type": "regex", "value": "(unclosed"}]);
        let message = message_of(check(&[case(value)]));
        assert!(
            message.starts_with("cases[0].assert[0]: the pattern does not compile"),
            "{message}"
        );
    }

    #[test]
    fn a_regex_built_from_vars_is_checked_as_rendered() {
        let mut value = simple();
        value["vars"] = json!({"p": "(open"});
        value["assert"] = json!([{"type": "regex", "value": "{{p}}"}]);
        assert!(check(&[case(value)]).is_err());
    }

    #[test]
    fn a_conversation_must_end_with_the_user() {
        let mut value = simple();
        value["messages"] =
            json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]);
        assert_eq!(
            message_of(check(&[case(value)])),
            "cases[0].messages: the conversation must end with a user turn"
        );
    }

    #[test]
    fn a_case_without_messages_or_channel_is_refused() {
        let mut value = simple();
        value["messages"] = json!([]);
        assert!(message_of(check(&[case(value)])).contains(".messages"));
        let mut value = simple();
        value["channel"] = json!(" ");
        assert!(message_of(check(&[case(value)])).contains(".channel"));
    }

    #[test]
    fn a_var_name_must_be_an_identifier() {
        let mut value = simple();
        value["vars"] = json!({"not ok": "x"});
        assert!(message_of(check(&[case(value)])).contains("is not a variable name"));
    }

    #[test]
    fn tool_choice_takes_a_mode_or_one_function() {
        for (choice, ok) in [
            (json!("auto"), true),
            (json!("required"), true),
            (
                json!({"type": "function", "function": {"name": "lookup"}}),
                true,
            ),
            (json!("any"), false),
            (json!({"type": "function", "function": {}}), false),
        ] {
            let mut value = simple();
            value["tool_choice"] = choice.clone();
            assert_eq!(check(&[case(value)]).is_ok(), ok, "{choice}");
        }
    }

    #[test]
    fn the_bounds_are_enforced() {
        let many = vec![case(simple()); MAX_CASES + 1];
        assert!(message_of(check(&many)).contains("at most 1000 cases"));
        let mut value = simple();
        value["assert"] = json!(vec![
            json!({"type": "contains", "value": "x"});
            MAX_ASSERTIONS + 1
        ]);
        assert!(message_of(check(&[case(value)])).contains("at most 32 assertions"));
        let mut value = simple();
        value["messages"][0]["content"] = json!("x".repeat(MAX_TEXT_BYTES + 1));
        assert!(message_of(check(&[case(value)])).contains("messages[0]"));
        let big = vec![
            case(
                json!({"channel": "web", "messages": [{"role": "user", "content": "x".repeat(60_000)}]})
            );
            80
        ];
        assert!(message_of(check(&big)).contains("bytes as JSON"));
    }

    #[test]
    fn unknown_fields_are_refused() {
        let mut value = simple();
        value["extra"] = json!(1);
        assert!(serde_json::from_value::<Case>(value).is_err());
    }
}
