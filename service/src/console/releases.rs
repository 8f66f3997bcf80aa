//! An agent's releases: its labels and where each has been, its revisions, and
//! what changed between any two of them.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::page::{Path, Query, error_page, render};
use super::session::Admin;
use crate::app::AppState;
use crate::error::Result;
use crate::releases::diff::{self, RevisionDiff};
use crate::releases::read::{self, LabelHistory, LabelView, RevisionSummary};

pub fn routes() -> Router<AppState> {
    Router::new().route("/console/agents/{agent}/releases", get(releases))
}

#[derive(Serialize)]
struct Releases {
    title: String,
    agent: String,
    labels: Vec<LabelView>,
    /// Each label's moves, newest first, in the order of `labels`.
    histories: Vec<LabelHistory>,
    revisions: Vec<RevisionSummary>,
    /// The pair compared: the asked one, else the two newest revisions.
    compared: Option<RevisionDiff>,
}

#[derive(Deserialize)]
struct Pair {
    from: Option<i32>,
    to: Option<i32>,
}

async fn releases(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(pair): Query<Pair>,
) -> Response {
    match page(&state, &name, pair).await {
        Ok(page) => render(Some(&signed), StatusCode::OK, "releases.html", page),
        Err(e) => error_page(Some(&signed), &e),
    }
}

async fn page(state: &AppState, name: &str, pair: Pair) -> Result<Releases> {
    let labels = read::labels(&state.db, name).await?.labels;
    let mut histories = Vec::with_capacity(labels.len());
    for label in &labels {
        histories.push(read::history(&state.db, name, &label.name).await?);
    }
    let revisions = read::revisions(&state.db, name).await?.revisions;
    let newest = revisions.first().map(|r| r.number);
    let to = pair.to.or(newest);
    let from = pair.from.or(to.map(|t| (t - 1).max(1)));
    let compared = match (from, to) {
        (Some(from), Some(to)) => Some(diff::between(&state.db, name, from, to).await?),
        _ => None,
    };
    Ok(Releases {
        title: format!("Releases of {name}"),
        agent: name.to_owned(),
        labels,
        histories,
        revisions,
        compared,
    })
}
