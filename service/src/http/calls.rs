//! Tool calls and their proposals. Write tools do not act, they propose: an agent's
//! call of a tool that needs approval becomes a proposal in the ledger; an approver
//! approves (it runs once), declines, or retries a failure. The tenant is always the
//! caller's key's; another tenant's proposal is a 404.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use entity::{agent_tools, proposals as rows, tools, user_tool_preferences};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::fetch::{check_name, check_user_id, json_body};
use super::error::{ApiError, ApiResult};
use super::extract::{AgentKey, ApproverKey};
use crate::app::AppState;
use crate::actions::executors::{Call, Executors};
use crate::actions::ledger::{self, Approval, LedgerError, NewProposal};

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

/// How long an execution may take.
const EXECUTION_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_ATTEMPTS: i32 = 3;

fn ledger_error(error: LedgerError) -> ApiError {
    match error {
        LedgerError::NotFound => ApiError::not_found("no such proposal"),
        LedgerError::Conflict { state, proposal } => ApiError::conflict(format!(
            "the proposal is {state}; that action is not possible from there"
        ))
        .with_details(json!({"state": state, "proposal": proposal_json(&proposal)})),
        LedgerError::Db(e) => e.into(),
    }
}

fn proposal_json(p: &rows::Model) -> Value {
    json!({
        "id": p.id,
        "state": p.state,
        "tool": p.tool_name,
        "conversation_id": p.conversation_id,
        "message_id": p.message_id,
        "user_id": p.user_id,
        "description": p.description,
        "preview": p.preview,
        "arguments": p.arguments,
        "attempts": p.attempts,
        "max_attempts": p.max_attempts,
        "result": p.result,
        "outcome_unknown": p.outcome_unknown,
        "expires_at": p.expires_at,
        "created_at": p.created_at,
        "updated_at": p.updated_at,
    })
}

/// "create_tasks" → "Create tasks".
fn humanize(tool: &str) -> String {
    let words = tool.replace('_', " ");
    let mut chars = words.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().collect::<String>() + chars.as_str())
        .unwrap_or_default()
}

/// The first string field of an item: its title, name or text, by convention.
fn label(item: &Value) -> Option<String> {
    match item {
        Value::String(s) => Some(s.clone()),
        Value::Object(fields) => ["title", "name", "text", "content", "instructions"]
            .iter()
            .find_map(|k| fields.get(*k).and_then(Value::as_str))
            .or_else(|| fields.values().find_map(Value::as_str))
            .map(str::to_owned),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn shorten(text: &str) -> String {
    let mut out: String = text.chars().take(80).collect();
    if text.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// "Create tasks: Buy groceries, Call the dentist", and one preview row per field
/// (`{field, new}`; old values are not known to loadout).
fn describe(tool: &str, arguments: &Value) -> (String, Value) {
    let mut labels = Vec::new();
    let mut preview = Vec::new();
    if let Some(fields) = arguments.as_object() {
        for (name, value) in fields {
            match value {
                Value::Array(items) => {
                    labels.extend(items.iter().filter_map(label));
                    for (i, item) in items.iter().enumerate() {
                        match item.as_object() {
                            Some(inner) => {
                                for (field, v) in inner.iter().filter(|(_, v)| !v.is_null()) {
                                    preview.push(
                                        json!({"field": format!("{name}[{i}].{field}"), "new": v}),
                                    );
                                }
                            }
                            None => {
                                preview.push(json!({"field": format!("{name}[{i}]"), "new": item}))
                            }
                        }
                    }
                }
                Value::Null => {}
                other => {
                    if let Some(text) = label(other) {
                        labels.push(text);
                    }
                    preview.push(json!({"field": name, "new": other}));
                }
            }
        }
    }
    let labels: Vec<String> = labels.iter().map(|l| shorten(l)).collect();
    let description = if labels.is_empty() {
        humanize(tool)
    } else {
        format!("{}: {}", humanize(tool), labels.join(", "))
    };
    (description, Value::Array(preview))
}

#[derive(Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct ToolCall {
    tool: String,
    arguments: Value,
    conversation_id: String,
    message_id: Option<String>,
    user_id: Option<String>,
    idempotency_key: Option<String>,
}

fn check_id(what: &str, id: &str) -> ApiResult<()> {
    if id.is_empty() || id.chars().count() > 128 || id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "{what} must be 1 to 128 characters without control characters"
        )));
    }
    Ok(())
}

/// 424: the tool has no executor now; a proposal stays as it is.
fn not_connected(e: crate::actions::executors::NotRunnable) -> ApiError {
    ApiError::new(
        StatusCode::FAILED_DEPENDENCY,
        "not_connected",
        e.to_string(),
    )
}

