//! The domain's one error type. It knows what went wrong, not how a protocol says
//! it: `http::error` maps each [`Kind`] to a status, the CLI prints the message.

use serde::Serialize;
use serde_json::Value;

/// What kind of failure, which decides the HTTP status (see `http::error`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Malformed input: a name, id, time zone or shape the caller must fix (400).
    Invalid,
    /// No valid key (401).
    Unauthenticated,
    /// The key's role may not do this (403).
    Forbidden,
    /// No such resource for this caller, including another tenant's (404).
    NotFound,
    /// The route does not take this method (405).
    MethodNotAllowed,
    /// A stale version, a taken name or a state that forbids the change (409).
    Conflict,
    /// Larger than a limit (413).
    TooLarge,
    /// Well-formed but refused by a rule: lint, registry check, schema (422).
    Refused,
    /// The tool has nothing to run it now (424).
    NotRunnable,
    /// Too many attempts from this client address; `Retry-After` says when (429).
    TooManyRequests,
    /// The service cannot answer yet (503).
    Unavailable,
    /// A failure the caller cannot fix; the cause is logged, never shown (500).
    Internal,
}

/// The code of [`Error::limit_reached`].
pub const LIMIT_REACHED: &str = "limit_reached";

/// A failure with a stable code, a sentence for people and structured details.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: Kind,
    /// Stable and machine-readable, e.g. `not_found`, `invalid_arguments`.
    pub code: &'static str,
    pub message: String,
    /// `null` unless the code documents details. Boxed: a `Value` object is an
    /// `IndexMap` here (cedar-policy switches serde_json's `preserve_order` on), and
    /// every `Result` carries this type.
    pub details: Box<Value>,
    /// What caused an internal error, for the log (see [`Error::chain`]).
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            kind,
            code,
            message: message.into(),
            details: Box::new(Value::Null),
            source: None,
        }
    }

    /// Structured details; anything `Serialize` (one that cannot be serialised
    /// leaves the details `null`).
    pub fn with_details(mut self, details: impl Serialize) -> Self {
        self.details = Box::new(serde_json::to_value(details).unwrap_or(Value::Null));
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::Invalid, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Kind::NotFound, "not_found", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(Kind::Conflict, "conflict", message)
    }

    pub fn refused(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Kind::Refused, code, message)
    }

    pub fn too_large(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(Kind::TooLarge, code, message)
    }

    /// A tenant holds the most `what` it may (`most`): 422 `limit_reached`, until
    /// it gives one up (a retry alone never helps, so not a 429).
    pub fn limit_reached(what: &str, most: u64, flag: &str) -> Self {
        #[derive(Serialize)]
        struct Limit {
            limit: u64,
        }
        Self::new(
            Kind::Refused,
            LIMIT_REACHED,
            format!(
                "this tenant holds {most} {what}, the most it may (`{flag}`); remove one first"
            ),
        )
        .with_details(Limit { limit: most })
    }

    pub fn unauthorized() -> Self {
        Self::new(
            Kind::Unauthenticated,
            "unauthorized",
            "a valid API key is required: Authorization: Bearer lo_...",
        )
    }

    /// The key's role may not do this; `needed` names the roles that may.
    pub fn forbidden(needed: &str) -> Self {
        Self::new(
            Kind::Forbidden,
            "forbidden",
            format!("this key's role may not do this: it needs {needed}"),
        )
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            Kind::MethodNotAllowed,
            "method_not_allowed",
            "this route does not take that method; /openapi.json lists the methods it takes",
        )
    }

    /// A failure the caller cannot fix; `cause` goes to the log at the boundary.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::new(Kind::Internal, "internal", cause.to_string())
    }

    /// [`Error::internal`] keeping `cause` itself, so the log gets its whole source
    /// chain (a database error's driver error, an I/O error's OS error).
    pub fn internal_from(cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        let mut error = Self::internal(&cause);
        error.source = Some(Box::new(cause));
        error
    }

    /// The message and every cause under it, `: `-separated, for the log.
    pub fn chain(&self) -> String {
        let mut out = self.message.clone();
        let mut next = self.source.as_deref().and_then(std::error::Error::source);
        while let Some(cause) = next {
            out.push_str(": ");
            out.push_str(&cause.to_string());
            next = cause.source();
        }
        out
    }
}

