//! Rules about agents' links to tools.

use super::code::ProblemCode;
use super::report::Problems;
use super::rows::{Rows, is_active};

/// An agent's active link to a tool that is inactive or deleted (a warning) or that
/// does not exist (an error).
pub(super) fn links(rows: &Rows, out: &mut Problems) {
    for agent in &rows.agents {
        for link in rows.active_links_of(agent) {
            match rows.by_id.get(&link.tool_id) {
                Some(tool) if is_active(tool) => {}
                Some(tool) => out.warning(
                    "link",
                    &format!("{}/{}", agent.name, tool.name),
                    ProblemCode::LinkToInactiveTool,
                    format!(
                        "is an active link to {}, which is inactive or deleted",
                        tool.name
                    ),
                    format!(
                        "detach it: DELETE /v1/agents/{}/links/{}",
                        agent.name, tool.name
                    ),
                ),
                None => out.error(
                    "link",
                    &format!("{}/#{}", agent.name, link.tool_id),
                    ProblemCode::LinkToMissingTool,
                    format!(
                        "is an active link to tool id {}, which does not exist",
                        link.tool_id
                    ),
                    "remove the link row",
                ),
            }
        }
    }
}

/// An agent with no active link to an active tool.
pub(super) fn agents_without_tools(rows: &Rows, out: &mut Problems) {
    for agent in &rows.agents {
        let has_tools = rows
            .active_links_of(agent)
            .any(|link| rows.by_id.get(&link.tool_id).is_some_and(|t| is_active(t)));
        if !has_tools {
            out.warning(
                "agent",
                &agent.name,
                ProblemCode::AgentWithoutTools,
                "has no active tools",
                format!("attach tools: PUT /v1/agents/{}/links/{{tool}}", agent.name),
            );
        }
    }
}
