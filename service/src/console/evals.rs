//! Evaluation runs: the newest runs, one run's page (its progress, refreshed by htmx
//! while it is queued or running, and its cases with each assertion's verdict), a
//! candidate's run side by side with its base's (`?base=`, and `&only=regressed` for
//! the cases that turned from pass to fail), and cancel. Through the same functions
//! and tenant rule as the API: an admin sees its tenant's runs (another tenant's is
//! 404), an operator every tenant's.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::page::{CsrfOnly, Path, Query, Signed, error_page, render, wants_partial};
use super::session::{Admin, Checked};
use crate::app::AppState;
use crate::error::{Error, Result};
use crate::evals::compare::{AssertionCount, Comparison};
use crate::evals::gate;
use crate::evals::runs::{self, CasePair, CaseResult, RunView};

/// Runs shown on the list.
const LIST_ROWS: u64 = 50;

/// The side-by-side filter that keeps the cases that turned from pass to fail.
const REGRESSED: &str = "regressed";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/evals", get(list))
        .route("/console/eval-runs/{id}", get(run))
        .route("/console/eval-runs/{id}/cancel", post(cancel))
}

#[derive(Serialize)]
struct Runs {
    title: &'static str,
    runs: Vec<RunView>,
    limit: u64,
}

/// The newest runs the reader may see.
async fn list(State(state): State<AppState>, Admin(signed): Admin) -> Response {
    match runs::list(&state.db, &signed.who, None, LIST_ROWS).await {
        Ok(list) => {
            let page = Runs {
                title: "Evaluations",
                runs: list.runs,
                limit: LIST_ROWS,
            };
            render(Some(&signed), StatusCode::OK, "eval_runs.html", page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

/// A run alone, or against a base run (`base`), every case or only the regressed.
#[derive(Deserialize)]
struct Side {
    base: Option<i32>,
    only: Option<String>,
}

#[derive(Serialize)]
struct RunPage {
    title: String,
    run: RunView,
    /// Queued or running (either run, side by side): the page polls itself.
    live: bool,
    /// This page's address, which the poll asks again.
    here: String,
    /// The run's cases (alone).
    cases: Vec<CaseResult>,
    compared: Option<Compared>,
}

/// The comparison's header and its cases, filtered.
#[derive(Serialize)]
struct Compared {
    base: RunView,
    comparison: Comparison,
    assertions: Vec<AssertionCount>,
    cases: Vec<CasePair>,
    only_regressed: bool,
    /// The page without the filter, and with it.
    every_case: String,
    regressed_only: String,
}

/// A run's page; to an htmx poll, the part that changes.
async fn run(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Query(side): Query<Side>,
    headers: HeaderMap,
) -> Response {
    match read(&state, &signed, id, side).await {
        Ok(page) if wants_partial(&headers) => {
            render(Some(&signed), StatusCode::OK, "eval_run_body.html", page)
        }
        Ok(page) => render(Some(&signed), StatusCode::OK, "eval_run.html", page),
        Err(e) => error_page(Some(&signed), &e),
    }
}

async fn read(state: &AppState, signed: &Signed, id: i32, side: Side) -> Result<RunPage> {
    let only_regressed = match side.only.as_deref() {
        None | Some("") => false,
        Some(REGRESSED) => true,
        Some(_) => return Err(Error::invalid("`only` may be `regressed` or nothing")),
    };
    match side.base {
        None => alone(state, signed, id).await,
        Some(base) => side_by_side(state, signed, id, base, only_regressed).await,
    }
}

/// A run and its cases.
async fn alone(state: &AppState, signed: &Signed, id: i32) -> Result<RunPage> {
    let found = runs::cases(&state.db, &signed.who, id).await?;
    Ok(RunPage {
        title: format!("Evaluation run {id}"),
        live: !found.run.state.ended(),
        here: format!("/console/eval-runs/{id}"),
        run: found.run,
        cases: found.cases,
        compared: None,
    })
}

/// Run `id` against run `base`, case by case, at the release check's alpha.
async fn side_by_side(
    state: &AppState,
    signed: &Signed,
    id: i32,
    base: i32,
    only_regressed: bool,
) -> Result<RunPage> {
    let found = runs::compare_runs(&state.db, &signed.who, id, base, gate::ALPHA).await?;
    let every_case = format!("/console/eval-runs/{id}?base={base}");
    let regressed_only = format!("{every_case}&only={REGRESSED}");
    let cases = found
        .cases
        .into_iter()
        .filter(|c| !only_regressed || c.change == REGRESSED)
        .collect();
    Ok(RunPage {
        title: format!("Evaluation run {id} against run {base}"),
        live: !found.candidate.state.ended() || !found.base.state.ended(),
        here: if only_regressed {
            regressed_only.clone()
        } else {
            every_case.clone()
        },
        run: found.candidate,
        cases: Vec::new(),
        compared: Some(Compared {
            base: found.base,
            comparison: found.comparison,
            assertions: found.assertions,
            cases,
            only_regressed,
            every_case,
            regressed_only,
        }),
    })
}

/// Cancels a run (a queued one at once, a running one before its next case); then
/// back to its page.
async fn cancel(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(id): Path<i32>,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    match runs::cancel(&state.db, &signed.who, id, state.clock.now(), None).await {
        Ok(_) => {
            tracing::info!(eval_run = id, by = %signed.who.key_name, "evaluation run cancelled in the console");
            Redirect::to(&format!("/console/eval-runs/{id}")).into_response()
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}
