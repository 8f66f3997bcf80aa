//! A reply's tool calls: as promptfoo's OpenAI provider makes them its output,
//! and the two checks on them (`is-valid-openai-tools-call`, loadout's `tool-call`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::json;
use crate::evals::kinds;

/// A tool call as the model made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[schema(as = EvalToolCall)]
pub struct ToolCall {
    pub name: String,
    /// The arguments' JSON text as the model sent it (it may not parse).
    pub arguments: String,
}

/// A tool call in OpenAI's shape, for the output string.
#[derive(Serialize)]
struct OpenAiCall<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolCall,
}

/// An assistant message in OpenAI's shape, for the output string.
#[derive(Serialize)]
struct OpenAiMessage<'a> {
    role: &'static str,
    content: &'a str,
    tool_calls: Vec<OpenAiCall<'a>>,
}

/// promptfoo's output for a reply with tool calls: the calls as a JSON list when
/// there is no content, the whole message as JSON when there is both. The call
/// ids OpenAI sends are left out (they differ on every call).
pub fn output(content: &str, calls: &[ToolCall]) -> String {
    let tool_calls: Vec<OpenAiCall<'_>> = calls
        .iter()
        .map(|function| OpenAiCall {
            kind: "function",
            function,
        })
        .collect();
    let text = match content.is_empty() {
        true => serde_json::to_string(&tool_calls),
        false => serde_json::to_string(&OpenAiMessage {
            role: "assistant",
            content,
            tool_calls,
        }),
    };
    text.unwrap_or_default()
}

/// `is-valid-openai-tools-call`: there is a call, and every call names one of
/// `tools` with arguments that parse and are valid under its parameters schema.
pub fn valid(calls: &[ToolCall], tools: &[(String, Value)]) -> Result<(), String> {
    if calls.is_empty() {
        return Err("the model made no tool call".to_owned());
    }
    if tools.is_empty() {
        return Err("No tools configured in provider, but output contains tool calls".to_owned());
    }
    for call in calls {
        let Some((_, schema)) = tools.iter().find(|(name, _)| *name == call.name) else {
            return Err(format!(
                "Called \"{}\", but there is no function with that name",
                call.name
            ));
        };
        let arguments: Value = serde_json::from_str(&call.arguments)
            .map_err(|e| format!("the arguments of \"{}\" are not JSON: {e}", call.name))?;
        let validator = kinds::compile(schema)?;
        let errors: Vec<String> = validator
            .iter_errors(&arguments)
            .take(3)
            .map(|e| format!("{} at {:?}", e.masked(), e.instance_path().as_str()))
            .collect();
        if !errors.is_empty() {
            return Err(format!(
                "Call to \"{}\" does not match schema: {}",
                call.name,
                errors.join("; ")
            ));
        }
    }
    Ok(())
}

/// `tool-call`: some call names `name` and, when `arguments` is given, has
/// arguments that parse and hold it ([`json::contains`]).
pub fn made(calls: &[ToolCall], name: &str, arguments: Option<&Value>) -> bool {
    calls
        .iter()
        .filter(|c| c.name == name)
        .any(|c| match arguments {
            None => true,
            Some(expected) => serde_json::from_str::<Value>(&c.arguments)
                .is_ok_and(|actual| json::contains(&actual, expected)),
        })
}
