//! Admin routes for agent configurations: identity, soul and sections, the
//! versioned template, previews and users' instructions. Each handler parses the
//! request and calls [`crate::agents`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery, OperatorKey};
use super::idempotent::{Idempotency, key};
use crate::agents::definition::{self, AgentList, AgentUpdate, AgentView, CreatedAgent, NewAgent};
use crate::agents::instructions::{self, InstructionsPut, InstructionsView};
use crate::agents::model::{self, ModelView};
use crate::agents::policy::{self, PolicyCheck, PolicyPut, PolicyTry, PolicyView};
use crate::agents::preview::{self, Preview, PreviewRequest};
use crate::agents::template::{
    self, SavedTemplate, TemplatePut, TemplateView, VersionList, VersionView,
};
use crate::app::AppState;
use crate::db::page;
use crate::releases::model::ModelSettings;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_agents, create_agent))
        .routes(routes!(get_agent, update_agent, delete_agent))
        .routes(routes!(get_template, put_template, delete_template))
        .routes(routes!(list_versions))
        .routes(routes!(get_version))
        .routes(routes!(restore_version))
        .routes(routes!(preview))
        .routes(routes!(get_instructions, put_instructions))
        .routes(routes!(get_policy, put_policy))
        .routes(routes!(validate_policy))
        .routes(routes!(get_model, put_model))
}

/// A page of agents by name: `limit` (1 to 1,000; 100 unless given) after `after`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AgentPage {
    /// Agents in the page: 1 to 1,000, 100 unless given.
    limit: Option<u64>,
    /// The previous page's `next_after`: the page starts after this name.
    after: Option<String>,
}

#[utoipa::path(get, path = "/v1/agents", tag = "admin", summary = "List agents by name, a page at a time (admin)",
    params(AgentPage),
    responses((status = 200, body = AgentList, description = "A page of live agents by name"), E400, E401, E403))]
async fn list_agents(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiQuery(q): ApiQuery<AgentPage>,
) -> ApiResult<Json<AgentList>> {
    let page = page::ByName {
        limit: q.limit,
        after: q.after,
    };
    Ok(Json(definition::list(&state.db, &page).await?))
}

#[utoipa::path(get, path = "/v1/agents/{agent}", tag = "admin", summary = "One agent with soul, template and versions (admin)",
    params(("agent" = String, Path)),
    responses((status = 200, body = AgentView, description = "The agent"), E400, E401, E403, E404))]
async fn get_agent(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<AgentView>> {
    Ok(Json(definition::get(&state.db, &name).await?))
}

#[utoipa::path(post, path = "/v1/agents", tag = "admin", summary = "Create an agent (operator)",
    request_body = NewAgent,
    responses((status = 201, body = CreatedAgent, description = "Created, with the template's lint warnings"), E400, E401, E403, E409, E413, E422))]
async fn create_agent(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    idempotency: Idempotency,
    ApiJson(new): ApiJson<NewAgent>,
) -> ApiResult<(StatusCode, Json<CreatedAgent>)> {
    let created = definition::create(
        &state.prompts(),
        state.settings.max_template_bytes,
        &who.member,
        new,
        key(&idempotency),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Soft delete: `deleted_at` is set and the agent disappears from every endpoint.
#[utoipa::path(delete, path = "/v1/agents/{agent}", tag = "admin", summary = "Soft-delete an agent (operator)",
    params(("agent" = String, Path)),
    responses((status = 200, body = AgentView, description = "The agent as deleted"), E400, E401, E403, E404, E422))]
async fn delete_agent(
    State(state): State<AppState>,
    _key: OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
) -> ApiResult<Json<AgentView>> {
    Ok(Json(
        definition::delete(&state.writer(key(&idempotency)), &name).await?,
    ))
}

#[utoipa::path(patch, path = "/v1/agents/{agent}", tag = "admin", summary = "Update identity, soul or sections (operator; soul versioned)",
    params(("agent" = String, Path)), request_body = AgentUpdate,
    responses((status = 200, body = AgentView, description = "The agent as saved"), E400, E401, E403, E404, E409, E413, E422))]
async fn update_agent(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(update): ApiJson<AgentUpdate>,
) -> ApiResult<Json<AgentView>> {
    Ok(Json(
        definition::update(
            &state.prompts(),
            &who.member,
            &name,
            update,
            key(&idempotency),
        )
        .await?,
    ))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt-template", tag = "admin", summary = "The current template and its version (admin)",
    params(("agent" = String, Path)),
    responses((status = 200, body = TemplateView, description = "The template"), E400, E401, E403, E404))]