/// Runs an approved proposal's claimed attempt with the executors the request
/// checked, and records the outcome.
async fn execute(
    state: &AppState,
    executors: &Executors,
    claimed: rows::Model,
    tool_type: &str,
) -> ApiResult<rows::Model> {
    if let Err(e) = executors.runnable(&claimed.tool_name, tool_type) {
        // Claimed but not runnable: fail it, retryable (the tool may be connected later).
        let outcome = ledger::Outcome {
            success: false,
            result: json!({"error": e.to_string(), "retryable": true}),
        };
        return ledger::finish(
            &state.db,
            &claimed.tenant_id,
            claimed.id,
            claimed.attempts,
            outcome,
            Utc::now(),
        )
        .await
        .map_err(ledger_error);
    }
    if ledger::arguments_hash(&claimed.arguments) != claimed.arguments_hash {
        let outcome = ledger::Outcome {
            success: false,
            result: json!({"error": "the arguments changed after they were proposed", "retryable": false}),
        };
        return ledger::finish(
            &state.db,
            &claimed.tenant_id,
            claimed.id,
            claimed.attempts,
            outcome,
            Utc::now(),
        )
        .await
        .map_err(ledger_error);
    }
    let call = Call {
        tenant: claimed.tenant_id.clone(),
        agent_id: claimed.agent_id,
        user_id: claimed.user_id.clone(),
        tool: claimed.tool_name.clone(),
        arguments: claimed.arguments.clone(),
        idempotency_key: format!("{}:{}", claimed.id, claimed.attempts),
    };
    let outcome = executors.run(&state.db, call, EXECUTION_TIMEOUT).await;
    let done = ledger::finish(
        &state.db,
        &claimed.tenant_id,
        claimed.id,
        claimed.attempts,
        outcome,
        Utc::now(),
    )
    .await
    .map_err(ledger_error)?;
    // A builtin may have changed what prompts render (update_instructions bumps the generation).
    if let Ok(generation) = crate::db::generation::current(&state.db).await {
        state.cache.observe(generation);
    }
    Ok(done)
}

async fn tool_type(state: &AppState, tool_id: i32) -> ApiResult<String> {
    Ok(tools::Entity::find_by_id(tool_id)
        .one(&state.db)
        .await?
        .map(|t| t.tool_type)
        .unwrap_or_default())
}

#[utoipa::path(post, path = "/v1/agents/{agent}/tool-calls", tag = "proposals", summary = "An agent calls a tool: auto tiers run now, others become proposals (agent key)", params(("agent" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn tool_call(
    State(state): State<AppState>,
    AgentKey(who): AgentKey,
    Path(agent_name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let request: ToolCall = json_body(body)?;
    check_name("tool", &request.tool)?;
    check_id("conversation_id", &request.conversation_id)?;
    if let Some(user) = &request.user_id {
        check_user_id(user)?;
    }
    for (what, id) in [
        ("message_id", &request.message_id),
        ("idempotency_key", &request.idempotency_key),
    ] {
        if let Some(id) = id {
            check_id(what, id)?;
        }
    }
    let tenant = who.tenant().to_owned();
    let agent = super::fetch::agent(&state, &agent_name).await?;
    let tool = tools::Entity::find()
        .inner_join(agent_tools::Entity)
        .filter(tools::Column::Name.eq(request.tool.as_str()))
        .filter(tools::Column::IsActive.eq(true))
        .filter(tools::Column::DeletedAt.is_null())
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .one(&state.db)
        .await?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "agent {agent_name:?} has no active tool {:?}",
                request.tool
            ))
        })?;
    crate::actions::arguments::validate(&tool.parameters, &request.arguments).map_err(|e| {
        ApiError::unprocessable("invalid_arguments", e.to_string())
            .with_details(json!({"path": e.path}))
    })?;

    let request_hash = crate::auth::keys::hash_bytes(
        serde_json::to_string(&request)
            .map_err(ApiError::internal)?
            .as_bytes(),
    );
    if let Some(key) = &request.idempotency_key
        && let Some(first) = rows::Entity::find()
            .filter(rows::Column::TenantId.eq(tenant.as_str()))
            .filter(rows::Column::IdempotencyKey.eq(key.as_str()))
            .one(&state.db)
            .await?
    {
        if first.request_hash.as_deref() != Some(request_hash.as_str()) {
            return Err(ApiError::conflict(
                "this idempotency key was used with a different request",
            ));
        }
        return Ok(axum::Json(call_response(&first)).into_response());
    }

    let auto = match tool.approval_tier.as_str() {
        "auto" => true,
        "user_configurable" => match &request.user_id {
            Some(user) => user_tool_preferences::Entity::find()
                .filter(user_tool_preferences::Column::TenantId.eq(tenant.as_str()))
                .filter(user_tool_preferences::Column::UserId.eq(user.as_str()))
                .filter(user_tool_preferences::Column::ToolId.eq(tool.id))
                .one(&state.db)
                .await?
                .is_some_and(|p| p.auto_approve),
            None => false,
        },
        _ => false,
    };
    let executors = state.executors().await?;
    if auto && let Err(e) = executors.runnable(&tool.name, &tool.tool_type) {
        return Err(not_connected(e));
    }
    let (description, preview) = describe(&tool.name, &request.arguments);
    let now = Utc::now();
    let created = ledger::create(
        &state.db,
        NewProposal {
            tenant_id: tenant.clone(),
            agent_id: agent.id,
            tool_id: tool.id,
            tool_name: tool.name.clone(),
            user_id: request.user_id.clone(),
            conversation_id: request.conversation_id.clone(),
            message_id: request.message_id.clone(),
            arguments: request.arguments.clone(),
            description,
            preview,
            idempotency_key: request.idempotency_key.clone(),
            request_hash: request
                .idempotency_key
                .as_ref()
                .map(|_| request_hash.clone()),
            ttl: state.proposal_ttl(&tool.approval_tier),
            max_attempts: MAX_ATTEMPTS,
        },
        &who.key_name,
        now,
    )
    .await
    .map_err(|e| {
        // Two concurrent calls with one idempotency key: the unique index picks one.
        if request.idempotency_key.is_some() {
            ApiError::conflict(format!(
                "a call with this idempotency key is in progress ({e})"
            ))
        } else {
            e.into()
        }
    })?;
    if !auto {
        return Ok(axum::Json(call_response(&created)).into_response());
    }
    let ran = match ledger::approve(
        &state.db,
        &tenant,
        created.id,
        "auto",
        now,
        state.proposal_lease,
    )
    .await
    .map_err(ledger_error)?
    {
        Approval::Run(claimed) => execute(&state, &executors, claimed, &tool.tool_type).await?,
        Approval::AsItIs(row) => row,
    };
    Ok(axum::Json(call_response(&ran)).into_response())
}

