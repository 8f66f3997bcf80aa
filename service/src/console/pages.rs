//! The admin's overview (the agents with their releases and queues, the registry
//! check's problems grouped by kind) and
//! keys (list, create, revoke).

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::page::{CsrfOnly, Path, Signed, error_page, render};
use super::session::{Admin, Checked, csrf_field};
use crate::actions::decide;
use crate::agents::board::{self, Board};
use crate::agents::definition::{self as agents, AgentView};
use crate::app::AppState;
use crate::auth::Role;
use crate::auth::keys::{self, KeyError, KeyInfo};
use crate::error::{Error, Result};
use crate::registry::check::{Problem, Report, Severity};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/", get(overview))
        .route("/console/keys", get(key_list).post(create_key))
        .route("/console/keys/{name}/revoke", post(revoke_key))
}

#[derive(Serialize)]
struct Overview {
    title: &'static str,
    /// The check's counts; its problems are in `groups`.
    check: Report,
    /// The problems by severity and code, errors first: a thousand tools with the
    /// same warning are one row, not a thousand.
    groups: Vec<ProblemGroup>,
    pending: u64,
    /// The first page of agents by name, each with its releases and queue.
    agents: Vec<AgentRow>,
    more_agents: bool,
}

/// An agent on the overview.
#[derive(Serialize)]
struct AgentRow {
    #[serde(flatten)]
    agent: AgentView,
    #[serde(flatten)]
    board: Board,
    /// Its tool calls waiting for a decision in the signed-in tenant.
    proposals: i64,
}

/// Problems that share a severity and a code.
#[derive(Serialize)]
struct ProblemGroup {
    severity: Severity,
    code: &'static str,
    count: usize,
    /// The first few subjects, by the check's order.
    subjects: Vec<String>,
    /// The first problem's message and fix.
    message: String,
    hint: String,
}

/// Subjects a group names before "and N more".
const GROUP_SUBJECTS: usize = 5;

