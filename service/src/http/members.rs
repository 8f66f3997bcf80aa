//! Routes for members and sign-off power (issue 34): list members, ask that a
//! member may sign off, and approve or decline such a grant. Each handler parses
//! the request and calls [`crate::auth::members`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery, ApproverKey, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::auth::Role;
use crate::auth::members::{self, MemberList};
use crate::auth::signers::{self, GrantList, GrantRequest, GrantView};
use crate::db::page;
use crate::error::Error;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_members))
        .routes(routes!(request_grant))
        .routes(routes!(list_grants))
        .routes(routes!(approve_grant))
        .routes(routes!(decline_grant))
}

/// A page of members: `limit` (1 to 1,000; 100 unless given) oldest first, after
/// `after` (the previous page's `next_after`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct MemberPage {
    limit: Option<u64>,
    after: Option<i32>,
}

#[utoipa::path(get, path = "/v1/members", tag = "keys", summary = "Members (people and services) with their live keys, a page at a time: an admin's tenant, or every tenant for an operator (admin)",
    params(MemberPage),
    responses((status = 200, body = MemberList, description = "A page of members, oldest first"), E400, E401, E403))]
async fn list_members(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiQuery(q): ApiQuery<MemberPage>,
) -> ApiResult<Json<MemberList>> {
    let tenant = (who.role != Role::Operator).then(|| who.tenant());
    let page = page::ByNumber {
        limit: q.limit,
        cursor: q.after,
    };
    Ok(Json(members::list(&state.db, tenant, page).await?))
}

#[utoipa::path(post, path = "/v1/members/{member}/signer-grants", tag = "keys", summary = "Ask that a person may sign off change requests; another signer decides (operator)",
    params(("member" = String, Path, description = "The member's name")), request_body = GrantRequest,
    responses((status = 202, body = GrantView, description = "The grant, waiting for another signer"), E400, E401, E403, E404, E409, E413, E422))]
async fn request_grant(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(member): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(body): ApiJson<GrantRequest>,
) -> ApiResult<(StatusCode, Json<GrantView>)> {
    let now = state.clock.now();
    let grant =
        signers::request_grant(&state.db, &who, &member, body, now, key(&idempotency)).await?;
    Ok((StatusCode::ACCEPTED, Json(grant)))
}

/// Whose grants, and which page: `limit` (1 to 1,000; 100 unless given) newest
/// first, older than `before` (the previous page's `next_before`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct OfMember {
    /// Only this member's (of the default tenant, or of `tenant`).
    member: Option<String>,
    tenant: Option<String>,
    limit: Option<u64>,
    before: Option<i32>,
}

#[utoipa::path(get, path = "/v1/signer-grants", tag = "keys", summary = "Grants and revocations of sign-off power, newest first, a page at a time: who asked, who decided (operator)",
    params(OfMember),
    responses((status = 200, body = GrantList, description = "A page of grants, newest first"), E400, E401, E403, E404))]
async fn list_grants(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiQuery(query): ApiQuery<OfMember>,
) -> ApiResult<Json<GrantList>> {
    let member = match &query.member {
        Some(name) => {
            let tenant = query
                .tenant
                .as_deref()
                .unwrap_or(crate::auth::keys::DEFAULT_TENANT);
            let found = members::named(&state.db, tenant, name).await?;
            Some(
                found
                    .ok_or_else(|| Error::not_found(format!("no member named {name:?}")))?
                    .id,
            )
        }
        None => None,
    };
    let page = page::ByNumber {
        limit: query.limit,
        cursor: query.before,
    };
    let grants = signers::grants(&state.db, member, page, state.clock.now()).await?;
    Ok(Json(grants))
}

#[utoipa::path(post, path = "/v1/signer-grants/{id}/approve", tag = "keys", summary = "Approve a grant of sign-off power (a signer who is neither its requester nor the member)",
    description = "403 `self_approval`: the caller's member asked for it or is the one it grants.",
    params(("id" = i32, Path)),
    responses((status = 200, body = GrantView, description = "The approved grant"), E400, E401, E403, E404, E409))]
async fn approve_grant(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
) -> ApiResult<Json<GrantView>> {
    let grant = signers::decide_grant(&state.writer(key(&idempotency)), &who, id, true).await?;
    Ok(Json(grant))
}

#[utoipa::path(post, path = "/v1/signer-grants/{id}/decline", tag = "keys", summary = "Decline a grant of sign-off power (a signer, or its requester withdrawing it)",
    params(("id" = i32, Path)),
    responses((status = 200, body = GrantView, description = "The declined grant"), E400, E401, E403, E404, E409))]
async fn decline_grant(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
) -> ApiResult<Json<GrantView>> {
    let grant = signers::decide_grant(&state.writer(key(&idempotency)), &who, id, false).await?;
    Ok(Json(grant))
}
