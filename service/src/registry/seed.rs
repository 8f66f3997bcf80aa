//! `loadout seed`: insert-only, so it can run on every start without undoing an admin's edit.

use std::fmt;

use anyhow::Context;
use chrono::{DateTime, Utc};
use entity::{agent_configurations, agent_tools, channels, prompt_versions, tools};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    Set,
};

use crate::registry::catalog::Seeds;

/// What a seed run created.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SeedReport {
    pub tools_created: usize,
    pub agents_created: usize,
    pub links_created: usize,
    pub channels_created: usize,
}

/// "seed: created 1 agent, 23 links; already present: tools, channels", or
/// "seed: nothing to create" when every seeded row exists (seeding never
/// overwrites, so a second run always says so).
impl fmt::Display for SeedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counts = [
            (self.tools_created, "tool", "tools"),
            (self.agents_created, "agent", "agents"),
            (self.links_created, "link", "links"),
            (self.channels_created, "channel", "channels"),
        ];
        let created: Vec<String> = counts
            .iter()
            .filter(|(n, _, _)| *n > 0)
            .map(|(n, one, many)| format!("{n} {}", if *n == 1 { one } else { many }))
            .collect();
        let present: Vec<&str> = counts
            .iter()
            .filter(|(n, _, _)| *n == 0)
            .map(|(_, _, many)| *many)
            .collect();
        if created.is_empty() {
            return f.write_str("seed: nothing to create; every seeded row is already present");
        }
        write!(f, "seed: created {}", created.join(", "))?;
        if !present.is_empty() {
            write!(f, "; already present: {}", present.join(", "))?;
        }
        Ok(())
    }
}

/// Creates catalog tools, channels, the default agent and its links where absent, in one transaction.
/// A row that exists in any state (edited, inactive, soft-deleted) is left exactly as it is.
pub async fn run(
    db: &DatabaseConnection,
    seeds: &Seeds,
    now: DateTime<Utc>,
) -> anyhow::Result<SeedReport> {
    let txn = crate::db::begin_write(db)
        .await
        .context("cannot start the seed transaction")?;
    let report = seed(&txn, seeds, now)
        .await
        .context("seeding failed; nothing was written")?;
    // A seeded agent starts at revision 1, with `production` and `latest` on it.
    // Other agents are published by the write that changed them, or by serve's
    // start-up (`migration`) when they predate revisions.
    if report.agents_created > 0 {
        let seeded = agent_configurations::Entity::find()
            .filter(agent_configurations::Column::Name.eq(&seeds.assistant.name))
            .one(&txn)
            .await?
            .context("the seeded agent is gone")?;
        crate::releases::publish(&txn, seeded.id, Some("seed"), now)
            .await
            .context("cannot publish the seeded agent; nothing was written")?;
    }
    txn.commit().await.context("cannot commit the seed")?;
    Ok(report)
}

async fn seed(
    db: &impl ConnectionTrait,
    seeds: &Seeds,
    now: DateTime<Utc>,
) -> anyhow::Result<SeedReport> {
    let mut report = SeedReport::default();

    let mut tool_ids = Vec::with_capacity(seeds.catalog.tools.len());
    for tool in &seeds.catalog.tools {
        let existing = tools::Entity::find()
            .filter(tools::Column::Name.eq(&tool.name))
            .one(db)
            .await?;
        let id = match existing {
            Some(row) => row.id,
            None => {
                report.tools_created += 1;
                tools::ActiveModel {
                    name: Set(tool.name.clone()),
                    tool_type: Set(tool.tool_type.clone()),
                    description: Set(tool.description.clone()),
                    approval_tier: Set(tool.tier.clone()),
                    parameters: Set(tool.schema_json()),
                    prompt_section: Set(Some(tool.prompt_section.clone())),
                    is_active: Set(true),
                    created_at: Set(now),
                    updated_at: Set(now),
                    deleted_at: Set(None),
                    ..Default::default()
                }
                .insert(db)
                .await?
                .id
            }
        };
        tool_ids.push(id);
    }

    for channel in &seeds.channels {
        let existing = channels::Entity::find()
            .filter(channels::Column::Name.eq(&channel.name))
            .one(db)
            .await?;
        if existing.is_none() {
            report.channels_created += 1;
            channels::ActiveModel {
                name: Set(channel.name.clone()),
                description: Set(channel.description.clone()),
                guidance: Set(channel.guidance.clone()),
                include_operating_model: Set(channel.include_operating_model),
                include_interaction_learning: Set(channel.include_interaction_learning),
                include_session_section: Set(channel.include_session_section),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(db)
            .await?;
        }
    }

    let agent = &seeds.assistant;
    let existing = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(&agent.name))
        .one(db)
        .await?;
    if existing.is_some() {
        return Ok(report);
    }
    report.agents_created += 1;
    let agent_id = agent_configurations::ActiveModel {
        name: Set(agent.name.clone()),
        identity: Set(serde_json::to_value(&agent.identity)?),
        soul: Set(agent.soul.clone()),
        prompt_template: Set(Some(agent.prompt_template.clone())),
        operating_model: Set(Some(agent.operating_model.clone())),
        interaction_learning: Set(Some(agent.interaction_learning.clone())),
        soul_version: Set(1),
        template_version: Set(1),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(db)
    .await?
    .id;
    for (kind, body) in [
        ("soul", Some(agent.soul.clone())),
        ("template", Some(agent.prompt_template.clone())),
    ] {
        prompt_versions::ActiveModel {
            agent_id: Set(agent_id),
            kind: Set(kind.to_owned()),
            version: Set(1),
            body: Set(body),
            forced: Set(false),
            author: Set("seed".to_owned()),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(db)
        .await?;
    }

    for tool_id in tool_ids {
        let linked = agent_tools::Entity::find()
            .filter(agent_tools::Column::AgentId.eq(agent_id))
            .filter(agent_tools::Column::ToolId.eq(tool_id))
            .one(db)
            .await?;
        if linked.is_none() {
            report.links_created += 1;
            agent_tools::ActiveModel {
                agent_id: Set(agent_id),
                tool_id: Set(tool_id),
                is_active: Set(true),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(db)
            .await?;
        }
    }
    Ok(report)
}
