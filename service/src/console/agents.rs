//! The agent editor: identity and soul, the template with lint as you type and a
//! preview of every channel, saves that send the version they replace, and the
//! template's versions with a line diff and restore.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::page::{
    CsrfOnly, Path, Query, Signed, blank, error_page, refusal, render, wants_partial,
};
use super::session::{Admin, Checked, Operator, csrf_field};
use crate::agents::definition::{self as agents, AgentUpdate, AgentView};
use crate::agents::preview::{self, ChannelRender, PreviewRequest};
use crate::agents::template::{self, Change, VersionView};
use crate::app::AppState;
use crate::error::{Error, Kind, Result};
use crate::prompt::lint::Problem;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/agents/{agent}", get(agent_page))
        .route("/console/agents/{agent}/soul", post(save_soul))
        .route("/console/agents/{agent}/template", post(save_template))
        .route("/console/agents/{agent}/template/lint", post(lint))
        .route("/console/agents/{agent}/template/preview", post(preview))
        .route("/console/agents/{agent}/versions", get(versions))
        .route(
            "/console/agents/{agent}/versions/{version}/restore",
            post(restore),
        )
}

/// The editor page's state: the agent, the text in the editor (saved or not),
/// and what the last action produced.
#[derive(Serialize, Default)]
struct Editor {
    title: String,
    agent: Option<AgentView>,
    display_name: String,
    role: String,
    description: String,
    /// The text in the template editor (the saved one unless a post failed).
    template: String,
    /// The version a save replaces.
    expected_version: i32,
    problems: Vec<Problem>,
    renders: Option<Vec<ChannelRender>>,
    preview: PreviewForm,
    /// A stale save: the version now saved and how the editor's text differs.
    conflict: Option<Conflict>,
    notice: Option<String>,
    error: Option<String>,
}

#[derive(Serialize)]
struct Conflict {
    current_version: i32,
    diff: Vec<DiffLine>,
}

/// One line of a diff: `equal`, `delete`, `insert`, or `gap` between hunks.
#[derive(Serialize)]
pub struct DiffLine {
    kind: &'static str,
    text: String,
}

/// A line diff with three lines of context around each change (the revision
/// diff's, so within its caps).
pub fn diff(old: &str, new: &str) -> Vec<DiffLine> {
    let change = crate::releases::diff::lines(old, new);
    let mut lines = Vec::new();
    if change.too_large {
        lines.push(DiffLine {
            kind: "gap",
            text: format!(
                "too large to compare line by line: {} lines before, {} after",
                change.deleted, change.inserted
            ),
        });
    }
    for (i, hunk) in change.hunks.into_iter().enumerate() {
        if i > 0 {
            lines.push(DiffLine {
                kind: "gap",
                text: "…".to_owned(),
            });
        }
        for line in hunk.lines {
            lines.push(DiffLine {
                kind: line.kind.as_str(),
                text: line.text,
            });
        }
    }
    lines
}

