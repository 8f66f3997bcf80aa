//! The rows one check reads, and the lookups several rules share.

use std::collections::{BTreeMap, BTreeSet};

use entity::{agent_configurations, agent_tools, tools};

use super::report::Counts;
use crate::execute::executors::Executors;
use crate::prompt::lint;
use crate::registry::catalog::Catalog;

/// The rows one check reads, and the lookups several rules share.
pub(super) struct Rows<'a> {
    pub(super) catalog: &'a Catalog,
    pub(super) executors: &'a Executors,
    /// Every tool row, soft-deleted ones included.
    pub(super) tools: &'a [tools::Model],
    /// Agents that are not soft-deleted.
    pub(super) agents: Vec<&'a agent_configurations::Model>,
    pub(super) links: &'a [agent_tools::Model],
    /// Active, not soft-deleted links by agent id (a lookup, not a scan per agent).
    active_links: BTreeMap<i32, Vec<&'a agent_tools::Model>>,
    pub(super) forced_templates: &'a BTreeSet<(i32, i32)>,
    /// Tools that are not soft-deleted, by name.
    pub(super) by_name: BTreeMap<&'a str, &'a tools::Model>,
    /// Every tool row by id.
    pub(super) by_id: BTreeMap<i32, &'a tools::Model>,
    /// Tools that are active and not soft-deleted.
    pub(super) active: Vec<&'a tools::Model>,
    /// The names prompts may and may not use.
    pub(super) names: lint::ToolNames,
}

impl<'a> Rows<'a> {
    pub(super) fn new(
        catalog: &'a Catalog,
        executors: &'a Executors,
        tools: &'a [tools::Model],
        agents: &'a [agent_configurations::Model],
        links: &'a [agent_tools::Model],
        forced_templates: &'a BTreeSet<(i32, i32)>,
    ) -> Self {
        let active: Vec<&tools::Model> = tools.iter().filter(|t| is_active(t)).collect();
        let mut active_links: BTreeMap<i32, Vec<&agent_tools::Model>> = BTreeMap::new();
        for link in links
            .iter()
            .filter(|l| l.is_active && l.deleted_at.is_none())
        {
            active_links.entry(link.agent_id).or_default().push(link);
        }
        Rows {
            active_links,
            catalog,
            executors,
            tools,
            agents: agents.iter().filter(|a| a.deleted_at.is_none()).collect(),
            links,
            forced_templates,
            by_name: tools
                .iter()
                .filter(|t| t.deleted_at.is_none())
                .map(|t| (t.name.as_str(), t))
                .collect(),
            by_id: tools.iter().map(|t| (t.id, t)).collect(),
            names: tool_names(
                catalog,
                tools.iter().map(|t| (t.name.as_str(), is_active(t))),
            ),
            active,
        }
    }

    /// The rows of some agents only: `tools` holds the tools their links point at,
    /// `names` every tool name's state (from [`tool_names`]).
    pub(super) fn of_agents(
        catalog: &'a Catalog,
        executors: &'a Executors,
        tools: &'a [tools::Model],
        agents: &'a [agent_configurations::Model],
        links: &'a [agent_tools::Model],
        forced_templates: &'a BTreeSet<(i32, i32)>,
        names: lint::ToolNames,
    ) -> Self {
        Rows {
            names,
            ..Rows::new(catalog, executors, tools, agents, links, forced_templates)
        }
    }

    /// An agent's links that are active and not soft-deleted.
    pub(super) fn active_links_of(
        &self,
        agent: &agent_configurations::Model,
    ) -> impl Iterator<Item = &'a agent_tools::Model> {
        self.active_links
            .get(&agent.id)
            .into_iter()
            .flatten()
            .copied()
    }

    pub(super) fn counts(&self) -> Counts {
        Counts {
            catalog_tools: self.catalog.tools.len(),
            tools: self.tools.iter().filter(|t| t.deleted_at.is_none()).count(),
            active_tools: self.active.len(),
            agents: self.agents.len(),
            active_links: self
                .links
                .iter()
                .filter(|l| l.is_active && l.deleted_at.is_none())
                .count(),
        }
    }
}

/// Active and not soft-deleted.
pub(super) fn is_active(tool: &tools::Model) -> bool {
    tool.is_active && tool.deleted_at.is_none()
}

/// The names prompts may use (active tools) and must not (inactive tools, and every
/// name the catalog retired or renamed, even where the database still has it active),
/// from each tool row's name and whether it is active (and not soft-deleted).
pub(super) fn tool_names<'t>(
    catalog: &crate::registry::catalog::Catalog,
    tools: impl Iterator<Item = (&'t str, bool)> + Clone,
) -> lint::ToolNames {
    let retired: BTreeSet<String> = catalog
        .deactivated
        .iter()
        .chain(catalog.renamed.keys())
        .cloned()
        .collect();
    let active_names: BTreeSet<String> = tools
        .clone()
        .filter(|(_, active)| *active)
        .map(|(name, _)| name.to_owned())
        .filter(|n| !retired.contains(n))
        .collect();
    lint::ToolNames {
        inactive: tools
            .filter(|(_, active)| !*active)
            .map(|(name, _)| name.to_owned())
            .filter(|n| !active_names.contains(n))
            .chain(retired.iter().cloned())
            .collect(),
        active: active_names,
    }
}