async fn get_template(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<TemplateView>> {
    Ok(Json(template::get(&state.db, &name).await?))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/prompt-template", tag = "admin", summary = "Save a template: lint, version check, new version (operator)",
    params(("agent" = String, Path)), request_body = TemplatePut,
    responses((status = 200, body = SavedTemplate, description = "The new version"), E400, E401, E403, E404, E409, E413, E422))]
async fn put_template(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(put): ApiJson<TemplatePut>,
) -> ApiResult<Json<SavedTemplate>> {
    let saved = template::save(
        &state.prompts(),
        state.settings.max_template_bytes,
        &who.member,
        &name,
        put.into(),
        key(&idempotency),
    )
    .await?;
    Ok(Json(saved))
}

/// Which version a change expects to replace.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ExpectedVersion {
    /// Refuse (409) unless the template is still at this version.
    expected_version: Option<i32>,
}

/// Back to the built-in assembly; recorded as a version with no template.
#[utoipa::path(delete, path = "/v1/agents/{agent}/prompt-template", tag = "admin", summary = "Back to the built-in assembly, as a new version (operator)",
    params(("agent" = String, Path), ExpectedVersion),
    responses((status = 200, body = SavedTemplate, description = "The new version"), E400, E401, E403, E404, E409, E422))]
async fn delete_template(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<ExpectedVersion>,
    idempotency: Idempotency,
) -> ApiResult<Json<SavedTemplate>> {
    let change = template::Change {
        expected_version: q.expected_version,
        ..Default::default()
    };
    let saved = template::save(
        &state.prompts(),
        state.settings.max_template_bytes,
        &who.member,
        &name,
        change,
        key(&idempotency),
    )
    .await?;
    Ok(Json(saved))
}

/// A page of template versions: `limit` (1 to 1,000; 100 unless given) oldest
/// first, newer than `after` (the previous page's `next_after`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct VersionPage {
    limit: Option<u64>,
    after: Option<i32>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt-template/versions", tag = "admin", summary = "Template history, oldest first, a page at a time (admin)",
    params(("agent" = String, Path), VersionPage),
    responses((status = 200, body = VersionList, description = "A page of versions, oldest first"), E400, E401, E403, E404))]
async fn list_versions(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(q): ApiQuery<VersionPage>,
) -> ApiResult<Json<VersionList>> {
    let page = page::ByNumber {
        limit: q.limit,
        cursor: q.after,
    };
    Ok(Json(template::versions(&state.db, &name, page).await?))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt-template/versions/{version}", tag = "admin", summary = "One template version (admin)",
    params(("agent" = String, Path), ("version" = i32, Path)),
    responses((status = 200, body = VersionView, description = "The version"), E400, E401, E403, E404))]
async fn get_version(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath((name, version)): ApiPath<(String, i32)>,
) -> ApiResult<Json<VersionView>> {
    Ok(Json(template::version(&state.db, &name, version).await?))
}

/// A new version equal to version `n` (history is never rewritten).
#[utoipa::path(post, path = "/v1/agents/{agent}/prompt-template/versions/{version}/restore", tag = "admin", summary = "A new version equal to an old one (operator)",
    params(("agent" = String, Path), ("version" = i32, Path)),
    responses((status = 200, body = SavedTemplate, description = "The new version"), E400, E401, E403, E404, E409, E413, E422))]
async fn restore_version(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath((name, version)): ApiPath<(String, i32)>,
    idempotency: Idempotency,
) -> ApiResult<Json<SavedTemplate>> {
    Ok(Json(
        template::restore(
            &state.prompts(),
            state.settings.max_template_bytes,
            &who.member,
            &name,
            version,
            key(&idempotency),
        )
        .await?,
    ))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/users/{user_id}/instructions", tag = "admin", summary = "A user's instructions for the agent (admin)",
    params(("agent" = String, Path), ("user_id" = String, Path)),
    responses((status = 200, body = InstructionsView, description = "The instructions"), E400, E401, E403, E404))]
