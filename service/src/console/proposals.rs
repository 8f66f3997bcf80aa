//! The approver's queue: the tenant's proposals with their descriptions and
//! preview rows, one proposal's events as a timeline, and approve, decline and
//! retry, through the same functions (and tenant rule) as the API.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::page::{CsrfOnly, Path, Query, Signed, error_page, render};
use super::session::Checked;
use crate::actions::decide::{self, State as ProposalState};
use crate::actions::views::{ProposalDetail, ProposalView};
use crate::app::AppState;
use crate::error::{Error, Result};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/proposals", get(queue))
        .route("/console/proposals/{id}", get(detail))
        .route("/console/proposals/{id}/{decision}", post(decide_one))
}

#[derive(Serialize)]
struct Queue {
    title: &'static str,
    proposals: Vec<ProposalView>,
    /// Change requests to move protected labels, waiting for a sign-off.
    change_requests: Vec<crate::promotion::change_requests::ChangeRequestView>,
    /// Whether the reader may approve and decline change requests (it sees them
    /// when it may read them; its own it may withdraw).
    signs_off: bool,
    member: String,
    /// The state shown (`all` for every state).
    showing: String,
    limit: u64,
}

#[derive(Deserialize)]
struct Filter {
    state: Option<String>,
}

/// Waiting proposals by default; `?state=all` or another state on request.
async fn queue(
    State(state): State<AppState>,
    signed: Signed,
    Query(filter): Query<Filter>,
) -> Response {
    let showing = filter.state.unwrap_or_else(|| "proposed".to_owned());
    let read = async {
        let only = match showing.as_str() {
            "all" => None,
            other => Some(
                other
                    .parse::<ProposalState>()
                    .map_err(|e| Error::invalid(e.to_string()))?,
            ),
        };
        let proposals = decide::queue(&state.db, &signed.who, only).await?;
        let requests = super::releases::pending(&state, &signed).await?;
        Ok::<_, Error>((proposals, requests))
    };
    match read.await {
        Ok((proposals, change_requests)) => {
            let page = Queue {
                title: "Proposals",
                proposals,
                change_requests,
                signs_off: crate::promotion::change_requests::may_sign_off(&signed.who),
                member: signed.who.member.clone(),
                showing,
                limit: decide::QUEUE_LIMIT,
            };
            render(Some(&signed), StatusCode::OK, "proposals.html", page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Serialize)]
struct Detail {
    title: String,
    proposal: ProposalDetail,
    result: Option<String>,
}

async fn detail(State(state): State<AppState>, signed: Signed, Path(id): Path<i32>) -> Response {
    match read(&state, &signed, id).await {
        Ok(page) => render(Some(&signed), StatusCode::OK, "proposal.html", page),
        Err(e) => error_page(Some(&signed), &e),
    }
}

async fn read(state: &AppState, signed: &Signed, id: i32) -> Result<Detail> {
    let proposal = decide::get(&state.db, &signed.who, id).await?;
    let result = proposal
        .proposal
        .result
        .as_ref()
        .map(|r| serde_json::to_string_pretty(r).unwrap_or_default());
    Ok(Detail {
        title: format!("Proposal {id}"),
        proposal,
        result,
    })
}

/// Approve, decline or retry; then back to the proposal, whatever it became.
async fn decide_one(
    State(state): State<AppState>,
    signed: Signed,
    Path((id, decision)): Path<(i32, String)>,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    let done = match decision.as_str() {
        "approve" => decide::approve(&state.runner(), &signed.who, id, None).await,
        "decline" => decide::decline(&state.db, &signed.who, id, state.clock.now(), None).await,
        "retry" => decide::retry(&state.runner(), &signed.who, id, None).await,
        _ => Err(Error::not_found(
            "no such decision: approve, decline or retry",
        )),
    };
    match done {
        Ok(_) => Redirect::to(&format!("/console/proposals/{id}")).into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}
