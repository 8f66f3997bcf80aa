//! The one error shape: `{"error": {"code", "message", "details"}}`, and its
//! OpenAPI description, one response type per status ([`E400`] ... [`E424`]) so that
//! every operation lists exactly the errors it can answer.

use std::collections::BTreeMap;

use axum::response::{IntoResponse, Response};
use utoipa::openapi::{RefOr, ResponseBuilder, content::ContentBuilder};

use crate::error::Kind;
use crate::web::status;

pub use crate::web::request::{ErrorBody, ErrorDetail};

pub use crate::error::Error as ApiError;

pub type ApiResult<T> = Result<T, ApiError>;

pub use crate::web::request::{INTERNAL_MESSAGE, public};

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let public = public(self);
        let retry_after = crate::web::retry_after(&public);
        let body = ErrorBody {
            error: ErrorDetail {
                code: public.code.to_owned(),
                message: public.message,
                details: *public.details,
            },
        };
        let mut response = (status(public.kind), axum::Json(body)).into_response();
        if public.code == crate::db::outage::CODE {
            // The edge opens the breaker on this (`http::trace::edge`).
            response.extensions_mut().insert(DatabaseDown);
        }
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds);
        }
        if public.kind == Kind::Unauthenticated {
            // RFC 6750: a 401 names its scheme.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static(r#"Bearer realm="loadout""#),
            );
        }
        response
    }
}

/// Marks a response whose request the database did not answer.
#[derive(Clone, Copy, Debug)]
pub struct DatabaseDown;

/// What every 503 says in `Retry-After`: the breaker's probe runs every few hundred
/// milliseconds, so a second is enough to see a database that is back.
pub const RETRY_AFTER_SECONDS: &str = "1";

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
