//! The policy editor: an agent's Cedar policy and tests, checked against its
//! tools as you type (problems at line and column), a "try a call" panel that
//! shows the decision and the policy that made it, and the save (an operator's).
//! And the tenant's groups of users.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::page::{CsrfOnly, Path, Query, Signed, blank, error_page, render, wants_partial};
use super::session::{Admin, Checked, Operator, csrf_field};
use crate::agents::policy::{self, DecisionView, PolicyPut, PolicyTry, TriedCall};
use crate::app::AppState;
use crate::error::{Error, Kind, Result};
use crate::policies::PolicyProblem;
use crate::policies::cases::{self, Case};
use crate::policies::groups::{self, GroupView, NewGroup};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/agents/{agent}/policy", get(page).post(save))
        .route("/console/agents/{agent}/policy/check", post(check))
        .route("/console/agents/{agent}/policy/try", post(try_call))
        .route("/console/groups", get(groups_page).post(create_group))
        .route("/console/groups/{group}/members", post(add_member))
        .route(
            "/console/groups/{group}/members/{user}/remove",
            post(remove_member),
        )
        .route("/console/groups/{group}/delete", post(delete_group))
}

#[derive(Deserialize, Default)]
struct PolicyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    policy: String,
    #[serde(default)]
    tests: String,
    #[serde(default)]
    try_tool: String,
    #[serde(default)]
    try_arguments: String,
    #[serde(default)]
    try_user: String,
    #[serde(default)]
    try_groups: String,
}

csrf_field!(PolicyForm, GroupForm, MemberForm);

/// The editor page's state.
#[derive(Serialize, Default)]
struct Editor {
    title: String,
    agent: String,
    policy: String,
    tests: String,
    tools: Vec<String>,
    try_tool: String,
    try_arguments: String,
    try_user: String,
    try_groups: String,
    problems: Vec<PolicyProblem>,
    test_failures: Vec<String>,
    decision: Option<DecisionView>,
    try_error: Option<String>,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<String>,
}

/// The tests as the form holds them: a JSON array (empty: none).
fn parse_tests(text: &str) -> std::result::Result<Vec<Case>, String> {
    match text.trim() {
        "" => Ok(Vec::new()),
        text => cases::parse(text),
    }
}

async fn editor(state: &AppState, name: &str, form: Option<PolicyForm>) -> Result<Editor> {
    let saved = policy::get(&state.db, name).await?;
    let tools = crate::fetch::agent(&state.prompts(), name)
        .await?
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let mut page = Editor {
        title: format!("Policy of {name}"),
        agent: name.to_owned(),
        tools,
        try_arguments: "{}".to_owned(),
        ..Default::default()
    };
    match form {
        Some(form) => {
            page.policy = form.policy;
            page.tests = form.tests;
            page.try_tool = form.try_tool;
            page.try_arguments = form.try_arguments;
            page.try_user = form.try_user;
            page.try_groups = form.try_groups;
        }
        None => {
            page.policy = saved.policy.unwrap_or_default();
            page.tests = match saved.tests.is_empty() {
                true => String::new(),
                false => serde_json::to_string_pretty(&saved.tests).map_err(Error::internal)?,
            };
        }
    }
    Ok(page)
}

