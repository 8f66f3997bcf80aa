//! `loadout check`: does the database agree with the catalog and the code?
//!
//! Every rule reads the database as it is (no migration, no write) and adds problems
//! to one report. Errors are drift that must block a deploy; warnings are operator
//! configuration or harmless leftovers. `serve` runs the same check at start,
//! `GET /v1/registry/check` returns it, and the admin tool endpoints refuse a change
//! that would add an error.
//!
//! The rules, one function each, live beside this file: `definition` (a tool
//! definition on its own, shared with the admin endpoints and the catalog test),
//! `tool` (the catalog against the database, each active tool, colliding names),
//! `prompt` (tool names in prompts, template lint) and `agent` (links, idle agents).
//! `code` holds [`ProblemCode`], one documented variant per code.

mod agent;
mod code;
mod definition;
mod prompt;
mod tool;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use entity::{agent_configurations, agent_tools, prompt_versions, tools};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use serde::Serialize;

pub use code::ProblemCode;
pub use definition::{
    TIERS, VERBS, catalog_problems, definition_problems, name_problem, schema_problem,
};

use crate::actions::executors::Executors;
use crate::prompt::lint;
use crate::registry::catalog::Catalog;

/// How bad a problem is: errors exit 1, warnings alone exit 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem. `code` is stable: machines may match on it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Problem {
    pub severity: Severity,
    /// `tool`, `agent`, `link` or `catalog`.
    pub kind: &'static str,
    /// The tool, agent or `agent/tool` the problem is about.
    pub subject: String,
    pub code: ProblemCode,
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{severity}: {} {}: {} [{}] (fix: {})",
            self.kind, self.subject, self.message, self.code, self.hint
        )
    }
}

/// What was looked at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub catalog_tools: usize,
    pub tools: usize,
    pub active_tools: usize,
    pub agents: usize,
    pub active_links: usize,
}

/// The whole report, as `--format json` prints it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    pub ok: bool,
    pub errors: usize,
    pub warnings: usize,
    pub checked: Counts,
    pub problems: Vec<Problem>,
}

impl Report {
    fn finish(mut problems: Vec<Problem>, checked: Counts) -> Self {
        problems.sort();
        problems.dedup();
        let errors = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        Report {
            ok: errors == 0,
            errors,
            warnings: problems.len() - errors,
            checked,
            problems,
        }
    }

    /// The text report: one line per problem, then a summary with the counts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.problems {
            out.push_str(&p.to_string());
            out.push('\n');
        }
        let c = &self.checked;
        out.push_str(&format!(
            "checked {} catalog tools, {} tools ({} active), {} agents, {} active links: {} errors, {} warnings\n",
            c.catalog_tools, c.tools, c.active_tools, c.agents, c.active_links, self.errors, self.warnings
        ));
        out
    }
}

/// Runs every rule against the database.
pub async fn run(
    db: &impl ConnectionTrait,
    catalog: &Catalog,
    executors: &Executors,
) -> Result<Report, DbErr> {
    let tools = tools::Entity::find().all(db).await?;
    let agents = agent_configurations::Entity::find().all(db).await?;
    let links = agent_tools::Entity::find().all(db).await?;
    let forced: BTreeSet<(i32, i32)> = prompt_versions::Entity::find()
        .filter(prompt_versions::Column::Kind.eq("template"))
        .filter(prompt_versions::Column::Forced.eq(true))
        .all(db)
        .await?
        .into_iter()
        .map(|v| (v.agent_id, v.version))
        .collect();
    Ok(check(catalog, executors, &tools, &agents, &links, &forced))
}

/// The rules, on rows already read. `forced_templates` holds `(agent id, version)` of
/// template versions an admin saved with `force: true`: the current one's problems
/// are reported as warnings, because forcing was an explicit, recorded decision.
pub fn check(
    catalog: &Catalog,
    executors: &Executors,
    tools: &[tools::Model],
    agents: &[agent_configurations::Model],
    links: &[agent_tools::Model],
    forced_templates: &BTreeSet<(i32, i32)>,
) -> Report {
    let rows = Rows::new(catalog, executors, tools, agents, links, forced_templates);
    let mut out = Problems::default();
    tool::catalog_in_database(&rows, &mut out);
    tool::outside_catalog(&rows, &mut out);
    tool::definitions(&rows, &mut out);
    tool::executors(&rows, &mut out);
    tool::duplicates(&rows, &mut out);
    prompt::stale_names_in_tool_sections(&rows, &mut out);
    prompt::stale_names_in_souls(&rows, &mut out);
    prompt::stale_names_in_templates(&rows, &mut out);
    prompt::template_lint(&rows, &mut out);
    agent::links(&rows, &mut out);
    agent::agents_without_tools(&rows, &mut out);
    Report::finish(out.0, rows.counts())
}

/// The rows one check reads, and the lookups several rules share.
struct Rows<'a> {
    catalog: &'a Catalog,
    executors: &'a Executors,
    /// Every tool row, soft-deleted ones included.
    tools: &'a [tools::Model],
    /// Agents that are not soft-deleted.
    agents: Vec<&'a agent_configurations::Model>,
    links: &'a [agent_tools::Model],
    forced_templates: &'a BTreeSet<(i32, i32)>,
    /// Tools that are not soft-deleted, by name.
    by_name: BTreeMap<&'a str, &'a tools::Model>,
    /// Every tool row by id.
    by_id: BTreeMap<i32, &'a tools::Model>,
    /// Tools that are active and not soft-deleted.
    active: Vec<&'a tools::Model>,
    /// The names prompts may and may not use.
    names: lint::ToolNames,
}

impl<'a> Rows<'a> {
    fn new(
        catalog: &'a Catalog,
        executors: &'a Executors,
        tools: &'a [tools::Model],
        agents: &'a [agent_configurations::Model],
        links: &'a [agent_tools::Model],
        forced_templates: &'a BTreeSet<(i32, i32)>,
    ) -> Self {
        let active: Vec<&tools::Model> = tools.iter().filter(|t| is_active(t)).collect();
        Rows {
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
            names: prompt::tool_names(catalog, tools, &active),
            active,
        }
    }

    /// An agent's links that are active and not soft-deleted.
    fn active_links_of(
        &self,
        agent: &agent_configurations::Model,
    ) -> impl Iterator<Item = &'a agent_tools::Model> {
        let agent_id = agent.id;
        self.links
            .iter()
            .filter(move |l| l.agent_id == agent_id && l.is_active && l.deleted_at.is_none())
    }

    fn counts(&self) -> Counts {
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
fn is_active(tool: &tools::Model) -> bool {
    tool.is_active && tool.deleted_at.is_none()
}

/// The problems the rules have found so far.
#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn add(
        &mut self,
        severity: Severity,
        kind: &'static str,
        subject: &str,
        code: ProblemCode,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.0.push(Problem {
            severity,
            kind,
            subject: subject.to_owned(),
            code,
            message: message.into(),
            hint: hint.into(),
        });
    }

    fn error(
        &mut self,
        kind: &'static str,
        subject: &str,
        code: ProblemCode,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.add(Severity::Error, kind, subject, code, message, hint);
    }

    fn warning(
        &mut self,
        kind: &'static str,
        subject: &str,
        code: ProblemCode,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.add(Severity::Warning, kind, subject, code, message, hint);
    }
}
