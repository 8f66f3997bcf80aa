//! The prompt service, what agents fetch: the revision a label serves (its agent,
//! tools and channels: [`served`]), the working copy ([`agent`], for edits and
//! previews) and a user's instructions through the generation-stamped cache
//! ([`cache`]), and the rendered prompt and tool definitions built from them; [`encoded`] holds the whole
//! responses the HTTP fetch path serves again. The views here are the API's
//! response bodies. An application service over the pure `prompt` (template,
//! builder, lint, loader), which depends on nothing above it.

pub mod cache;
pub mod encoded;
pub mod langfuse;
pub mod ofrep;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use sea_orm::DatabaseConnection;

use crate::cache::Generation;
use crate::db::outage::read_retrying;
use crate::error::{Error, Result, check_id, check_label, check_name};
use crate::prompt::builder::{self, Channels, RenderedPrompt, Source};
use crate::prompt::load::{self, LoadedAgent};
use crate::registry::formats::{self, AnthropicTool, Format, McpTool, OpenAiTool, Tools};
use crate::releases::content::Content;
use crate::releases::model::ServedModel;
use crate::releases::serve::{self, Served};
use crate::releases::traffic::{self, Running, Side};
use crate::vocab::Clock;

/// What the prompt service reads through: the database, its cache, the generation
/// that stamps the cache, the clock and the render limit. The state lends one
/// (`AppState::prompts`); it is a handful of references, built per call for free.
#[derive(Clone, Copy)]
pub struct Prompts<'a> {
    pub db: &'a DatabaseConnection,
    pub cache: &'a cache::PromptCache,
    pub generation: &'a Generation,
    pub clock: &'a dyn Clock,
    /// Largest rendered prompt (`serve --max-prompt-bytes`).
    pub max_prompt_bytes: usize,
}

/// At most this many memory notes in one render.
const MAX_MEMORY_NOTES: usize = 200;
/// At most this many bytes of memory notes in one render (a template's worst case
/// counts on it).
pub const MAX_MEMORY_NOTES_BYTES: usize = 256 * 1024;

/// The most each request-time placeholder can bring, as the API limits them.
pub fn bounds() -> builder::Bounds {
    builder::Bounds {
        user_instructions: crate::vocab::MAX_TEXT_BYTES,
        memory_notes: MAX_MEMORY_NOTES_BYTES,
    }
}

/// 422 `prompt_too_large`: what would pass the limit, and the limit.
pub fn too_large(placeholder: Option<&str>, bytes: Option<usize>, limit: usize) -> Error {
    #[derive(Serialize)]
    struct Details<'a> {
        placeholder: Option<&'a str>,
        worst_case_bytes: Option<usize>,
        limit: usize,
    }
    let what = match placeholder {
        Some(name) => format!("${name}"),
        None => "the template's own text".to_owned(),
    };
    let message = match bytes {
        Some(bytes) => format!(
            "this template can render up to {bytes} bytes, most of it from {what}; the limit is {limit} bytes (serve --max-prompt-bytes)"
        ),
        None => format!(
            "the rendered prompt would pass the limit of {limit} bytes at {what} (serve --max-prompt-bytes)"
        ),
    };
    Error::refused("prompt_too_large", message).with_details(Details {
        placeholder,
        worst_case_bytes: bytes,
        limit,
    })
}

/// Refuses a template whose worst case for `agent` passes the limit (422).
pub async fn check_worst_case(
    state: &Prompts<'_>,
    template: &str,
    agent: &builder::Agent,
) -> Result<()> {
    let channels = channels(state).await?;
    let (bytes, largest) = builder::worst_case(template, agent, &channels, &bounds());
    if bytes > state.max_prompt_bytes {
        return Err(too_large(largest, Some(bytes), state.max_prompt_bytes));
    }
    Ok(())
}