async fn page(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(saved): Query<Saved>,
) -> Response {
    match editor(&state, &name, None).await {
        Ok(mut page) => {
            if saved.saved.is_some() {
                page.notice = Some("Saved: the policy is in a new revision.".to_owned());
            }
            render(Some(&signed), StatusCode::OK, "policy.html", page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

/// The problems of the posted policy and tests against the agent's tools.
async fn checked(
    state: &AppState,
    signed: &Signed,
    name: &str,
    form: &PolicyForm,
    call: Option<TriedCall>,
) -> Result<(Vec<PolicyProblem>, Vec<String>, Option<DecisionView>)> {
    let tests = match parse_tests(&form.tests) {
        Ok(tests) => tests,
        Err(why) => return Ok((Vec::new(), vec![why], None)),
    };
    let tried = PolicyTry {
        policy: form.policy.clone(),
        tests,
        call,
    };
    let who = &signed.who;
    let check = policy::validate(&state.db, who.tenant(), &who.member, name, tried).await?;
    Ok((check.problems, check.test_failures, check.decision))
}

async fn check(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    Checked(form): Checked<PolicyForm>,
) -> Response {
    let found = checked(&state, &signed, &name, &form, None).await;
    let (problems, test_failures) = match found {
        Ok((problems, failures, _)) => (problems, failures),
        Err(e) => return error_page(Some(&signed), &e),
    };
    if wants_partial(&headers) {
        let page = Editor {
            problems,
            test_failures,
            ..Default::default()
        };
        return render(Some(&signed), StatusCode::OK, "policy_problems.html", page);
    }
    again(&state, &signed, &name, form, |page| {
        page.problems = problems;
        page.test_failures = test_failures;
    })
    .await
}

/// The tried call from the form, or why it cannot be tried.
fn tried_call(form: &PolicyForm) -> std::result::Result<TriedCall, String> {
    let arguments = serde_json::from_str(form.try_arguments.trim())
        .map_err(|e| format!("the arguments are not JSON: {e}"))?;
    let groups = blank(&form.try_groups).map(|g| {
        g.split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect()
    });
    Ok(TriedCall {
        tool: form.try_tool.clone(),
        arguments,
        user_id: blank(&form.try_user),
        groups,
    })
}

async fn try_call(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    Checked(form): Checked<PolicyForm>,
) -> Response {
    let mut page = Editor::default();
    match tried_call(&form) {
        Err(why) => page.try_error = Some(why),
        Ok(call) => match checked(&state, &signed, &name, &form, Some(call)).await {
            Ok((problems, failures, decision)) => {
                if let Some(first) = problems.first() {
                    page.try_error = Some(format!("The policy does not compile: {first}"));
                }
                page.decision = decision;
                page.problems = problems;
                page.test_failures = failures;
            }
            Err(e) if e.kind == Kind::Internal => {
                return error_page(Some(&signed), &e);
            }
            Err(e) => page.try_error = Some(e.message),
        },
    }
    if wants_partial(&headers) {
        return render(Some(&signed), StatusCode::OK, "decision.html", page);
    }
    again(&state, &signed, &name, form, |p| {
        p.decision = page.decision;
        p.try_error = page.try_error;
        p.problems = page.problems;
        p.test_failures = page.test_failures;
    })
    .await
}

/// The editor re-rendered around the posted form, with `change` applied.
async fn again(
    state: &AppState,
    signed: &Signed,
    name: &str,
    form: PolicyForm,
    change: impl FnOnce(&mut Editor),
) -> Response {
    match editor(state, name, Some(form)).await {
        Ok(mut page) => {
            change(&mut page);
            render(Some(signed), StatusCode::OK, "policy.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

async fn save(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<PolicyForm>,
) -> Response {
    let tests = match parse_tests(&form.tests) {
        Ok(tests) => tests,
        Err(why) => return again(&state, &signed, &name, form, |p| p.error = Some(why)).await,
    };
    let put = PolicyPut {
        policy: blank(&form.policy).map(|_| form.policy.clone()),
        tests,
    };
    let w = state.writer(None);
    match policy::save(&w, &signed.who.member, &name, put).await {
        Ok(_) => {
            Redirect::to(&format!("/console/agents/{name}/policy?saved=policy")).into_response()
        }
        Err(e) if matches!(e.kind, Kind::Internal | Kind::NotFound) => {
            error_page(Some(&signed), &e)
        }
        Err(e) => {
            let status = crate::web::status(e.kind);
            let mut response =
                again(&state, &signed, &name, form, |p| p.error = Some(e.message)).await;
            *response.status_mut() = status;
            response
        }
    }
}

#[derive(Deserialize, Default)]
struct GroupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    members: String,
}

#[derive(Deserialize, Default)]
struct MemberForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    user_id: String,
}

#[derive(Serialize, Default)]
struct GroupsPage {
    title: String,
    groups: Vec<GroupView>,
    notice: Option<String>,
    error: Option<String>,
}

async fn groups_of(state: &AppState, signed: &Signed, error: Option<String>) -> Response {
    match groups::list(&state.db, signed.who.tenant()).await {
        Ok(list) => {
            let status = match error {
                Some(_) => StatusCode::UNPROCESSABLE_ENTITY,
                None => StatusCode::OK,
            };
            let page = GroupsPage {
                title: "Groups".to_owned(),
                groups: list.groups,
                error,
                ..Default::default()
            };
            render(Some(signed), status, "groups.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

async fn groups_page(State(state): State<AppState>, Admin(signed): Admin) -> Response {
    groups_of(&state, &signed, None).await
}

/// Back to the groups page after a change, or the page with the refusal.
async fn done(state: &AppState, signed: &Signed, outcome: Result<GroupView>) -> Response {
    match outcome {
        Ok(_) => Redirect::to("/console/groups").into_response(),
        Err(e) if e.kind == Kind::Internal => error_page(Some(signed), &e),
        Err(e) => groups_of(state, signed, Some(e.message)).await,
    }
}

async fn create_group(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Checked(form): Checked<GroupForm>,
) -> Response {
    let members = form
        .members
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect();
    let new = NewGroup {
        name: form.name.trim().to_owned(),
        members,
    };
    let outcome = crate::agents::groups::create(
        &state.writer(None),
        &signed.who.member,
        signed.who.tenant(),
        new,
    )
    .await;
    done(&state, &signed, outcome).await
}

async fn add_member(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(group): Path<String>,
    Checked(form): Checked<MemberForm>,
) -> Response {
    let user = form.user_id.trim();
    let outcome = crate::agents::groups::add(
        &state.writer(None),
        &signed.who.member,
        signed.who.tenant(),
        &group,
        user,
    )
    .await;
    done(&state, &signed, outcome).await
}

async fn remove_member(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path((group, user)): Path<(String, String)>,
    Checked(_form): Checked<CsrfOnly>,
) -> Response {
    let outcome = crate::agents::groups::remove(
        &state.writer(None),
        &signed.who.member,
        signed.who.tenant(),
        &group,
        &user,
    )
    .await;
    done(&state, &signed, outcome).await
}

async fn delete_group(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(group): Path<String>,
    Checked(_form): Checked<CsrfOnly>,
) -> Response {
    let outcome = crate::agents::groups::delete(
        &state.writer(None),
        &signed.who.member,
        signed.who.tenant(),
        &group,
    )
    .await;
    done(&state, &signed, outcome).await
}
