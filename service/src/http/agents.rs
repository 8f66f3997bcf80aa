//! What admins call: agents' souls and templates (versioned), and users' instructions.
//!
//! Every write runs in one transaction that also bumps the configuration
//! generation; after the commit this process observes the new generation, so the
//! next read anywhere in it misses the cache and sees the write.

use std::collections::BTreeSet;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use entity::{agent_configurations, prompt_versions, tools, user_agent_prompt_customizations};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter,
    QueryOrder, Set, TransactionTrait,
};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::fetch::{check_name, check_user_id, json_body};
use super::error::{ApiError, ApiResult};
use super::extract::AdminKey;
use crate::app::AppState;
use crate::prompt::lint;

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
}

const TEMPLATE: &str = "template";
const SOUL: &str = "soul";

pub(super) async fn agent_row(
    db: &impl ConnectionTrait,
    name: &str,
) -> ApiResult<agent_configurations::Model> {
    check_name("agent", name)?;
    agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(name))
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no agent named {name:?}")))
}

fn agent_json(row: &agent_configurations::Model) -> Value {
    json!({
        "name": row.name,
        "identity": row.identity,
        "soul": row.soul,
        "soul_version": row.soul_version,
        "prompt_template": row.prompt_template,
        "template_version": row.template_version,
        "operating_model": row.operating_model,
        "interaction_learning": row.interaction_learning,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    })
}

/// An admin write in progress: its transaction, and the registry check's errors as
/// they were before it, so that [`commit`] can refuse a write that adds one.
pub(super) struct Write {
    txn: DatabaseTransaction,
    errors_before: BTreeSet<(crate::registry::check::ProblemCode, String, String)>,
}

impl std::ops::Deref for Write {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        &self.txn
    }
}

async fn check_errors(
    db: &impl ConnectionTrait,
) -> ApiResult<(
    crate::registry::check::Report,
    BTreeSet<(crate::registry::check::ProblemCode, String, String)>,
)> {
    let catalog = &crate::registry::catalog::Seeds::shared()
        .map_err(ApiError::internal)?
        .catalog;
    let report = crate::registry::check::run(
        db,
        catalog,
        &crate::actions::executors::Executors::load(db, Vec::new()).await?,
    )
    .await?;
    let errors = report
        .problems
        .iter()
        .filter(|p| p.severity == crate::registry::check::Severity::Error)
        .map(|p| (p.code, p.subject.clone(), p.message.clone()))
        .collect();
    Ok((report, errors))
}

/// Opens a write's transaction and notes the registry check's errors before it.
pub(super) async fn begin(state: &AppState) -> ApiResult<Write> {
    let txn = state.db.begin().await?;
    let (_, errors_before) = check_errors(&txn).await?;
    Ok(Write { txn, errors_before })
}

/// Refuses the write (422, rolled back) if it would add a `loadout check` error, so the
/// API can never create drift that `serve` or CI would then reject; otherwise bumps the
/// generation, commits, and lets this process see the write at once.
pub(super) async fn commit(state: &AppState, write: Write) -> ApiResult<()> {
    let (report, errors_after) = check_errors(&write.txn).await?;
    let added: Vec<&crate::registry::check::Problem> = report
        .problems
        .iter()
        .filter(|p| p.severity == crate::registry::check::Severity::Error)
        .filter(|p| {
            !write
                .errors_before
                .contains(&(p.code, p.subject.clone(), p.message.clone()))
        })
        .collect();
    debug_assert!(added.len() <= errors_after.len());
    if let Some(first) = added.first() {
        let message = format!("this change would make `loadout check` fail: {first}");
        let details = json!({ "problems": added });
        write.txn.rollback().await?;
        return Err(ApiError::unprocessable("registry_check_failed", message).with_details(details));
    }
    let generation = crate::db::generation::bump(&write.txn).await?;
    write.txn.commit().await?;
    state.cache.observe(generation);
    Ok(())
}

#[utoipa::path(get, path = "/v1/agents", tag = "admin", summary = "List agents (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn list_agents(State(state): State<AppState>, _key: AdminKey) -> ApiResult<Response> {
    let rows = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .order_by_asc(agent_configurations::Column::Name)
        .all(&state.db)
        .await?;
    let agents: Vec<Value> = rows.iter().map(agent_json).collect();
    Ok(axum::Json(json!({ "agents": agents })).into_response())
}

