//! The assertion types loadout scores, and the shape each one's value must have.
//! A type is promptfoo's name (so a promptfoo suite reads as it is), possibly with
//! promptfoo's `not-` prefix; the one addition is `tool-call`.
//!
//! Everything that runs code (`javascript`, `python`, `webhook`, ...) or needs a
//! model other than the judge (`similar`, `factuality`, ...) is refused here, with
//! the reason, so a dataset is checked once when it is saved rather than failing
//! case by case in a run. Pure: no I/O.

use serde_json::Value;

/// The most bytes a compiled regex may take (the `regex` crate's size limit): a
/// pattern is a dataset's input, and its program is built on every score.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

crate::closed_set! {
    /// An assertion type without its `not-` prefix.
    pub enum Kind as "assertion type" {
        Equals = "equals",
        Contains = "contains",
        Icontains = "icontains",
        ContainsAll = "contains-all",
        ContainsAny = "contains-any",
        IcontainsAll = "icontains-all",
        IcontainsAny = "icontains-any",
        StartsWith = "starts-with",
        Regex = "regex",
        IsJson = "is-json",
        ContainsJson = "contains-json",
        IsValidOpenaiToolsCall = "is-valid-openai-tools-call",
        /// loadout's own: some tool call has this name (and these arguments).
        ToolCall = "tool-call",
        FinishReason = "finish-reason",
        Latency = "latency",
        Cost = "cost",
        /// Graded by the judge model.
        LlmRubric = "llm-rubric",
    }
}

/// An assertion's type read: the kind, and whether `not-` inverts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub kind: Kind,
    pub negate: bool,
}

/// Reads an assertion's type; the error says why loadout does not score it.
pub fn parse(text: &str) -> Result<Parsed, String> {
    let (negate, base) = match text.strip_prefix("not-") {
        Some(base) => (true, base),
        None => (false, text),
    };
    let Ok(kind) = base.parse::<Kind>() else {
        return Err(unsupported(base));
    };
    // promptfoo ignores `not-` on this one (its handler never reads it), so a
    // suite that says it does not mean what it says.
    if negate && kind == Kind::IsValidOpenaiToolsCall {
        return Err(format!(
            "{text:?} is not supported: promptfoo ignores `not-` on is-valid-openai-tools-call; use not-tool-call"
        ));
    }
    Ok(Parsed { kind, negate })
}

/// Why a type loadout does not score is refused.
fn unsupported(base: &str) -> String {
    let why = match base {
        "javascript" | "python" | "ruby" | "webhook" => {
            "loadout runs no code from a dataset; use a deterministic assertion (contains, regex, is-json, tool-call, ...) or llm-rubric"
        }
        "similar"
        | "factuality"
        | "model-graded-closedqa"
        | "model-graded-factuality"
        | "answer-relevance"
        | "context-faithfulness"
        | "context-recall"
        | "context-relevance"
        | "conversation-relevance"
        | "g-eval"
        | "select-best"
        | "max-score"
        | "classifier"
        | "moderation"
        | "pi"
        | "agent-rubric"
        | "search-rubric"
        | "trajectory:goal-success" => {
            "the one model-graded assertion loadout runs is llm-rubric; write the criterion as a rubric"
        }
        "assert-set" => "nested assertion sets are not supported; list the assertions on the case",
        "is-valid-function-call" => {
            "this is the Google function-call check; use is-valid-openai-tools-call or tool-call"
        }
        _ => "it is not a type loadout scores",
    };
    format!(
        "{base:?} assertions are not supported: {why} (supported: {}, each also with `not-` except is-valid-openai-tools-call)",
        Kind::NAMES.join(", ")
    )
}

/// What [`check`] reads of an assertion (`cases::Assertion::shape`).
#[derive(Clone, Copy, Debug)]
pub struct Shape<'a> {
    pub kind: &'a str,
    pub value: Option<&'a Value>,
    pub threshold: Option<f64>,
    pub weight: Option<f64>,
}

