//! promptfoo's test format read into cases, so a team's existing suite imports
//! as it is. The input is a `promptfooconfig.yaml` (`description`, `prompts`,
//! `providers`, `tests`, `defaultTest`) or a bare list of tests, in YAML or JSON.
//!
//! - `prompts`: at most one, inline: a text (the user's message, `{{var}}`
//!   substituted from each test's vars), `{raw: ...}`, or a chat as a JSON list of
//!   `user`/`assistant` turns. None: the message is `{{input}}`, so each test needs
//!   an `input` var. Several prompts, a `file://` prompt or a `system` turn are
//!   refused: the revision's prompt is the system message, and a run compares it
//!   with its base, not prompts with each other.
//! - `providers` are ignored: loadout runs the revision against a connection.
//! - `defaultTest`: its `assert` comes before each test's, its `vars` under them.
//! - A test's `vars` are texts (numbers and booleans become text; a list, which
//!   promptfoo would expand into several tests, is refused); `metadata.channel`
//!   overrides the channel given to the import, `metadata.user_id` sets the user.
//! - Templates may use simple variables only (`{{ name }}`): filters, tags and
//!   expressions need nunjucks and are refused.
//!
//! Whatever loadout cannot honour (a test's `threshold`, `provider`, `options`
//! that transform output, code assertions, files) refuses the whole import, 422
//! `invalid_dataset` listing every such thing: a suite that imported in part would
//! score something other than what its authors wrote. Pure: no I/O.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use super::cases::{self, Assertion, Case, MAX_DATASET_BYTES, Message, MessageRole};
use super::{kinds, yaml};
use crate::error::{Result, check_size};

/// The user's message when the suite has no prompt.
pub const DEFAULT_PROMPT: &str = "{{input}}";
/// The most problems a refusal lists in its message (its details hold them all).
const MAX_LISTED: usize = 10;

/// Top-level keys that change nothing in loadout (run settings, sharing, the
/// providers loadout replaces with a connection).
const IGNORED_TOP: &[&str] = &[
    "description",
    "providers",
    "env",
    "evaluateOptions",
    "commandLineOptions",
    "outputPath",
    "sharing",
    "tags",
    "metadata",
    "writeLatestResults",
];
/// Test `options` that change nothing here (run order, var expansion).
const IGNORED_OPTIONS: &[&str] = &[
    "runSerially",
    "disableVarExpansion",
    "disableConversationVar",
];

/// The refusal's details: every problem found.
#[derive(Serialize)]
struct Problems<'a> {
    problems: &'a [String],
}

/// The cases of the promptfoo suite `text`, on `channel` unless a test's
/// `metadata.channel` says otherwise; checked as `cases::check` checks a dataset.
pub fn import(text: &str, channel: &str) -> Result<Vec<Case>> {
    check_size("the promptfoo suite", text, MAX_DATASET_BYTES)?;
    let value = yaml::parse(text)
        .map_err(|e| cases::refused(format!("the suite is not YAML or JSON: {e}")))?;
    let mut problems = Vec::new();
    let cases = read(&value, channel, &mut problems);
    if !problems.is_empty() {
        return Err(refusal(&problems));
    }
    cases::check(&cases)?;
    Ok(cases)
}

