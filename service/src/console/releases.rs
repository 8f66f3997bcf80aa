//! An agent's releases: its labels and where each has been, its revisions, and
//! what changed between any two of them.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::page::{Path, Query, Signed, blank, error_page, refusal, render};
use super::session::{Admin, Checked, Operator, csrf_field};
use crate::app::AppState;
use crate::auth::Role;
use crate::error::{Error, Result};
use crate::promotion::change_requests::{self, ChangeState, Decision, Filter};
use crate::promotion::labels::{self, LabelPut, Outcome, Rollback};
use crate::promotion::replay::{self, ReplayQuery, ReplayReport, Replayer};
use crate::promotion::rollouts as rollout_ops;
use crate::releases::LATEST;
use crate::releases::diff::{self, RevisionDiff};
use crate::releases::outcomes::{self, RevisionOutcomes};
use crate::releases::read::{self, LabelHistory, LabelView, RevisionSummary};
use crate::releases::traffic::RolloutView;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/agents/{agent}/releases", get(releases))
        .route("/console/agents/{agent}/releases/labels", post(put_label))
        .route(
            "/console/agents/{agent}/releases/labels/{label}/rollback",
            post(rollback),
        )
        .route("/console/change-requests/{id}/{decision}", post(decide))
}

/// A label moved (or created) from the releases page.
#[derive(Deserialize)]
struct LabelForm {
    #[serde(default)]
    csrf: String,
    label: String,
    revision: i32,
    #[serde(default)]
    protected: Option<String>,
    #[serde(default)]
    require_checks: Option<String>,
    #[serde(default)]
    reason: String,
}

/// A rollback, approval or decline: its reason.
#[derive(Deserialize)]
struct ReasonForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

csrf_field!(LabelForm, ReasonForm);

/// Moves or creates a label; a protected label of a gated agent opens a change
/// request instead. The page again, saying which.
async fn put_label(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<LabelForm>,
) -> Response {
    let put = LabelPut {
        revision: form.revision,
        protected: form.protected.as_deref().map(|p| p == "on"),
        require_checks: form.require_checks.as_deref().map(|p| p == "on"),
        require_evals: None,
        reason: blank(&form.reason),
    };
    let done = labels::put(
        &state.label_writing(),
        &signed.who,
        &name,
        &form.label,
        put,
        None,
    )
    .await;
    let notice = match done {
        Ok(Outcome::Moved(moved)) => {
            format!("{} points at revision {}.", moved.label, moved.revision)
        }
        Ok(Outcome::Requested(request)) => format!(
            "Change request {} waits for a sign-off: {} to revision {}.",
            request.id, request.label, request.to_revision
        ),
        Err(e) => return again(&state, &signed, &name, e).await,
    };
    shown(&state, &signed, &name, StatusCode::OK, notice).await
}

/// Moves a label back to the revision it held just before, at once.
async fn rollback(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<ReasonForm>,
) -> Response {
    let body = Rollback {
        reason: blank(&form.reason),
    };
    match labels::rollback(
        &state.label_writing(),
        &signed.who,
        &name,
        &label,
        body,
        None,
    )
    .await
    {
        Ok(moved) => {
            let notice = format!("{} is back at revision {}.", moved.label, moved.revision);
            shown(&state, &signed, &name, StatusCode::OK, notice).await
        }
        Err(e) => again(&state, &signed, &name, e).await,
    }
}