/// Whether `assertion` is one loadout scores, with a value of the right shape;
/// the error is a sentence without the assertion's place (the caller adds it).
pub fn check(assertion: Shape<'_>) -> Result<Parsed, String> {
    let parsed = parse(assertion.kind)?;
    if let Some(Value::String(text)) = assertion.value
        && text.starts_with("file://")
    {
        return Err("loadout reads no files: put the value inline".to_owned());
    }
    check_numbers(assertion)?;
    let name = parsed.kind.as_str();
    let value = assertion.value;
    match parsed.kind {
        Kind::Equals => value.map(|_| ()).ok_or(format!("{name} needs a value")),
        Kind::Contains | Kind::Icontains => match value {
            Some(Value::String(s)) if !s.is_empty() => Ok(()),
            Some(Value::Number(_)) => Ok(()),
            _ => Err(format!("{name} needs a non-empty string or a number")),
        },
        Kind::ContainsAll | Kind::ContainsAny | Kind::IcontainsAll | Kind::IcontainsAny => {
            list(value).map(|_| ()).map_err(|e| format!("{name}: {e}"))
        }
        Kind::StartsWith | Kind::LlmRubric => match value {
            Some(Value::String(s)) if !s.is_empty() => Ok(()),
            _ => Err(format!("{name} needs a non-empty string")),
        },
        Kind::FinishReason => match value {
            Some(Value::String(_)) => Ok(()),
            _ => Err(format!(
                "{name} needs a string (stop, length, tool_calls, ...)"
            )),
        },
        Kind::Regex => match value {
            Some(Value::String(s)) if !s.is_empty() => regex(s).map(|_| ()),
            _ => Err(format!("{name} needs a non-empty pattern")),
        },
        Kind::IsJson | Kind::ContainsJson => schema(value)
            .and_then(|s| s.map_or(Ok(()), |s| compile(&s).map(|_| ())))
            .map_err(|e| format!("{name}: {e}")),
        Kind::IsValidOpenaiToolsCall => Ok(()),
        Kind::ToolCall => tool_call(value)
            .map(|_| ())
            .map_err(|e| format!("{name}: {e}")),
        Kind::Latency | Kind::Cost => match assertion.threshold {
            Some(t) if t >= 0.0 => Ok(()),
            _ => Err(format!(
                "{name} needs a threshold (at least 0; {})",
                match parsed.kind {
                    Kind::Latency => "milliseconds",
                    _ => "the same currency as the connection's prices",
                }
            )),
        },
    }
    .map(|()| parsed)
}

/// Threshold and weight are finite; a weight is at least 0.
fn check_numbers(assertion: Shape<'_>) -> Result<(), String> {
    if assertion.threshold.is_some_and(|t| !t.is_finite()) {
        return Err("threshold must be a finite number".to_owned());
    }
    match assertion.weight {
        Some(w) if !w.is_finite() || w < 0.0 => {
            Err("weight must be a number of at least 0".to_owned())
        }
        _ => Ok(()),
    }
}

/// The texts of a `contains-all`-like value: a list of strings and numbers, or a
/// string split at commas as promptfoo splits it (`"a, b", "c,d"` quoted fields
/// keep their commas; `\"` and `""` inside quotes are a quote).
pub fn list(value: Option<&Value>) -> Result<Vec<String>, String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                Value::Number(_) => Ok(js_string(item)),
                _ => Err("a list's items must be strings or numbers".to_owned()),
            })
            .collect(),
        Some(Value::String(s)) if !s.is_empty() => split_commas(s),
        _ => Err("needs a list, or a non-empty comma-separated string".to_owned()),
    }
}

/// promptfoo's `parseCommaSeparatedValues`: fields split at commas and trimmed,
/// empty fields skipped, double-quoted fields kept whole.
fn split_commas(text: &str) -> Result<Vec<String>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && (chars[i].is_whitespace() || chars[i] == ',') {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        if chars[i] == '"' {
            let (field, next) = quoted(&chars, i + 1)?;
            out.push(field);
            i = next;
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            if i < chars.len() && chars[i] != ',' {
                return Err("a quoted field must be followed by a comma".to_owned());
            }
        } else {
            let start = i;
            while i < chars.len() && chars[i] != ',' {
                i += 1;
            }
            out.push(chars[start..i].iter().collect::<String>().trim().to_owned());
        }
    }
    Ok(out)
}