/// What the agent relays: a proposal to approve, or the result of a call that ran.
fn call_response(p: &rows::Model) -> Value {
    match p.state.as_str() {
        "proposed" | "declined" | "expired" | "approved" => json!({
            "status": if p.state == "proposed" { "proposed_for_approval" } else { p.state.as_str() },
            "proposal_id": p.id,
            "description": p.description,
            "preview": p.preview,
        }),
        _ => json!({
            "status": p.state,
            "proposal_id": p.id,
            "result": p.result,
        }),
    }
}

fn parse_id(id: &str) -> ApiResult<i32> {
    id.parse()
        .map_err(|_| ApiError::not_found("no such proposal"))
}

#[utoipa::path(get, path = "/v1/proposals/{id}", tag = "proposals", summary = "A proposal and its events (approver or admin)", params(("id" = i32, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn get_proposal(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let row = ledger::get(&state.db, who.tenant(), id)
        .await
        .map_err(ledger_error)?;
    let events: Vec<Value> = ledger::events(&state.db, who.tenant(), id)
        .await
        .map_err(ledger_error)?
        .iter()
        .map(|e| json!({"from": e.from_state, "to": e.to_state, "actor": e.actor, "at": e.at}))
        .collect();
    let mut body = proposal_json(&row);
    body["events"] = Value::Array(events);
    Ok(axum::Json(body).into_response())
}

#[utoipa::path(get, path = "/v1/conversations/{conversation_id}/proposals", tag = "proposals", summary = "A conversation's proposals, oldest first (approver or admin)", params(("conversation_id" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn conversation_proposals(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    Path(conversation): Path<String>,
) -> ApiResult<Response> {
    check_id("conversation_id", &conversation)?;
    let found: Vec<Value> = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(who.tenant()))
        .filter(rows::Column::ConversationId.eq(conversation.as_str()))
        .order_by_asc(rows::Column::Id)
        .all(&state.db)
        .await?
        .iter()
        .map(proposal_json)
        .collect();
    Ok(axum::Json(json!({"conversation_id": conversation, "proposals": found})).into_response())
}

#[utoipa::path(post, path = "/v1/proposals/{id}/approve", tag = "proposals", summary = "Approve and execute, exactly once (approver or admin)", params(("id" = i32, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn approve(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let row = ledger::get(&state.db, who.tenant(), id)
        .await
        .map_err(ledger_error)?;
    let kind = tool_type(&state, row.tool_id).await?;
    let executors = state.executors().await?;
    if row.state == "proposed"
        && let Err(e) = executors.runnable(&row.tool_name, &kind)
    {
        // The proposal stays `proposed`: it can be approved once the tool is connected.
        return Err(not_connected(e));
    }
    let done = match ledger::approve(
        &state.db,
        who.tenant(),
        id,
        &who.key_name,
        Utc::now(),
        state.proposal_lease,
    )
    .await
    .map_err(ledger_error)?
    {
        Approval::Run(claimed) => execute(&state, &executors, claimed, &kind).await?,
        Approval::AsItIs(row) => row,
    };
    Ok(axum::Json(proposal_json(&done)).into_response())
}