async fn get_instructions(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath((name, user)): ApiPath<(String, String)>,
) -> ApiResult<Json<InstructionsView>> {
    Ok(Json(
        instructions::get(&state.db, who.tenant(), &name, &user).await?,
    ))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/users/{user_id}/instructions", tag = "admin", summary = "Set or switch off a user's instructions (admin)",
    params(("agent" = String, Path), ("user_id" = String, Path)), request_body = InstructionsPut,
    responses((status = 200, body = InstructionsView, description = "The instructions as saved"), E400, E401, E403, E404, E413, E422))]
async fn put_instructions(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath((name, user)): ApiPath<(String, String)>,
    idempotency: Idempotency,
    ApiJson(put): ApiJson<InstructionsPut>,
) -> ApiResult<Json<InstructionsView>> {
    Ok(Json(
        instructions::put(
            &state.writer(key(&idempotency)),
            who.tenant(),
            &name,
            &user,
            put,
        )
        .await?,
    ))
}

/// Renders a template that is not saved, with its lint report; nothing is written.
#[utoipa::path(post, path = "/v1/agents/{agent}/prompt/preview", tag = "admin", summary = "Render an unsaved template for one or every channel, with its lint report (admin)",
    params(("agent" = String, Path)), request_body = PreviewRequest,
    responses((status = 200, body = Preview, description = "Lint report and renders"), E400, E401, E403, E404, E413, E422))]
async fn preview(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiJson(request): ApiJson<PreviewRequest>,
) -> ApiResult<Json<Preview>> {
    Ok(Json(
        preview::preview(
            &state.prompts(),
            state.settings.max_template_bytes,
            who.tenant(),
            &name,
            request,
        )
        .await?,
    ))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/policy", tag = "admin",
    summary = "The agent's Cedar policy and its tests, as the working copy holds them (admin or operator)",
    params(("agent" = String, Path)),
    responses((status = 200, body = PolicyView, description = "The policy (`null`: none)"), E400, E401, E403, E404))]
async fn get_policy(
    State(state): State<AppState>,
    AdminKey(_who): AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<PolicyView>> {
    Ok(Json(policy::get(&state.db, &name).await?))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/policy", tag = "admin",
    summary = "Save the agent's policy and tests: compiled against its tools, tests run, a new revision (operator)",
    params(("agent" = String, Path)), request_body = PolicyPut,
    responses((status = 200, body = PolicyView, description = "Saved; `latest` serves it (and `production` too on a direct agent)"), E400, E401, E403, E404, E409, E413, E422))]
async fn put_policy(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(put): ApiJson<PolicyPut>,
) -> ApiResult<Json<PolicyView>> {
    let w = state.writer(key(&idempotency));
    Ok(Json(policy::save(&w, &who.member, &name, put).await?))
}

#[utoipa::path(post, path = "/v1/agents/{agent}/policy/validate", tag = "admin",
    summary = "Check a policy being edited against the agent's tools, run its tests, decide a tried call; saves nothing (admin or operator)",
    params(("agent" = String, Path)), request_body = PolicyTry,
    responses((status = 200, body = PolicyCheck, description = "The problems at line and column, failing tests, the tried call's decision"), E400, E401, E403, E404, E413))]
async fn validate_policy(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiJson(tried): ApiJson<PolicyTry>,
) -> ApiResult<Json<PolicyCheck>> {
    let check = policy::validate(&state.db, who.tenant(), &who.member, &name, tried).await?;
    Ok(Json(check))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/model", tag = "admin",
    summary = "The agent's model settings as the working copy holds them (admin or operator)",
    params(("agent" = String, Path)),
    responses((status = 200, body = ModelView, description = "The settings (`null`: none)"), E400, E401, E403, E404))]
async fn get_model(
    State(state): State<AppState>,
    AdminKey(_who): AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<ModelView>> {
    Ok(Json(model::get(&state.db, &name).await?))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/model", tag = "admin",
    summary = "Save the agent's model, parameters and response schema (`{}` removes them): a new revision (operator)",
    params(("agent" = String, Path)), request_body = ModelSettings,
    responses((status = 200, body = ModelView, description = "Saved; `latest` serves it (and `production` too on a direct agent)"), E400, E401, E403, E404, E409, E413, E422))]
async fn put_model(
    State(state): State<AppState>,
    OperatorKey(who): OperatorKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
    ApiJson(settings): ApiJson<ModelSettings>,
) -> ApiResult<Json<ModelView>> {
    let w = state.writer(key(&idempotency));
    Ok(Json(
        model::save(&w, &who.member, &name, Some(settings)).await?,
    ))
}
