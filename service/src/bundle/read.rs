//! The configuration a database holds, as a [`Bundle`]: live rows only, five reads
//! and one per agent for its datasets (through their owner, `evals::datasets`).

use std::collections::{BTreeMap, HashMap};

use entity::{agent_configurations, agent_tools, channels, connectors, tools};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use super::{
    AgentDoc, Bundle, ChannelDoc, ConnectorDoc, HeaderValue, LAYOUT_VERSION, ToolDoc, canonical,
    env_name, sorted,
};
use crate::error::Result;
use crate::evals::cases::Case;

/// What a database holds: the bundle, and the rows it was made from (by name).
pub struct Current {
    pub bundle: Bundle,
    pub agents: HashMap<String, agent_configurations::Model>,
    pub tools: HashMap<String, tools::Model>,
    pub channels: HashMap<String, channels::Model>,
    pub connectors: HashMap<String, connectors::Model>,
    /// Live links (on or off) by agent id and tool id.
    pub links: HashMap<(i32, i32), agent_tools::Model>,
}

/// Reads the live configuration (inside a write's transaction, or not).
pub async fn current(db: &impl ConnectionTrait) -> Result<Current> {
    let agents = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    let tool_rows = tools::Entity::find()
        .filter(tools::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    let channel_rows = channels::Entity::find()
        .filter(channels::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    let connector_rows = connectors::Entity::find()
        .filter(connectors::Column::DeletedAt.is_null())
        .all(db)
        .await?;
    let link_rows = agent_tools::Entity::find()
        .filter(agent_tools::Column::DeletedAt.is_null())
        .all(db)
        .await?;

    let mut datasets: HashMap<i32, BTreeMap<String, Vec<Case>>> = HashMap::new();
    for agent in &agents {
        let held = crate::evals::datasets::latest(db, agent.id).await?;
        datasets.insert(agent.id, held.into_iter().collect());
    }

    let connector_names: HashMap<i32, &str> = connector_rows
        .iter()
        .map(|c| (c.id, c.name.as_str()))
        .collect();
    let tool_names: HashMap<i32, &str> =
        tool_rows.iter().map(|t| (t.id, t.name.as_str())).collect();
    let mut linked: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for link in link_rows.iter().filter(|l| l.is_active) {
        if let Some(name) = tool_names.get(&link.tool_id) {
            linked
                .entry(link.agent_id)
                .or_default()
                .push((*name).to_owned());
        }
    }
    let mut bundle = Bundle {
        version: LAYOUT_VERSION,
        agents: agents
            .iter()
            .map(|a| AgentDoc {
                name: a.name.clone(),
                identity: canonical(&a.identity),
                soul: a.soul.clone(),
                template: a.prompt_template.clone(),
                operating_model: a.operating_model.clone(),
                interaction_learning: a.interaction_learning.clone(),
                release_mode: crate::releases::ReleaseMode::or_gated(&a.release_mode)
                    .as_str()
                    .to_owned(),
                tools: linked.remove(&a.id).unwrap_or_default(),
                policy: a.policy.clone().filter(|p| !p.trim().is_empty()),
                policy_tests: a
                    .policy_tests
                    .as_deref()
                    .and_then(|t| crate::policies::cases::parse(t).ok())
                    .unwrap_or_default(),
                model: crate::releases::model::ModelSettings::parse(a.model_settings.as_deref())
                    .ok()
                    .flatten(),
                datasets: datasets.remove(&a.id).unwrap_or_default(),
            })
            .collect(),
        tools: tool_rows
            .iter()
            .map(|t| ToolDoc {
                name: t.name.clone(),
                tool_type: t.tool_type.clone(),
                description: t.description.clone(),
                approval_tier: t.approval_tier.clone(),
                parameters: sorted(&t.parameters),
                prompt_section: t.prompt_section.clone(),
                connector: t
                    .connector_id
                    .and_then(|id| connector_names.get(&id))
                    .map(|n| (*n).to_owned()),
                strict: t.strict,
                active: t.is_active,
            })
            .collect(),
        channels: channel_rows
            .iter()
            .map(|c| ChannelDoc {
                name: c.name.clone(),
                description: c.description.clone(),
                guidance: c.guidance.clone(),
                include_operating_model: c.include_operating_model,
                include_interaction_learning: c.include_interaction_learning,
                include_session_section: c.include_session_section,
            })
            .collect(),
        connectors: connector_rows
            .iter()
            .map(|c| ConnectorDoc {
                name: c.name.clone(),
                kind: c.kind.clone(),
                url: c.url.clone(),
                method: c.method.clone(),
                timeout_ms: c.timeout_ms,
                trusted: Some(c.trusted),
                headers: c
                    .headers
                    .as_object()
                    .map(|h| {
                        h.keys()
                            .map(|k| {
                                let env = env_name(&c.name, k);
                                (k.clone(), HeaderValue::Env { env })
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect(),
        state: None,
    };
    bundle.sort();
    Ok(Current {
        bundle,
        agents: agents.into_iter().map(|a| (a.name.clone(), a)).collect(),
        tools: tool_rows.into_iter().map(|t| (t.name.clone(), t)).collect(),
        channels: channel_rows
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect(),
        connectors: connector_rows
            .into_iter()
            .map(|c| (c.name.clone(), c))
            .collect(),
        links: link_rows
            .into_iter()
            .map(|l| ((l.agent_id, l.tool_id), l))
            .collect(),
    })
}

/// The bundle an export writes: the configuration and the state it is.
pub async fn export(db: &impl ConnectionTrait) -> Result<Bundle> {
    let mut bundle = current(db).await?.bundle;
    bundle.state = Some(bundle.state());
    Ok(bundle)
}