/// The agent, from the cache or the database; 404 when there is no live agent of that name.
pub async fn agent(state: &Prompts<'_>, name: &str) -> Result<Arc<LoadedAgent>> {
    check_name("agent", name)?;
    let generation = state.generation.current();
    let found = match state.cache.agent(name, generation) {
        Some(found) => found,
        None => {
            let found = read_retrying(|| load::agent_with_tool_defs(state.db, name))
                .await?
                .map(|(id, agent, tools)| Arc::new(LoadedAgent { id, agent, tools }));
            state.cache.put_agent(name, generation, found.clone());
            found
        }
    };
    found.ok_or_else(|| Error::not_found(format!("no agent named {name:?}")))
}

/// What the agent's `label` serves, from the cache or the database: 404 when there
/// is no live agent of that name, 404 `label_not_found` when it has no such label.
/// Loaded once per generation: the label's revision, its content made servable.
pub async fn served(state: &Prompts<'_>, name: &str, label: &str) -> Result<Arc<Served>> {
    check_label(label)?;
    let key = cache::served_key(name, label);
    let found = resolve(state, name, key, |db, id| async move {
        serve::by_label(db, id, label).await
    })
    .await?;
    found.ok_or_else(|| serve::label_not_found(name, label))
}

/// What a label serves one subject: the revision, and the rollout that picked it.
#[derive(Clone)]
pub struct Pick {
    pub served: Arc<Served>,
    /// The label's running rollout and the subject's side; `None` when none runs.
    pub rollout: Option<ServedRollout>,
}

/// The running rollout that decided what was served, and the side it gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct ServedRollout {
    /// The rollout's id.
    pub id: i32,
    /// `candidate`: the rollout's candidate; `base`: the label's revision.
    pub side: Side,
}

/// What the agent's `label` serves `subject` (a user id, else a conversation id;
/// `None`: the base, as no subject can be kept on one side): the label's
/// revision, or a running rollout's candidate for the subjects in its share
/// ([`Running::side`]). The rollout is read once per generation, like the label.
pub async fn pick(
    state: &Prompts<'_>,
    name: &str,
    label: &str,
    subject: Option<&str>,
) -> Result<Pick> {
    let base = served(state, name, label).await?;
    let Some(running) = running(state, name, label).await? else {
        return Ok(Pick {
            served: base,
            rollout: None,
        });
    };
    let side = running.side(name, label, subject);
    let served = match side {
        Side::Base => base,
        Side::Candidate => revision(state, name, running.candidate).await?,
    };
    Ok(Pick {
        served,
        rollout: Some(ServedRollout {
            id: running.id,
            side,
        }),
    })
}

/// The label's running rollout, from the cache or the database.
async fn running(state: &Prompts<'_>, name: &str, label: &str) -> Result<Option<Running>> {
    let key = cache::served_key(name, label);
    let generation = state.generation.current();
    if let Some(found) = state.cache.rollout(&key, generation) {
        return Ok(found);
    }
    let working = agent(state, name).await?;
    let found = read_retrying(|| traffic::running(state.db, working.id, label)).await?;
    state.cache.put_rollout(key, generation, found);
    Ok(found)
}

/// The agent's revision `number` as it is served (see [`served`]): 404
/// `revision_not_found` when the agent has no such revision.
pub async fn revision(state: &Prompts<'_>, name: &str, number: i32) -> Result<Arc<Served>> {
    let key = cache::served_key(name, &format!("#{number}"));
    let found = resolve(state, name, key, |db, id| async move {
        serve::by_number(db, id, number).await
    })
    .await?;
    found.ok_or_else(|| serve::revision_not_found(name, number))
}

