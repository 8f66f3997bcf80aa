//! Extractors: who is calling (by role), and the request's JSON body, query and path
//! parameters. Every rejection is the one error shape, never axum's plain text.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::app::AppState;
use crate::auth::{Principal, Role};
pub use crate::web::request::{MAX_BODY_BYTES, authenticate, has_nul_escape, reach};

/// The caller, holding an agent, admin or operator key (approver keys read
/// proposals only).
pub struct AgentKey(pub Principal);

/// The caller, holding an agent key and no other: what only an agent (a service
/// of a tenant) reports, never a person typing numbers in.
pub struct OnlyAgentKey(pub Principal);

/// The caller, holding an approver, admin or operator key.
pub struct ApproverKey(pub Principal);

/// The caller, who manages a tenant: an admin key, or an operator's (which acts in
/// the default tenant). Reads the shared configuration; writes only its tenant's data.
pub struct AdminKey(pub Principal);

/// The caller, who must hold an operator key: writes the configuration every
/// tenant's agents run (agents, tools, links, channels, connectors).
pub struct OperatorKey(pub Principal);

async fn principal(parts: &Parts, state: &AppState) -> Result<Principal, ApiError> {
    authenticate(&parts.headers, state).await
}

/// The principal if its role is one of `roles`; 403 naming them otherwise.
async fn with_role(
    parts: &Parts,
    state: &AppState,
    roles: &[Role],
    needed: &str,
) -> Result<Principal, ApiError> {
    let principal = principal(parts, state).await?;
    if roles.contains(&principal.role) {
        Ok(principal)
    } else {
        Err(ApiError::forbidden(needed))
    }
}

impl FromRequestParts<AppState> for AgentKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let roles = [Role::Agent, Role::Admin, Role::Operator];
        with_role(parts, state, &roles, "an agent, admin or operator key")
            .await
            .map(AgentKey)
    }
}

impl FromRequestParts<AppState> for OnlyAgentKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        with_role(
            parts,
            state,
            &[Role::Agent],
            "an agent key (only agents report this)",
        )
        .await
        .map(OnlyAgentKey)
    }
}

impl FromRequestParts<AppState> for ApproverKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let roles = [Role::Approver, Role::Admin, Role::Operator];
        with_role(parts, state, &roles, "an approver, admin or operator key")
            .await
            .map(ApproverKey)
    }
}

impl FromRequestParts<AppState> for AdminKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let roles = [Role::Admin, Role::Operator];
        with_role(parts, state, &roles, "an admin or operator key")
            .await
            .map(AdminKey)
    }
}

impl FromRequestParts<AppState> for OperatorKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let needed = "an operator key (the configuration is shared by every tenant)";
        with_role(parts, state, &[Role::Operator], needed)
            .await
            .map(OperatorKey)
    }
}

/// A JSON body of `T`; malformed JSON, a wrong shape or an unknown field is 400,
/// a body over [`MAX_BODY_BYTES`] is 413.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|e: BytesRejection| {
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::too_large(
                        "payload_too_large",
                        format!("request bodies are limited to {MAX_BODY_BYTES} bytes"),
                    )
                } else {
                    ApiError::invalid(e.body_text())
                }
            })?;
        if has_nul_escape(&bytes) {
            return Err(ApiError::invalid(
                "a JSON string holds \\u0000 (NUL), which no text column can store",
            ));
        }
        serde_json::from_slice(&bytes)
            .map(ApiJson)
            .map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))
    }
}

/// Query parameters of `T`; a missing, malformed or unknown parameter is 400.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| ApiQuery(q))
            .map_err(|e: QueryRejection| {
                ApiError::invalid(format!("bad query string: {}", e.body_text()))
            })
    }
}

/// Path parameters of `T`; one that is not valid UTF-8 or does not parse is 400.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| ApiPath(p))
            .map_err(|e: PathRejection| {
                ApiError::invalid(format!("bad path parameter: {}", e.body_text()))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::has_nul_escape;

    #[test]
    fn an_escaped_nul_is_found() {
        assert!(has_nul_escape(br#"{"soul": "a\u0000b"}"#));
    }

    #[test]
    fn an_escaped_backslash_before_u0000_is_text_not_nul() {
        assert!(!has_nul_escape(br#"{"soul": "a\\u0000b"}"#));
    }

    #[test]
    fn a_trailing_backslash_does_not_read_past_the_end() {
        assert!(!has_nul_escape(b"\\"));
        assert!(!has_nul_escape(b"\\\\"));
    }
}