/// A quoted field from after its opening quote: the text, and where it ends.
fn quoted(chars: &[char], mut i: usize) -> Result<(String, usize), String> {
    let mut field = String::new();
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        match chars[i] {
            '\\' if matches!(next, Some('"' | '\\')) => {
                field.extend(next);
                i += 2;
            }
            '"' if next == Some('"') => {
                field.push('"');
                i += 2;
            }
            '"' => return Ok((field, i + 1)),
            c => {
                field.push(c);
                i += 1;
            }
        }
    }
    Err("a quoted field is not closed".to_owned())
}

/// A pattern compiled as loadout matches it: the `regex` crate (linear time; no
/// lookaround or backreferences, which JavaScript's `RegExp` has; `\d`, `\w` and
/// `\b` are Unicode-aware where JavaScript's are ASCII).
pub fn regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| format!("the pattern does not compile: {}", one_line(&e.to_string())))
}

/// The JSON schema of an `is-json`/`contains-json` value: none for no value (or an
/// empty one), an object as it is, a string read as YAML (JSON is YAML), as
/// promptfoo reads it.
pub fn schema(value: Option<&Value>) -> Result<Option<Value>, String> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => super::yaml::parse(s)
            .map(Some)
            .map_err(|e| format!("the schema is not YAML or JSON: {e}")),
        Some(v @ (Value::Object(_) | Value::Bool(_))) => Ok(Some(v.clone())),
        Some(_) => Err("the value must be a JSON schema (an object, or its text)".to_owned()),
    }
}

/// A schema compiled as tool arguments are checked (`execute::arguments`).
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    crate::execute::arguments::compile(schema)
        .map_err(|e| format!("the schema does not compile: {e}"))
}

/// A `tool-call` value: the tool's name and, optionally, arguments the call's
/// must contain.
pub fn tool_call(value: Option<&Value>) -> Result<(String, Option<Value>), String> {
    let shape = || "needs {name: \"tool\", arguments: {...}} (arguments optional)".to_owned();
    let Some(Value::Object(map)) = value else {
        return Err(shape());
    };
    if map.keys().any(|k| k != "name" && k != "arguments") {
        return Err(shape());
    }
    match (map.get("name"), map.get("arguments")) {
        (Some(Value::String(name)), None | Some(Value::Null)) if !name.is_empty() => {
            Ok((name.clone(), None))
        }
        (Some(Value::String(name)), Some(args @ Value::Object(_))) if !name.is_empty() => {
            Ok((name.clone(), Some(args.clone())))
        }
        _ => Err(shape()),
    }
}

/// A value as JavaScript's `String(value)` writes it, where promptfoo compares
/// text: numbers without a needless `.0` (`42`, not `42.0`).
pub fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(0.0) => "0".to_owned(),
            Some(f) if f.fract() == 0.0 && f.abs() < 1e21 && n.is_f64() => format!("{f:.0}"),
            _ => n.to_string(),
        },
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// A message on one line, for an error that names a place.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn comma_separated_text_splits_as_promptfoo_splits_it() {
        let split = |t: &str| list(Some(&json!(t)));
        assert_eq!(split(" a, b ,,c ").unwrap(), ["a", "b", "c"]);
        assert_eq!(
            split(r#""x, y", "say \"hi\"", "a""b""#).unwrap(),
            ["x, y", "say \"hi\"", "a\"b"]
        );
        assert!(split("\"open").is_err());
        assert!(split("\"a\" b").is_err());
    }

    #[test]
    fn numbers_read_as_javascript_writes_them() {
        assert_eq!(js_string(&json!(42.0)), "42");
        assert_eq!(js_string(&json!(-0.0)), "0");
        assert_eq!(js_string(&json!(1.5)), "1.5");
        assert_eq!(js_string(&json!(7)), "7");
    }

    #[test]
    fn a_not_prefix_inverts_and_unknown_types_say_what_is_supported() {
        assert_eq!(
            parse("not-regex"),
            Ok(Parsed {
                kind: Kind::Regex,
                negate: true
            })
        );
        assert!(
            parse("levenshtein")
                .unwrap_err()
                .contains("supported: equals")
        );
        assert!(
            parse("not-is-valid-openai-tools-call")
                .unwrap_err()
                .contains("ignores `not-`")
        );
    }
}