/// The 422 listing `problems` (the first [`MAX_LISTED`] in the message).
fn refusal(problems: &[String]) -> crate::error::Error {
    let mut message = format!(
        "this promptfoo suite cannot be imported as it is ({} problem{}):",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for problem in problems.iter().take(MAX_LISTED) {
        message.push_str("\n- ");
        message.push_str(problem);
    }
    if problems.len() > MAX_LISTED {
        message.push_str(&format!("\n- and {} more", problems.len() - MAX_LISTED));
    }
    cases::refused(message).with_details(Problems { problems })
}

/// The suite's parts, as far as they can be read; `problems` gets the rest.
fn read(value: &Value, channel: &str, problems: &mut Vec<String>) -> Vec<Case> {
    let empty = Map::new();
    let (config, tests) = match value {
        Value::Array(tests) => (&empty, tests.as_slice()),
        Value::Object(config) => {
            for key in config.keys() {
                if !IGNORED_TOP.contains(&key.as_str())
                    && !["prompts", "tests", "defaultTest"].contains(&key.as_str())
                {
                    problems.push(format!("{key}: not read by loadout; remove it"));
                }
            }
            (config, tests_of(config.get("tests"), problems))
        }
        _ => {
            problems.push(
                "the suite must be a promptfoo config (a mapping) or a list of tests".to_owned(),
            );
            return Vec::new();
        }
    };
    let template = prompt(config.get("prompts"), problems);
    let default = default_test(config.get("defaultTest"), problems);
    tests
        .iter()
        .enumerate()
        .filter_map(|(i, test)| {
            let mut found = Vec::new();
            let case = test_case(test, &default, &template, channel, &mut found);
            problems.extend(found.into_iter().map(|p| format!("tests[{i}]{p}")));
            case
        })
        .collect()
}

/// `tests`: a list; a file or glob is refused.
fn tests_of<'a>(tests: Option<&'a Value>, problems: &mut Vec<String>) -> &'a [Value] {
    match tests {
        Some(Value::Array(tests)) => tests,
        None => {
            problems.push("tests: the suite has no tests".to_owned());
            &[]
        }
        Some(_) => {
            problems
                .push("tests: loadout reads no files: put the tests inline, as a list".to_owned());
            &[]
        }
    }
}

/// The user's turn (or conversation) each test renders.
fn prompt(prompts: Option<&Value>, problems: &mut Vec<String>) -> Vec<Message> {
    let single = match prompts {
        None => None,
        Some(Value::Array(list)) if list.len() > 1 => {
            problems.push(format!(
                "prompts: {} prompts; loadout runs a revision's own prompt against its base, so keep the one user turn to test",
                list.len()
            ));
            return Vec::new();
        }
        Some(Value::Array(list)) => list.first(),
        Some(one) => Some(one),
    };
    let text = match single {
        None => return vec![user(DEFAULT_PROMPT)],
        Some(Value::String(text)) => text.as_str(),
        Some(Value::Object(map)) if map.get("raw").is_some_and(Value::is_string) => {
            map.get("raw").and_then(Value::as_str).unwrap_or_default()
        }
        Some(_) => {
            problems.push("prompts: a prompt must be inline text (or {raw: text})".to_owned());
            return Vec::new();
        }
    };
    if text.starts_with("file://") {
        problems.push("prompts: loadout reads no files: put the prompt inline".to_owned());
        return Vec::new();
    }
    match chat(text) {
        Some(Ok(messages)) => messages,
        Some(Err(problem)) => {
            problems.push(format!("prompts: {problem}"));
            Vec::new()
        }
        None => {
            if let Err(problem) = plain(text) {
                problems.push(format!("prompts: {problem}"));
            }
            vec![user(text)]
        }
    }
}

fn user(content: &str) -> Message {
    Message {
        role: MessageRole::User,
        content: content.to_owned(),
    }
}

/// A prompt in promptfoo's chat format (a JSON list of `{role, content}`), or
/// `None` when it is plain text.
fn chat(text: &str) -> Option<std::result::Result<Vec<Message>, String>> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('[') {
        return None;
    }
    let Ok(Value::Array(turns)) = serde_json::from_str::<Value>(trimmed) else {
        return None;
    };
    let read = |turn: &Value| -> std::result::Result<Message, String> {
        let role = turn.get("role").and_then(Value::as_str).unwrap_or_default();
        let content = turn
            .get("content")
            .and_then(Value::as_str)
            .ok_or("a chat turn needs text content")?;
        plain(content)?;
        match role {
            "user" => Ok(user(content)),
            "assistant" => Ok(Message {
                role: MessageRole::Assistant,
                content: content.to_owned(),
            }),
            "system" => {
                Err("a system turn: the revision's prompt is the system message".to_owned())
            }
            other => Err(format!(
                "a chat turn's role {other:?} is not user or assistant"
            )),
        }
    };
    Some(turns.iter().map(read).collect())
}

