//! What a revision holds: everything an agent serves apart from request and user
//! data, read the way the prompt builder and the tools export read it.

use std::collections::BTreeMap;

use entity::tools;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::connectors::client::ConnectorPin;
use crate::error::{Error, Result};
use crate::prompt::builder::Channels;
use crate::prompt::load;
use crate::releases::model::ModelSettings;

/// An agent's served content. Fields are in a fixed order and maps are sorted
/// (`serde_json`'s `Value` keeps object keys sorted, and channels are a
/// `BTreeMap`), so equal content is equal JSON text and hashes alike.
///
/// The soul and template version counters are left out: they count edits, and an
/// edit that restores older text serves the older content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Content {
    /// `{"display_name", "role", "description"}`.
    #[schema(value_type = Object)]
    pub identity: Value,
    pub soul: String,
    /// Empty when the agent has none (the section renders nothing).
    pub operating_model: String,
    /// Empty when the agent has none.
    pub interaction_learning: String,
    /// `null`: the built-in assembly.
    pub template: Option<String>,
    /// The agent's active tools as served, sorted by name.
    pub tools: Vec<ToolContent>,
    /// Every live channel, by name.
    pub channels: BTreeMap<String, ChannelContent>,
    /// The agent's Cedar policy set (`policies`); absent when it has none, so the
    /// content of an agent without one hashes as it did before policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The model, its parameters and response schema (`releases::model`); absent
    /// when none are set, so older contents hash as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelSettings>,
    /// The members of every group the policy names, per tenant (tenant → group →
    /// sorted user ids), as they were when this revision was published: a call is
    /// decided by these, so no one widens a signed-off policy by editing a group
    /// (a group change publishes a new revision, which a gated agent promotes
    /// through sign-off). Absent when the policy names no group; a revision
    /// published before groups were carried reads the tenant's groups live.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Groups>,
}

/// Tenant → group → sorted user ids.
pub type Groups = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// One tool as the agent is served it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolContent {
    pub name: String,
    pub description: String,
    /// The JSON Schema of its input.
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// `false`: served to OpenAI with `strict: false` (a loose synced schema).
    pub strict: bool,
    /// `auto`, `user_configurable` or `requires_approval`.
    pub approval_tier: String,
    /// `builtin`, `api` or `mcp`.
    #[serde(rename = "type")]
    pub tool_type: String,
    pub prompt_section: Option<String>,
    /// The connector an `api` or `mcp` tool calls, as this revision pins it (a
    /// gated agent's calls go where its served revision says; see `docs/bounds.md`).
    /// Absent for builtins, unbound tools and revisions published before pins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector: Option<ConnectorPin>,
}

/// A channel's guidance and which optional sections it gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChannelContent {
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
}

impl Content {
    /// The live agent `name`'s content, with `channels` (every live channel, read
    /// once by the caller); `None` if there is no live agent of that name.
    pub async fn read(
        db: &impl ConnectionTrait,
        name: &str,
        channels: &Channels,
    ) -> Result<Option<Content>, DbErr> {
        let Some((id, agent, defs)) = load::agent_with_tool_defs(db, name).await? else {
            return Ok(None);
        };
        let stored: Option<(Option<String>, Option<String>)> =
            entity::agent_configurations::Entity::find_by_id(id)
                .select_only()
                .column(entity::agent_configurations::Column::Policy)
                .column(entity::agent_configurations::Column::ModelSettings)
                .into_tuple()
                .one(db)
                .await?;
        let (policy, model) = stored.unwrap_or_default();
        let policy = policy.filter(|p| !p.trim().is_empty());
        let groups = match &policy {
            Some(text) => groups(db, text).await?,
            None => None,
        };
        // Settings were checked when saved; text that no longer reads serves none.
        let model = ModelSettings::parse(model.as_deref()).unwrap_or_default();
        let names: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
        let types = tool_types(db, names.clone()).await?;
        let mut pins = pins(db, names).await?;
        // Both lists are the same rows in the same order (by name).
        let tools = defs
            .into_iter()
            .zip(agent.tools)
            .map(|(def, tool)| ToolContent {
                tool_type: types.get(&def.name).cloned().unwrap_or_default(),
                connector: pins.remove(&def.name),
                name: def.name,
                description: def.description,
                parameters: def.parameters,
                strict: def.strict,
                approval_tier: def.approval_tier,
                prompt_section: tool.prompt_section,
            })
            .collect();
        let channels = channels
            .iter()
            .map(|c| {
                let content = ChannelContent {
                    guidance: c.guidance.clone(),
                    include_operating_model: c.include_operating_model,
                    include_interaction_learning: c.include_interaction_learning,
                    include_session_section: c.include_session_section,
                };
                (c.name.clone(), content)
            })
            .collect();
        Ok(Some(Content {
            identity: agent.identity,
            soul: agent.soul,
            operating_model: agent.operating_model,
            interaction_learning: agent.interaction_learning,
            template: agent.prompt_template,
            tools,
            channels,
            policy,
            model,
            groups,
        }))
    }

