//! Whether a proposal's tool may still run for its agent. Read when a run is
//! about to start (an approval, a retry, the sweeper resuming an approval), so a
//! call approved after an admin switched its tool off, unlinked it or deleted
//! it, or deleted the agent, runs nothing.

use entity::{agent_configurations, agent_tools, proposals, tools};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use crate::error::Result;

/// Why `proposal` may no longer run, if it may not: the agent deleted, the tool
/// deleted or switched off, or its link to the agent deleted or switched off.
pub async fn reason(
    db: &impl ConnectionTrait,
    proposal: &proposals::Model,
) -> Result<Option<String>> {
    let tool = &proposal.tool_name;
    let agent = agent_configurations::Entity::find_by_id(proposal.agent_id)
        .one(db)
        .await?;
    let Some(agent) = agent.filter(|a| a.deleted_at.is_none()) else {
        return Ok(Some("its agent was deleted".to_owned()));
    };
    let row = tools::Entity::find_by_id(proposal.tool_id).one(db).await?;
    match row {
        Some(row) if row.deleted_at.is_some() => {
            return Ok(Some(format!("the tool {tool} was deleted")));
        }
        None => return Ok(Some(format!("the tool {tool} was deleted"))),
        Some(row) if !row.is_active => return Ok(Some(format!("the tool {tool} is switched off"))),
        Some(_) => {}
    }
    let linked = agent_tools::Entity::find()
        .filter(agent_tools::Column::AgentId.eq(proposal.agent_id))
        .filter(agent_tools::Column::ToolId.eq(proposal.tool_id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .one(db)
        .await?;
    Ok(linked.is_none().then(|| {
        format!(
            "the tool {tool} is no longer linked to the agent {}",
            agent.name
        )
    }))
}