#[utoipa::path(get, path = "/v1/agents/{agent}", tag = "admin", summary = "One agent with soul, template and versions (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_agent(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let row = agent_row(&state.db, &name).await?;
    Ok(axum::Json(agent_json(&row)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewAgent {
    name: String,
    identity: Value,
    soul: String,
    prompt_template: Option<String>,
    operating_model: Option<String>,
    interaction_learning: Option<String>,
}

#[utoipa::path(post, path = "/v1/agents", tag = "admin", summary = "Create an agent (admin)", responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn create_agent(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let new: NewAgent = json_body(body)?;
    check_name("agent", &new.name)?;
    if !new.identity.is_object() {
        return Err(ApiError::unprocessable(
            "invalid_identity",
            "identity must be a JSON object (display_name, role, description)",
        ));
    }
    check_text("soul", &new.soul)?;
    for text in [&new.operating_model, &new.interaction_learning]
        .into_iter()
        .flatten()
    {
        check_text("section", text)?;
    }
    let mut warnings = Vec::new();
    if let Some(template) = &new.prompt_template {
        check_template_size(&state, template)?;
        warnings = lint::lint(template, &lint_tool_names(&state.db).await?);
        if lint::has_errors(&warnings) {
            return Err(ApiError::unprocessable(
                "lint_failed",
                "the template has lint errors; fix them, or create the agent without a template and save it with \"force\": true",
            )
            .with_details(json!({ "problems": warnings })));
        }
    }
    let txn = begin(&state).await?;
    let taken = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(new.name.as_str()))
        .one(&*txn)
        .await?;
    if taken.is_some() {
        return Err(ApiError::conflict(format!(
            "an agent named {:?} exists (or existed: names of deleted agents stay taken)",
            new.name
        )));
    }
    let now = Utc::now();
    let saved = agent_configurations::ActiveModel {
        name: Set(new.name),
        identity: Set(new.identity),
        soul: Set(new.soul.clone()),
        prompt_template: Set(new.prompt_template.clone()),
        operating_model: Set(new.operating_model),
        interaction_learning: Set(new.interaction_learning),
        soul_version: Set(1),
        template_version: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&*txn)
    .await?;
    record_version(
        &txn,
        saved.id,
        SOUL,
        1,
        Some(new.soul),
        false,
        &who.key_name,
    )
    .await?;
    record_version(
        &txn,
        saved.id,
        TEMPLATE,
        1,
        new.prompt_template,
        false,
        &who.key_name,
    )
    .await?;
    commit(&state, txn).await?;
    let mut body = agent_json(&saved);
    body["warnings"] = json!(warnings);
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

/// Soft delete: `deleted_at` is set and the agent disappears from every endpoint.
#[utoipa::path(delete, path = "/v1/agents/{agent}", tag = "admin", summary = "Soft-delete an agent (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn delete_agent(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let txn = begin(&state).await?;
    let row = agent_row(&*txn, &name).await?;
    let now = Utc::now();
    let mut active: agent_configurations::ActiveModel = row.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(agent_json(&saved)).into_response())
}

/// The fields an admin may change; anything else (ids, versions, timestamps) is refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentUpdate {
    identity: Option<Value>,
    soul: Option<String>,
    operating_model: Option<Option<String>>,
    interaction_learning: Option<Option<String>>,
    /// Refuse the write (409) unless the soul is still at this version.
    expected_soul_version: Option<i32>,
}

const MAX_TEXT_BYTES: usize = 256 * 1024;

/// Templates over the configured limit are refused with the limit named.
fn check_template_size(state: &AppState, template: &str) -> ApiResult<()> {
    if template.len() > state.max_template_bytes {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "template_too_large",
            format!(
                "the template is {} bytes; the limit is {} bytes",
                template.len(),
                state.max_template_bytes
            ),
        ));
    }
    Ok(())
}

fn check_text(what: &str, text: &str) -> ApiResult<()> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "{what} is {} bytes; the limit is {MAX_TEXT_BYTES} bytes",
                text.len()
            ),
        ));
    }
    Ok(())
}