/// A served revision by its cache key, or the revision `find` reads (by the
/// agent's id), made servable and cached; `None` when `find` finds none.
async fn resolve<'a, F, Fut>(
    state: &Prompts<'a>,
    name: &str,
    key: String,
    find: F,
) -> Result<Option<Arc<Served>>>
where
    F: Fn(&'a DatabaseConnection, i32) -> Fut,
    Fut: Future<
        Output = std::result::Result<Option<entity::agent_revisions::Model>, sea_orm::DbErr>,
    >,
{
    check_name("agent", name)?;
    let generation = state.generation.current();
    if let Some(found) = state.cache.served(&key, generation) {
        return Ok(found);
    }
    let working = agent(state, name).await?;
    let found = match read_retrying(|| find(state.db, working.id)).await? {
        Some(row) => {
            let content = Content::parse(&row.content)?;
            let versions = read_retrying(|| serve::versions(state.db, &working, &content)).await?;
            let policy = serve::policy_off_workers(&content).await?;
            Some(Arc::new(Served::new(
                &row, content, &working, versions, policy,
            )))
        }
        None => None,
    };
    state.cache.put_served(key, generation, found.clone());
    Ok(found)
}

/// Every live channel, from the cache or the database.
pub async fn channels(state: &Prompts<'_>) -> Result<Arc<Channels>> {
    let generation = state.generation.current();
    if let Some(channels) = state.cache.channels(generation) {
        return Ok(channels);
    }
    let channels = Arc::new(read_retrying(|| load::channels(state.db)).await?);
    state.cache.put_channels(generation, channels.clone());
    Ok(channels)
}

async fn instructions(
    state: &Prompts<'_>,
    tenant: &str,
    agent_id: i32,
    user: &str,
) -> Result<Option<String>> {
    let generation = state.generation.current();
    let found = match state.cache.instructions(tenant, agent_id, user, generation) {
        Some(found) => found,
        None => {
            let found: Option<Arc<str>> =
                read_retrying(|| load::user_instructions(state.db, tenant, agent_id, user))
                    .await?
                    .map(Into::into);
            state
                .cache
                .put_instructions(tenant, agent_id, user, generation, found.clone());
            found
        }
    };
    Ok(found.map(|s| s.to_string()))
}

/// Everything a render takes besides the agent (the body of `POST .../prompt/render`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenderRequest {
    /// A channel name, e.g. `web` (a missing one is 400 listing the known ones).
    #[serde(default)]
    #[schema(value_type = String, required = true)]
    pub channel: Option<String>,
    /// Brings the user's instructions into the prompt; the subject a running
    /// rollout assigns by.
    #[serde(default)]
    pub user_id: Option<String>,
    /// The subject a running rollout assigns by when there is no `user_id`.
    #[serde(default)]
    pub conversation_id: Option<String>,
    /// An IANA time zone for `$current_time`, e.g. `Europe/Berlin`; UTC when absent.
    #[serde(default)]
    pub tz: Option<String>,
    /// Rendered as bullets under "What you remember"; at most 200.
    #[serde(default)]
    pub memory_notes: Vec<String>,
    /// When the user last wrote; decides the session section.
    #[serde(default)]
    pub last_message_at: Option<DateTime<Utc>>,
    /// Render as of this instant; the clock's now when absent. Never from a body.
    #[serde(skip)]
    pub now: Option<DateTime<Utc>>,
}

/// Where a served prompt came from: the path that built it, the version counters of
/// its template and soul, the channel, and the revision and label it was served from.
#[derive(Debug, Serialize, ToSchema)]
pub struct Provenance {
    pub source: Source,
    pub template_version: i32,
    pub soul_version: i32,
    pub channel: String,
    /// The revision served (also the `Loadout-Revision` header).
    pub revision: i32,
    /// The label asked for (`production` when none was).
    pub label: String,
    /// The label's running rollout and the side served; absent when none runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<ServedRollout>,
}

impl Provenance {
    fn of(rendered: builder::Provenance, pick: &Pick, label: &str) -> Self {
        Self {
            source: rendered.source,
            template_version: rendered.template_version,
            soul_version: rendered.soul_version,
            channel: rendered.channel,
            revision: pick.served.number,
            label: label.to_owned(),
            rollout: pick.rollout,
        }
    }
}

