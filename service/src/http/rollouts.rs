//! A label's rollouts (issue 26, item 1): start, read, change (share, pause,
//! resume), complete, abort. Operators write, as for label moves; admins read.
//! In `gated` mode a protected label's start and completion answer 202 with the
//! change request that waits for a sign-off. Each handler parses the request and
//! calls [`crate::promotion::rollouts`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::promotion::change_requests::ChangeRequestView;
use crate::promotion::rollouts::{self, Outcome, RolloutEnd, RolloutPatch, RolloutStart};
use crate::releases::traffic::{RolloutStatus, RolloutView};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_rollout, get_rollout, patch_rollout))
        .routes(routes!(complete_rollout))
        .routes(routes!(abort_rollout))
}

fn answer(outcome: Outcome, done: StatusCode) -> Response {
    match outcome {
        Outcome::Done(view) => (done, Json(view)).into_response(),
        Outcome::Requested(request) => (StatusCode::ACCEPTED, Json(request)).into_response(),
    }
}

#[utoipa::path(post, path = "/v1/agents/{agent}/labels/{label}/rollout", tag = "admin", summary = "Start a rollout: a candidate revision for a share of users (operator); a protected label of a gated agent waits for a sign-off",
    description = "Each subject (the `user_id`, else the conversation) is put on one side by a stable hash of agent, label, rollout id and subject, so a user keeps one revision for the whole rollout, in every process, and raising the share only adds users. 201: started. 202: the label is protected and the agent `gated`, so a change request waits for a sign-off. 404: unknown agent, label or revision. 409: the label already has a running rollout (or a pending change request). 422 `candidate_is_base`, `invalid_percent`, `invalid_guard`, `label_automatic`.",
    params(("agent" = String, Path), ("label" = String, Path)), request_body = RolloutStart,
    responses((status = 201, body = RolloutView, description = "The rollout, started"),
        (status = 202, body = ChangeRequestView, description = "A change request waiting for a sign-off"),
        E400, E401, E403, E404, E409, E413, E422))]
async fn start_rollout(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(body): ApiJson<RolloutStart>,
) -> ApiResult<Response> {
    let outcome = rollouts::start(
        &state.label_writing(),
        &who,
        &agent,
        &label,
        body,
        key(&idempotency),
    )
    .await?;
    Ok(answer(outcome, StatusCode::CREATED))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/labels/{label}/rollout", tag = "admin", summary = "The label's running rollout and its past ones, with their history (admin)",
    params(("agent" = String, Path), ("label" = String, Path)),
    responses((status = 200, body = RolloutStatus, description = "The running rollout (`current`, null when none) and the ended ones"), E400, E401, E403, E404))]
async fn get_rollout(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
) -> ApiResult<Json<RolloutStatus>> {
    Ok(Json(rollouts::status(&state.db, &agent, &label).await?))
}

#[utoipa::path(patch, path = "/v1/agents/{agent}/labels/{label}/rollout", tag = "admin", summary = "Change the running rollout's share, pause or resume it (operator)",
    description = "A pause serves the base to everyone and keeps the rollout; a resume brings the same users back to the candidate. 404 `rollout_not_found`: none runs.",
    params(("agent" = String, Path), ("label" = String, Path)), request_body = RolloutPatch,
    responses((status = 200, body = RolloutView, description = "The rollout as changed"),
        (status = 202, body = ChangeRequestView, description = "A share above the one signed off, on a protected label of a gated agent: a change request waits for a sign-off"),
        E400, E401, E403, E404, E409, E413, E422))]
async fn patch_rollout(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(body): ApiJson<RolloutPatch>,
) -> ApiResult<Response> {
    let outcome = rollouts::patch(
        &state.label_writing(),
        &who,
        &agent,
        &label,
        body,
        key(&idempotency),
    )
    .await?;
    Ok(answer(outcome, StatusCode::OK))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/labels/{label}/rollout/complete", tag = "admin", summary = "Complete the running rollout: the label moves to the candidate (operator); a protected label of a gated agent waits for a sign-off",
    description = "200: completed; the move is in the label's history as `rollout`. 202: a change request waits for a sign-off. 404 `rollout_not_found`: none runs. 409: a change request for the label is already pending.",
    params(("agent" = String, Path), ("label" = String, Path)), request_body = RolloutEnd,
    responses((status = 200, body = RolloutView, description = "The completed rollout"),
        (status = 202, body = ChangeRequestView, description = "A change request waiting for a sign-off"),
        E400, E401, E403, E404, E409, E413, E422))]
async fn complete_rollout(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(body): ApiJson<RolloutEnd>,
) -> ApiResult<Response> {
    let outcome = rollouts::complete(
        &state.label_writing(),
        &who,
        &agent,
        &label,
        body,
        key(&idempotency),
    )
    .await?;
    Ok(answer(outcome, StatusCode::OK))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/labels/{label}/rollout/abort", tag = "admin", summary = "Abort the running rollout: everyone gets the base again, at once (operator)",
    description = "No sign-off is needed, in any mode. 404 `rollout_not_found`: none runs.",
    params(("agent" = String, Path), ("label" = String, Path)), request_body = RolloutEnd,
    responses((status = 200, body = RolloutView, description = "The aborted rollout"), E400, E401, E403, E404, E409, E413, E422))]
async fn abort_rollout(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, label)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(body): ApiJson<RolloutEnd>,
) -> ApiResult<Json<RolloutView>> {
    let view = rollouts::abort(
        &state.label_writing(),
        &who,
        &agent,
        &label,
        body,
        key(&idempotency),
    )
    .await?;
    Ok(Json(view))
}