#[utoipa::path(patch, path = "/v1/agents/{agent}", tag = "admin", summary = "Update identity, soul or sections (admin; soul versioned)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn update_agent(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let update: AgentUpdate = json_body(body)?;
    if let Some(identity) = &update.identity
        && !identity.is_object()
    {
        return Err(ApiError::unprocessable(
            "invalid_identity",
            "identity must be a JSON object (display_name, role, description)",
        ));
    }
    for (what, text) in [
        ("soul", update.soul.as_deref()),
        (
            "operating_model",
            update.operating_model.as_ref().and_then(|t| t.as_deref()),
        ),
        (
            "interaction_learning",
            update
                .interaction_learning
                .as_ref()
                .and_then(|t| t.as_deref()),
        ),
    ] {
        if let Some(text) = text {
            check_text(what, text)?;
        }
    }
    let txn = begin(&state).await?;
    let row = agent_row(&*txn, &name).await?;
    if let Some(expected) = update.expected_soul_version
        && expected != row.soul_version
    {
        return Err(stale(SOUL, expected, row.soul_version));
    }
    let now = Utc::now();
    let soul_changed = update.soul.as_ref().is_some_and(|s| *s != row.soul);
    let mut active: agent_configurations::ActiveModel = row.clone().into();
    if let Some(identity) = update.identity {
        active.identity = Set(identity);
    }
    if let Some(text) = update.operating_model {
        active.operating_model = Set(text);
    }
    if let Some(text) = update.interaction_learning {
        active.interaction_learning = Set(text);
    }
    if soul_changed {
        let version = row.soul_version + 1;
        active.soul = Set(update.soul.clone().unwrap_or_default());
        active.soul_version = Set(version);
        record_version(
            &txn,
            row.id,
            SOUL,
            version,
            update.soul,
            false,
            &who.key_name,
        )
        .await?;
    }
    active.updated_at = Set(now);
    let saved = active.update(&*txn).await?;
    commit(&state, txn).await?;
    Ok(axum::Json(agent_json(&saved)).into_response())
}

fn stale(kind: &str, expected: i32, current: i32) -> ApiError {
    ApiError::conflict(format!(
        "the {kind} is at version {current}, not {expected}; reload and apply your change again"
    ))
    .with_details(json!({"expected_version": expected, "current_version": current}))
}

async fn record_version(
    txn: &DatabaseTransaction,
    agent_id: i32,
    kind: &str,
    version: i32,
    body: Option<String>,
    forced: bool,
    author: &str,
) -> ApiResult<prompt_versions::Model> {
    Ok(prompt_versions::ActiveModel {
        agent_id: Set(agent_id),
        kind: Set(kind.to_owned()),
        version: Set(version),
        body: Set(body),
        forced: Set(forced),
        author: Set(author.to_owned()),
        created_at: Set(Utc::now()),
        ..Default::default()
    }
    .insert(txn)
    .await?)
}

/// Tool names for the lint: active rows, and names known to be inactive or retired.
async fn lint_tool_names(db: &impl ConnectionTrait) -> ApiResult<lint::ToolNames> {
    let rows = tools::Entity::find().all(db).await?;
    let mut names = lint::ToolNames::default();
    for row in rows {
        if row.is_active && row.deleted_at.is_none() {
            names.active.insert(row.name);
        } else {
            names.inactive.insert(row.name);
        }
    }
    if let Ok(seeds) = crate::registry::catalog::Seeds::shared() {
        let retired: BTreeSet<String> = seeds
            .catalog
            .deactivated
            .iter()
            .chain(seeds.catalog.renamed.keys())
            .cloned()
            .collect();
        names.inactive.extend(retired);
    }
    Ok(names)
}

