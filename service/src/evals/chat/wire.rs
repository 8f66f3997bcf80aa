//! The wire shapes of a chat completion: the body sent, built from serde structs,
//! and the answer as read.
//!
//! Answers are read leniently, as real servers write them: `content` null, missing,
//! or (some gateways) an array of text parts; `tool_calls` null or missing;
//! `arguments` an object instead of a string (older llama.cpp and Ollama builds),
//! taken as its JSON text; `usage` missing; unknown fields ignored. Only the first
//! choice is read. What no reading can make a chat completion is [`Malformed`], in
//! words of loadout's own: serde's messages quote the body.
//!
//! [`Malformed`]: super::types::ChatError::Malformed

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::types::{Answer, Ask, ChatError, ChatMessage, Structured, ToolCall, Usage};
use crate::registry::formats::OpenAiTool;
use crate::secrets::Secret;

/// The most characters of a provider's error message an error repeats.
pub const MAX_PROVIDER_MESSAGE_CHARS: usize = 300;

/// The name a response schema is sent under (OpenAI requires one).
const SCHEMA_NAME: &str = "answer";

/// Keys provider options may never set, even where the body leaves them out: they
/// would change what is asked (`tools` when the revision has none) or how the
/// answer comes (`stream`).
const NEVER_FROM_OPTIONS: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "stream",
    "stream_options",
];

/// The request body's own fields; provider options are added around them.
#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: &'a [OpenAiTool],
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<ResponseFormat<'a>>,
    stream: bool,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResponseFormat<'a> {
    JsonSchema { json_schema: NamedSchema<'a> },
    JsonObject { schema: &'a Value },
}

#[derive(Serialize)]
struct NamedSchema<'a> {
    name: &'static str,
    schema: &'a Value,
    strict: bool,
}

/// The JSON body for `ask`: its fields, then each provider option the body does
/// not already hold.
pub(super) fn body(ask: &Ask, structured: Structured) -> Result<Vec<u8>, ChatError> {
    let response_format = ask.response_schema.as_ref().map(|schema| match structured {
        Structured::JsonSchema => ResponseFormat::JsonSchema {
            json_schema: NamedSchema {
                name: SCHEMA_NAME,
                schema,
                strict: true,
            },
        },
        Structured::JsonObjectSchema => ResponseFormat::JsonObject { schema },
    });
    let fields = Body {
        model: &ask.model,
        messages: &ask.messages,
        tools: &ask.tools,
        tool_choice: ask.tool_choice.as_ref(),
        temperature: ask.parameters.temperature,
        max_tokens: ask.parameters.max_tokens,
        top_p: ask.parameters.top_p,
        response_format,
        stream: false,
    };
    let unencodable = || ChatError::Refused("the request could not be encoded as JSON".into());
    let Ok(Value::Object(mut body)) = serde_json::to_value(&fields) else {
        return Err(unencodable());
    };
    for (key, value) in &ask.parameters.provider_options {
        if !NEVER_FROM_OPTIONS.contains(&key.as_str()) && !body.contains_key(key) {
            body.insert(key.clone(), value.clone());
        }
    }
    serde_json::to_vec(&body).map_err(|_| unencodable())
}

#[derive(Deserialize)]
struct Completion {
    choices: Option<Vec<Choice>>,
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<Value>,
    refusal: Option<String>,
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

fn malformed(why: &str) -> ChatError {
    ChatError::Malformed(format!(
        "the model server's answer is not a chat completion: {why}"
    ))
}

/// The first choice of a 2xx body; `latency` is left for the caller to set.
pub(super) fn answer(body: &[u8]) -> Result<Answer, ChatError> {
    let value: Value = serde_json::from_slice(body).map_err(|_| malformed("it is not JSON"))?;
    let completion: Completion = serde_json::from_value(value)
        .map_err(|_| malformed("a field has the wrong type or it is not an object"))?;
    let Some(choice) = completion.choices.and_then(|c| c.into_iter().next()) else {
        return Err(malformed("it has no choices"));
    };
    let Some(message) = choice.message else {
        return Err(malformed("its first choice has no message"));
    };
    let tool_calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(tool_call)
        .collect::<Result<Vec<_>, _>>()?;
    let usage = completion.usage.map_or_else(Usage::default, |u| Usage {
        prompt_tokens: u.prompt_tokens.unwrap_or(0),
        completion_tokens: u.completion_tokens.unwrap_or(0),
    });
    Ok(Answer {
        content: content(message.content)?,
        refusal: message.refusal,
        tool_calls,
        finish_reason: choice.finish_reason,
        usage,
        model: completion.model,
        latency: Duration::ZERO,
        attempts: 1,
    })
}

/// `content` as text: a string, nothing (null or missing), or text parts joined.
fn content(content: Option<Value>) -> Result<String, ChatError> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part.get("text") {
                Some(Value::String(text)) => Ok(text.as_str()),
                _ => Err(malformed("a content part has no text")),
            })
            .collect(),
        Some(_) => Err(malformed("the message's content is not text")),
    }
}