impl Error {
    /// A database error as the caller should see it; `taken` says what a unique
    /// key race means here (e.g. "an agent named \"x\" already exists").
    pub fn from_db(error: sea_orm::DbErr, taken: impl FnOnce() -> String) -> Self {
        match crate::db::classify(&error) {
            crate::db::DbFailure::Taken => Self::conflict(taken()),
            crate::db::DbFailure::Gone => Self::conflict(
                "a row this change refers to was removed by a concurrent change; reload and try again",
            ),
            crate::db::DbFailure::Busy => {
                tracing::warn!(error = %error, "database busy");
                Self::new(
                    Kind::Unavailable,
                    "busy",
                    "the database is busy; retry in a moment",
                )
            }
            crate::db::DbFailure::Storage => {
                tracing::error!(error = %error, "the database cannot write");
                Self::new(
                    Kind::Unavailable,
                    "storage_full",
                    "the database cannot write: its disk is full or failing; nothing was saved. Free space on the database's disk and retry",
                )
            }
            crate::db::DbFailure::Down => {
                tracing::warn!(error = %error, "the database does not answer");
                if crate::db::outage::lost(&error) {
                    crate::db::outage::note_lost();
                }
                Self::new(
                    Kind::Unavailable,
                    crate::db::outage::CODE,
                    "the database does not answer (a connection was lost, or none was free in time); retry in a moment",
                )
            }
            crate::db::DbFailure::Other => Self::internal_from(error),
        }
    }
}

/// The one mapping from database errors: a unique-key race is 409, a lock timeout
/// 503, anything else 500 (logged, never shown). Call sites that know what was
/// taken use [`Error::from_db`] for a better message.
impl From<sea_orm::DbErr> for Error {
    fn from(error: sea_orm::DbErr) -> Self {
        Self::from_db(error, || {
            "a concurrent change wrote the same thing first; reload and try again".to_owned()
        })
    }
}

/// `[a-z0-9][a-z0-9._-]{0,63}`: agent, tool, channel, connector and key names.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    if crate::vocab::valid_name(name) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} name {name:?} is not valid: use 1 to 64 of a-z, 0-9, '-', '_' and '.'"
        )))
    }
}

/// A label's name ([`crate::vocab::valid_label`]): Langfuse's labels, `_canary` too.
pub fn check_label(label: &str) -> Result<()> {
    if crate::vocab::valid_label(label) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "label name {label:?} is not valid: use 1 to 64 of a-z, 0-9, '-', '_' and '.' (not `.` or `..`)"
        )))
    }
}

/// A page's size: `limit` when it is 1 to [`page::MAX`](crate::db::page::MAX),
/// [`page::DEFAULT`](crate::db::page::DEFAULT) when absent; 400 otherwise.
pub fn check_limit(limit: Option<u64>) -> Result<u64> {
    use crate::db::page::{DEFAULT, MAX};
    match limit.unwrap_or(DEFAULT) {
        n @ 1..=MAX => Ok(n),
        _ => Err(Error::invalid(format!("limit must be 1 to {MAX}"))),
    }
}

/// An id from a client (user, conversation, message, idempotency key): 1 to 128
/// characters without control characters.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.chars().count() > 128 || id.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "{what} must be 1 to 128 characters without control characters"
        )));
    }
    Ok(())
}

/// A text field's size limit, named in the error.
pub fn check_size(what: &str, text: &str, limit: usize) -> Result<()> {
    if text.len() > limit {
        return Err(Error::too_large(
            "payload_too_large",
            format!("{what} is {} bytes; the limit is {limit} bytes", text.len()),
        ));
    }
    Ok(())
}

/// For a field an update may clear: present, even as `null` (`Some(None)`), versus
/// absent (`None`). Use with `#[serde(default, deserialize_with = "...")]`.
pub fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read the catalog")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_internal_error_keeps_its_source_chain_for_the_log() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
        let error = Error::internal_from(Outer(io));
        assert_eq!(error.message, "cannot read the catalog");
        assert_eq!(error.chain(), "cannot read the catalog: permission denied");
        assert_eq!(Error::internal("plain").chain(), "plain");
    }
}