fn identity_field(identity: &Value, field: &str) -> String {
    identity
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The editor as saved now, with the saved template's lint.
async fn editor(state: &AppState, name: &str) -> Result<Editor> {
    let agent = agents::get(&state.db, name).await?;
    let template = agent.prompt_template.clone().unwrap_or_default();
    let problems = template::lint(&state.db, state.settings.max_template_bytes, &template).await?;
    Ok(Editor {
        title: format!("Agent {}", agent.name),
        display_name: identity_field(&agent.identity, "display_name"),
        role: identity_field(&agent.identity, "role"),
        description: identity_field(&agent.identity, "description"),
        expected_version: agent.template_version,
        template,
        problems,
        agent: Some(agent),
        ..Default::default()
    })
}

fn show(signed: &Signed, status: StatusCode, page: Editor) -> Response {
    render(Some(signed), status, "agent.html", page)
}

#[derive(Deserialize)]
struct Notice {
    saved: Option<String>,
}

async fn agent_page(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(notice): Query<Notice>,
) -> Response {
    match editor(&state, &name).await {
        Ok(mut page) => {
            // Only our own words: the query cannot put text on the page.
            page.notice = match notice.saved.as_deref() {
                Some("soul") => Some("Saved the identity and soul.".to_owned()),
                Some("template") => Some("Saved the template.".to_owned()),
                _ => None,
            };
            show(&signed, StatusCode::OK, page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Deserialize)]
struct SoulForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    soul: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    role: String,
    #[serde(default)]
    description: String,
    expected_soul_version: Option<i32>,
}

csrf_field!(SoulForm, TemplateForm);

/// Identity and soul in one write; the soul's version must still be the one shown.
async fn save_soul(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<SoulForm>,
) -> Response {
    let write = async {
        let mut identity = agents::get(&state.db, &name).await?.identity;
        if let Value::Object(fields) = &mut identity {
            for (field, value) in [
                ("display_name", &form.display_name),
                ("role", &form.role),
                ("description", &form.description),
            ] {
                fields.insert(field.to_owned(), Value::String(value.trim().to_owned()));
            }
        }
        let update = AgentUpdate {
            identity: Some(identity),
            soul: Some(form.soul.replace("\r\n", "\n")),
            expected_soul_version: form.expected_soul_version,
            ..Default::default()
        };
        agents::update(&state.prompts(), &signed.who.member, &name, update, None).await
    };
    match write.await {
        Ok(_) => Redirect::to(&format!("/console/agents/{name}?saved=soul")).into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Deserialize, Default)]
struct TemplateForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    template: String,
    expected_version: Option<i32>,
    /// The checkbox: present when ticked.
    force: Option<String>,
    #[serde(default)]
    reason: String,
    #[serde(flatten)]
    preview: PreviewForm,
}

/// The preview's choices, echoed back into the form.
#[derive(Deserialize, Serialize, Default, Clone)]
struct PreviewForm {
    #[serde(default)]
    user_id: String,
    #[serde(default)]
    tz: String,
    /// `YYYY-MM-DDTHH:MM` (a `datetime-local` input), read in UTC.
    #[serde(default)]
    at: String,
}

impl TemplateForm {
    /// The editor's text with the browser's line endings made `\n` again.
    fn text(&self) -> String {
        self.template.replace("\r\n", "\n")
    }
}

fn parse_at(at: &str) -> Result<Option<DateTime<Utc>>> {
    let Some(at) = blank(at) else { return Ok(None) };
    let parsed = NaiveDateTime::parse_from_str(&at, "%Y-%m-%dT%H:%M")
        .or_else(|_| NaiveDateTime::parse_from_str(&at, "%Y-%m-%dT%H:%M:%S"));
    match parsed {
        Ok(naive) => Ok(Some(naive.and_utc())),
        Err(_) => Err(Error::invalid(format!(
            "time: {at:?} is not a date and time like 2026-11-24T09:30"
        ))),
    }
}

/// Lint as you type: the Problems region for the editor's text.
async fn lint(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    Checked(form): Checked<TemplateForm>,
) -> Response {
    if wants_partial(&headers) {
        let problems = match template::lint(
            &state.db,
            state.settings.max_template_bytes,
            &form.text(),
        )
        .await
        {
            Ok(problems) => problems,
            Err(e) => return error_page(Some(&signed), &e),
        };
        let page = Editor {
            problems,
            ..Default::default()
        };
        return render(Some(&signed), StatusCode::OK, "problems.html", page);
    }
    edited(&state, &signed, &name, form, |_| ()).await
}

/// The editor page re-rendered around the posted text and its lint, with
/// `change` applied.
async fn edited(
    state: &AppState,
    signed: &Signed,
    name: &str,
    form: TemplateForm,
    change: impl FnOnce(&mut Editor),
) -> Response {
    match editor(state, name).await {
        Ok(mut page) => {
            page.template = form.text();
            match template::lint(&state.db, state.settings.max_template_bytes, &page.template).await
            {
                Ok(problems) => page.problems = problems,
                Err(e) => return error_page(Some(signed), &e),
            }
            page.preview = form.preview.clone();
            if let Some(expected) = form.expected_version {
                page.expected_version = expected;
            }
            change(&mut page);
            let status = if page.error.is_some() {
                StatusCode::UNPROCESSABLE_ENTITY
            } else {
                StatusCode::OK
            };
            show(signed, status, page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

/// Every channel rendered from the unsaved text, for the chosen user, zone and time.
async fn preview(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    headers: HeaderMap,
    Checked(form): Checked<TemplateForm>,
) -> Response {
    let rendered = render_preview(&state, &signed, &name, &form).await;
    if wants_partial(&headers) {
        let page = match rendered {
            Ok((problems, renders)) => Editor {
                problems,
                renders: Some(renders),
                ..Default::default()
            },
            Err(e) => Editor {
                error: Some(e.message),
                ..Default::default()
            },
        };
        return render(Some(&signed), StatusCode::OK, "preview.html", page);
    }
    edited(&state, &signed, &name, form, |page| match rendered {
        Ok((_, renders)) => page.renders = Some(renders),
        Err(e) => page.error = Some(e.message),
    })
    .await
}

async fn render_preview(
    state: &AppState,
    signed: &Signed,
    name: &str,
    form: &TemplateForm,
) -> Result<(Vec<Problem>, Vec<ChannelRender>)> {
    let request = PreviewRequest {
        template: Some(form.text()),
        channel: None,
        user_id: blank(&form.preview.user_id),
        tz: blank(&form.preview.tz),
        memory_notes: Vec::new(),
        last_message_at: None,
        now: parse_at(&form.preview.at)?,
    };
    let done = preview::preview(
        &state.prompts(),
        state.settings.max_template_bytes,
        signed.who.tenant(),
        name,
        request,
    )
    .await?;
    Ok((done.lint, done.renders))
}

/// Saves the editor's text as a new version. A stale version shows the conflict
/// and the diff against what is saved now, and keeps the text; lint errors keep
/// the text and show them; forcing needs a reason.
async fn save_template(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<TemplateForm>,
) -> Response {
    let force = form.force.is_some();
    if force && blank(&form.reason).is_none() {
        let error = "Saving over lint errors needs a reason: say why in \"Reason\".".to_owned();
        return edited(&state, &signed, &name, form, |page| {
            page.error = Some(error)
        })
        .await;
    }
    let change = Change {
        template: Some(form.text()),
        expected_version: form.expected_version,
        force,
        reason: blank(&form.reason),
    };
    match template::save(
        &state.prompts(),
        state.settings.max_template_bytes,
        &signed.who.member,
        &name,
        change,
        None,
    )
    .await
    {
        Ok(_) => Redirect::to(&format!("/console/agents/{name}?saved=template")).into_response(),
        Err(e) => {
            let again = |status, e| refused_save(&state, &signed, &name, status, form, e);
            refusal(&signed, e, again).await
        }
    }
}

async fn refused_save(
    state: &AppState,
    signed: &Signed,
    name: &str,
    status: StatusCode,
    form: TemplateForm,
    error: Error,
) -> Response {
    let stale = error.kind == Kind::Conflict;
    let saved = match agents::get(&state.db, name).await {
        Ok(agent) => agent,
        Err(e) => return error_page(Some(signed), &e),
    };
    let text = form.text();
    let mut response = edited(state, signed, name, form, |page| {
        page.error = Some(error.message.clone());
        if stale {
            let current = saved.prompt_template.as_deref().unwrap_or_default();
            page.conflict = Some(Conflict {
                current_version: saved.template_version,
                diff: diff(current, &text),
            });
            // A second Save replaces what is saved now: the person has seen the diff.
            page.expected_version = saved.template_version;
        }
    })
    .await;
    *response.status_mut() = status;
    response
}

#[derive(Serialize)]
struct Versions {
    title: String,
    agent: String,
    current_version: i32,
    versions: Vec<VersionView>,
    from: i32,
    to: i32,
    diff: Vec<DiffLine>,
}

#[derive(Deserialize)]
struct Pair {
    from: Option<i32>,
    to: Option<i32>,
}

/// The template's versions, newest first, and the diff between two of them
/// (by default the previous and the current one).
async fn versions(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(pair): Query<Pair>,
) -> Response {
    match versions_page(&state, &name, pair).await {
        Ok(page) => render(Some(&signed), StatusCode::OK, "versions.html", page),
        Err(e) => error_page(Some(&signed), &e),
    }
}

async fn versions_page(state: &AppState, name: &str, pair: Pair) -> Result<Versions> {
    // At most one page (1,000 versions); the rest are in the API's pages.
    let page = crate::db::page::ByNumber {
        limit: Some(crate::db::page::MAX),
        cursor: None,
    };
    let list = template::versions(&state.db, name, page).await?;
    let current = list.current_version;
    let to = pair.to.unwrap_or(current);
    let from = pair.from.unwrap_or((to - 1).max(1));
    let body = |n: i32| {
        let found = list.versions.iter().find(|v| v.version == n);
        found
            .map(|v| v.template.clone().unwrap_or_default())
            .ok_or_else(|| Error::not_found(format!("{name} has no template version {n}")))
    };
    let diff = diff(&body(from)?, &body(to)?);
    let mut versions = list.versions;
    versions.reverse();
    Ok(Versions {
        title: format!("Versions of {name}"),
        agent: name.to_owned(),
        current_version: current,
        versions,
        from,
        to,
        diff,
    })
}

/// Restores a version as a new one (history is never rewritten).
async fn restore(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((name, version)): Path<(String, i32)>,
    Checked(_): Checked<CsrfOnly>,
) -> Response {
    match template::restore(
        &state.prompts(),
        state.settings.max_template_bytes,
        &signed.who.member,
        &name,
        version,
        None,
    )
    .await
    {
        Ok(saved) => {
            let to = saved.version;
            let back = format!("/console/agents/{name}/versions?from={version}&to={to}");
            Redirect::to(&back).into_response()
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}
