//! Releases: what an agent serves is recorded as numbered, immutable
//! revisions, and labels (`production`, `latest`, ...) point at them.
//!
//! Every configuration write publishes inside its own transaction
//! ([`crate::registry::guard`] calls [`publish_all`] before its final check, so a
//! refused write leaves no revision), and so do the seed and serve's start-up, so
//! a database that predates revisions gets revision 1 per agent on its first start.
//!
//! Publishing reads the working copy the way the prompt builder and the tools
//! export read it ([`crate::prompt::load`]), makes its canonical JSON
//! ([`content::Content`]) and stores it once per agent: content equal to an
//! existing revision of the agent reuses that revision, so a restore points the
//! labels back at the old number. Then `latest` moves to it, and when it moved,
//! `production` too while the agent's release mode is `direct`. A label already
//! there does not move and records nothing.
//!
//! What is served is a revision: [`serve`] finds the one a label points at and
//! makes its content into what the prompt builder and the tools export take.
//!
//! Below `registry` (whose write guard calls it) and above `prompt`: it uses
//! `prompt`, `db`, `vocab`, `entity` and `error` only.

pub mod compat;
pub mod content;
pub mod diff;
pub mod guard;
pub mod model;
pub mod moves;
pub mod outcomes;
pub mod read;
pub mod serve;
pub mod signals;
pub mod traffic;

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use entity::{agent_configurations, agent_revisions};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::error::{Error, Result};
use crate::events::{self, Event, RevisionPublished};
use crate::prompt::builder::Channels;
use crate::prompt::load;

pub use moves::{LATEST, PRODUCTION};

crate::closed_set! {
    /// How an agent's saves reach `production`.
    pub enum ReleaseMode as "release mode" {
        /// Every save publishes and moves `production` (today's behaviour).
        Direct = "direct",
        /// A save moves `latest` only; `production` moves by promotion.
        Gated = "gated",
    }
}

impl ReleaseMode {
    /// A stored mode read where a decision is made: anything unknown is `gated`,
    /// so a drifted value never moves `production` by itself.
    pub fn or_gated(text: &str) -> ReleaseMode {
        text.parse().unwrap_or(ReleaseMode::Gated)
    }
}

/// What one publish did for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub agent_id: i32,
    /// The revision the agent's content is (new or reused).
    pub number: i32,
    /// A new revision was made (false: the content was already a revision).
    pub created: bool,
    /// The labels that moved to it.
    pub moved: Vec<&'static str>,
}

/// Publishes the live agent `agent_id` inside the caller's transaction (see the
/// module's documentation). 404 if there is no live agent with that id.
pub async fn publish(
    db: &impl ConnectionTrait,
    agent_id: i32,
    author: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Published> {
    let agent = agent_configurations::Entity::find_by_id(agent_id)
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent with id {agent_id}")))?;
    let channels = load::channels(db).await?;
    publish_agent(db, &agent, &channels, author, now).await
}

/// Publishes every live agent (see [`publish`]); what each publish did, by id.
pub async fn publish_all(
    db: &impl ConnectionTrait,
    author: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<Published>> {
    let live = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::DeletedAt.is_null());
    publish_each(db, live, author, now).await
}

/// Publishes the live agents among `ids` (see [`publish`]); what each publish did.
pub async fn publish_some(
    db: &impl ConnectionTrait,
    ids: &BTreeSet<i32>,
    author: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<Published>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let live = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .filter(agent_configurations::Column::Id.is_in(ids.iter().copied()));
    publish_each(db, live, author, now).await
}

/// Publishes each agent `agents` finds, by id.
async fn publish_each(
    db: &impl ConnectionTrait,
    agents: sea_orm::Select<agent_configurations::Entity>,
    author: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Vec<Published>> {
    let agents = agents
        .order_by_asc(agent_configurations::Column::Id)
        .all(db)
        .await?;
    let channels = load::channels(db).await?;
    let mut published = Vec::with_capacity(agents.len());
    for agent in &agents {
        published.push(publish_agent(db, agent, &channels, author, now).await?);
    }
    Ok(published)
}

async fn publish_agent(
    db: &impl ConnectionTrait,
    agent: &agent_configurations::Model,
    channels: &Channels,
    author: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Published> {
    let content = content::Content::read(db, &agent.name, channels)
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent named {:?}", agent.name)))?;
    let text = content.canonical()?;
    let hash = content::hash(&text);
    let existing = agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(agent.id))
        .filter(agent_revisions::Column::ContentHash.eq(&hash))
        .one(db)
        .await?;
    let created = existing.is_none();
    let revision = match existing {
        Some(revision) => revision,
        None => {
            let last: Option<Option<i32>> = agent_revisions::Entity::find()
                .select_only()
                .column_as(agent_revisions::Column::Number.max(), "number")
                .filter(agent_revisions::Column::AgentId.eq(agent.id))
                .into_tuple()
                .one(db)
                .await?;
            agent_revisions::ActiveModel {
                agent_id: Set(agent.id),
                number: Set(last.flatten().unwrap_or(0) + 1),
                content_hash: Set(hash),
                content: Set(text),
                author: Set(author.map(str::to_owned)),
                created_at: Set(now),
                ..Default::default()
            }
            .insert(db)
            .await?
        }
    };
    let mv = moves::Move {
        agent_id: agent.id,
        to_revision_id: revision.id,
        kind: moves::PUBLISH,
        actor: author,
        at: now,
    };
    if created {
        let published = RevisionPublished {
            agent: agent.name.clone(),
            revision: revision.number,
            author: author.map(str::to_owned),
        };
        events::record(db, now, Event::RevisionPublished(published)).await?;
    }
    let mut moved = Vec::new();
    if moves::move_label(db, LATEST, &mv).await? {
        moved.push(LATEST);
    }
    // In direct mode `production` follows `latest` when a write moves it, not on
    // every write: a `production` an operator moved by hand stays until the next
    // change of what the agent serves.
    let direct = ReleaseMode::or_gated(&agent.release_mode) == ReleaseMode::Direct;
    if direct && !moved.is_empty() && moves::move_label(db, PRODUCTION, &mv).await? {
        moved.push(PRODUCTION);
        traffic::end_on_move(db, agent.id, PRODUCTION, moves::PUBLISH, author, now).await?;
    }
    Ok(Published {
        agent_id: agent.id,
        number: revision.number,
        created,
        moved,
    })
}
