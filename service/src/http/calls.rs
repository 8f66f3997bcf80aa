//! Tool calls and their proposals. Agents call tools; approvers read, approve,
//! decline and retry their tenant's proposals, and set users' preferences. Each
//! handler parses the request and calls [`crate::actions`].

use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422, E424};
use super::extract::{AgentKey, ApiJson, ApiPath, ApiQuery, ApproverKey};
use super::idempotent::{Idempotency, key};
use crate::actions::call::{self, ToolCall};
use crate::actions::decide;
use crate::actions::preferences::{self, Preference};
use crate::actions::views::{
    CallResult, ConversationProposals, PreferenceView, ProposalDetail, ProposalView,
};
use crate::app::AppState;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(tool_call))
        .routes(routes!(get_proposal))
        .routes(routes!(conversation_proposals))
        .routes(routes!(approve))
        .routes(routes!(decline))
        .routes(routes!(retry))
        .routes(routes!(set_preference))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/tool-calls", tag = "proposals",
    summary = "An agent calls a tool: auto tiers run now, others become proposals (agent key)",
    params(("agent" = String, Path)), request_body = ToolCall,
    responses((status = 200, body = CallResult, description = "Proposed for approval, or the result"), E400, E401, E403, E404, E409, E413, E422, E424))]
async fn tool_call(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    ApiPath(agent): ApiPath<String>,
    ApiJson(request): ApiJson<ToolCall>,
) -> ApiResult<Json<CallResult>> {
    super::extract::reach(&who, &agent)?;
    Ok(Json(
        call::call(
            &state.runner(),
            &state.prompts(),
            &state.validators,
            &state.settings.proposals,
            &who,
            &agent,
            request,
        )
        .await?,
    ))
}

#[utoipa::path(get, path = "/v1/proposals/{id}", tag = "proposals", summary = "A proposal and its events (approver or admin)",
    params(("id" = i32, Path)),
    responses((status = 200, body = ProposalDetail, description = "The proposal and its events"), E400, E401, E403, E404))]
async fn get_proposal(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<ProposalDetail>> {
    Ok(Json(decide::get(&state.db, &who, id).await?))
}

/// Which page of a conversation's proposals.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ProposalsPage {
    /// How many proposals, 1 to 200; 50 when absent.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
    /// Only proposals after this id: the previous page's `next`.
    after: Option<i32>,
}

#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/proposals", tag = "proposals",
    summary = "A page of a conversation's proposals, oldest first (approver or admin)",
    description = "Ordered by id. `next` is the `after` of the next page, `null` on the last one.",
    params(("conversation_id" = String, Path), ProposalsPage),
    responses((status = 200, body = ConversationProposals, description = "The proposals"), E400, E401, E403))]
async fn conversation_proposals(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(conversation): ApiPath<String>,
    ApiQuery(page): ApiQuery<ProposalsPage>,
) -> ApiResult<Json<ConversationProposals>> {
    let page = decide::Page {
        limit: page.limit,
        after: page.after,
    };
    Ok(Json(
        decide::conversation(&state.db, &who, &conversation, page).await?,
    ))
}

#[utoipa::path(post, path = "/v1/proposals/{id}/approve", tag = "proposals", summary = "Approve and execute, exactly once (approver or admin)",
    description = "409 `tool_unavailable`: the tool was switched off, unlinked or deleted, or the agent deleted, since the call was proposed; the proposal has ended `failed` (not retryable, the reason in `result.error` and in `details.reason`) and nothing ran.",
    params(("id" = i32, Path)),
    responses((status = 200, body = ProposalView, description = "The proposal after its execution"), E400, E401, E403, E404, E409, E424))]
async fn approve(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    key: Idempotency,
) -> ApiResult<Json<ProposalView>> {
    let key = key.map(|Extension(pending)| pending);
    Ok(Json(decide::approve(&state.runner(), &who, id, key).await?))
}

#[utoipa::path(post, path = "/v1/proposals/{id}/decline", tag = "proposals", summary = "Decline a proposal (approver or admin)",
    params(("id" = i32, Path)),
    responses((status = 200, body = ProposalView, description = "The declined proposal"), E400, E401, E403, E404, E409))]
async fn decline(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    key: Idempotency,
) -> ApiResult<Json<ProposalView>> {
    let key = key.map(|Extension(pending)| pending);
    Ok(Json(
        decide::decline(&state.db, &who, id, state.clock.now(), key).await?,
    ))
}

#[utoipa::path(post, path = "/v1/proposals/{id}/retry", tag = "proposals", summary = "Run a failed proposal again, while attempts remain (approver or admin)",
    description = "409 `tool_unavailable`: the tool or its agent is no longer available (as for approve); the proposal stays `failed`, now not retryable, and nothing ran.",
    params(("id" = i32, Path)),
    responses((status = 200, body = ProposalView, description = "The proposal after its execution"), E400, E401, E403, E404, E409, E424))]
async fn retry(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath(id): ApiPath<i32>,
    key: Idempotency,
) -> ApiResult<Json<ProposalView>> {
    let key = key.map(|Extension(pending)| pending);
    Ok(Json(decide::retry(&state.runner(), &who, id, key).await?))
}

#[utoipa::path(put, path = "/v1/users/{user_id}/tools/{tool}/preference", tag = "proposals",
    summary = "Whether a user_configurable tool runs for this user without asking (approver or admin)",
    params(("user_id" = String, Path), ("tool" = String, Path)), request_body = Preference,
    responses((status = 200, body = PreferenceView, description = "The preference as saved"), E400, E401, E403, E404, E413, E422))]
async fn set_preference(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    ApiPath((user, tool)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(preference): ApiJson<Preference>,
) -> ApiResult<Json<PreferenceView>> {
    Ok(Json(
        preferences::set(
            &state.writer(key(&idempotency)),
            &who,
            &user,
            &tool,
            preference,
        )
        .await?,
    ))
}