/// A rendered prompt.
#[derive(Debug, Serialize, ToSchema)]
pub struct PromptView {
    pub agent: String,
    pub text: String,
    pub provenance: Provenance,
}

/// A prompt inside a loadout.
#[derive(Debug, Serialize, ToSchema)]
pub struct PromptBody {
    pub text: String,
    pub provenance: Provenance,
}

/// An agent's active tools in one wire format, sorted by name: `format` says
/// which shape `tools` has. Each format is a complete object in the document (a
/// `oneOf` tagged by `format`), which client generators can read.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum ToolsView {
    /// OpenAI Chat Completions function tools, strict mode.
    Openai {
        agent: String,
        /// The revision served (also the `Loadout-Revision` header).
        revision: i32,
        /// The label asked for (`production` when none was).
        label: String,
        /// The label's running rollout and the side served; absent when none runs.
        #[serde(skip_serializing_if = "Option::is_none")]
        rollout: Option<ServedRollout>,
        tools: Vec<OpenAiTool>,
    },
    /// Anthropic Messages API tools.
    Anthropic {
        agent: String,
        /// The revision served (also the `Loadout-Revision` header).
        revision: i32,
        /// The label asked for (`production` when none was).
        label: String,
        /// The label's running rollout and the side served; absent when none runs.
        #[serde(skip_serializing_if = "Option::is_none")]
        rollout: Option<ServedRollout>,
        tools: Vec<AnthropicTool>,
    },
    /// MCP tools, as loadout's MCP server lists them.
    Mcp {
        agent: String,
        /// The revision served (also the `Loadout-Revision` header).
        revision: i32,
        /// The label asked for (`production` when none was).
        label: String,
        /// The label's running rollout and the side served; absent when none runs.
        #[serde(skip_serializing_if = "Option::is_none")]
        rollout: Option<ServedRollout>,
        tools: Vec<McpTool>,
    },
}

impl ToolsView {
    fn new(
        agent: String,
        revision: i32,
        label: String,
        rollout: Option<ServedRollout>,
        tools: Tools,
    ) -> Self {
        match tools {
            Tools::Openai(tools) => Self::Openai {
                agent,
                revision,
                label,
                rollout,
                tools,
            },
            Tools::Anthropic(tools) => Self::Anthropic {
                agent,
                revision,
                label,
                rollout,
                tools,
            },
            Tools::Mcp(tools) => Self::Mcp {
                agent,
                revision,
                label,
                rollout,
                tools,
            },
        }
    }

    /// The revision the view names.
    pub fn revision(&self) -> i32 {
        match self {
            Self::Openai { revision, .. }
            | Self::Anthropic { revision, .. }
            | Self::Mcp { revision, .. } => *revision,
        }
    }
}

/// Prompt and tools in one response; `format` says which shape `tools` has, as
/// in [`ToolsView`].
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum LoadoutView {
    /// OpenAI Chat Completions function tools, strict mode.
    Openai {
        agent: String,
        prompt: PromptBody,
        tools: Vec<OpenAiTool>,
        /// The model settings for the channel; absent when the revision has none.
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<ServedModel>,
    },
    /// Anthropic Messages API tools.
    Anthropic {
        agent: String,
        prompt: PromptBody,
        tools: Vec<AnthropicTool>,
        /// The model settings for the channel; absent when the revision has none.
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<ServedModel>,
    },
    /// MCP tools, as loadout's MCP server lists them.
    Mcp {
        agent: String,
        prompt: PromptBody,
        tools: Vec<McpTool>,
        /// The model settings for the channel; absent when the revision has none.
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<ServedModel>,
    },
}

impl LoadoutView {
    /// The revision the view names.
    pub fn revision(&self) -> i32 {
        match self {
            Self::Openai { prompt, .. }
            | Self::Anthropic { prompt, .. }
            | Self::Mcp { prompt, .. } => prompt.provenance.revision,
        }
    }
}

