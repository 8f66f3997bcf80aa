//! Configuration as code over HTTP (issue 27): the configuration as one JSON
//! document (`GET /v1/config`), and the plan and the apply of one
//! (`POST /v1/config/plan`, `/apply`), so a pipeline needs no binary. Reading and
//! planning take an admin or operator key; applying writes the configuration
//! every tenant runs, so it takes an operator key, as every configuration write.

use axum::Json;
use axum::extract::{DefaultBodyLimit, State};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::auth::failures::too_many_asks;
use crate::bundle::apply::{self, Applied, Base};
use crate::bundle::plan::{self, Plan, PlanFile};
use crate::bundle::{Bundle, read};

/// The largest configuration document taken: 16 MiB (an instance of 100 agents
/// and 1,000 tools is about 2 MiB; every other route takes 1 MiB).
pub const MAX_CONFIG_BYTES: usize = 16 * 1024 * 1024;

/// The routes whose bodies may be [`MAX_CONFIG_BYTES`].
pub const LARGE_BODY_ROUTES: [&str; 2] = ["/v1/config/plan", "/v1/config/apply"];

pub fn routes() -> OpenApiRouter<AppState> {
    let large = OpenApiRouter::new()
        .routes(routes!(plan_config))
        .routes(routes!(apply_config))
        .layer(DefaultBodyLimit::max(MAX_CONFIG_BYTES));
    OpenApiRouter::new()
        .routes(routes!(get_config))
        .merge(large)
}

/// The body of `POST /v1/config/plan` and `/apply`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigRequest {
    /// The configuration wanted (what `GET /v1/config` answers, edited).
    pub configuration: Bundle,
    /// Remove (soft-delete) objects the configuration leaves out.
    #[serde(default)]
    pub prune: bool,
    /// Apply only: the plan `/v1/config/plan` answered; the apply is refused (409)
    /// if the instance or the configuration changed since. Without it, the
    /// configuration's `state` (an export's) is the base, if it has one.
    pub plan: Option<PlanBase>,
}

/// The part of a plan an apply checks (its other fields are ignored).
#[derive(Debug, Deserialize, ToSchema)]
pub struct PlanBase {
    pub version: u32,
    pub against: String,
    pub objects: std::collections::BTreeMap<String, String>,
    pub target: String,
    pub prune: bool,
}

#[utoipa::path(get, path = "/v1/config", tag = "config", summary = "The instance's configuration as one document, header values never included (admin)",
    responses((status = 200, body = Bundle, description = "The configuration and the state it is"), E401, E403))]
async fn get_config(State(state): State<AppState>, _key: AdminKey) -> ApiResult<Json<Bundle>> {
    Ok(Json(read::export(&state.db).await?))
}

#[utoipa::path(post, path = "/v1/config/plan", tag = "config", summary = "What applying a configuration would change, object by object (admin)",
    request_body = ConfigRequest,
    responses((status = 200, body = Plan, description = "The plan"), E400, E401, E403, E413, E422))]
async fn plan_config(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiJson(body): ApiJson<ConfigRequest>,
) -> ApiResult<Json<Plan>> {
    state
        .plans
        .take(who.key_id)
        .map_err(|wait| too_many_asks("too_many_plans", "configuration plans", wait))?;
    let current = read::current(&state.db).await?;
    // No keyring: a plan never compares a given header value with the stored one.
    let plan =
        crate::cpu::run(move || plan::compute(&current, &body.configuration, body.prune, None))
            .await?;
    Ok(Json(plan))
}

#[utoipa::path(post, path = "/v1/config/apply", tag = "config", summary = "Apply a configuration in one guarded transaction (operator)",
    request_body = ConfigRequest,
    responses((status = 200, body = Applied, description = "What was applied"), E400, E401, E403, E409, E413, E422))]
async fn apply_config(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    idempotency: Idempotency,
    ApiJson(mut body): ApiJson<ConfigRequest>,
) -> ApiResult<Json<Applied>> {
    let base = match (body.plan, body.configuration.state.take()) {
        (Some(p), _) => Base::Plan(PlanFile {
            version: p.version,
            against: p.against,
            objects: p.objects,
            target: p.target,
            prune: p.prune,
        }),
        (None, Some(exported)) => Base::Export(exported),
        (None, None) => Base::Nothing,
    };
    let input = apply::Apply {
        target: body.configuration,
        base,
        prune: body.prune,
        who: &who,
        keyring: &state.secrets,
        outbound: &state.outbound,
        max_template_bytes: state.settings.max_template_bytes,
        request_ttl: state.label_writing().request_ttl,
        evals: &state.settings.evals,
    };
    Ok(Json(
        apply::apply(&state.writer(key(&idempotency)), input).await?,
    ))
}
