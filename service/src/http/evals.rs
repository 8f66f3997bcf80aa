//! Evaluations: model connections (operators write, admins read), an agent's
//! datasets (operators write, admins read), and runs (admins start, read, cancel
//! and compare their tenant's; operators any). Each handler parses the request
//! and calls [`crate::evals`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::error::Error;
use crate::evals::cases::Case;
use crate::evals::connections::{
    self, ConnectionList, ConnectionPatch, ConnectionView, NewConnection,
};
use crate::evals::datasets::{self, DatasetList, DatasetSummary, DatasetView, Save, Saved};
use crate::evals::runs::{self, NewRun, RunCases, RunComparison, RunList, RunView};
use crate::evals::{gate, promptfoo};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_connections, create_connection))
        .routes(routes!(
            get_connection,
            update_connection,
            delete_connection
        ))
        .routes(routes!(list_datasets))
        .routes(routes!(get_dataset, put_dataset, delete_dataset))
        .routes(routes!(start_run))
        .routes(routes!(list_runs))
        .routes(routes!(get_run))
        .routes(routes!(run_cases))
        .routes(routes!(cancel_run))
        .routes(routes!(compare_runs))
}

#[utoipa::path(get, path = "/v1/model-connections", tag = "evals", summary = "Model connections, never their keys (admin)",
    responses((status = 200, body = ConnectionList, description = "By name"), E401, E403))]
async fn list_connections(
    State(state): State<AppState>,
    AdminKey(_): AdminKey,
) -> ApiResult<Json<ConnectionList>> {
    Ok(Json(connections::list(&state.db).await?))
}

#[utoipa::path(post, path = "/v1/model-connections", tag = "evals", summary = "Register an OpenAI-compatible endpoint (operator)",
    description = "The base URL is checked as a connector's is (private and loopback addresses only where `--connector-allow` names them); the API key is sealed at rest and never shown.",
    request_body = NewConnection,
    responses((status = 201, body = ConnectionView, description = "Registered"), E400, E401, E403, E409, E413, E422))]
async fn create_connection(
    State(state): State<AppState>,
    OperatorKey(_): OperatorKey,
    idempotency: Idempotency,
    ApiJson(new): ApiJson<NewConnection>,
) -> ApiResult<(StatusCode, Json<ConnectionView>)> {
    let sealing = connections::Sealing {
        outbound: &state.outbound,
        keyring: &state.secrets,
    };
    let now = state.clock.now();
    let made = connections::create(&state.db, &sealing, new, now, key(&idempotency)).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

#[utoipa::path(get, path = "/v1/model-connections/{connection}", tag = "evals", summary = "One model connection (admin)",
    params(("connection" = String, Path)),
    responses((status = 200, body = ConnectionView, description = "The connection"), E400, E401, E403, E404))]
async fn get_connection(
    State(state): State<AppState>,
    AdminKey(_): AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<ConnectionView>> {
    Ok(Json(connections::get(&state.db, &name).await?))
}

#[utoipa::path(patch, path = "/v1/model-connections/{connection}", tag = "evals", summary = "Change a model connection (operator); `api_key: \"\"` removes the key",
    params(("connection" = String, Path)), request_body = ConnectionPatch,
    responses((status = 200, body = ConnectionView, description = "As saved"), E400, E401, E403, E404, E413, E422))]
async fn update_connection(
    State(state): State<AppState>,
    OperatorKey(_): OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(patch): ApiJson<ConnectionPatch>,
) -> ApiResult<Json<ConnectionView>> {
    let sealing = connections::Sealing {
        outbound: &state.outbound,
        keyring: &state.secrets,
    };
    let now = state.clock.now();
    let saved =
        connections::update(&state.db, &sealing, &name, patch, now, key(&idempotency)).await?;
    Ok(Json(saved))
}

#[utoipa::path(delete, path = "/v1/model-connections/{connection}", tag = "evals", summary = "Delete a model connection (softly) and erase its key (operator)",
    params(("connection" = String, Path)),
    responses((status = 200, body = ConnectionView, description = "As deleted"), E400, E401, E403, E404))]
