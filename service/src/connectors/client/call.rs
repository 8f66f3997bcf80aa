//! What an executor is given ([`Call`]) and what it answers ([`Outcome`]).

use serde::Serialize;
use serde_json::Value;

/// One tool call to carry out, with its context.
#[derive(Clone, Debug)]
pub struct Call {
    pub tenant: String,
    pub agent_id: i32,
    pub user_id: Option<String>,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// `{proposal_id}:{attempt}`: executors must treat a repeat as the same call.
    pub idempotency_key: String,
    /// The agent's name, for the connector's context.
    pub agent: String,
    pub conversation_id: String,
    pub proposal_id: i32,
    pub attempt: i32,
}

/// An execution's result.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub success: bool,
    /// The executor's structured result, or a [`Failure`].
    pub result: Value,
}

/// A failed execution's result: what went wrong (sanitised: no bodies, URLs or
/// secrets), and whether running it again may help.
#[derive(Clone, Debug, Serialize)]
pub struct Failure {
    pub error: String,
    pub retryable: bool,
}

impl Outcome {
    pub fn failure(error: impl Into<String>, retryable: bool) -> Self {
        let failure = Failure {
            error: error.into(),
            retryable,
        };
        Self {
            success: false,
            result: serde_json::to_value(failure).unwrap_or(Value::Null),
        }
    }
}
