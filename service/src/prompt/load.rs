//! Reads what [`super::builder`] needs from the database. Soft-deleted rows
//! (`deleted_at` set) and inactive tools or links are never returned.

use entity::{agent_configurations, agent_tools, channels, tools};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Statement,
};

use super::builder::{Agent, Channel, Channels, Tool};
use crate::vocab::ToolDef;

/// An agent with its database id, as loaded for rendering.
#[derive(Debug)]
pub struct LoadedAgent {
    pub id: i32,
    pub agent: Agent,
    /// The agent's active tools with their schemas, sorted by name.
    pub tools: Vec<ToolDef>,
}

impl LoadedAgent {
    /// A copy without the tools named in `hidden` (a policy hides them from
    /// whoever the prompt is for).
    pub fn without_tools(&self, hidden: &[String]) -> LoadedAgent {
        let mut agent = self.agent.clone();
        agent.tools.retain(|t| !hidden.contains(&t.name));
        LoadedAgent {
            id: self.id,
            agent,
            tools: self
                .tools
                .iter()
                .filter(|t| !hidden.contains(&t.name))
                .cloned()
                .collect(),
        }
    }

    /// A copy whose prompt template is `template`, for previews.
    pub fn clone_with_template(&self, template: Option<String>) -> LoadedAgent {
        let mut agent = self.agent.clone();
        agent.prompt_template = template;
        LoadedAgent {
            id: self.id,
            agent,
            tools: self.tools.clone(),
        }
    }
}

/// An agent by name, with its active tools, or `None` if there is no live agent of that name.
pub async fn agent(db: &impl ConnectionTrait, name: &str) -> Result<Option<(i32, Agent)>, DbErr> {
    Ok(agent_with_tool_defs(db, name)
        .await?
        .map(|(id, agent, _)| (id, agent)))
}

/// Like [`agent`], plus the active tools' definitions (with schemas) for the tools endpoints.
pub async fn agent_with_tool_defs(
    db: &impl ConnectionTrait,
    name: &str,
) -> Result<Option<(i32, Agent, Vec<ToolDef>)>, DbErr> {
    let Some(row) = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(name))
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let rows = tools::Entity::find()
        .inner_join(agent_tools::Entity)
        .filter(agent_tools::Column::AgentId.eq(row.id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .filter(tools::Column::IsActive.eq(true))
        .filter(tools::Column::DeletedAt.is_null())
        .order_by_asc(tools::Column::Name)
        .distinct()
        .all(db)
        .await?;
    let defs = rows
        .iter()
        .map(|t| ToolDef {
            name: t.name.clone(),
            description: t.description.clone(),
            approval_tier: t.approval_tier.clone(),
            parameters: t.parameters.clone(),
            strict: t.strict,
        })
        .collect();
    let tools = rows
        .into_iter()
        .map(|t| Tool {
            name: t.name,
            description: t.description,
            approval_tier: t.approval_tier,
            prompt_section: t.prompt_section,
        })
        .collect();
    Ok(Some((
        row.id,
        Agent {
            name: row.name,
            identity: row.identity,
            soul: row.soul,
            soul_version: row.soul_version,
            prompt_template: row.prompt_template,
            template_version: row.template_version,
            operating_model: row.operating_model.unwrap_or_default(),
            interaction_learning: row.interaction_learning.unwrap_or_default(),
            tools,
        },
        defs,
    )))
}

/// Every live channel.
pub async fn channels(db: &impl ConnectionTrait) -> Result<Channels, DbErr> {
    let rows = channels::Entity::find()
        .filter(channels::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    Ok(Channels::new(
        rows.into_iter()
            .map(|c| Channel {
                name: c.name,
                guidance: c.guidance,
                include_operating_model: c.include_operating_model,
                include_interaction_learning: c.include_interaction_learning,
                include_session_section: c.include_session_section,
            })
            .collect(),
    ))
}

/// The tenant's user's active instructions for an agent, if any. A user id names a
/// person only inside a tenant: another tenant's `alice` is someone else.
///
/// This is the one query of a per-user fetch, so it is written out: one column,
/// on the (tenant_id, agent_id, user_id) unique index, the same text every time
/// (a prepared statement the pool keeps), no query builder on the hot path.
pub async fn user_instructions(
    db: &impl ConnectionTrait,
    tenant: &str,
    agent_id: i32,
    user_id: &str,
) -> Result<Option<String>, DbErr> {
    let backend = db.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => {
            "SELECT instructions FROM user_agent_prompt_customizations WHERE tenant_id = $1 AND agent_id = $2 AND user_id = $3 AND is_active AND deleted_at IS NULL"
        }
        _ => {
            "SELECT instructions FROM user_agent_prompt_customizations WHERE tenant_id = ? AND agent_id = ? AND user_id = ? AND is_active AND deleted_at IS NULL"
        }
    };
    let statement = Statement::from_sql_and_values(
        backend,
        sql,
        [tenant.into(), agent_id.into(), user_id.into()],
    );
    match db.query_one_raw(statement).await? {
        Some(row) => Ok(Some(row.try_get_by_index(0)?)),
        None => Ok(None),
    }
}
