//! Scoring a reply against a case's assertions, with promptfoo's semantics (read
//! from promptfoo 0.123.1's handlers) so a suite's verdicts agree with promptfoo's.
//!
//! What is scored is promptfoo's *output string* for an OpenAI-compatible reply
//! ([`output`]): the content; or, when the model called tools, the calls as a JSON
//! list (no content) or the whole message as JSON (content and calls), as
//! promptfoo's OpenAI provider makes it. `llm-rubric` needs a model: [`score`]
//! hands back a [`JudgeAsk`] and the runner asks the judge, then calls [`judged`].
//! An assertion with weight 0 always passes, as in promptfoo. Pure: no I/O.
//!
//! - `verdict`: one assertion's result; `judge`: llm-rubric's prompt, answer
//!   schema and reading; `json`: JSON equality, subsets and the objects found in
//!   text; `tools`: tool calls as output, and the checks on them.

use serde_json::Value;

use super::cases::Assertion;
use super::kinds::{self, Kind, js_string};

pub mod json;
pub mod judge;
pub mod tools;
pub mod verdict;

pub use judge::{JudgeAsk, JudgeMessage, JudgeVerdict, judge_messages, judged, verdict_schema};
pub use tools::ToolCall;
pub use verdict::Verdict;

/// What the model answered, and what it cost.
#[derive(Clone, Copy, Debug)]
pub struct Reply<'a> {
    pub content: &'a str,
    pub tool_calls: &'a [ToolCall],
    /// As the endpoint sent it (`stop`, `length`, `tool_calls`, ...).
    pub finish_reason: Option<&'a str>,
    pub latency_ms: u64,
    /// `None` when the connection has no prices.
    pub cost: Option<f64>,
    pub tokens: Tokens,
}

/// The tokens a reply used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    pub prompt: u64,
    pub completion: u64,
}

/// An assertion's result, or the question for the judge.
#[derive(Clone, Debug, PartialEq)]
pub enum Scored {
    Done(Verdict),
    Judge(JudgeAsk),
}

/// promptfoo's output string for `reply` (see the module's doc).
pub fn output(reply: &Reply<'_>) -> String {
    match reply.tool_calls.is_empty() {
        true => reply.content.to_owned(),
        false => tools::output(reply.content, reply.tool_calls),
    }
}

/// Scores `assertion` (its case's vars substituted: `cases::substitute`) on
/// `reply`; `tools` are the revision's tools by name with their parameters schema.
/// Never panics: an assertion `cases::check` would refuse fails with the reason.
pub fn score(assertion: &Assertion, reply: &Reply<'_>, tools: &[(String, Value)]) -> Scored {
    let metric = assertion.metric.as_deref();
    let parsed = match kinds::check(assertion.shape()) {
        Ok(parsed) => parsed,
        Err(reason) => return Scored::Done(Verdict::of(&assertion.kind, metric, false, || reason)),
    };
    let weightless = assertion.weight == Some(0.0);
    if parsed.kind == Kind::LlmRubric && !weightless {
        return Scored::Judge(JudgeAsk {
            rubric: assertion.value.as_ref().map(js_string).unwrap_or_default(),
            output: output(reply),
            threshold: assertion.threshold,
            negate: parsed.negate,
            metric: assertion.metric.clone(),
        });
    }
    let mut verdict = match parsed.kind {
        Kind::Cost if reply.cost.is_none() => Verdict::of(&assertion.kind, metric, false, || {
            "the connection has no prices, so the cost is not known".to_owned()
        }),
        _ => {
            let (held, why) = check(parsed.kind, assertion, reply, tools);
            let pass = held != parsed.negate;
            Verdict::of(&assertion.kind, metric, pass, || {
                failure(parsed.negate, &why)
            })
        }
    };
    if weightless {
        verdict.pass = true;
    }
    Scored::Done(verdict)
}

/// Whether a case passes: every assertion does (promptfoo's rule for a test
/// without a threshold; no assertions pass).
pub fn case_passes(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| v.pass)
}

/// Why a failed assertion failed: `Expected output to [not ]<why>`, promptfoo's
/// wording, or the reason itself when it is already a sentence.
fn failure(negate: bool, why: &Why) -> String {
    match why {
        Why::Expected(what) => format!(
            "Expected output to {}{what}",
            if negate { "not " } else { "" }
        ),
        Why::Said(reason, inverse) => match negate {
            true => inverse.clone(),
            false => reason.clone(),
        },
    }
}

