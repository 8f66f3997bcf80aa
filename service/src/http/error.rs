//! The one error shape: `{"error": {"code", "message", "details"}}`, and its
//! OpenAPI description, one response type per status ([`E400`] ... [`E424`]) so that
//! every operation lists exactly the errors it can answer.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa::openapi::{RefOr, ResponseBuilder, content::ContentBuilder};

/// An error a handler returns; its status and code are part of the API.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Value,
}

/// Every error body.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong: a stable code to branch on, a sentence for people, and
/// structured details where there are any (JSON paths, problems, known values).
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable and machine-readable, e.g. `not_found`, `invalid_arguments`.
    pub code: String,
    pub message: String,
    /// `null` unless the code documents details.
    pub details: Value,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: Value::Null,
        }
    }

    /// Structured details; anything `Serialize` (a value that cannot be serialised
    /// leaves the details `null`).
    pub fn with_details(mut self, details: impl Serialize) -> Self {
        self.details = serde_json::to_value(details).unwrap_or(Value::Null);
        self
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method; /openapi.json lists the methods it takes",
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "a valid API key is required: Authorization: Bearer lo_...",
        )
    }

    /// 403, naming the roles that may do this.
    pub fn forbidden(needed: &str) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this key's role may not do this: it needs {needed}"),
        )
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request bodies are limited to {limit} bytes"),
        )
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// A failure the caller cannot fix. The cause is logged, never sent.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log",
        )
    }
}

impl From<sea_orm::DbErr> for ApiError {
    fn from(error: sea_orm::DbErr) -> Self {
        Self::internal(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                details: self.details,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// One documented error status, answered with [`ErrorBody`].
fn error_response(
    status: u16,
    description: &str,
) -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
    let content = ContentBuilder::new()
        .schema(Some(utoipa::openapi::Ref::from_schema_name("ErrorBody")))
        .build();
    let response = ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build();
    BTreeMap::from([(status.to_string(), RefOr::T(response))])
}

macro_rules! error_responses {
    ($($name:ident = $status:literal, $description:literal;)*) => {$(
        #[doc = concat!("OpenAPI: ", stringify!($status), " ", $description, ".")]
        pub struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
                error_response($status, $description)
            }
        }
    )*};
}

error_responses! {
    E400 = 400, "Bad input: a malformed body, query or path parameter";
    E401 = 401, "No valid API key";
    E403 = 403, "The key's role may not do this; the message names the role needed";
    E404 = 404, "No such resource, or another tenant's";
    E405 = 405, "The route does not take this method";
    E409 = 409, "Conflict: a stale version, a duplicate, or a state that forbids the change";
    E413 = 413, "The request body is larger than the limit";
    E422 = 422, "Well-formed but refused by a rule (lint, registry check, argument schema)";
    E424 = 424, "The tool has no executor or connector to run it";
    E503 = 503, "Not ready";
}
