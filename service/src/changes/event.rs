//! What one change is: the outbox's event types the stream carries, and a change
//! as every stream is sent it.

use axum::body::Bytes;

/// The event types the stream carries: those that change what some key fetches.
pub const TYPES: &[&str] = &[
    "label.moved",
    "rollout.started",
    "rollout.changed",
    "rollout.aborted",
    "rollout.held",
    "rollout.completed",
    "instructions.changed",
    "agent.deleted",
];

/// One change as the stream sends it: who may see it, and its frame.
#[derive(Debug)]
pub struct Change {
    /// The outbox row id: the SSE `id`.
    pub id: i64,
    /// A tenant's change (a user's instructions); `None`: every tenant's.
    pub tenant: Option<Box<str>>,
    /// The agent it is about.
    pub agent: Box<str>,
    /// The label it moved, for label and rollout changes.
    pub label: Option<Box<str>>,
    /// `id: …\ndata: {…}\n\n`, encoded once for every stream.
    pub frame: Bytes,
}