async fn delete_connection(
    State(state): State<AppState>,
    OperatorKey(_): OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
) -> ApiResult<Json<ConnectionView>> {
    let now = state.clock.now();
    Ok(Json(
        connections::delete(&state.db, &name, now, key(&idempotency)).await?,
    ))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/datasets", tag = "evals", summary = "The agent's datasets, the latest version of each (admin)",
    params(("agent" = String, Path)),
    responses((status = 200, body = DatasetList, description = "By name"), E400, E401, E403, E404))]
async fn list_datasets(
    State(state): State<AppState>,
    AdminKey(_): AdminKey,
    ApiPath(agent): ApiPath<String>,
) -> ApiResult<Json<DatasetList>> {
    Ok(Json(datasets::list(&state.db, &agent).await?))
}

/// Which version (default: the latest).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VersionQuery {
    pub version: Option<i32>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/datasets/{dataset}", tag = "evals", summary = "A dataset version with its cases (admin)",
    params(("agent" = String, Path), ("dataset" = String, Path), VersionQuery),
    responses((status = 200, body = DatasetView, description = "The version"), E400, E401, E403, E404))]
async fn get_dataset(
    State(state): State<AppState>,
    AdminKey(_): AdminKey,
    ApiPath((agent, name)): ApiPath<(String, String)>,
    ApiQuery(query): ApiQuery<VersionQuery>,
) -> ApiResult<Json<DatasetView>> {
    Ok(Json(
        datasets::get(&state.db, &agent, &name, query.version).await?,
    ))
}

/// A dataset's cases: loadout's own, or a promptfoo test suite read into them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetPut {
    /// The cases, in loadout's shape.
    #[serde(default)]
    pub cases: Option<Vec<Case>>,
    /// Or a promptfoo configuration (`promptfooconfig.yaml`, YAML or JSON) or test
    /// list, as its text.
    #[serde(default)]
    pub promptfoo: Option<String>,
    /// The channel promptfoo tests render for unless a test's `metadata.channel`
    /// names one (default `web`).
    #[serde(default)]
    pub channel: Option<String>,
}

#[utoipa::path(put, path = "/v1/agents/{agent}/datasets/{dataset}", tag = "evals", summary = "Save a dataset's next version (operator); the same cases again make none",
    description = "Body: `{cases}` in loadout's shape, or `{promptfoo, channel?}` with a promptfoo suite's text. 422 `invalid_dataset` names the first problem (an assertion loadout does not run, with the reason).",
    params(("agent" = String, Path), ("dataset" = String, Path)), request_body = DatasetPut,
    responses((status = 200, body = Saved, description = "The version"), E400, E401, E403, E404, E413, E422))]
async fn put_dataset(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((agent, name)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(put): ApiJson<DatasetPut>,
) -> ApiResult<Json<Saved>> {
    let cases = match (put.cases, put.promptfoo) {
        (Some(cases), None) => cases,
        (None, Some(text)) => {
            let channel = put.channel.unwrap_or_else(|| "web".to_owned());
            crate::cpu::run(move || promptfoo::import(&text, &channel)).await??
        }
        _ => {
            return Err(Error::refused(
                "invalid_dataset",
                "give either `cases` or `promptfoo`",
            ));
        }
    };
    let save = Save {
        agent: &agent,
        name: &name,
        cases,
        by: &who.member,
    };
    let now = state.clock.now();
    Ok(Json(
        datasets::put(&state.db, save, now, key(&idempotency)).await?,
    ))
}

#[utoipa::path(delete, path = "/v1/agents/{agent}/datasets/{dataset}", tag = "evals", summary = "Delete a dataset, every version (softly; operator)",
    params(("agent" = String, Path), ("dataset" = String, Path)),
    responses((status = 200, body = DatasetSummary, description = "Its latest version, as deleted"), E400, E401, E403, E404))]