    /// The groups `tenant` gives `user` in this revision; `None` when the revision
    /// carries no groups (its policy names none, or it predates carried groups).
    pub fn groups_of(&self, tenant: &str, user: Option<&str>) -> Option<Vec<String>> {
        groups_of(self.groups.as_ref(), tenant, user)
    }

    /// The canonical JSON text (keys sorted at every depth): what is stored and hashed.
    pub fn canonical(&self) -> Result<String> {
        crate::digest::canonical(self).map_err(Error::internal)
    }

    /// Content read back from a revision's stored text.
    pub fn parse(text: &str) -> Result<Content> {
        serde_json::from_str(text).map_err(Error::internal)
    }
}

/// The groups of `user` in `tenant` among `groups`; `None` without `groups`.
pub fn groups_of(groups: Option<&Groups>, tenant: &str, user: Option<&str>) -> Option<Vec<String>> {
    let groups = groups?;
    let Some(user) = user else {
        return Some(Vec::new());
    };
    Some(
        groups
            .get(tenant)
            .map(|of| {
                of.iter()
                    .filter(|(_, users)| users.binary_search_by(|u| u.as_str().cmp(user)).is_ok())
                    .map(|(name, _)| name.clone())
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// The live members of the live groups `policy` names, in every tenant; `None`
/// when it names no group.
async fn groups(db: &impl ConnectionTrait, policy: &str) -> Result<Option<Groups>, DbErr> {
    use entity::{user_group_members as members, user_groups};
    let names: Vec<String> = crate::policies::bounds::group_names(policy)
        .into_iter()
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    let rows: Vec<(String, String, String)> = user_groups::Entity::find()
        .select_only()
        .column(user_groups::Column::TenantId)
        .column(user_groups::Column::Name)
        .column(members::Column::UserId)
        .inner_join(members::Entity)
        .filter(user_groups::Column::Name.is_in(names))
        .filter(user_groups::Column::DeletedAt.is_null())
        .filter(members::Column::DeletedAt.is_null())
        .into_tuple()
        .all(db)
        .await?;
    let mut out = Groups::new();
    for (tenant, group, user) in rows {
        out.entry(tenant)
            .or_default()
            .entry(group)
            .or_default()
            .push(user);
    }
    for users in out.values_mut().flat_map(|g| g.values_mut()) {
        users.sort();
        users.dedup();
    }
    Ok(Some(out))
}

/// Each named tool's connector, as a revision pins it (bound tools only).
async fn pins(
    db: &impl ConnectionTrait,
    names: Vec<String>,
) -> Result<BTreeMap<String, ConnectorPin>, DbErr> {
    use entity::connectors;
    let mut out = BTreeMap::new();
    if names.is_empty() {
        return Ok(out);
    }
    let bound: Vec<(String, i32)> = tools::Entity::find()
        .select_only()
        .column(tools::Column::Name)
        .column(tools::Column::ConnectorId)
        .filter(tools::Column::Name.is_in(names))
        .filter(tools::Column::DeletedAt.is_null())
        .filter(tools::Column::ConnectorId.is_not_null())
        .into_tuple()
        .all(db)
        .await?;
    if bound.is_empty() {
        return Ok(out);
    }
    let ids: Vec<i32> = bound.iter().map(|(_, id)| *id).collect();
    let rows: BTreeMap<i32, connectors::Model> = connectors::Entity::find()
        .filter(connectors::Column::Id.is_in(ids))
        .filter(connectors::Column::DeletedAt.is_null())
        .all(db)
        .await?
        .into_iter()
        .map(|c| (c.id, c))
        .collect();
    for (tool, id) in bound {
        if let Some(c) = rows.get(&id) {
            let pin = ConnectorPin {
                name: c.name.clone(),
                kind: c.kind.clone(),
                url: c.url.clone(),
                method: c.method.clone(),
                timeout_ms: c.timeout_ms,
            };
            out.insert(tool, pin);
        }
    }
    Ok(out)
}

/// Each named tool's type (`prompt::load` does not read it: nothing rendered shows it).
async fn tool_types(
    db: &impl ConnectionTrait,
    names: Vec<String>,
) -> Result<BTreeMap<String, String>, DbErr> {
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let rows: Vec<(String, String)> = tools::Entity::find()
        .select_only()
        .column(tools::Column::Name)
        .column(tools::Column::ToolType)
        .filter(tools::Column::Name.is_in(names))
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().collect())
}

/// Hex SHA-256 of the canonical text.
pub fn hash(text: &str) -> String {
    crate::digest::sha256_hex(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_hex_sha256() {
        assert_eq!(
            hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
