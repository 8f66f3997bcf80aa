//! An agent's model settings in the console: the JSON the API takes, shown and
//! saved (an operator's save is a new revision, through sign-off on a gated agent).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::page::{Path, Query, Signed, error_page, render};
use super::session::{Admin, Checked, Operator, csrf_field};
use crate::agents::model;
use crate::app::AppState;
use crate::error::{Error, Kind, Result};
use crate::releases::model::ModelSettings;

pub fn routes() -> Router<AppState> {
    Router::new().route("/console/agents/{agent}/model", get(page).post(save))
}

#[derive(Deserialize, Default)]
struct ModelForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    settings: String,
}

csrf_field!(ModelForm);

#[derive(Serialize, Default)]
struct Editor {
    title: String,
    agent: String,
    /// The settings as pretty JSON (empty: none).
    settings: String,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<String>,
}

async fn editor(state: &AppState, name: &str) -> Result<Editor> {
    let found = model::get(&state.db, name).await?;
    let settings = match &found.settings {
        Some(s) => serde_json::to_string_pretty(s).map_err(Error::internal)?,
        None => String::new(),
    };
    Ok(Editor {
        title: format!("Model settings of {name}"),
        agent: found.agent,
        settings,
        ..Default::default()
    })
}

async fn page(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(saved): Query<Saved>,
) -> Response {
    match editor(&state, &name).await {
        Ok(mut page) => {
            if saved.saved.is_some() {
                page.notice = Some("Saved: the settings are in a new revision.".to_owned());
            }
            render(Some(&signed), StatusCode::OK, "model.html", page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

/// The settings as the form holds them: JSON (empty: none).
fn parse(text: &str) -> Result<Option<ModelSettings>> {
    match text.trim() {
        "" => Ok(None),
        text => serde_json::from_str(text).map(Some).map_err(|e| {
            Error::refused(
                "invalid_model_settings",
                format!("the settings are not valid: {e}"),
            )
        }),
    }
}

async fn save(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<ModelForm>,
) -> Response {
    let saved = match parse(&form.settings) {
        Ok(settings) => model::save(&state.writer(None), &signed.who.member, &name, settings).await,
        Err(e) => Err(e),
    };
    match saved {
        Ok(_) => Redirect::to(&format!("/console/agents/{name}/model?saved=model")).into_response(),
        Err(e) if matches!(e.kind, Kind::Internal | Kind::NotFound) => {
            error_page(Some(&signed), &e)
        }
        Err(e) => again(&state, &signed, &name, form, e).await,
    }
}

/// The page again with the form as typed and why it was refused.
async fn again(
    state: &AppState,
    signed: &Signed,
    name: &str,
    form: ModelForm,
    e: Error,
) -> Response {
    match editor(state, name).await {
        Ok(mut page) => {
            page.settings = form.settings;
            page.error = Some(e.message);
            render(Some(signed), crate::web::status(e.kind), "model.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}