fn version_json(v: &prompt_versions::Model) -> Value {
    json!({
        "version": v.version,
        "template": v.body,
        "forced": v.forced,
        "author": v.author,
        "created_at": v.created_at,
    })
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt-template", tag = "admin", summary = "The current template and its version (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_template(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let row = agent_row(&state.db, &name).await?;
    Ok(axum::Json(json!({
        "agent": row.name,
        "template": row.prompt_template,
        "version": row.template_version,
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplatePut {
    template: String,
    expected_version: Option<i32>,
    #[serde(default)]
    force: bool,
}

/// Saves a new template version: lint first (errors → 422 unless `force`), then
/// the optimistic version check (409), then the write, the version row and the
/// generation bump in one transaction.
async fn save_template(
    state: &AppState,
    who: &str,
    name: &str,
    template: Option<String>,
    expected_version: Option<i32>,
    force: bool,
) -> ApiResult<Response> {
    let mut problems = Vec::new();
    if let Some(text) = &template {
        check_template_size(state, text)?;
        problems = lint::lint(text, &lint_tool_names(&state.db).await?);
        if lint::has_errors(&problems) && !force {
            return Err(ApiError::unprocessable(
                "lint_failed",
                "the template has lint errors; fix them or save with \"force\": true",
            )
            .with_details(json!({ "problems": problems })));
        }
    }
    // Recorded whenever asked for: it also lets `loadout check` report this version's
    // problems as warnings (an explicit decision, not drift).
    let forced = force;
    let txn = begin(state).await?;
    let row = agent_row(&*txn, name).await?;
    if let Some(expected) = expected_version
        && expected != row.template_version
    {
        return Err(stale(TEMPLATE, expected, row.template_version));
    }
    let version = row.template_version + 1;
    // Conditional on the version read above, so two concurrent saves cannot both win.
    let updated = agent_configurations::Entity::update_many()
        .col_expr(
            agent_configurations::Column::PromptTemplate,
            Expr::value(template.clone()),
        )
        .col_expr(
            agent_configurations::Column::TemplateVersion,
            Expr::value(version),
        )
        .col_expr(
            agent_configurations::Column::UpdatedAt,
            Expr::value(Utc::now()),
        )
        .filter(agent_configurations::Column::Id.eq(row.id))
        .filter(agent_configurations::Column::TemplateVersion.eq(row.template_version))
        .exec(&*txn)
        .await?;
    if updated.rows_affected != 1 {
        return Err(stale(
            TEMPLATE,
            row.template_version,
            row.template_version + 1,
        ));
    }
    let saved = record_version(&txn, row.id, TEMPLATE, version, template, forced, who).await?;
    commit(state, txn).await?;
    Ok(axum::Json(json!({
        "agent": row.name,
        "version": version,
        "template": saved.body,
        "forced": saved.forced,
        "warnings": problems,
    }))
    .into_response())
}

#[utoipa::path(put, path = "/v1/agents/{agent}/prompt-template", tag = "admin", summary = "Save a template: lint, version check, new version (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn put_template(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let put: TemplatePut = json_body(body)?;
    save_template(
        &state,
        &who.key_name,
        &name,
        Some(put.template),
        put.expected_version,
        put.force,
    )
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedVersion {
    expected_version: Option<i32>,
}

/// Back to the built-in assembly; recorded as a version with no template.
#[utoipa::path(delete, path = "/v1/agents/{agent}/prompt-template", tag = "admin", summary = "Back to the built-in assembly, as a new version (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn delete_template(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    Path(name): Path<String>,
    q: Result<Query<ExpectedVersion>, QueryRejection>,
) -> ApiResult<Response> {
    let q = q
        .map(|Query(q)| q)
        .map_err(|e| ApiError::bad_request(e.body_text()))?;
    save_template(
        &state,
        &who.key_name,
        &name,
        None,
        q.expected_version,
        false,
    )
    .await
}

async fn versions(
    db: &impl ConnectionTrait,
    agent_id: i32,
) -> ApiResult<Vec<prompt_versions::Model>> {
    Ok(prompt_versions::Entity::find()
        .filter(prompt_versions::Column::AgentId.eq(agent_id))
        .filter(prompt_versions::Column::Kind.eq(TEMPLATE))
        .order_by_asc(prompt_versions::Column::Version)
        .all(db)
        .await?)
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt-template/versions", tag = "admin", summary = "Template history (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn list_versions(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let row = agent_row(&state.db, &name).await?;
    let versions: Vec<Value> = versions(&state.db, row.id)
        .await?
        .iter()
        .map(version_json)
        .collect();
    Ok(axum::Json(
        json!({"agent": row.name, "current_version": row.template_version, "versions": versions}),
    )
    .into_response())
}

async fn one_version(
    state: &AppState,
    name: &str,
    version: i32,
) -> ApiResult<(agent_configurations::Model, prompt_versions::Model)> {
    let row = agent_row(&state.db, name).await?;
    let found = prompt_versions::Entity::find()
        .filter(prompt_versions::Column::AgentId.eq(row.id))
        .filter(prompt_versions::Column::Kind.eq(TEMPLATE))
        .filter(prompt_versions::Column::Version.eq(version))
        .one(&state.db)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!("agent {name:?} has no template version {version}"))
        })?;
    Ok((row, found))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/prompt-template/versions/{version}", tag = "admin", summary = "One template version (admin)", params(("agent" = String, Path), ("version" = i32, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_version(
    State(state): State<AppState>,
    _key: AdminKey,
    Path((name, version)): Path<(String, i32)>,
) -> ApiResult<Response> {
    let (_, found) = one_version(&state, &name, version).await?;
    Ok(axum::Json(version_json(&found)).into_response())
}

/// A new version equal to version `n` (history is never rewritten).
#[utoipa::path(post, path = "/v1/agents/{agent}/prompt-template/versions/{version}/restore", tag = "admin", summary = "A new version equal to an old one (admin)", params(("agent" = String, Path), ("version" = i32, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn restore_version(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    Path((name, version)): Path<(String, i32)>,
) -> ApiResult<Response> {
    let (row, found) = one_version(&state, &name, version).await?;
    save_template(
        &state,
        &who.key_name,
        &name,
        found.body,
        Some(row.template_version),
        // As forced as the version it copies: lint and the check apply again otherwise.
        found.forced,
    )
    .await
}

#[utoipa::path(get, path = "/v1/agents/{agent}/users/{user_id}/instructions", tag = "admin", summary = "A user's instructions for the agent (admin)", params(("agent" = String, Path), ("user_id" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_instructions(
    State(state): State<AppState>,
    _key: AdminKey,
    Path((name, user)): Path<(String, String)>,
) -> ApiResult<Response> {
    check_user_id(&user)?;
    let row = agent_row(&state.db, &name).await?;
    let found = crate::prompt::load::user_instructions(&state.db, row.id, &user).await?;
    Ok(
        axum::Json(json!({"agent": row.name, "user_id": user, "instructions": found}))
            .into_response(),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InstructionsPut {
    /// `null` switches the user's instructions off (the row is kept, inactive).
    instructions: Option<String>,
}

#[utoipa::path(put, path = "/v1/agents/{agent}/users/{user_id}/instructions", tag = "admin", summary = "Set or switch off a user's instructions (admin)", params(("agent" = String, Path), ("user_id" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn put_instructions(
    State(state): State<AppState>,
    _key: AdminKey,
    Path((name, user)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    check_user_id(&user)?;
    let put: InstructionsPut = json_body(body)?;
    if let Some(text) = &put.instructions {
        check_text("instructions", text)?;
    }
    use user_agent_prompt_customizations as uapc;
    let txn = begin(&state).await?;
    let row = agent_row(&*txn, &name).await?;
    let existing = uapc::Entity::find()
        .filter(uapc::Column::AgentId.eq(row.id))
        .filter(uapc::Column::UserId.eq(user.as_str()))
        .one(&*txn)
        .await?;
    let now = Utc::now();
    match (existing, &put.instructions) {
        (Some(existing), text) => {
            let mut active: uapc::ActiveModel = existing.into();
            if let Some(text) = text {
                active.instructions = Set(text.clone());
            }
            active.is_active = Set(text.is_some());
            active.deleted_at = Set(None);
            active.updated_at = Set(now);
            active.update(&*txn).await?;
        }
        (None, Some(text)) => {
            uapc::ActiveModel {
                user_id: Set(user.clone()),
                agent_id: Set(row.id),
                instructions: Set(text.clone()),
                is_active: Set(true),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(&*txn)
            .await?;
        }
        (None, None) => {}
    }
    commit(&state, txn).await?;
    Ok(
        axum::Json(json!({"agent": row.name, "user_id": user, "instructions": put.instructions}))
            .into_response(),
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewRequest {
    /// The candidate; `null` previews the built-in assembly.
    template: Option<String>,
    /// One channel, or every channel when absent.
    channel: Option<String>,
    user_id: Option<String>,
    tz: Option<String>,
    #[serde(default)]
    memory_notes: Vec<String>,
    last_message_at: Option<chrono::DateTime<Utc>>,
}

/// Renders a template that is not saved, with its lint report; nothing is written.
#[utoipa::path(post, path = "/v1/agents/{agent}/prompt/preview", tag = "admin", summary = "Render an unsaved template for one or every channel, with its lint report (admin)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn preview(
    State(state): State<AppState>,
    _key: AdminKey,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let request: PreviewRequest = json_body(body)?;
    if let Some(text) = &request.template {
        check_template_size(&state, text)?;
    }
    let loaded = super::fetch::agent(&state, &name).await?;
    let candidate = loaded.clone_with_template(request.template.clone());
    let problems = match &request.template {
        Some(text) => lint::lint(text, &lint_tool_names(&state.db).await?),
        None => Vec::new(),
    };
    let names: Vec<String> = match &request.channel {
        Some(channel) => vec![channel.clone()],
        None => super::fetch::channels(&state)
            .await?
            .names()
            .map(str::to_owned)
            .collect(),
    };
    let mut rendered = Vec::with_capacity(names.len());
    for channel in names {
        let one = super::fetch::render(
            &state,
            &candidate,
            super::fetch::RenderRequest {
                channel,
                user_id: request.user_id.clone(),
                tz: request.tz.clone(),
                memory_notes: request.memory_notes.clone(),
                last_message_at: request.last_message_at,
                now: None,
            },
        )
        .await?;
        rendered.push(json!({"channel": one["provenance"]["channel"], "text": one["text"], "source": one["provenance"]["source"]}));
    }
    Ok(axum::Json(json!({"agent": name, "lint": problems, "renders": rendered})).into_response())
}
