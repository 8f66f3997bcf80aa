//! Moving labels and signing off their change requests (issue 25, items 3 and 4).
//! Label writes are configuration writes (operators); change requests are read by
//! admins, operators and the default tenant's approvers, and decided by signers:
//! an operator or an approver of the default tenant who is not the author (see [`crate::promotion::change_requests`]).
//! Each handler parses the request and calls [`crate::agents`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{ApiJson, ApiPath, ApiQuery, ApproverKey, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::promotion::change_requests::{
    self, ChangeRequestList, ChangeRequestView, ChangeState, Decision, Filter,
};
use crate::promotion::labels::{self, LabelMoved, LabelPut, Outcome, Rollback};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(put_label))
        .routes(routes!(rollback_label))
        .routes(routes!(list_change_requests))
        .routes(routes!(get_change_request))
        .routes(routes!(approve_change_request))
        .routes(routes!(decline_change_request))
        .routes(routes!(recheck_change_request))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/labels/{label}", tag = "admin", summary = "Create or move a label (operator); a protected label of a gated agent waits for a sign-off",
    description = "200: the label moved at once (`move`; `rollback` when it names the revision the label held just before). 202: the label is protected and the agent `gated`, so a pending change request was made; another operator or an approver of the default tenant approves it. 409 `conflict`: a request for the label is already pending. 422 `label_automatic`: `latest` moves by itself.",
    params(("agent" = String, Path), ("label" = String, Path)), request_body = LabelPut,
    responses((status = 200, body = LabelMoved, description = "The label as moved"),
        (status = 202, body = ChangeRequestView, description = "A change request waiting for a sign-off"),
        E400, E401, E403, E404, E409, E413, E422))]
async fn put_label(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(put): ApiJson<LabelPut>,
) -> ApiResult<Response> {
    Ok(
        match labels::put(
            &state.label_writing(),
            &who,
            &agent,
            &label,
            put,
            key(&idempotency),
        )
        .await?
        {
            Outcome::Moved(moved) => Json(moved).into_response(),
            Outcome::Requested(request) => (StatusCode::ACCEPTED, Json(request)).into_response(),
        },
    )
}

#[utoipa::path(post, path = "/v1/agents/{agent}/labels/{label}/rollback", tag = "admin", summary = "Move a label back to the revision it held just before, at once (operator)",
    description = "No sign-off is needed, in any mode; the move is recorded as `rollback`, and a pending change request of the label is superseded. 409 `nothing_to_roll_back`: the label never moved.",
    params(("agent" = String, Path), ("label" = String, Path)), request_body = Rollback,
    responses((status = 200, body = LabelMoved, description = "The label as rolled back"), E400, E401, E403, E404, E409, E413, E422))]
async fn rollback_label(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(body): ApiJson<Rollback>,
) -> ApiResult<Json<LabelMoved>> {
    let moved = labels::rollback(
        &state.label_writing(),
        &who,
        &agent,
        &label,
        body,
        key(&idempotency),
    )
    .await?;
    Ok(Json(moved))
}

/// Which change requests to list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ChangeRequestQuery {
    /// Only requests in this state (`pending` excludes those past their expiry).
    state: Option<ChangeState>,
    /// Only this agent's requests.
    agent: Option<String>,
}

#[utoipa::path(get, path = "/v1/change-requests", tag = "proposals", summary = "Change requests to move protected labels, newest first (admin, operator or default-tenant approver)",
    params(ChangeRequestQuery),
    responses((status = 200, body = ChangeRequestList, description = "The newest 200 matching requests"), E400, E401, E403, E404))]
async fn list_change_requests(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiQuery(q): ApiQuery<ChangeRequestQuery>,
) -> ApiResult<Json<ChangeRequestList>> {
    let filter = Filter {
        state: q.state,
        agent: q.agent,
    };
    let now = state.clock.now();
    Ok(Json(
        change_requests::list(&state.db, &who, filter, now).await?,
    ))
}

#[utoipa::path(get, path = "/v1/change-requests/{id}", tag = "proposals", summary = "One change request and its events (admin, operator or default-tenant approver)",
    params(("id" = i32, Path)),
    responses((status = 200, body = ChangeRequestView, description = "The change request"), E400, E401, E403, E404))]
async fn get_change_request(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<ChangeRequestView>> {
    let now = state.clock.now();
    Ok(Json(change_requests::get(&state.db, &who, id, now).await?))
}

#[utoipa::path(post, path = "/v1/change-requests/{id}/approve", tag = "proposals", summary = "Sign off a change request: the label moves (operator or default-tenant approver, not its author)",
    description = "403 `self_approval`: the caller's key made the request. 409 `conflict`: it is no longer pending, or the label moved since it was made (it is now `superseded`); 409 `expired`: nobody decided it in time.",
    params(("id" = i32, Path)), request_body = Decision,
    responses((status = 200, body = ChangeRequestView, description = "The approved request"), E400, E401, E403, E404, E409, E413, E422))]
async fn approve_change_request(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
    ApiJson(decision): ApiJson<Decision>,
) -> ApiResult<Json<ChangeRequestView>> {
    let approved =
        change_requests::approve(&state.writer(key(&idempotency)), &who, id, decision).await?;
    Ok(Json(approved))
}

#[utoipa::path(post, path = "/v1/change-requests/{id}/decline", tag = "proposals", summary = "Decline a change request: the label stays (operator or default-tenant approver; its author may withdraw it)",
    description = "409 `conflict`: it is no longer pending; 409 `expired`: nobody decided it in time.",
    params(("id" = i32, Path)), request_body = Decision,
    responses((status = 200, body = ChangeRequestView, description = "The declined request"), E400, E401, E403, E404, E409, E413, E422))]
async fn decline_change_request(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
    ApiJson(decision): ApiJson<Decision>,
) -> ApiResult<Json<ChangeRequestView>> {
    let declined =
        change_requests::decline(&state.writer(key(&idempotency)), &who, id, decision).await?;
    Ok(Json(declined))
}

#[utoipa::path(post, path = "/v1/change-requests/{id}/checks", tag = "proposals", summary = "Run a pending change request's release checks again, for the tenant that requested it (admin, operator or default-tenant approver)",
    description = "After a fix (a render snapshot accepted, ...). 409 `conflict`: it is no longer pending.",
    params(("id" = i32, Path)),
    responses((status = 200, body = ChangeRequestView, description = "The request with its checks as run now"), E400, E401, E403, E404, E409))]
async fn recheck_change_request(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<ChangeRequestView>> {
    let now = state.clock.now();
    Ok(Json(
        change_requests::recheck(&state.db, &who, id, &state.settings.evals, now).await?,
    ))
}
