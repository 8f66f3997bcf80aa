//! The admin's registry pages: tools (list, create, edit, connector binding), an
//! agent's tool links, and channels. Every write goes through the same domain
//! function as its API route, so the vocabulary, strictness and tier rules and the
//! write guard apply unchanged; a refusal re-renders the form with the posted
//! values, the message, and each problem's fix hint.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::page::{Path, Query, Signed, blank, error_page, refusal, render};
use super::session::{Admin, Checked, Operator, csrf_field};
use crate::app::AppState;
use crate::connectors::store::{self as connectors, Binding};
use crate::db::page;
use crate::error::{Error, Result};
use crate::registry::channels::{self, ChannelUpdate, ChannelView};
use crate::registry::links;
use crate::registry::tools::{self, NewTool, ToolUpdate, ToolView};
use crate::registry::{Tier, ToolType};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/console/tools", get(tool_list).post(create_tool))
        .route("/console/tools/{tool}", get(tool_page).post(update_tool))
        .route("/console/tools/{tool}/connector", post(bind_tool))
        .route("/console/agents/{agent}/tools", get(link_page))
        .route("/console/agents/{agent}/tools/{tool}", post(set_link))
        .route("/console/channels", get(channel_list))
        .route("/console/channels/{channel}", post(update_channel))
}

/// A tool form's fields, as posted (or as stored, for the edit page).
#[derive(Serialize, Deserialize, Default, Clone)]
struct ToolFields {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default, rename = "type")]
    tool_type: String,
    #[serde(default)]
    approval_tier: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    parameters: String,
    #[serde(default)]
    prompt_section: String,
    /// A checkbox: present when ticked.
    #[serde(default)]
    is_active: Option<String>,
}

csrf_field!(ToolFields, BindForm, LinkForm, ChannelForm);

impl ToolFields {
    fn of(tool: &ToolView) -> Self {
        Self {
            name: tool.name.clone(),
            tool_type: tool.tool_type.clone(),
            approval_tier: tool.approval_tier.clone(),
            description: tool.description.clone(),
            parameters: serde_json::to_string_pretty(&tool.parameters).unwrap_or_default(),
            prompt_section: tool.prompt_section.clone().unwrap_or_default(),
            is_active: tool.is_active.then(|| "true".to_owned()),
            ..Default::default()
        }
    }

    /// The parameters text as JSON, or a refusal saying where it is not JSON.
    fn schema(&self) -> Result<Value> {
        serde_json::from_str(&self.parameters).map_err(|e| {
            Error::refused("invalid_parameters", format!("parameters is not JSON: {e}"))
        })
    }
}

/// A refusal as a form shows it: the message, and each problem with its hint.
#[derive(Serialize, Default)]
struct Refusal {
    error: Option<String>,
    problems: Value,
}

impl Refusal {
    fn of(error: &Error) -> Self {
        Self {
            error: Some(error.message.clone()),
            problems: error.details.get("problems").cloned().unwrap_or_default(),
        }
    }
}

#[derive(Serialize)]
struct ToolRow {
    #[serde(flatten)]
    tool: ToolView,
    connector: Option<String>,
}

/// Which page of a tool list: names containing `q`, after `after`.
#[derive(Deserialize, Serialize, Default, Clone)]
struct Finding {
    #[serde(default)]
    q: Option<String>,
    #[serde(default)]
    after: Option<String>,
}

impl Finding {
    /// A console page of tools: 100 by name, narrowed by the search text.
    async fn tools(&self, state: &AppState) -> Result<tools::ToolList> {
        let filter = tools::Filter {
            active: None,
            search: self.q.clone(),
        };
        let page = page::ByName {
            limit: None,
            after: self.after.clone(),
        };
        tools::list(&state.db, &filter, &page).await
    }
}

#[derive(Serialize)]
struct Tools {
    title: &'static str,
    tools: Vec<ToolRow>,
    finding: Finding,
    next_after: Option<String>,
    form: ToolFields,
    #[serde(flatten)]
    refusal: Refusal,
    tiers: &'static [&'static str],
    types: &'static [&'static str],
}