/// The releases page with `notice` above it.
pub(super) async fn shown(
    state: &AppState,
    signed: &Signed,
    name: &str,
    status: StatusCode,
    notice: String,
) -> Response {
    let pair = Pair {
        from: None,
        to: None,
        replay: None,
    };
    match page(state, signed, name, pair).await {
        Ok(mut page) => {
            page.notice = Some(notice);
            render(Some(signed), status, "releases.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

/// A refused write: the page again with the reason, at the refusal's status.
pub(super) async fn again(state: &AppState, signed: &Signed, name: &str, error: Error) -> Response {
    refusal(signed, error, async |status, error| {
        shown(state, signed, name, status, error.message).await
    })
    .await
}

/// Approve or decline a change request; then back to the queue.
async fn decide(
    State(state): State<AppState>,
    signed: Signed,
    Path((id, decision)): Path<(i32, String)>,
    Checked(form): Checked<ReasonForm>,
) -> Response {
    let body = Decision {
        reason: blank(&form.reason),
    };
    let done = match decision.as_str() {
        "approve" => change_requests::approve(&state.writer(None), &signed.who, id, body).await,
        "decline" => change_requests::decline(&state.writer(None), &signed.who, id, body).await,
        "checks" => {
            change_requests::recheck(
                &state.db,
                &signed.who,
                id,
                &state.settings.evals,
                state.clock.now(),
            )
            .await
        }
        _ => Err(Error::not_found(
            "no such decision: approve, decline or checks",
        )),
    };
    match done {
        Ok(_) => Redirect::to("/console/proposals").into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}

/// The change requests waiting for a sign-off that `signed` may see.
pub async fn pending(
    state: &AppState,
    signed: &Signed,
) -> Result<Vec<change_requests::ChangeRequestView>> {
    if !change_requests::may_read(&signed.who) {
        return Ok(Vec::new());
    }
    let filter = Filter {
        state: Some(ChangeState::Pending),
        agent: None,
    };
    let now = state.clock.now();
    Ok(change_requests::list(&state.db, &signed.who, filter, now)
        .await?
        .change_requests)
}

#[derive(Serialize)]
struct Releases {
    title: String,
    agent: String,
    labels: Vec<LabelView>,
    /// Each label's moves, newest first, in the order of `labels`.
    histories: Vec<LabelHistory>,
    /// Each label's rollout panel (every label but `latest`).
    rollouts: Vec<RolloutPanel>,
    revisions: Vec<RevisionSummary>,
    /// The pair compared: the asked one, else the two newest revisions.
    compared: Option<RevisionDiff>,
    /// The reader's tenant's recorded calls replayed against the pair (asked for).
    replayed: Option<ReplayReport>,
    /// What the last form did, or why it was refused.
    notice: Option<String>,
}

#[derive(Deserialize)]
struct Pair {
    from: Option<i32>,
    to: Option<i32>,
    /// Replay the recorded calls against `to` too.
    replay: Option<String>,
}

async fn releases(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(pair): Query<Pair>,
) -> Response {
    match page(&state, &signed, &name, pair).await {
        Ok(page) => render(Some(&signed), StatusCode::OK, "releases.html", page),
        Err(e) => error_page(Some(&signed), &e),
    }
}

async fn page(state: &AppState, signed: &Signed, name: &str, pair: Pair) -> Result<Releases> {
    let labels = read::labels(&state.db, name).await?.labels;
    let mut histories = Vec::with_capacity(labels.len());
    let mut rollouts = Vec::with_capacity(labels.len());
    for label in &labels {
        histories.push(read::history(&state.db, name, &label.name, Default::default()).await?);
        if label.name != LATEST {
            rollouts.push(panel(state, signed, name, label).await?);
        }
    }
    let revisions = read::revisions(&state.db, name, read::Page::first())
        .await?
        .revisions;
    let newest = revisions.first().map(|r| r.number);
    let to = pair.to.or(newest);
    let from = pair.from.or(to.map(|t| (t - 1).max(1)));
    let compared = match (from, to) {
        (Some(from), Some(to)) => Some(diff::between(&state.db, name, from, to).await?),
        _ => None,
    };
    let replayed = match (from, to, pair.replay.is_some()) {
        (Some(base), Some(candidate), true) => {
            let who = Replayer {
                tenant: signed.who.tenant(),
                member: &signed.who.member,
            };
            let query = ReplayQuery {
                candidate: Some(candidate),
                base: Some(base),
                limit: None,
            };
            Some(replay::run(&state.db, who, name, query).await?)
        }
        _ => None,
    };
    Ok(Releases {
        title: format!("Releases of {name}"),
        agent: name.to_owned(),
        labels,
        histories,
        rollouts,
        revisions,
        compared,
        replayed,
        notice: None,
    })
}

/// One label's rollout panel: the running rollout (if any) with both sides'
/// outcomes, else the last one that ended.
#[derive(Serialize)]
struct RolloutPanel {
    label: String,
    /// The label's revision: the base a new rollout would start from.
    revision: i32,
    current: Option<Shown>,
    /// The newest ended rollout, when none runs.
    last: Option<Shown>,
}

/// A rollout as the page shows it: numbers already formatted.
#[derive(Serialize)]
struct Shown {
    rollout: RolloutView,
    /// `10`, `12.5`: the share without a trailing `.0`.
    percent: String,
    paused: bool,
    /// Base then candidate.
    sides: [Side; 2],
    /// Oldest first, with their shares formatted.
    events: Vec<(String, RolloutEventShown)>,
}

#[derive(Serialize)]
struct RolloutEventShown {
    kind: String,
    by: Option<String>,
    reason: Option<String>,
    at: String,
}

/// One side's outcomes: the counts of the outcomes read (in the tenants the
/// reader sees), for its revision.
#[derive(Serialize)]
struct Side {
    name: &'static str,
    revision: i32,
    successes: u64,
    failures: u64,
    /// `12.5 %`, or `—` with nothing reported.
    failure_rate: String,
}

async fn panel(
    state: &AppState,
    signed: &Signed,
    agent: &str,
    label: &LabelView,
) -> Result<RolloutPanel> {
    let status = rollout_ops::status(&state.db, agent, &label.name).await?;
    let tenant = (signed.who.role != Role::Operator).then(|| signed.who.tenant());
    let current = match status.current {
        Some(view) => Some(shown_rollout(state, agent, tenant, view).await?),
        None => None,
    };
    let last = match (current.is_none(), status.past.into_iter().next()) {
        (true, Some(view)) => Some(shown_rollout(state, agent, tenant, view).await?),
        _ => None,
    };
    Ok(RolloutPanel {
        label: label.name.clone(),
        revision: label.revision,
        current,
        last,
    })
}

async fn shown_rollout(
    state: &AppState,
    agent: &str,
    tenant: Option<&str>,
    rollout: RolloutView,
) -> Result<Shown> {
    let side = async |name: &'static str, revision: i32| -> Result<Side> {
        let report = outcomes::report(&state.db, agent, tenant, Some(revision)).await?;
        let counted = report.revisions.into_iter().next();
        let (successes, failures, rate) = counted
            .map(|r: RevisionOutcomes| (r.successes, r.failures, r.failure_rate))
            .unwrap_or((0, 0, None));
        Ok(Side {
            name,
            revision,
            successes,
            failures,
            failure_rate: rate.map_or_else(|| "—".to_owned(), |r| format!("{:.1} %", r * 100.0)),
        })
    };
    let sides = [
        side("Base", rollout.base_revision).await?,
        side("Candidate", rollout.candidate_revision).await?,
    ];
    let events = rollout
        .events
        .iter()
        .map(|e| {
            let shown = RolloutEventShown {
                kind: e.kind.as_str().replace('_', " "),
                by: e.by.clone(),
                reason: e.reason.clone(),
                at: e.at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            };
            (format!("{}", e.percent), shown)
        })
        .collect();
    Ok(Shown {
        percent: format!("{}", rollout.percent),
        paused: rollout.state != crate::releases::traffic::RolloutState::Active,
        sides,
        events,
        rollout,
    })
}