async fn delete_dataset(
    State(state): State<AppState>,
    OperatorKey(_): OperatorKey,
    ApiPath((agent, name)): ApiPath<(String, String)>,
    idempotency: Idempotency,
) -> ApiResult<Json<DatasetSummary>> {
    let now = state.clock.now();
    Ok(Json(
        datasets::delete(&state.db, &agent, &name, now, key(&idempotency)).await?,
    ))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/eval-runs", tag = "evals", summary = "Evaluate a revision on a dataset against a model (admin); queued, 202",
    description = "The run belongs to the key's tenant: its cases render with that tenant's users' instructions, and it counts against the tenant's bounds (`--eval-runs-per-tenant`, `--eval-max-queued`, `--eval-token-budget`, `--eval-max-minutes`).",
    params(("agent" = String, Path)), request_body = NewRun,
    responses((status = 202, body = RunView, description = "Queued"), E400, E401, E403, E404, E413, E422))]
async fn start_run(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(agent): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(new): ApiJson<NewRun>,
) -> ApiResult<(StatusCode, Json<RunView>)> {
    let planned = runs::plan(&state.db, &agent, &new).await?;
    let now = state.clock.now();
    let run = runs::start(
        &state.db,
        &state.settings.evals,
        &who,
        planned,
        new.token_budget,
        now,
        key(&idempotency),
    )
    .await?;
    Ok((StatusCode::ACCEPTED, Json(run)))
}

/// Which runs: of one agent, and how many (1 to 200, default 50).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RunQuery {
    pub agent: Option<String>,
    pub limit: Option<u64>,
}

#[utoipa::path(get, path = "/v1/eval-runs", tag = "evals", summary = "Evaluation runs, newest first (admin: its tenant's; operator: all)",
    params(RunQuery),
    responses((status = 200, body = RunList, description = "Newest first"), E400, E401, E403, E404))]
async fn list_runs(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> ApiResult<Json<RunList>> {
    let limit = query.limit.unwrap_or(50);
    Ok(Json(
        runs::list(&state.db, &who, query.agent.as_deref(), limit).await?,
    ))
}

#[utoipa::path(get, path = "/v1/eval-runs/{id}", tag = "evals", summary = "A run's state and progress (admin of its tenant, or operator)",
    params(("id" = i32, Path)),
    responses((status = 200, body = RunView, description = "The run"), E400, E401, E403, E404))]
async fn get_run(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<RunView>> {
    Ok(Json(runs::get(&state.db, &who, id).await?))
}

#[utoipa::path(get, path = "/v1/eval-runs/{id}/cases", tag = "evals", summary = "A run's cases so far: output, tool calls, verdicts, latency, tokens",
    params(("id" = i32, Path)),
    responses((status = 200, body = RunCases, description = "The run and its cases"), E400, E401, E403, E404))]
async fn run_cases(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<RunCases>> {
    Ok(Json(runs::cases(&state.db, &who, id).await?))
}

#[utoipa::path(post, path = "/v1/eval-runs/{id}/cancel", tag = "evals", summary = "Cancel a run: a queued one at once, a running one before its next case",
    params(("id" = i32, Path)),
    responses((status = 200, body = RunView, description = "The run"), E400, E401, E403, E404, E409))]
async fn cancel_run(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
) -> ApiResult<Json<RunView>> {
    let now = state.clock.now();
    Ok(Json(
        runs::cancel(&state.db, &who, id, now, key(&idempotency)).await?,
    ))
}

/// The base run, and the test's level (default 0.05).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    pub base: i32,
    pub alpha: Option<f64>,
}

#[utoipa::path(get, path = "/v1/eval-runs/{id}/compare", tag = "evals", summary = "A candidate's run against its base's on the same dataset version",
    description = "Pass rates, per-assertion counts, the cases that turned, and McNemar's exact test of whether the candidate is worse (`p_worse`, `worse` at `alpha`).",
    params(("id" = i32, Path), CompareQuery),
    responses((status = 200, body = RunComparison, description = "The comparison"), E400, E401, E403, E404, E422))]
async fn compare_runs(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
    ApiQuery(query): ApiQuery<CompareQuery>,
) -> ApiResult<Json<RunComparison>> {
    let alpha = query.alpha.unwrap_or(gate::ALPHA);
    if !(alpha > 0.0 && alpha < 0.5) {
        return Err(Error::refused(
            "invalid_alpha",
            "alpha must be above 0 and below 0.5",
        ));
    }
    Ok(Json(
        runs::compare_runs(&state.db, &who, id, query.base, alpha).await?,
    ))
}
