//! Serving a revision: the revision a label points at (or a number names), and its
//! [`Content`] made into what the prompt builder and the tools export take
//! ([`LoadedAgent`], [`Channels`], the [`ToolDef`]s). The fetch path (`fetch`)
//! calls these once per generation and keeps the result in its cache.

use entity::{agent_labels, agent_revisions, prompt_versions};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};

use super::content::Content;
use crate::connectors::client::ConnectorPin;
use crate::error::{Error, Kind};
use crate::prompt::builder::{Agent, Channel, Channels, Tool};
use crate::prompt::load::LoadedAgent;
use crate::vocab::ToolDef;

/// The revision the agent's `label` points at; `None` if the agent has no such label.
pub async fn by_label(
    db: &impl ConnectionTrait,
    agent_id: i32,
    label: &str,
) -> Result<Option<agent_revisions::Model>, DbErr> {
    let found = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent_id))
        .filter(agent_labels::Column::Name.eq(label))
        .find_also_related(agent_revisions::Entity)
        .one(db)
        .await?;
    Ok(found.and_then(|(_, revision)| revision))
}

/// The agent's revision `number`; `None` if it has none of that number.
pub async fn by_number(
    db: &impl ConnectionTrait,
    agent_id: i32,
    number: i32,
) -> Result<Option<agent_revisions::Model>, DbErr> {
    agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(agent_id))
        .filter(agent_revisions::Column::Number.eq(number))
        .one(db)
        .await
}

/// 404 `label_not_found`.
pub fn label_not_found(agent: &str, label: &str) -> Error {
    Error::new(
        Kind::NotFound,
        "label_not_found",
        format!("agent {agent:?} has no label {label:?}"),
    )
}

/// 404 `revision_not_found`.
pub fn revision_not_found(agent: &str, number: i32) -> Error {
    Error::new(
        Kind::NotFound,
        "revision_not_found",
        format!("agent {agent:?} has no revision {number}"),
    )
}

/// The soul and template version counters a revision's provenance shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions {
    pub soul: i32,
    pub template: i32,
}

/// The version counters of `content`'s soul and template. Where the text is the
/// working copy's (`working`), its counter, with no query: so a revision equal to
/// the working copy (every `direct` agent's `production`) shows exactly what the
/// working copy showed. Otherwise the newest saved version with that text, or 0
/// when no saved version has it.
pub async fn versions(
    db: &impl ConnectionTrait,
    working: &LoadedAgent,
    content: &Content,
) -> Result<Versions, DbErr> {
    let agent = &working.agent;
    let soul = match content.soul == agent.soul {
        true => agent.soul_version,
        false => newest(db, working.id, "soul", Some(&content.soul)).await?,
    };
    let template = match content.template == agent.prompt_template {
        true => agent.template_version,
        false => newest(db, working.id, "template", content.template.as_deref()).await?,
    };
    Ok(Versions { soul, template })
}

/// The newest `kind` version of the agent whose body is `body` (0 if none).
async fn newest(
    db: &impl ConnectionTrait,
    agent_id: i32,
    kind: &str,
    body: Option<&str>,
) -> Result<i32, DbErr> {
    let query = prompt_versions::Entity::find()
        .select_only()
        .column_as(prompt_versions::Column::Version.max(), "version")
        .filter(prompt_versions::Column::AgentId.eq(agent_id))
        .filter(prompt_versions::Column::Kind.eq(kind));
    let query = match body {
        Some(body) => query.filter(prompt_versions::Column::Body.eq(body)),
        None => query.filter(prompt_versions::Column::Body.is_null()),
    };
    let found: Option<Option<i32>> = query.into_tuple().one(db).await?;
    Ok(found.flatten().unwrap_or(0))
}

/// A revision as it is served: its number, and its content as the prompt builder
/// and the tools export take it.
#[derive(Debug)]
pub struct Served {
    /// The revision's number (1, 2, ... per agent).
    pub number: i32,
    /// The revision's row id, unique over every agent's revisions.
    pub id: i32,
    /// The agent (its working copy's id and name) with its tools and definitions.
    pub agent: LoadedAgent,
    pub channels: Channels,
    /// The connector each bound tool calls, as the revision pins it.
    pub pins: std::collections::BTreeMap<String, ConnectorPin>,
    /// The revision's policy, compiled once against its tools; `None`: it has none.
    pub policy: Option<crate::policies::Policy>,
    /// The revision's model settings; `None`: it has none.
    pub model: Option<crate::releases::model::ModelSettings>,
    /// The groups the revision carries (see [`Content::groups`]): with the policy,
    /// what decides a call, never the groups as they are now.
    groups: Option<super::content::Groups>,
}