fn group(problems: Vec<Problem>) -> Vec<ProblemGroup> {
    let mut groups: Vec<ProblemGroup> = Vec::new();
    let mut index: BTreeMap<(Severity, &'static str), usize> = BTreeMap::new();
    for p in problems {
        let key = (p.severity, p.code.as_str());
        match index.get(&key) {
            Some(&i) => {
                let g = &mut groups[i];
                g.count += 1;
                if g.subjects.len() < GROUP_SUBJECTS {
                    g.subjects.push(format!("{} {}", p.kind, p.subject));
                }
            }
            None => {
                index.insert(key, groups.len());
                groups.push(ProblemGroup {
                    severity: p.severity,
                    code: p.code.as_str(),
                    count: 1,
                    subjects: vec![format!("{} {}", p.kind, p.subject)],
                    message: p.message,
                    hint: p.hint,
                });
            }
        }
    }
    groups.sort_by_key(|g| g.severity);
    groups
}

/// Admins see the overview; an approver is sent to the queue.
async fn overview(State(state): State<AppState>, signed: Signed) -> Response {
    if !signed.is_admin() {
        return Redirect::to("/console/proposals").into_response();
    }
    let read = async {
        let mut check = crate::registry::check::current(&state.db, &state.secrets).await?;
        let groups = group(std::mem::take(&mut check.problems));
        let pending = decide::pending(&state.db, &signed.who).await?;
        let list = agents::list(&state.db, &Default::default()).await?;
        let names: Vec<String> = list.agents.iter().map(|a| a.name.clone()).collect();
        let mut boards = board::boards(&state.db, &names).await?;
        let ids: Vec<i32> = boards.values().map(|b| b.agent_id).collect();
        let waiting = decide::pending_by_agent(&state.db, &signed.who, &ids).await?;
        let agents = list
            .agents
            .into_iter()
            .map(|agent| {
                let board = boards.remove(&agent.name).unwrap_or_default();
                let proposals = waiting.get(&board.agent_id).copied().unwrap_or(0);
                AgentRow {
                    agent,
                    board,
                    proposals,
                }
            })
            .collect();
        Result::Ok(Overview {
            title: "Overview",
            check,
            groups,
            pending,
            more_agents: list.next_after.is_some(),
            agents,
        })
    };
    match read.await {
        Ok(page) => render(Some(&signed), StatusCode::OK, "overview.html", page),
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Serialize, Default)]
struct Keys<'a> {
    title: &'static str,
    keys: Vec<KeyInfo>,
    /// The key just created: shown on this one response and never again.
    created: Option<Created<'a>>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Created<'a> {
    name: &'a str,
    key: &'a str,
}

/// The admin's tenant's keys (another tenant's are not shown).
async fn tenant_keys(state: &AppState, signed: &Signed) -> Result<Vec<KeyInfo>> {
    Ok(keys::list_in_tenant(&state.db, signed.who.tenant()).await?)
}

async fn key_list(State(state): State<AppState>, Admin(signed): Admin) -> Response {
    keys_page(&state, &signed, StatusCode::OK, None, None).await
}

async fn keys_page(
    state: &AppState,
    signed: &Signed,
    status: StatusCode,
    created: Option<Created<'_>>,
    error: Option<String>,
) -> Response {
    match tenant_keys(state, signed).await {
        Ok(keys) => {
            let page = Keys {
                title: "Keys",
                keys,
                created,
                error,
            };
            render(Some(signed), status, "keys.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

#[derive(Deserialize)]
struct NewKey {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    role: String,
    /// Scope an agent key to this agent; empty reaches every agent.
    #[serde(default)]
    agent: String,
}

csrf_field!(NewKey);

/// Creates a key in the admin's tenant and shows it once (this response is
/// `no-store`, like every page).
async fn create_key(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Checked(form): Checked<NewKey>,
) -> Response {
    let role = match form.role.parse::<Role>() {
        Ok(Role::Operator) if !signed.is_operator() => {
            Err("only an operator creates operator keys".to_owned())
        }
        Ok(role) => Ok(role),
        Err(_) => Err(format!(
            "role must be agent, approver or admin, not {:?}",
            form.role
        )),
    };
    let role = match role {
        Ok(role) => role,
        Err(error) => {
            let status = StatusCode::BAD_REQUEST;
            return keys_page(&state, &signed, status, None, Some(error)).await;
        }
    };
    let name = form.name.trim();
    let tenant = signed.who.tenant_id.as_deref();
    let agent = super::page::blank(&form.agent);
    let most = state.settings.tenants.max_keys_per_tenant;
    let made = keys::create_by(
        &state.db,
        &signed.who,
        (name, role),
        tenant,
        agent.as_deref(),
        most,
        state.clock.now(),
    );
    match made.await {
        Ok(key) => {
            tracing::info!(key = name, by = %signed.who.key_name, "key created in the console");
            let created = Created { name, key: &key };
            keys_page(&state, &signed, StatusCode::OK, Some(created), None).await
        }
        Err(KeyError::Db(e)) => error_page(Some(&signed), &e.into()),
        Err(e) => {
            let status = match e {
                KeyError::NameTaken(_) => StatusCode::CONFLICT,
                KeyError::LimitReached(_) => StatusCode::UNPROCESSABLE_ENTITY,
                _ => StatusCode::BAD_REQUEST,
            };
            keys_page(&state, &signed, status, None, Some(e.to_string())).await
        }
    }
}

/// Revokes a key of the admin's tenant; its console sessions end with it.
async fn revoke_key(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    let tenant = signed.who.tenant();
    let key_error = |e| match e {
        KeyError::Db(e) => e.into(),
        other => Error::not_found(other.to_string()),
    };
    let revoke = async {
        let role = keys::role_of(&state.db, tenant, &name)
            .await
            .map_err(key_error)?;
        if role.is_none_or(|r| r == Role::Operator) && !signed.is_operator() {
            return Err(Error::forbidden("an operator key (for an operator's key)"));
        }
        let generation = keys::revoke_now(&state.db, tenant, &name, state.clock.now())
            .await
            .map_err(key_error)?;
        state.generation.observe(generation);
        Ok(())
    };
    match revoke.await {
        Ok(()) => Redirect::to("/console/keys").into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}