/// Whether `text` is a template of simple variables only: no nunjucks tags or
/// comments, and `{{ }}` around a name.
fn plain(text: &str) -> std::result::Result<(), String> {
    let nunjucks = |what: &str| {
        format!("{what} needs nunjucks; loadout substitutes simple variables only ({{{{ name }}}})")
    };
    if text.contains("{%") || text.contains("{#") {
        return Err(nunjucks("a template tag or comment"));
    }
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return Err(nunjucks("an unclosed {{"));
        };
        let inside = after[..close].trim();
        if !cases::is_identifier(inside) {
            return Err(nunjucks(&format!("{{{{ {inside} }}}}")));
        }
        rest = &after[close + 2..];
    }
    Ok(())
}

/// `defaultTest`'s parts that apply to every test.
#[derive(Default)]
struct Defaults {
    vars: BTreeMap<String, String>,
    assert: Vec<Value>,
}

fn default_test(value: Option<&Value>, problems: &mut Vec<String>) -> Defaults {
    let map = match value {
        None => return Defaults::default(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            problems.push("defaultTest: loadout reads no files: put it inline".to_owned());
            return Defaults::default();
        }
    };
    let mut found = Vec::new();
    for (key, value) in map {
        if !["vars", "assert", "description", "metadata"].contains(&key.as_str()) {
            if key == "options" {
                options(value, &mut found);
            } else {
                found.push(format!(".{key}: {}", unhonoured(key)));
            }
        }
    }
    let vars = vars(map.get("vars"), &mut found);
    let assert = match map.get("assert") {
        None => Vec::new(),
        Some(Value::Array(list)) => list.clone(),
        Some(_) => {
            found.push(".assert: must be a list".to_owned());
            Vec::new()
        }
    };
    problems.extend(found.into_iter().map(|p| format!("defaultTest{p}")));
    Defaults { vars, assert }
}

/// One test as a case; its problems start with their place in the test.
fn test_case(
    test: &Value,
    default: &Defaults,
    template: &[Message],
    channel: &str,
    problems: &mut Vec<String>,
) -> Option<Case> {
    let Value::Object(map) = test else {
        problems.push(": loadout reads no files: a test must be inline (a mapping)".to_owned());
        return None;
    };
    for (key, value) in map {
        match key.as_str() {
            "description" | "vars" | "assert" | "metadata" => {}
            "options" => options(value, problems),
            other => problems.push(format!(".{other}: {}", unhonoured(other))),
        }
    }
    let mut all = default.vars.clone();
    all.extend(vars(map.get("vars"), problems));
    let metadata = map.get("metadata").and_then(Value::as_object);
    let text = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    if template.iter().any(|m| m.content == DEFAULT_PROMPT) && !all.contains_key("input") {
        problems.push(format!(
            ": the suite has no prompt, so the user's message is {DEFAULT_PROMPT} and the test needs an `input` var"
        ));
    }
    let mut assert = Vec::new();
    let listed = match map.get("assert") {
        None => &[][..],
        Some(Value::Array(list)) => list.as_slice(),
        Some(_) => {
            problems.push(".assert: must be a list".to_owned());
            &[][..]
        }
    };
    for (j, value) in default
        .assert
        .iter()
        .map(|a| (None, a))
        .chain(listed.iter().enumerate().map(|(j, a)| (Some(j), a)))
    {
        let place = match j {
            Some(j) => format!(".assert[{j}]"),
            None => ".assert (from defaultTest)".to_owned(),
        };
        match assertion(value, &all) {
            Ok(a) => assert.push(a),
            Err(problem) => problems.push(format!("{place}: {problem}")),
        }
    }
    Some(Case {
        description: map
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned),
        channel: text("channel").unwrap_or_else(|| channel.to_owned()),
        user_id: text("user_id"),
        vars: all,
        messages: template.to_vec(),
        tool_choice: None,
        assert,
    })
}