async fn tools_page(
    state: &AppState,
    signed: &Signed,
    status: StatusCode,
    (form, finding): (ToolFields, Finding),
    refusal: Refusal,
) -> Response {
    let read = async {
        let list = finding.tools(state).await?;
        let mut bound = connectors::bindings(&state.db).await?;
        let rows = list
            .tools
            .into_iter()
            .map(|tool| ToolRow {
                connector: bound.remove(&tool.name),
                tool,
            })
            .collect();
        Result::Ok((rows, list.next_after))
    };
    match read.await {
        Ok((tools, next_after)) => {
            let page = Tools {
                title: "Tools",
                tools,
                finding,
                next_after,
                form,
                refusal,
                tiers: Tier::NAMES,
                types: ToolType::NAMES,
            };
            render(Some(signed), status, "tools.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

async fn tool_list(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Query(finding): Query<Finding>,
) -> Response {
    let blank = ToolFields {
        tool_type: ToolType::Api.as_str().to_owned(),
        parameters: "{\n  \"type\": \"object\",\n  \"properties\": {},\n  \"required\": [],\n  \"additionalProperties\": false\n}".to_owned(),
        ..Default::default()
    };
    let page = (blank, finding);
    tools_page(&state, &signed, StatusCode::OK, page, Refusal::default()).await
}

/// Creates a tool through `tools::create`; a refusal keeps the form as typed.
async fn create_tool(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Checked(form): Checked<ToolFields>,
) -> Response {
    let create = async {
        let new = NewTool {
            name: form.name.trim().to_owned(),
            tool_type: form.tool_type.clone(),
            description: form.description.clone(),
            approval_tier: form.approval_tier.clone(),
            parameters: form.schema()?,
            prompt_section: blank(&form.prompt_section),
        };
        tools::create(&state.writer(None), new).await
    };
    match create.await {
        Ok(tool) => {
            tracing::info!(tool = %tool.name, by = %signed.who.key_name, "tool created in the console");
            Redirect::to(&format!("/console/tools/{}?saved=created", tool.name)).into_response()
        }
        Err(e) => {
            let again = |status, e| {
                let page = (form, Finding::default());
                tools_page(&state, &signed, status, page, Refusal::of(&e))
            };
            refusal(&signed, e, again).await
        }
    }
}

#[derive(Serialize)]
struct ToolPage {
    title: String,
    name: String,
    tool_type: String,
    form: ToolFields,
    #[serde(flatten)]
    refusal: Refusal,
    notice: Option<&'static str>,
    tiers: &'static [&'static str],
    connector: Option<String>,
    connectors: Vec<String>,
}

#[derive(Deserialize)]
struct Saved {
    saved: Option<String>,
}

/// The fixed words for `?saved=`: a query parameter never reaches the page as text.
fn notice(saved: Option<&str>) -> Option<&'static str> {
    match saved? {
        "created" => Some("Created the tool."),
        "tool" => Some("Saved the tool."),
        "connector" => Some("Saved the connector binding."),
        _ => None,
    }
}

async fn tool_view(
    state: &AppState,
    signed: &Signed,
    name: &str,
    status: StatusCode,
    form: Option<ToolFields>,
    refusal: Refusal,
    notice: Option<&'static str>,
) -> Response {
    let read = async {
        let tool = tools::get(&state.db, name).await?;
        let connector = connectors::bindings(&state.db).await?.remove(&tool.name);
        let connectors = connectors::list(&state.db).await?.connectors;
        Result::Ok(ToolPage {
            title: format!("Tool {}", tool.name),
            name: tool.name.clone(),
            tool_type: tool.tool_type.clone(),
            form: form.unwrap_or_else(|| ToolFields::of(&tool)),
            refusal,
            notice,
            tiers: Tier::NAMES,
            connector,
            connectors: connectors.into_iter().map(|c| c.name).collect(),
        })
    };
    match read.await {
        Ok(page) => render(Some(signed), status, "tool.html", page),
        Err(e) => error_page(Some(signed), &e),
    }
}

async fn tool_page(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(name): Path<String>,
    Query(saved): Query<Saved>,
) -> Response {
    let notice = notice(saved.saved.as_deref());
    tool_view(
        &state,
        &signed,
        &name,
        StatusCode::OK,
        None,
        Refusal::default(),
        notice,
    )
    .await
}

/// Saves every field of the edit form through `tools::update`.
async fn update_tool(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<ToolFields>,
) -> Response {
    let update = async {
        let change = ToolUpdate {
            description: Some(form.description.clone()),
            approval_tier: Some(form.approval_tier.clone()),
            parameters: Some(form.schema()?),
            prompt_section: Some(blank(&form.prompt_section)),
            is_active: Some(form.is_active.is_some()),
        };
        tools::update(&state.writer(None), &name, change).await
    };
    match update.await {
        Ok(_) => Redirect::to(&format!("/console/tools/{name}?saved=tool")).into_response(),
        Err(e) => {
            let again = |status, e| {
                let refused = Refusal::of(&e);
                tool_view(&state, &signed, &name, status, Some(form), refused, None)
            };
            refusal(&signed, e, again).await
        }
    }
}

#[derive(Deserialize)]
struct BindForm {
    #[serde(default)]
    csrf: String,
    /// A connector name; empty disconnects the tool.
    #[serde(default)]
    connector: String,
}

async fn bind_tool(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<BindForm>,
) -> Response {
    let binding = Binding {
        connector: blank(&form.connector),
    };
    match connectors::bind(&state.writer(None), &name, binding).await {
        Ok(_) => Redirect::to(&format!("/console/tools/{name}?saved=connector")).into_response(),
        Err(e) => {
            let again =
                |status, e| tool_view(&state, &signed, &name, status, None, Refusal::of(&e), None);
            refusal(&signed, e, again).await
        }
    }
}

#[derive(Serialize)]
struct LinkRow {
    tool: String,
    linked: bool,
    tool_active: bool,
    approval_tier: String,
}

#[derive(Serialize)]
struct Links {
    title: String,
    agent: String,
    /// The tools this agent has links to (switched on or off).
    links: Vec<LinkRow>,
    /// A page of the registry's tools matching the search, to link.
    found: Vec<LinkRow>,
    finding: Finding,
    next_after: Option<String>,
}

/// The agent's linked tools, and a searchable page of the registry to link more.
async fn link_page(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Path(agent): Path<String>,
    Query(finding): Query<Finding>,
) -> Response {
    let read = async {
        let linked: BTreeMap<String, bool> = links::list(&state.db, &agent)
            .await?
            .links
            .into_iter()
            .map(|l| (l.tool, l.active))
            .collect();
        let tiers = tools::tiers_of(&state.db, linked.keys()).await?;
        let links = tiers
            .into_iter()
            .map(|(tool, (tool_active, approval_tier))| LinkRow {
                linked: linked.get(&tool).copied().unwrap_or(false),
                tool_active,
                approval_tier,
                tool,
            })
            .collect();
        let page = finding.tools(&state).await?;
        let found = page
            .tools
            .into_iter()
            .map(|t| LinkRow {
                linked: linked.get(&t.name).copied().unwrap_or(false),
                tool_active: t.is_active,
                approval_tier: t.approval_tier,
                tool: t.name,
            })
            .collect();
        Result::Ok((links, found, page.next_after))
    };
    match read.await {
        Ok((links, found, next_after)) => {
            let page = Links {
                title: format!("Tools of {agent}"),
                agent,
                links,
                found,
                finding,
                next_after,
            };
            render(Some(&signed), StatusCode::OK, "links.html", page)
        }
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Deserialize)]
struct LinkForm {
    #[serde(default)]
    csrf: String,
    /// `on` or `off`.
    #[serde(default)]
    link: String,
}

async fn set_link(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path((agent, tool)): Path<(String, String)>,
    Checked(form): Checked<LinkForm>,
) -> Response {
    let on = match form.link.as_str() {
        "on" => true,
        "off" => false,
        _ => return error_page(Some(&signed), &Error::invalid("link must be on or off")),
    };
    match links::set(&state.writer(None), &agent, &tool, on).await {
        Ok(_) => Redirect::to(&format!("/console/agents/{agent}/tools")).into_response(),
        Err(e) => error_page(Some(&signed), &e),
    }
}

#[derive(Serialize)]
struct Channels {
    title: &'static str,
    channels: Vec<ChannelView>,
    error: Option<String>,
    /// The channel just saved; compared with each name, never shown.
    saved: Option<String>,
}

async fn channels_page(
    state: &AppState,
    signed: &Signed,
    status: StatusCode,
    error: Option<String>,
    saved: Option<String>,
) -> Response {
    match channels::list(&state.db).await {
        Ok(list) => {
            let page = Channels {
                title: "Channels",
                channels: list.channels,
                error,
                saved,
            };
            render(Some(signed), status, "channels.html", page)
        }
        Err(e) => error_page(Some(signed), &e),
    }
}

async fn channel_list(
    State(state): State<AppState>,
    Admin(signed): Admin,
    Query(query): Query<Saved>,
) -> Response {
    channels_page(&state, &signed, StatusCode::OK, None, query.saved).await
}

#[derive(Deserialize)]
struct ChannelForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    guidance: String,
    include_operating_model: Option<String>,
    include_interaction_learning: Option<String>,
    include_session_section: Option<String>,
}

async fn update_channel(
    State(state): State<AppState>,
    Operator(signed): Operator,
    Path(name): Path<String>,
    Checked(form): Checked<ChannelForm>,
) -> Response {
    let update = ChannelUpdate {
        description: Some(form.description),
        guidance: Some(form.guidance),
        include_operating_model: Some(form.include_operating_model.is_some()),
        include_interaction_learning: Some(form.include_interaction_learning.is_some()),
        include_session_section: Some(form.include_session_section.is_some()),
    };
    match channels::update(&state.writer(None), &name, update).await {
        Ok(_) => {
            Redirect::to(&format!("/console/channels?saved={name}#channel-{name}")).into_response()
        }
        Err(e) => {
            let again =
                |status, e: Error| channels_page(&state, &signed, status, Some(e.message), None);
            refusal(&signed, e, again).await
        }
    }
}
