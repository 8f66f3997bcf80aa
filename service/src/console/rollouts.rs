//! A label's rollout from the releases page: start, set the share, pause,
//! resume, complete and abort. The same domain calls and rules as the API
//! ([`crate::promotion::rollouts`]): operators only, CSRF-checked forms; a protected
//! label of a gated agent opens a change request for a start or a completion.
//! Each answers with the releases page and what it did (or why it was refused).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::post;
use serde::Deserialize;

use super::page::{Path, blank};
use super::releases::{again, shown};
use super::session::{Checked, Operator, csrf_field};
use crate::app::AppState;
use crate::error::{Error, Result};
use crate::promotion::rollouts::{self, Outcome, RolloutEnd, RolloutPatch, RolloutStart};
use crate::releases::traffic::Guard;

const BASE: &str = "/console/agents/{agent}/releases/labels/{label}/rollout";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(BASE, post(start))
        .route(&format!("{BASE}/share"), post(share))
        .route(&format!("{BASE}/pause"), post(pause))
        .route(&format!("{BASE}/resume"), post(resume))
        .route(&format!("{BASE}/complete"), post(complete))
        .route(&format!("{BASE}/abort"), post(abort))
}

/// A start: the candidate, its share, an optional guard (both fields or
/// neither) and a reason.
#[derive(Deserialize)]
struct StartForm {
    #[serde(default)]
    csrf: String,
    candidate: i32,
    percent: f64,
    #[serde(default)]
    min_outcomes: String,
    #[serde(default)]
    alpha: String,
    #[serde(default)]
    reason: String,
}

/// A new share.
#[derive(Deserialize)]
struct ShareForm {
    #[serde(default)]
    csrf: String,
    percent: f64,
    #[serde(default)]
    reason: String,
}

/// A pause, resume, completion or abort: its reason.
#[derive(Deserialize)]
struct EndForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

csrf_field!(StartForm, ShareForm, EndForm);

/// The guard the two optional fields give: none when both are blank.
fn guard(min_outcomes: &str, alpha: &str) -> Result<Option<Guard>> {
    let (min_outcomes, alpha) = (min_outcomes.trim(), alpha.trim());
    if min_outcomes.is_empty() && alpha.is_empty() {
        return Ok(None);
    }
    let bad = || {
        Error::refused(
            "invalid_guard",
            "a guard needs both its minimum outcomes (a whole number) and its alpha (a number)",
        )
    };
    let guard = Guard {
        min_outcomes: min_outcomes.parse().map_err(|_| bad())?,
        alpha: alpha.parse().map_err(|_| bad())?,
    };
    guard.check()?;
    Ok(Some(guard))
}

async fn start(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<StartForm>,
) -> Response {
    let body = match guard(&form.min_outcomes, &form.alpha) {
        Ok(guard) => RolloutStart {
            candidate: form.candidate,
            percent: form.percent,
            guard,
            reason: blank(&form.reason),
        },
        Err(e) => return again(&state, &signed, &name, e).await,
    };
    let done = rollouts::start(
        &state.label_writing(),
        &signed.who,
        &name,
        &label,
        body,
        None,
    )
    .await;
    let notice = match done {
        Ok(Outcome::Done(r)) => format!(
            "The rollout of revision {} on {} started at {} %.",
            r.candidate_revision, r.label, r.percent
        ),
        Ok(Outcome::Requested(request)) => format!(
            "Change request {} waits for a sign-off: a rollout of revision {} on {}.",
            request.id, request.to_revision, request.label
        ),
        Err(e) => return again(&state, &signed, &name, e).await,
    };
    shown(&state, &signed, &name, StatusCode::OK, notice).await
}

async fn share(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<ShareForm>,
) -> Response {
    let body = RolloutPatch {
        percent: Some(form.percent),
        paused: None,
        reason: blank(&form.reason),
    };
    patched(state, signed, name, label, body).await
}

async fn pause(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<EndForm>,
) -> Response {
    let body = RolloutPatch {
        percent: None,
        paused: Some(true),
        reason: blank(&form.reason),
    };
    patched(state, signed, name, label, body).await
}

async fn resume(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<EndForm>,
) -> Response {
    let body = RolloutPatch {
        percent: None,
        paused: Some(false),
        reason: blank(&form.reason),
    };
    patched(state, signed, name, label, body).await
}

async fn patched(
    state: AppState,
    signed: super::page::Signed,
    name: String,
    label: String,
    body: RolloutPatch,
) -> Response {
    let notice = match rollouts::patch(
        &state.label_writing(),
        &signed.who,
        &name,
        &label,
        body,
        None,
    )
    .await
    {
        Ok(Outcome::Done(r)) => {
            let how = match r.state {
                crate::releases::traffic::RolloutState::Paused => "paused: everyone gets the base",
                crate::releases::traffic::RolloutState::Held => {
                    "held by the guard: everyone gets the base until a signer resumes it"
                }
                _ => "active",
            };
            format!(
                "The rollout on {} is {how}, at {} % for revision {}.",
                r.label, r.percent, r.candidate_revision
            )
        }
        Ok(Outcome::Requested(request)) => format!(
            "Change request {} waits for a sign-off: raising the rollout on {} to {} % (above the share signed off).",
            request.id,
            request.label,
            request.percent.unwrap_or_default()
        ),
        Err(e) => return again(&state, &signed, &name, e).await,
    };
    shown(&state, &signed, &name, StatusCode::OK, notice).await
}

async fn complete(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<EndForm>,
) -> Response {
    let body = RolloutEnd {
        reason: blank(&form.reason),
    };
    let done = rollouts::complete(
        &state.label_writing(),
        &signed.who,
        &name,
        &label,
        body,
        None,
    )
    .await;
    let notice = match done {
        Ok(Outcome::Done(r)) => format!(
            "The rollout completed: {} points at revision {}.",
            r.label, r.candidate_revision
        ),
        Ok(Outcome::Requested(request)) => format!(
            "Change request {} waits for a sign-off: completing the rollout of revision {} on {}.",
            request.id, request.to_revision, request.label
        ),
        Err(e) => return again(&state, &signed, &name, e).await,
    };
    shown(&state, &signed, &name, StatusCode::OK, notice).await
}

async fn abort(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, label)): Path<(String, String)>,
    Checked(form): Checked<EndForm>,
) -> Response {
    let body = RolloutEnd {
        reason: blank(&form.reason),
    };
    match rollouts::abort(
        &state.label_writing(),
        &signed.who,
        &name,
        &label,
        body,
        None,
    )
    .await
    {
        Ok(r) => {
            let notice = format!(
                "The rollout was aborted: everyone on {} gets revision {} again.",
                r.label, r.base_revision
            );
            shown(&state, &signed, &name, StatusCode::OK, notice).await
        }
        Err(e) => again(&state, &signed, &name, e).await,
    }
}
