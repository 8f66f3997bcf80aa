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

/// An agent's policy that does not compile against its active tools, or whose
/// tests fail: the same check a policy save makes, so a tool schema change that
/// breaks a policy is refused by the write guard.
pub(super) fn policies(rows: &Rows, out: &mut Problems) {
    use crate::policies::{Policy, Rules, ToolShape, cases};
    for agent in &rows.agents {
        let Some(text) = agent.policy.as_deref().filter(|p| !p.trim().is_empty()) else {
            continue;
        };
        let tools: Vec<ToolShape<'_>> = rows
            .active_links_of(agent)
            .filter_map(|link| rows.by_id.get(&link.tool_id))
            // Switched-off tools stay in: switching one off is never refused.
            .filter(|t| t.deleted_at.is_none())
            .map(|t| ToolShape {
                name: &t.name,
                tier: &t.approval_tier,
                parameters: &t.parameters,
            })
            .collect();
        let fix = format!("fix it: PUT /v1/agents/{}/policy", agent.name);
        let rules = match Rules::compile(text, tools.iter().copied()) {
            Ok(rules) => rules,
            Err(e) => {
                let problems = e.problems(text);
                let first = problems
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let more = match problems.len() {
                    0 | 1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                };
                out.error(
                    "agent",
                    &agent.name,
                    ProblemCode::PolicyInvalid,
                    format!("its policy does not compile: {first}{more}"),
                    fix,
                );
                continue;
            }
        };
        let cases = match agent.policy_tests.as_deref().map(cases::parse) {
            None => Vec::new(),
            Some(Ok(cases)) => cases,
            Some(Err(e)) => {
                out.error("agent", &agent.name, ProblemCode::PolicyTestFailed, e, fix);
                continue;
            }
        };
        if let Err(e) = cases::within_bounds(&rules, &cases) {
            out.error("agent", &agent.name, ProblemCode::PolicyTestFailed, e, fix);
            continue;
        }
        for failure in cases::run(&Policy::Ready(Box::new(rules)), &tools, &cases) {
            out.error(
                "agent",
                &agent.name,
                ProblemCode::PolicyTestFailed,
                format!("a policy test failed: {failure}"),
                fix.clone(),
            );
        }
    }
}
