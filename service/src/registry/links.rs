//! Which tools an agent has: `agent_tools` links, switched on and off, never removed.

use crate::db::Writer;
use entity::{agent_configurations, agent_tools, tools};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    Set,
};
use serde::Serialize;
use utoipa::ToSchema;

use super::guard;
use crate::error::{Error, Result, check_name};

/// One link of an agent to a tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkView {
    pub tool: String,
    /// The link is on.
    pub active: bool,
    /// The tool itself is active and not deleted.
    pub tool_active: bool,
}

/// An agent's links, by tool name.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkList {
    pub agent: String,
    pub links: Vec<LinkView>,
}

/// A link as set.
#[derive(Debug, Serialize, ToSchema)]
pub struct LinkSet {
    pub agent: String,
    pub tool: String,
    pub active: bool,
}

/// The live agent of that name; 404 otherwise. Editing agents is `agents`'s; the
/// registry only looks one up, for its links.
pub async fn agent(db: &impl ConnectionTrait, name: &str) -> Result<agent_configurations::Model> {
    check_name("agent", name)?;
    agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(name))
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent named {name:?}")))
}

pub async fn list(db: &DatabaseConnection, agent: &str) -> Result<LinkList> {
    let agent = self::agent(db, agent).await?;
    let rows = agent_tools::Entity::find()
        .find_also_related(tools::Entity)
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    let mut links: Vec<LinkView> = rows
        .into_iter()
        .filter_map(|(link, tool)| {
            let tool = tool?;
            Some(LinkView {
                active: link.is_active,
                tool_active: tool.is_active && tool.deleted_at.is_none(),
                tool: tool.name,
            })
        })
        .collect();
    links.sort_by(|a, b| a.tool.cmp(&b.tool));
    Ok(LinkList {
        agent: agent.name,
        links,
    })
}

/// Switches a link on (creating it if needed) or off (404 if there is none).
pub async fn set(w: &Writer<'_>, agent: &str, tool: &str, on: bool) -> Result<LinkSet> {
    let mut write = w.begin_for_agents().await?;
    let agent = self::agent(&*write, agent).await?;
    write.touch(agent.id).await?;
    let tool = super::tools::row(&*write, tool).await?;
    set_in(&write, &agent, &tool, on).await?;
    w.commit(write).await?;
    Ok(LinkSet {
        agent: agent.name,
        tool: tool.name,
        active: on,
    })
}

/// Gives `agent` a link to `tool` unless it has one, inside a write that is
/// already open (a connector sync attaching its tools): a missing link is created
/// and a soft-deleted one revived, on; a link an admin switched off stays off.
pub async fn attach_in(
    write: &guard::Write,
    agent: &entity::agent_configurations::Model,
    tool: &entity::tools::Model,
) -> Result<()> {
    let db = &**write;
    let existing = agent_tools::Entity::find()
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::ToolId.eq(tool.id))
        .one(db)
        .await?;
    match existing {
        Some(link) if link.deleted_at.is_none() => Ok(()),
        _ => set_in(write, agent, tool, true).await,
    }
}

/// [`set`] inside a write that is already open.
pub async fn set_in(
    write: &guard::Write,
    agent: &entity::agent_configurations::Model,
    tool: &entity::tools::Model,
    on: bool,
) -> Result<()> {
    let (db, now) = (&**write, write.now());
    let existing = agent_tools::Entity::find()
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::ToolId.eq(tool.id))
        .one(db)
        .await?;
    match existing {
        Some(link) => {
            let mut active: agent_tools::ActiveModel = link.into();
            active.is_active = Set(on);
            active.deleted_at = Set(None);
            active.updated_at = Set(now);
            active.update(db).await?;
        }
        None if on => {
            agent_tools::ActiveModel {
                agent_id: Set(agent.id),
                tool_id: Set(tool.id),
                is_active: Set(true),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(db)
            .await?;
        }
        None => {
            return Err(Error::not_found(format!(
                "agent {:?} has no link to {:?}",
                agent.name, tool.name
            )));
        }
    }
    Ok(())
}

/// Switches one link off inside a write that is already open (configuration as
/// code pruning the links its file no longer names).
pub async fn switch_off_in(write: &guard::Write, link: agent_tools::Model) -> Result<()> {
    let mut active: agent_tools::ActiveModel = link.into();
    active.is_active = Set(false);
    active.updated_at = Set(write.now());
    active.update(&**write).await?;
    Ok(())
}