#[utoipa::path(post, path = "/v1/proposals/{id}/decline", tag = "proposals", summary = "Decline a proposal (approver or admin)", params(("id" = i32, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn decline(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let row = ledger::decline(&state.db, who.tenant(), id, &who.key_name, Utc::now())
        .await
        .map_err(ledger_error)?;
    Ok(axum::Json(proposal_json(&row)).into_response())
}

#[utoipa::path(post, path = "/v1/proposals/{id}/retry", tag = "proposals", summary = "Run a failed proposal again, while attempts remain (approver or admin)", params(("id" = i32, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn retry(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let row = ledger::get(&state.db, who.tenant(), id)
        .await
        .map_err(ledger_error)?;
    let kind = tool_type(&state, row.tool_id).await?;
    let executors = state.executors().await?;
    if let Err(e) = executors.runnable(&row.tool_name, &kind) {
        return Err(not_connected(e));
    }
    let claimed = ledger::retry(
        &state.db,
        who.tenant(),
        id,
        &who.key_name,
        Utc::now(),
        state.proposal_lease,
    )
    .await
    .map_err(ledger_error)?;
    let done = execute(&state, &executors, claimed, &kind).await?;
    Ok(axum::Json(proposal_json(&done)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Preference {
    auto_approve: bool,
}

#[utoipa::path(put, path = "/v1/users/{user_id}/tools/{tool}/preference", tag = "proposals", summary = "Whether a user_configurable tool runs for this user without asking (approver or admin)", params(("user_id" = String, Path), ("tool" = String, Path)), responses((status = 200, description = "JSON; errors use the one error shape")))]
async fn set_preference(
    State(state): State<AppState>,
    ApproverKey(who): ApproverKey,
    Path((user, tool)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    check_user_id(&user)?;
    check_name("tool", &tool)?;
    let preference: Preference = json_body(body)?;
    let row = tools::Entity::find()
        .filter(tools::Column::Name.eq(tool.as_str()))
        .filter(tools::Column::DeletedAt.is_null())
        .one(&state.db)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no tool named {tool:?}")))?;
    if row.approval_tier != "user_configurable" {
        return Err(ApiError::unprocessable(
            "not_user_configurable",
            format!(
                "{tool} is {}; only user_configurable tools take a user preference",
                row.approval_tier
            ),
        ));
    }
    let now = Utc::now();
    let existing = user_tool_preferences::Entity::find()
        .filter(user_tool_preferences::Column::TenantId.eq(who.tenant()))
        .filter(user_tool_preferences::Column::UserId.eq(user.as_str()))
        .filter(user_tool_preferences::Column::ToolId.eq(row.id))
        .one(&state.db)
        .await?;
    match existing {
        Some(found) => {
            let mut active: user_tool_preferences::ActiveModel = found.into();
            active.auto_approve = Set(preference.auto_approve);
            active.updated_at = Set(now);
            active.update(&state.db).await?;
        }
        None => {
            user_tool_preferences::ActiveModel {
                tenant_id: Set(who.tenant().to_owned()),
                user_id: Set(user.clone()),
                tool_id: Set(row.id),
                auto_approve: Set(preference.auto_approve),
                created_at: Set(now),
                updated_at: Set(now),
                ..Default::default()
            }
            .insert(&state.db)
            .await?;
        }
    }
    Ok(
        axum::Json(json!({"user_id": user, "tool": tool, "auto_approve": preference.auto_approve}))
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_name_the_items() {
        let (text, preview) = describe(
            "create_tasks",
            &json!({"tasks": [{"title": "Buy groceries", "due_date": null}, {"title": "Call the dentist", "due_date": "2026-12-01"}]}),
        );
        assert_eq!(text, "Create tasks: Buy groceries, Call the dentist");
        assert_eq!(
            preview,
            json!([
                {"field": "tasks[0].title", "new": "Buy groceries"},
                {"field": "tasks[1].due_date", "new": "2026-12-01"},
                {"field": "tasks[1].title", "new": "Call the dentist"}
            ])
        );
        let (text, _) = describe(
            "update_instructions",
            &json!({"instructions": "Reply in French."}),
        );
        assert_eq!(text, "Update instructions: Reply in French.");
        assert_eq!(
            describe("delete_tasks", &json!({"ids": ["t1", "t2"]})).0,
            "Delete tasks: t1, t2"
        );
    }
}