/// What an assertion's failure says.
enum Why {
    /// The tail of `Expected output to [not] ...`.
    Expected(String),
    /// The reason when it fails, and when its `not-` form fails.
    Said(String, String),
}

/// Whether the assertion holds before `not-`, and what its failure says.
fn check(
    kind: Kind,
    assertion: &Assertion,
    reply: &Reply<'_>,
    tools: &[(String, Value)],
) -> (bool, Why) {
    let out = output(reply);
    let value = assertion.value.as_ref();
    let text = value.map(js_string).unwrap_or_default();
    match kind {
        Kind::Equals => equals(value, &out),
        Kind::Contains => (
            out.contains(&text),
            Why::Expected(format!("contain \"{text}\"")),
        ),
        Kind::Icontains => (
            out.to_lowercase().contains(&text.to_lowercase()),
            Why::Expected(format!("contain \"{text}\"")),
        ),
        Kind::ContainsAll | Kind::IcontainsAll | Kind::ContainsAny | Kind::IcontainsAny => {
            some_or_all(kind, value, &out)
        }
        Kind::StartsWith => (
            out.starts_with(&text),
            Why::Expected(format!("start with \"{text}\"")),
        ),
        Kind::Regex => match kinds::regex(&text) {
            Ok(re) => (
                re.is_match(&out),
                Why::Expected(format!("match regex \"{text}\"")),
            ),
            Err(e) => (false, Why::Said(e.clone(), e)),
        },
        Kind::IsJson => is_json(value, &out),
        Kind::ContainsJson => contains_json(value, &out),
        Kind::IsValidOpenaiToolsCall => match tools::valid(reply.tool_calls, tools) {
            Ok(()) => (true, Why::Said(String::new(), String::new())),
            Err(e) => (false, Why::Said(e.clone(), e)),
        },
        Kind::ToolCall => tool_call(value, reply),
        Kind::FinishReason => finish_reason(&text, reply.finish_reason),
        Kind::Latency | Kind::Cost => threshold(kind, assertion.threshold, reply),
        // Handed to the judge by `score`; a weightless rubric passes without it.
        Kind::LlmRubric => (true, Why::Said(String::new(), String::new())),
    }
}

/// `equals`: a text compared as text; an object, list or other JSON value compared
/// with the output parsed as JSON (an output that does not parse is not equal).
fn equals(value: Option<&Value>, out: &str) -> (bool, Why) {
    let (held, shown) = match value {
        Some(expected @ (Value::Object(_) | Value::Array(_) | Value::Null)) => (
            serde_json::from_str::<Value>(out).is_ok_and(|actual| json::equal(expected, &actual)),
            expected.to_string(),
        ),
        other => {
            let text = other.map(js_string).unwrap_or_default();
            (text == out, text)
        }
    };
    let said = format!("Expected output \"{out}\" to equal \"{shown}\"");
    let inverse = format!("Expected output \"{out}\" to not equal \"{shown}\"");
    (held, Why::Said(said, inverse))
}

/// `contains-all`/`-any` and their case-insensitive forms.
fn some_or_all(kind: Kind, value: Option<&Value>, out: &str) -> (bool, Why) {
    let items = kinds::list(value).unwrap_or_default();
    let fold = matches!(kind, Kind::IcontainsAll | Kind::IcontainsAny);
    let haystack = if fold {
        out.to_lowercase()
    } else {
        out.to_owned()
    };
    let has = |item: &String| match fold {
        true => haystack.contains(&item.to_lowercase()),
        false => haystack.contains(item.as_str()),
    };
    match kind {
        Kind::ContainsAny | Kind::IcontainsAny => (
            items.iter().any(has),
            Why::Expected(format!("contain one of \"{}\"", items.join(", "))),
        ),
        _ => {
            let missing: Vec<&str> = items
                .iter()
                .filter(|i| !has(i))
                .map(String::as_str)
                .collect();
            (
                missing.is_empty(),
                Why::Expected(format!(
                    "contain all of [{}]. Missing: [{}]",
                    items.join(", "),
                    missing.join(", ")
                )),
            )
        }
    }
}

/// `is-json`: the output parses, and when a schema is given it is valid under it.
fn is_json(value: Option<&Value>, out: &str) -> (bool, Why) {
    let Ok(parsed) = serde_json::from_str::<Value>(out) else {
        return (false, Why::Expected("be valid JSON".to_owned()));
    };
    match kinds::schema(value).and_then(|s| s.map(|s| kinds::compile(&s)).transpose()) {
        Ok(None) => (true, Why::Expected("be valid JSON".to_owned())),
        Ok(Some(validator)) => match schema_errors(&validator, &parsed) {
            None => (
                true,
                Why::Said(
                    String::new(),
                    "Output is JSON that conforms to the provided schema".to_owned(),
                ),
            ),
            Some(errors) => (false, Why::Said(errors.clone(), errors)),
        },
        Err(e) => (false, Why::Said(e.clone(), e)),
    }
}