/// The details of a missing or unknown channel.
#[derive(Debug, Serialize)]
struct KnownChannels {
    known_channels: Vec<String>,
}

impl KnownChannels {
    fn of(channels: &Channels) -> Self {
        Self {
            known_channels: channels.names().map(str::to_owned).collect(),
        }
    }
}

/// `None` is UTC; anything else must be an IANA name.
pub fn parse_tz(tz: Option<&str>) -> Result<Tz> {
    match tz {
        None => Ok(Tz::UTC),
        Some(name) => name.parse().map_err(|_| {
            Error::invalid(format!(
                "unknown time zone {name:?}; use an IANA name such as Europe/Berlin"
            ))
        }),
    }
}

/// Renders what the agent's label serves for a channel, the provenance naming the
/// revision and `label`. The channel must be one of the revision's (404 naming the
/// known ones); the user's instructions are `tenant`'s (the caller's key's, never a
/// request's) and come from the cache.
///
/// A tool the revision's policy hides from the viewer (the request's user, the
/// key's tenant and member) is left out of the prompt's tool sections, as it is
/// out of the tool lists: what a caller cannot call, it cannot read of either.
pub async fn render(
    state: &Prompts<'_>,
    viewer: Viewer<'_>,
    pick: &Pick,
    label: &str,
    request: RenderRequest,
) -> Result<PromptView> {
    let served = &pick.served;
    let tenant = viewer.tenant;
    let viewer = Viewer {
        user: request.user_id.as_deref(),
        ..viewer
    };
    let hidden = hidden(state, pick, viewer).await?;
    let filtered = (!hidden.is_empty()).then(|| served.agent.without_tools(&hidden));
    let agent = filtered.as_ref().unwrap_or(&served.agent);
    let rendered = rendered(state, tenant, agent, &served.channels, request).await?;
    Ok(PromptView {
        agent: served.agent.agent.name.clone(),
        text: rendered.text,
        provenance: Provenance::of(rendered.provenance, pick, label),
    })
}

/// Renders `agent`'s prompt for one of `channels` (the working copy's for a
/// preview, a revision's when served): see [`render`].
pub async fn rendered(
    state: &Prompts<'_>,
    tenant: &str,
    agent: &LoadedAgent,
    channels: &Channels,
    request: RenderRequest,
) -> Result<RenderedPrompt> {
    let Some(name) = &request.channel else {
        return Err(Error::invalid(format!(
            "channel is required; use one of {}",
            channels.names().collect::<Vec<_>>().join(", ")
        ))
        .with_details(KnownChannels::of(channels)));
    };
    check_name("channel", name)?;
    let tz = parse_tz(request.tz.as_deref())?;
    if let Some(user) = &request.user_id {
        check_id("user_id", user)?;
    }
    if request.memory_notes.len() > MAX_MEMORY_NOTES {
        return Err(Error::invalid(format!(
            "at most {MAX_MEMORY_NOTES} memory notes"
        )));
    }
    let notes_bytes: usize = request.memory_notes.iter().map(String::len).sum();
    if notes_bytes > MAX_MEMORY_NOTES_BYTES {
        return Err(Error::too_large(
            "payload_too_large",
            format!(
                "memory notes are {notes_bytes} bytes together; the limit is {MAX_MEMORY_NOTES_BYTES} bytes"
            ),
        ));
    }
    let channel = channels
        .get(name)
        .map_err(|e| Error::not_found(e.to_string()).with_details(KnownChannels::of(channels)))?;
    let user_instructions = match &request.user_id {
        Some(user) => instructions(state, tenant, agent.id, user).await?,
        None => None,
    };
    let context = builder::Context {
        now: request.now.unwrap_or_else(|| state.clock.now()),
        time_zone: tz,
        memory_notes: request.memory_notes,
        user_instructions,
        last_message_at: request.last_message_at,
    };
    builder::build_agent_prompt_within(&agent.agent, channel, &context, state.max_prompt_bytes)
        .map_err(|e| match e {
            builder::BuildError::TooLarge(over) => {
                too_large(over.placeholder.as_deref(), None, over.limit)
            }
            builder::BuildError::Builtin(e) => Error::internal(e),
        })
}

