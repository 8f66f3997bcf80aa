//! What a chat completion is asked with, of where, and what comes back: the
//! client's public shapes and its one error.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::registry::formats::OpenAiTool;
use crate::releases::model::Parameters;
use crate::secrets::Secret;

crate::closed_set! {
    /// How a response schema is asked for: servers that speak the same API differ here.
    pub enum Structured as "structured output mode" {
        /// OpenAI's `response_format: {"type": "json_schema", "json_schema":
        /// {"name": "answer", "schema": …, "strict": true}}` (OpenAI, vLLM, llama.cpp's server).
        JsonSchema = "json_schema",
        /// llama.cpp's extension `response_format: {"type": "json_object", "schema": …}`,
        /// for llama-cpp-python, which refuses `json_schema` with HTTP 500.
        JsonObjectSchema = "json_object_schema",
    }
}

/// Where a model is asked: one registered model connection, its key opened.
#[derive(Clone, Copy, Debug)]
pub struct Endpoint<'a> {
    /// The API's root, `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`;
    /// `/chat/completions` is appended to its path (a query string stays).
    pub base_url: &'a str,
    /// Sent as `Authorization: Bearer …`; none for local servers without keys.
    pub api_key: Option<&'a Secret>,
    /// For each attempt as a whole: connecting, sending, and reading the answer.
    pub timeout: Duration,
    pub structured: Structured,
}

crate::closed_set! {
    /// Who says a message.
    pub enum Role as "message role" {
        System = "system",
        User = "user",
        Assistant = "assistant",
    }
}

/// One message of the conversation sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

/// What to ask: the revision's model settings, its tools, and the conversation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ask {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    /// The revision's tools in OpenAI's format (`registry::formats::render`); left
    /// out of the request when empty, since some servers refuse `"tools": []`.
    pub tools: Vec<OpenAiTool>,
    /// Sent as given (`"auto"`, `"required"`, `{"type": "function", …}`).
    pub tool_choice: Option<Value>,
    /// Temperature, max tokens and top p go in their fields; provider options join
    /// the body's top level (`seed`, `reasoning_effort`) but never replace a field
    /// loadout sets, nor `model`, `messages`, `tools`, `tool_choice` or `stream`.
    pub parameters: Parameters,
    /// Asked for as the endpoint's [`Structured`] mode says; sent as given.
    pub response_schema: Option<Value>,
}

/// A tool call the model made (the one shape the scoring reads).
pub use crate::evals::assertions::ToolCall;

/// The tokens an answer cost; 0 when the server does not say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// The first choice of a chat completion, and what it took to get it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The text; empty when the model only called tools (`content: null`).
    pub content: String,
    /// OpenAI's `refusal` (structured outputs): the model declined, in words.
    pub refusal: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `length`, `tool_calls`, … as the server says.
    pub finish_reason: Option<String>,
    pub usage: Usage,
    /// The model the server says answered (a dated snapshot of the one asked for).
    pub model: Option<String>,
    /// From sending to the last byte read, of the attempt that succeeded.
    pub latency: Duration,
    /// Attempts made, the successful one included.
    pub attempts: u32,
}

/// Why no answer came. Messages hold no URL, address, key or answer body.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// Asking again will not help: a 4xx other than 408 and 429, a redirect, a base
    /// URL or address refused, a key that cannot be a header.
    #[error("{0}")]
    Refused(String),
    /// Asking later may: 408, 429, 5xx, a timeout, a connection that failed.
    #[error("{message}")]
    Unavailable {
        message: String,
        /// How long the server asked to wait (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// A 2xx whose body is not a chat completion; not asked again.
    #[error("{0}")]
    Malformed(String),
}

impl ChatError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ChatError::Unavailable { .. })
    }

    pub(super) fn unavailable(message: String) -> ChatError {
        ChatError::Unavailable {
            message,
            retry_after: None,
        }
    }
}

/// A duration as people write it: whole seconds, else milliseconds.
pub(super) fn words(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}
