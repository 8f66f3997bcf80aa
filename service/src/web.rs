//! What the API (`http`) and the console share, below both: the status each kind
//! of error answers ([`status`]), the `Retry-After` of a 429 ([`retry_after`]),
//! and the client address of the request being served ([`peer`]). The router in
//! `http` mounts the console, so anything both need lives here rather than in
//! either.

pub mod peer;
pub mod request;

use axum::http::{HeaderValue, StatusCode};

use crate::error::{Error, Kind};

pub use peer::{Peer, client, counted, serving};

/// The status each kind of failure answers.
pub fn status(kind: Kind) -> StatusCode {
    match kind {
        Kind::Invalid => StatusCode::BAD_REQUEST,
        Kind::Unauthenticated => StatusCode::UNAUTHORIZED,
        Kind::Forbidden => StatusCode::FORBIDDEN,
        Kind::NotFound => StatusCode::NOT_FOUND,
        Kind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        Kind::Conflict => StatusCode::CONFLICT,
        Kind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Kind::Refused => StatusCode::UNPROCESSABLE_ENTITY,
        Kind::NotRunnable => StatusCode::FAILED_DEPENDENCY,
        Kind::TooManyRequests => StatusCode::TOO_MANY_REQUESTS,
        Kind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Kind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `Retry-After` of a 429 made by [`crate::auth::failures::too_many`].
pub fn retry_after(error: &Error) -> Option<HeaderValue> {
    if error.kind != Kind::TooManyRequests {
        return None;
    }
    let seconds = error.details.get("retry_after_seconds")?.as_u64()?;
    Some(HeaderValue::from(seconds))
}