/// Who a tool list is for: a `forbid` of the served revision's policy that holds
/// whatever the arguments hides that tool from this principal.
#[derive(Clone, Copy, Debug)]
pub struct Viewer<'a> {
    pub tenant: &'a str,
    pub member: &'a str,
    pub user: Option<&'a str>,
}

/// The names of the tools of `pick` the revision's policy hides from `viewer`
/// (none, at the cost of one check, when its policy can hide none).
async fn hidden(state: &Prompts<'_>, pick: &Pick, viewer: Viewer<'_>) -> Result<Vec<String>> {
    let Some(policy) = pick.served.policy.as_ref().filter(|p| p.can_hide()) else {
        return Ok(Vec::new());
    };
    let groups = pick
        .served
        .groups_of(state.db, viewer.tenant, viewer.user)
        .await?;
    let who = crate::policies::Who {
        tenant: viewer.tenant,
        member: viewer.member,
        user: viewer.user,
        groups: &groups,
    };
    Ok(pick
        .served
        .agent
        .tools
        .iter()
        .filter(|t| policy.hides(&t.name, who))
        .map(|t| t.name.clone())
        .collect())
}

/// The tools of `pick` that `viewer` may see: all of them, borrowed, unless the
/// revision's policy hides one from them.
pub async fn visible<'p>(
    state: &Prompts<'_>,
    pick: &'p Pick,
    viewer: Viewer<'_>,
) -> Result<std::borrow::Cow<'p, [crate::vocab::ToolDef]>> {
    let tools = &pick.served.agent.tools;
    let hidden = hidden(state, pick, viewer).await?;
    if hidden.is_empty() {
        return Ok(std::borrow::Cow::Borrowed(tools));
    }
    let shown = tools.iter().filter(|t| !hidden.contains(&t.name)).cloned();
    Ok(std::borrow::Cow::Owned(shown.collect()))
}

/// What the agent's label serves of its tools (those `tools` keeps), in `format`.
pub fn tools(
    pick: &Pick,
    label: &str,
    format: Format,
    tools: &[crate::vocab::ToolDef],
) -> ToolsView {
    let served = &pick.served;
    ToolsView::new(
        served.agent.agent.name.clone(),
        served.number,
        label.to_owned(),
        pick.rollout,
        formats::render(tools, format),
    )
}

/// Prompt and tools in one view; the prompt as [`render`] makes it for `tenant`.
pub async fn loadout(
    state: &Prompts<'_>,
    viewer: Viewer<'_>,
    pick: &Pick,
    label: &str,
    request: RenderRequest,
    format: Format,
) -> Result<LoadoutView> {
    let shown = visible(state, pick, viewer).await?;
    let model = model_for(pick, request.channel.as_deref());
    let view = render(state, viewer, pick, label, request).await?;
    let agent_name = view.agent;
    let prompt = PromptBody {
        text: view.text,
        provenance: view.provenance,
    };
    Ok(match formats::render(&shown, format) {
        Tools::Openai(tools) => LoadoutView::Openai {
            agent: agent_name,
            prompt,
            tools,
            model,
        },
        Tools::Anthropic(tools) => LoadoutView::Anthropic {
            agent: agent_name,
            prompt,
            tools,
            model,
        },
        Tools::Mcp(tools) => LoadoutView::Mcp {
            agent: agent_name,
            prompt,
            tools,
            model,
        },
    })
}

/// The model settings `pick`'s revision serves on `channel`.
pub fn model_for(pick: &Pick, channel: Option<&str>) -> Option<ServedModel> {
    pick.served.model.as_ref().map(|m| m.resolve(channel))
}
