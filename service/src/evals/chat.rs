//! The OpenAI-compatible Chat Completions client an evaluation asks its model
//! through: one `POST {base_url}/chat/completions`, without streaming, and the
//! first choice of the answer read back.
//!
//! The call goes through the one outbound client
//! ([`Outbound`](crate::connectors::client::outbound::Outbound)) like every
//! connector call: the base URL is checked before each attempt (loopback and private
//! addresses only when allow-listed with `--connector-allow`), names are checked
//! again where they resolve, and redirects are never followed. The API key travels
//! as `Authorization: Bearer …` in a header value marked sensitive.
//!
//! Errors are sanitised like a connector's: they never hold the URL, an address the
//! host resolved to, the API key or the body of the answer. They do hold the HTTP
//! status and, when the server sent an OpenAI error object
//! (`{"error": {"message": …}}`, or `{"error": "…"}`), its message cut to
//! [`MAX_PROVIDER_MESSAGE_CHARS`] characters with control characters removed and the
//! key blotted out if echoed: "model not found" is what tells an operator what to
//! fix. That holds for 5xx answers too, since llama-cpp-python answers a
//! `json_schema` response format it does not take with a 500 that says so.
//!
//! - `types`: what is asked, of where, and what comes back; the one error;
//! - `send`: one attempt, from the address check to the answer read within its cap;
//! - `wire`: the request body sent and the answer's shape as read;
//! - `retry`: attempts, waits (`Retry-After` or exponential backoff), and giving up.

mod retry;
mod send;
mod types;
mod wire;

pub use retry::{Retry, complete_with_retries};
pub use send::{MAX_ANSWER_BYTES, complete};
pub use types::{Answer, Ask, ChatError, ChatMessage, Endpoint, Role, Structured, ToolCall, Usage};
pub use wire::MAX_PROVIDER_MESSAGE_CHARS;

#[cfg(test)]
mod tests;
