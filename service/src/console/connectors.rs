//! The admin's connector pages: list, create and edit. Header values are
//! write-only here as in the API: the pages show header names, a form never holds
//! a stored value, and an edit with the headers field left empty keeps them.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::page::{CsrfOnly, Path, Query, Signed, blank, error_page, refusal, render};
use super::session::{Checked, Operator, csrf_field};
use crate::app::AppState;
use crate::connectors::pins::{self, ChangeFilter, ToolChangeView};
use crate::connectors::review;
use crate::connectors::store::{self as store, ConnectorUpdate, ConnectorView, NewConnector};
use crate::connectors::sync::{self as syncing, SyncReport, SyncRequest};
use crate::error::{Error, Result};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/connectors", get(list).post(create))
        .route("/console/connectors/{name}", post(update))
        .route("/console/connectors/{name}/sync", post(sync))
        .route("/console/tool-changes/{id}/{decision}", post(decide))
}

/// A connector form as posted. Headers are one `Name: value` per line.
#[derive(Serialize, Deserialize, Default)]
struct Fields {
    #[serde(default, skip_serializing)]
    csrf: String,
    #[serde(default)]
    name: String,
    /// `http` or `mcp` (new connectors only).
    #[serde(default)]
    kind: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    method: String,
    #[serde(default)]
    timeout_ms: String,
    /// Never echoed back: a refused form comes back with this field empty.
    #[serde(default, skip_serializing)]
    headers: String,
    /// A checkbox on the edit form: remove every header.
    #[serde(default, skip_serializing)]
    clear_headers: Option<String>,
    /// A checkbox: apply the server's new and changed tools at once on sync.
    #[serde(default)]
    trusted: Option<String>,
}

csrf_field!(Fields, SyncForm);

impl Fields {
    fn timeout(&self) -> Result<Option<i32>> {
        let text = self.timeout_ms.trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| {
            Error::refused(
                "invalid_timeout",
                "timeout must be a whole number of milliseconds",
            )
        })
    }

    /// The headers field as a map; `None` when it is empty.
    fn headers(&self) -> Result<Option<Map<String, Value>>> {
        let mut map = Map::new();
        for line in self.headers.lines().filter(|l| !l.trim().is_empty()) {
            let Some((name, value)) = line.split_once(':') else {
                return Err(Error::refused(
                    "invalid_headers",
                    "write each header on its own line as `Name: value`",
                ));
            };
            map.insert(
                name.trim().to_owned(),
                Value::String(value.trim().to_owned()),
            );
        }
        Ok((!map.is_empty()).then_some(map))
    }
}

#[derive(Serialize, Default)]
struct Connectors {
    title: &'static str,
    connectors: Vec<ConnectorView>,
    form: Fields,
    /// The connector whose form the error belongs to; empty for the new one.
    failed: String,
    error: Option<String>,
    /// The connector just saved; the page compares it with each name and never shows it.
    saved: Option<String>,
    /// A sync's report (or dry run's plan), shown under its connector.
    report: Option<SyncReport>,
    /// Remote definitions held for an operator, newest first.
    changes: Vec<ToolChangeView>,
    /// The change just accepted or rejected, and how.
    decided: Option<String>,
}