impl Served {
    /// `revision` of the agent `working`, its content read and made servable.
    pub fn new(
        revision: &agent_revisions::Model,
        content: Content,
        working: &LoadedAgent,
        versions: Versions,
        policy: Option<crate::policies::Policy>,
    ) -> Served {
        let pins = pins(&content);
        let model = content.model.clone();
        // A policy that names no group needs none; only a revision published before
        // groups were carried, whose policy names one, reads them live.
        let groups = match (&content.groups, &content.policy) {
            (Some(groups), _) => Some(groups.clone()),
            (None, Some(text)) if !crate::policies::bounds::group_names(text).is_empty() => None,
            (None, _) => Some(Default::default()),
        };
        let (agent, channels) = loaded(content, working.id, &working.agent.name, versions);
        Served {
            number: revision.number,
            id: revision.id,
            agent,
            channels,
            pins,
            policy,
            model,
            groups,
        }
    }

    /// The groups `tenant` gives `user` as this revision decides calls: the ones it
    /// carries, or (a revision published before groups were carried) the tenant's
    /// groups now.
    pub async fn groups_of(
        &self,
        db: &impl ConnectionTrait,
        tenant: &str,
        user: Option<&str>,
    ) -> Result<Vec<String>, Error> {
        match super::content::groups_of(self.groups.as_ref(), tenant, user) {
            Some(groups) => Ok(groups),
            None => crate::policies::groups::of_user(db, tenant, user).await,
        }
    }
}

/// `content`'s policy compiled against its tools (`None` when it has none). CPU
/// work in proportion to the policy: async code calls [`policy_off_workers`].
pub fn policy_of(content: &Content) -> Option<crate::policies::Policy> {
    let tools = content.tools.iter().map(|t| crate::policies::ToolShape {
        name: &t.name,
        tier: &t.approval_tier,
        parameters: &t.parameters,
    });
    crate::policies::Policy::of(content.policy.as_deref(), tools)
}

/// [`policy_of`] through the CPU gate, off the async workers.
pub async fn policy_off_workers(
    content: &Content,
) -> crate::error::Result<Option<crate::policies::Policy>> {
    if content.policy.is_none() {
        return Ok(None);
    }
    let content = content.clone();
    crate::cpu::run(move || policy_of(&content)).await
}

/// The connector pins of `content`, by tool.
pub fn pins(content: &Content) -> std::collections::BTreeMap<String, ConnectorPin> {
    content
        .tools
        .iter()
        .filter_map(|t| t.connector.clone().map(|pin| (t.name.clone(), pin)))
        .collect()
}

/// The connector pins of revision `revision_id` (none when it has none, or is gone).
pub async fn pins_of(
    db: &impl ConnectionTrait,
    revision_id: i32,
) -> Result<std::collections::BTreeMap<String, ConnectorPin>, Error> {
    let row = agent_revisions::Entity::find_by_id(revision_id)
        .one(db)
        .await?;
    match row {
        Some(row) => Ok(pins(&Content::parse(&row.content)?)),
        None => Ok(Default::default()),
    }
}