/// Why a test key loadout does not read is refused.
fn unhonoured(key: &str) -> &'static str {
    match key {
        "threshold" => {
            "a test threshold (a weighted score) is not supported: every assertion must pass"
        }
        "provider" | "providers" | "providerOutput" => {
            "loadout runs the revision against a connection; remove it"
        }
        "assertScoringFunction" => "loadout runs no code from a dataset",
        "prompts" => "tests run the suite's one prompt",
        _ => "not read by loadout; remove it",
    }
}

/// A test's `options`: those that change nothing here pass; the rest are refused.
fn options(value: &Value, problems: &mut Vec<String>) {
    let Value::Object(map) = value else {
        problems.push(".options: must be a mapping".to_owned());
        return;
    };
    for key in map
        .keys()
        .filter(|k| !IGNORED_OPTIONS.contains(&k.as_str()))
    {
        let why = match key.as_str() {
            "provider" => {
                "the judge is the evaluation's judge connection, not a provider of the suite's"
            }
            "transform" | "postprocess" | "transformVars" => "loadout runs no code from a dataset",
            "rubricPrompt" => "loadout asks the judge with its own prompt",
            _ => "not supported by loadout",
        };
        problems.push(format!(".options.{key}: {why}"));
    }
}

/// A test's vars as text (numbers and booleans written as JavaScript writes them).
fn vars(value: Option<&Value>, problems: &mut Vec<String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let map = match value {
        None => return out,
        Some(Value::Object(map)) => map,
        Some(_) => {
            problems
                .push(".vars: loadout reads no files: vars must be an inline mapping".to_owned());
            return out;
        }
    };
    for (name, value) in map {
        if !cases::is_identifier(name) {
            problems.push(format!(
                ".vars.{name}: not a variable name: use [A-Za-z_][A-Za-z0-9_]*"
            ));
            continue;
        }
        match value {
            Value::String(s) if s.starts_with("file://") => {
                problems.push(format!(".vars.{name}: loadout reads no files: put the value inline"));
            }
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                out.insert(name.clone(), kinds::js_string(value));
            }
            Value::Array(_) => problems.push(format!(
                ".vars.{name}: a list (promptfoo runs the test once per item); write one test per value"
            )),
            _ => problems.push(format!(".vars.{name}: must be text, a number or a boolean")),
        }
    }
    out
}

/// One assertion, checked as it will be scored (vars substituted).
fn assertion(
    value: &Value,
    vars: &BTreeMap<String, String>,
) -> std::result::Result<Assertion, String> {
    let Value::Object(map) = value else {
        return Err("an assertion must be a mapping with a type".to_owned());
    };
    if let Some(key) = map
        .keys()
        .find(|k| !["type", "value", "threshold", "weight", "metric"].contains(&k.as_str()))
    {
        return Err(match key.as_str() {
            "transform" | "contextTransform" => {
                format!("`{key}` runs code; loadout runs no code from a dataset")
            }
            "provider" => "`provider`: the judge is the evaluation's judge connection".to_owned(),
            "rubricPrompt" => {
                "`rubricPrompt`: loadout asks the judge with its own prompt".to_owned()
            }
            _ => format!("`{key}` is not supported by loadout"),
        });
    }
    let number = |key: &str| match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or(format!("`{key}` must be a number")),
    };
    let assertion = Assertion {
        kind: map
            .get("type")
            .and_then(Value::as_str)
            .ok_or("an assertion needs a type")?
            .to_owned(),
        value: map.get("value").filter(|v| !v.is_null()).cloned(),
        threshold: number("threshold")?,
        weight: number("weight")?,
        metric: match map.get("metric") {
            None => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(_) => return Err("`metric` must be text".to_owned()),
        },
    };
    let strings: Vec<&str> = match &assertion.value {
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    for text in strings {
        plain(text)?;
    }
    let mut rendered = assertion.clone();
    rendered.value = rendered.value.map(|v| cases::render_value(v, vars));
    kinds::check(rendered.shape())?;
    Ok(assertion)
}

#[cfg(test)]
mod tests;
