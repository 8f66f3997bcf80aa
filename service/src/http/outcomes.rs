//! Outcomes (issue 26): agents report how a conversation went; admins and
//! operators read the per-revision report. Each handler parses the request and
//! calls [`crate::releases::outcomes`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E413};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery, OnlyAgentKey, reach};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::auth::Role;
use crate::releases::outcomes::{self, NewOutcome, OutcomeReport, OutcomeView};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(report_outcome, read_outcomes))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/outcomes", tag = "outcomes",
    summary = "Report how a conversation served by a revision went; the latest report per conversation counts (agent keys only)",
    params(("agent" = String, Path)), request_body = NewOutcome,
    responses((status = 201, body = OutcomeView, description = "Stored (a repeated report for the conversation replaces the earlier one)"), E400, E401, E403, E404, E413))]
async fn report_outcome(
    State(state): State<AppState>,
    // Outcomes judge shared rollouts: only an agent (a service of a tenant)
    // reports them, never an admin or operator typing numbers in.
    OnlyAgentKey(who): OnlyAgentKey,
    ApiPath(agent): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(report): ApiJson<NewOutcome>,
) -> ApiResult<(StatusCode, Json<OutcomeView>)> {
    reach(&who, &agent)?;
    let view = outcomes::submit(
        &state.writer(key(&idempotency)),
        who.tenant(),
        &agent,
        report,
        state.settings.tenants.max_outcomes_per_subject,
    )
    .await?;
    state
        .metrics
        .outcome(&view.agent, view.revision, view.outcome.as_str());
    Ok((StatusCode::CREATED, Json(view)))
}

/// Which revision to report.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct Only {
    /// Only this revision (reported even with nothing counted).
    revision: Option<i32>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/outcomes", tag = "outcomes",
    summary = "Outcomes and loadout's own signals per revision: an admin's tenant, or every tenant for an operator (admin)",
    params(("agent" = String, Path), Only),
    responses((status = 200, body = OutcomeReport, description = "Per revision, newest first"), E400, E401, E403, E404))]
async fn read_outcomes(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(agent): ApiPath<String>,
    ApiQuery(only): ApiQuery<Only>,
) -> ApiResult<Json<OutcomeReport>> {
    let tenant = (who.role != Role::Operator).then(|| who.tenant());
    Ok(Json(
        outcomes::report(&state.db, &agent, tenant, only.revision).await?,
    ))
}