/// A revision's content as the prompt builder and the tools export take it: the
/// agent (`id`, `name`) with its tools and definitions, and the channels.
pub fn loaded(
    content: Content,
    id: i32,
    name: &str,
    versions: Versions,
) -> (LoadedAgent, Channels) {
    let mut tools = Vec::with_capacity(content.tools.len());
    let mut defs = Vec::with_capacity(content.tools.len());
    for tool in content.tools {
        tools.push(Tool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            approval_tier: tool.approval_tier.clone(),
            prompt_section: tool.prompt_section,
        });
        defs.push(ToolDef {
            name: tool.name,
            description: tool.description,
            approval_tier: tool.approval_tier,
            parameters: tool.parameters,
            strict: tool.strict,
        });
    }
    let agent = Agent {
        name: name.to_owned(),
        identity: content.identity,
        soul: content.soul,
        soul_version: versions.soul,
        prompt_template: content.template,
        template_version: versions.template,
        operating_model: content.operating_model,
        interaction_learning: content.interaction_learning,
        tools,
    };
    let channels = content
        .channels
        .into_iter()
        .map(|(name, c)| Channel {
            name,
            guidance: c.guidance,
            include_operating_model: c.include_operating_model,
            include_interaction_learning: c.include_interaction_learning,
            include_session_section: c.include_session_section,
        })
        .collect();
    let loaded = LoadedAgent {
        id,
        agent,
        tools: defs,
    };
    (loaded, Channels::new(channels))
}
/// How long after a label or a rollout stopped serving a revision a tool call may
/// still name it: a client that fetched the prompt just before a move finishes
/// its conversation on what it was served.
pub const CALL_GRACE: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Whether a tool call may name revision `revision_id` of agent `agent_id` now: a
/// label points at it, a running rollout serves it, or one of them did within
/// [`CALL_GRACE`]. Any other revision (an old one with a looser schema, a draft
/// never released) is not what a label serves, so a call may not pick it.
pub async fn callable(
    db: &impl ConnectionTrait,
    agent_id: i32,
    revision_id: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<bool, DbErr> {
    use entity::{label_moves, rollouts};
    use sea_orm::{Condition, PaginatorTrait};
    let labelled = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent_id))
        .filter(agent_labels::Column::RevisionId.eq(revision_id))
        .count(db)
        .await?;
    if labelled > 0 {
        return Ok(true);
    }
    let since = now - CALL_GRACE;
    let either_side = Condition::any()
        .add(rollouts::Column::BaseRevisionId.eq(revision_id))
        .add(rollouts::Column::CandidateRevisionId.eq(revision_id));
    let rolled = rollouts::Entity::find()
        .filter(rollouts::Column::AgentId.eq(agent_id))
        .filter(either_side)
        .filter(
            Condition::any()
                .add(rollouts::Column::EndedAt.is_null())
                .add(rollouts::Column::EndedAt.gte(since)),
        )
        .count(db)
        .await?;
    if rolled > 0 {
        return Ok(true);
    }
    let moved_away = label_moves::Entity::find()
        .filter(label_moves::Column::AgentId.eq(agent_id))
        .filter(label_moves::Column::FromRevisionId.eq(revision_id))
        .filter(label_moves::Column::CreatedAt.gte(since))
        .count(db)
        .await?;
    Ok(moved_away > 0)
}

/// The 404 for a revision no label or rollout serves (see [`callable`]).
pub fn not_served(name: &str, number: i32) -> Error {
    Error::new(
        Kind::NotFound,
        "revision_not_served",
        format!(
            "revision {number} of agent {name:?} is not served by any label or running rollout (nor was it in the last hour): call without `revision`, or with the revision your prompt came from"
        ),
    )
}

/// The moment renders outside a request are made at (render snapshots,
/// evaluations), so `$current_time` never makes two renders differ.
pub fn fixed_moment() -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC)
}

/// Whose render, and when: a render outside a request (snapshots, evaluations).
pub struct Rendering<'a> {
    /// Whose users' instructions are rendered in.
    pub tenant: &'a str,
    pub agent_id: i32,
    pub name: &'a str,
    /// `$current_time` and friends.
    pub now: chrono::DateTime<chrono::Utc>,
    /// A prompt over this is refused (`render_failed`).
    pub max_bytes: usize,
}

/// `content`'s prompt for `channel` and `user` (with the tenant's instructions for
/// the user) in UTC; 404 for a channel the revision does not hold.
pub async fn render(
    db: &impl ConnectionTrait,
    at: &Rendering<'_>,
    content: &Content,
    channel: &str,
    user: Option<&str>,
) -> Result<String, Error> {
    use crate::prompt::builder::{self, Context};
    let versions = Versions {
        soul: 0,
        template: 0,
    };
    let (agent, channels) = loaded(content.clone(), at.agent_id, at.name, versions);
    let channel = channels
        .get(channel)
        .map_err(|e| Error::not_found(e.to_string()))?;
    let user_instructions = match user {
        Some(user) => {
            crate::prompt::load::user_instructions(db, at.tenant, at.agent_id, user).await?
        }
        None => None,
    };
    let context = Context {
        now: at.now,
        time_zone: chrono_tz::UTC,
        memory_notes: Vec::new(),
        user_instructions,
        last_message_at: None,
    };
    let rendered =
        builder::build_agent_prompt_within(&agent.agent, channel, &context, at.max_bytes)
            .map_err(|e| Error::refused("render_failed", e.to_string()))?;
    Ok(rendered.text)
}
