//! Rules about prompts: tool names they must not use, and template lint errors.

use std::collections::BTreeSet;

use entity::agent_configurations;

use super::code::ProblemCode;
use super::report::{Problems, Severity};
use super::rows::Rows;
use crate::prompt::lint;

/// An active tool's prompt section names a tool that is not active.
pub(super) fn stale_names_in_tool_sections(rows: &Rows, out: &mut Problems) {
    for tool in &rows.active {
        let Some(section) = &tool.prompt_section else {
            continue;
        };
        for name in stale_mentions(section, &rows.names) {
            out.error(
                "tool",
                &tool.name,
                ProblemCode::PromptNamesInactiveTool,
                format!(
                    "its prompt section names {name}, which is not an active tool (or is retired in the catalog)"
                ),
                "rewrite the prompt section with the canonical tool name",
            );
        }
    }
}

/// An agent's soul names a tool that is not active.
pub(super) fn stale_names_in_souls(rows: &Rows, out: &mut Problems) {
    for agent in &rows.agents {
        for name in stale_mentions(&agent.soul, &rows.names) {
            out.error(
                "agent",
                &agent.name,
                ProblemCode::PromptNamesInactiveTool,
                format!(
                    "its soul names {name}, which is not an active tool (or is retired in the catalog)"
                ),
                format!(
                    "edit the soul (PATCH /v1/agents/{}) to use the canonical name",
                    agent.name
                ),
            );
        }
    }
}

/// An agent's prompt template names a tool that is not active (a warning when the
/// current template version was forced).
pub(super) fn stale_names_in_templates(rows: &Rows, out: &mut Problems) {
    for agent in &rows.agents {
        let Some(template) = &agent.prompt_template else {
            continue;
        };
        for name in stale_mentions(template, &rows.names) {
            out.add(
                template_severity(rows, agent),
                "agent",
                &agent.name,
                ProblemCode::PromptNamesInactiveTool,
                format!(
                    "its prompt template names {name}, which is not an active tool (or is retired in the catalog)"
                ),
                "edit the template to use the canonical name",
            );
        }
    }
}

/// An agent's prompt template has lint errors (warnings when the current template
/// version was forced).
pub(super) fn template_lint(rows: &Rows, out: &mut Problems) {
    for agent in &rows.agents {
        let Some(template) = &agent.prompt_template else {
            continue;
        };
        for p in lint::lint(template, &rows.names)
            .into_iter()
            .filter(|p| p.severity == lint::Severity::Error)
        {
            out.add(
                template_severity(rows, agent),
                "agent",
                &agent.name,
                ProblemCode::TemplateLintError,
                format!(
                    "its prompt template, line {} column {}: {}",
                    p.line, p.column, p.message
                ),
                "fix the template (the lint runs on PUT /v1/agents/{agent}/prompt-template)",
            );
        }
    }
}

/// A forced template version's problems are warnings: forcing was an explicit,
/// recorded decision.
fn template_severity(rows: &Rows, agent: &agent_configurations::Model) -> Severity {
    if rows
        .forced_templates
        .contains(&(agent.id, agent.template_version))
    {
        Severity::Warning
    } else {
        Severity::Error
    }
}

/// The names in `text` that prompts must not use, each once.
fn stale_mentions(text: &str, names: &lint::ToolNames) -> BTreeSet<String> {
    lint::inactive_mentions(text, names)
        .map(|(_, word)| word.to_owned())
        .collect()
}