/// `contains-json`: the output holds a JSON object (valid under the schema, when
/// given). As in promptfoo, the objects are tried in order and the last tried
/// decides: the first valid one, or else the last.
fn contains_json(value: Option<&Value>, out: &str) -> (bool, Why) {
    let objects = json::objects(out);
    let validator =
        match kinds::schema(value).and_then(|s| s.map(|s| kinds::compile(&s)).transpose()) {
            Ok(validator) => validator,
            Err(e) => return (false, Why::Said(e.clone(), e)),
        };
    let Some(validator) = validator else {
        return (
            !objects.is_empty(),
            Why::Expected("contain valid JSON".to_owned()),
        );
    };
    let mut last = None;
    for object in &objects {
        match schema_errors(&validator, object) {
            None => {
                let conforms = "Output contains JSON conforming to the provided schema".to_owned();
                return (true, Why::Said(String::new(), conforms));
            }
            Some(errors) => last = Some(errors),
        }
    }
    match last {
        Some(errors) => (false, Why::Said(errors.clone(), errors)),
        None => (false, Why::Expected("contain valid JSON".to_owned())),
    }
}

/// The first errors of `value` under `validator`, or `None` when it is valid.
fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(3)
        .map(|e| format!("{} at {:?}", e.masked(), e.instance_path().as_str()))
        .collect();
    (!errors.is_empty()).then(|| {
        format!(
            "JSON does not conform to the provided schema. Errors: {}",
            errors.join("; ")
        )
    })
}

/// `tool-call`: some call has the name (and holds the arguments).
fn tool_call(value: Option<&Value>, reply: &Reply<'_>) -> (bool, Why) {
    let Ok((name, arguments)) = kinds::tool_call(value) else {
        return (
            false,
            Why::Said(
                "invalid tool-call value".to_owned(),
                "invalid tool-call value".to_owned(),
            ),
        );
    };
    let held = tools::made(reply.tool_calls, &name, arguments.as_ref());
    let what = match &arguments {
        Some(args) => format!("a call of \"{name}\" with arguments holding {args}"),
        None => format!("a call of \"{name}\""),
    };
    let called: Vec<&str> = reply.tool_calls.iter().map(|c| c.name.as_str()).collect();
    let said = format!("Expected {what}; the calls were [{}]", called.join(", "));
    (held, Why::Said(said, format!("Expected no {what}")))
}

/// promptfoo's finish reasons: each provider's word mapped to OpenAI's.
fn normalized(reason: &str) -> &str {
    match reason {
        "function_call" | "tool_use" => "tool_calls",
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        other => other,
    }
}

/// `finish-reason`: the reply's, normalized, equals the value (any case). A reply
/// without one fails (its `not-` form passes), as in promptfoo.
fn finish_reason(expected: &str, actual: Option<&str>) -> (bool, Why) {
    let Some(actual) = actual.map(str::trim).filter(|a| !a.is_empty()) else {
        let none = "Provider did not supply stop/finish reason".to_owned();
        return (false, Why::Said(none.clone(), none));
    };
    let actual = normalized(actual);
    (
        expected.to_lowercase() == actual.to_lowercase(),
        Why::Said(
            format!("Expected finish reason \"{expected}\" but got \"{actual}\""),
            format!("Expected finish reason not \"{expected}\" but got \"{actual}\""),
        ),
    )
}

/// `latency` (ms) and `cost` (known): at most the threshold.
fn threshold(kind: Kind, threshold: Option<f64>, reply: &Reply<'_>) -> (bool, Why) {
    let limit = threshold.unwrap_or(0.0);
    let (measured, shown) = match kind {
        Kind::Latency => (
            reply.latency_ms as f64,
            format!("Latency {}ms", reply.latency_ms),
        ),
        _ => {
            let cost = reply.cost.unwrap_or(f64::INFINITY);
            (cost, format!("Cost {cost}"))
        }
    };
    let unit = if kind == Kind::Latency { "ms" } else { "" };
    (
        measured <= limit,
        Why::Said(
            format!("{shown} is greater than threshold {limit}{unit}"),
            format!("{shown} is less than or equal to threshold {limit}{unit}"),
        ),
    )
}

#[cfg(test)]
mod tests;