/// The page around `page`'s form state, with the live connectors filled in.
async fn show(state: &AppState, signed: &Signed, status: StatusCode, page: Connectors) -> Response {
    let read = async {
        let list = store::list(&state.db).await?;
        let held = pins::list(&state.db, ChangeFilter::default()).await?;
        Ok::<_, Error>((list, held))
    };
    match read.await {
        Ok((list, held)) => {
            let page = Connectors {
                title: "Connectors",
                connectors: list.connectors,
                changes: held.changes,
                ..page
            };
            render(Some(signed), status, "connectors.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<String>,
    decided: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Query(query): Query<Saved>,
) -> Response {
    let page = Connectors {
        form: Fields {
            method: "POST".to_owned(),
            timeout_ms: "30000".to_owned(),
            ..Default::default()
        },
        saved: query.saved,
        decided: query.decided,
        ..Default::default()
    };
    show(&state, &signed, StatusCode::OK, page).await
}

/// Accepts or rejects a held change, then the page again saying which.
async fn decide(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((id, decision)): Path<(i32, String)>,
    Checked(_form): Checked<CsrfOnly>,
) -> Response {
    let writer = state.writer(None);
    let done = match decision.as_str() {
        "accept" => review::accept(&writer, &signed.who, id).await,
        "reject" => review::reject(&writer, &signed.who, id).await,
        _ => Err(Error::not_found("no such decision")),
    };
    match done {
        Ok(change) => {
            tracing::info!(change = id, by = %signed.who.key_name, "tool change {} in the console", change.state.as_str());
            Redirect::to(&format!(
                "/console/connectors?decided={}+change+{id}#changes",
                change.state.as_str()
            ))
            .into_response()
        }
        Err(e) => {
            let page = |status, e: Error| {
                let page = Connectors {
                    error: Some(e.message),
                    ..Default::default()
                };
                let (state, signed) = (state.clone(), signed.clone());
                async move { show(&state, &signed, status, page).await }
            };
            refusal(&signed, e, page).await
        }
    }
}

/// A refused write's page: the page again, the form as typed (headers excepted)
/// and the message, under the connector it belongs to (`failed`).
async fn again(
    state: &AppState,
    signed: &Signed,
    status: StatusCode,
    form: Fields,
    failed: String,
    e: Error,
) -> Response {
    let page = Connectors {
        form,
        failed,
        error: Some(e.message),
        ..Default::default()
    };
    show(state, signed, status, page).await
}

async fn create(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Checked(form): Checked<Fields>,
) -> Response {
    let create = async {
        let new = NewConnector {
            name: form.name.trim().to_owned(),
            kind: blank(&form.kind).unwrap_or_else(|| "http".to_owned()),
            url: form.url.trim().to_owned(),
            method: blank(&form.method).unwrap_or_else(|| "POST".to_owned()),
            headers: form.headers()?.unwrap_or_default(),
            timeout_ms: form.timeout()?.unwrap_or(30_000),
            trusted: form.trusted.is_some(),
        };
        store::create(&state.writer(None), &state.outbound, &state.secrets, new).await
    };
    match create.await {
        Ok(c) => {
            tracing::info!(connector = %c.name, by = %signed.who.key_name, "connector created in the console");
            Redirect::to(&format!(
                "/console/connectors?saved={0}#connector-{0}",
                c.name
            ))
            .into_response()
        }
        Err(e) => {
            let form_again = |status, e| again(&state, &signed, status, form, String::new(), e);
            refusal(&signed, e, form_again).await
        }
    }
}

async fn update(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<Fields>,
) -> Response {
    let update = async {
        let headers = match form.headers()? {
            Some(map) => Some(map),
            None if form.clear_headers.is_some() => Some(Map::new()),
            None => None,
        };
        let change = ConnectorUpdate {
            url: blank(&form.url),
            method: blank(&form.method),
            headers,
            timeout_ms: form.timeout()?,
            trusted: Some(form.trusted.is_some()),
        };
        store::update(
            &state.writer(None),
            &state.outbound,
            &state.secrets,
            &name,
            change,
        )
        .await
    };
    match update.await {
        Ok(_) => Redirect::to(&format!(
            "/console/connectors?saved={name}#connector-{name}"
        ))
        .into_response(),
        Err(e) => {
            let form_again = |status, e| again(&state, &signed, status, Fields::default(), name, e);
            refusal(&signed, e, form_again).await
        }
    }
}

#[derive(Deserialize)]
struct SyncForm {
    #[serde(default)]
    csrf: String,
    /// `dry-run` (the default) or `sync`.
    #[serde(default)]
    mode: String,
    #[serde(default)]
    agent: String,
    /// One `remote=loadout_name` per line.
    #[serde(default)]
    renames: String,
    /// A checkbox: replace admins' edits with the server's.
    overwrite: Option<String>,
}

/// Runs a sync (or its dry run) and shows the report under the connector.
async fn sync(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<SyncForm>,
) -> Response {
    let request = SyncRequest {
        dry_run: form.mode != "sync",
        overwrite: form.overwrite.is_some(),
        rename: form
            .renames
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(remote, name)| (remote.trim().to_owned(), name.trim().to_owned()))
            .collect(),
        allow_loose: Default::default(),
        agent: blank(&form.agent),
    };
    match syncing::run(&state.writer(None), &state.remote(), &name, request).await {
        Ok(report) => {
            if !report.dry_run {
                tracing::info!(connector = %name, by = %signed.who.key_name, "connector synced in the console");
            }
            let page = Connectors {
                failed: name,
                report: Some(report),
                ..Default::default()
            };
            show(&state, &signed, StatusCode::OK, page).await
        }
        Err(e) => {
            let form_again = |status, e| again(&state, &signed, status, Fields::default(), name, e);
            refusal(&signed, e, form_again).await
        }
    }
}