fn tool_call(call: WireToolCall) -> Result<ToolCall, ChatError> {
    let Some(function) = call.function else {
        return Err(malformed("a tool call is not a function call"));
    };
    let Some(name) = function.name else {
        return Err(malformed("a tool call has no name"));
    };
    let arguments = match function.arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        Some(object @ Value::Object(_)) => object.to_string(),
        Some(_) => return Err(malformed("a tool call's arguments are not text")),
    };
    Ok(ToolCall { name, arguments })
}

#[derive(Deserialize)]
struct ErrorBody {
    error: Option<Value>,
}

/// The provider's message in an error body (`{"error": {"message": …}}` or
/// `{"error": "…"}`), fit to repeat: control characters removed, the key blotted
/// out should the server echo it, cut to [`MAX_PROVIDER_MESSAGE_CHARS`].
pub(super) fn provider_message(body: &[u8], key: Option<&Secret>) -> Option<String> {
    let error = serde_json::from_slice::<ErrorBody>(body).ok()?.error?;
    let said = match &error {
        Value::String(text) => text.as_str(),
        Value::Object(fields) => message_of(fields)?,
        _ => return None,
    };
    let mut clean: String = said.chars().filter(|c| !c.is_control()).collect();
    if let Some(key) = key.map(Secret::expose).filter(|k| !k.is_empty()) {
        clean = clean.replace(key, "[redacted]");
    }
    let clean = clean.trim();
    if clean.is_empty() {
        return None;
    }
    let mut cut: String = clean.chars().take(MAX_PROVIDER_MESSAGE_CHARS).collect();
    if cut.len() < clean.len() {
        cut.push('…');
    }
    Some(cut)
}

fn message_of(fields: &Map<String, Value>) -> Option<&str> {
    fields.get("message").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::releases::model::Parameters;

    fn ask() -> Ask {
        Ask {
            model: "m".into(),
            messages: vec![],
            parameters: Parameters {
                temperature: Some(0.5),
                provider_options: [
                    ("seed".to_owned(), json!(7)),
                    ("model".to_owned(), json!("other")),
                    ("temperature".to_owned(), json!(1.5)),
                    ("tools".to_owned(), json!([{"type": "function"}])),
                    ("stream".to_owned(), json!(true)),
                ]
                .into_iter()
                .collect(),
                ..Parameters::default()
            },
            ..Ask::default()
        }
    }

    #[test]
    fn provider_options_add_keys_but_never_replace_or_smuggle_in_fields() {
        let body: Value =
            serde_json::from_slice(&body(&ask(), Structured::JsonSchema).expect("body"))
                .expect("json");
        assert_eq!(
            body,
            json!({"model": "m", "messages": [], "temperature": 0.5, "stream": false, "seed": 7})
        );
    }

    #[test]
    fn arguments_sent_as_an_object_are_taken_as_their_json_text() {
        let answer = answer(
            br#"{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}}]}"#,
        )
        .expect("answer");
        assert_eq!(answer.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(answer.content, "");
        assert_eq!(answer.usage, Usage::default());
    }

    #[test]
    fn content_parts_are_joined() {
        let answer = answer(
            br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#,
        )
        .expect("answer");
        assert_eq!(answer.content, "ab");
    }

    #[test]
    fn a_provider_message_is_cleaned_cut_and_never_repeats_the_key() {
        let key = super::super::tests::secret("sk-secret");
        let long = format!("bad key sk-secret\n\u{7}{}", "x".repeat(400));
        let body = serde_json::to_vec(&json!({"error": {"message": long}})).expect("json");
        let said = provider_message(&body, Some(&key)).expect("a message");
        assert!(said.starts_with("bad key [redacted]x"), "{said}");
        assert_eq!(said.chars().count(), MAX_PROVIDER_MESSAGE_CHARS + 1);
        assert_eq!(
            provider_message(br#"{"error":"no such model"}"#, None).as_deref(),
            Some("no such model")
        );
        assert_eq!(provider_message(b"<html>", None), None);
    }
}
