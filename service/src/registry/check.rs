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
//! `prompt` (tool names in prompts, template lint), `agent` (links, idle agents),
//! `secrets` (connectors' header values sealed and openable), `agent::policies`
//! (each agent's Cedar policy compiles and passes its tests) and `labels` (labels
//! serving tools since deleted, switched off or unconnected).
//! `code` holds [`ProblemCode`], one documented variant per code.

mod agent;
mod code;
mod definition;
mod labels;
mod prompt;
mod report;
mod rows;
mod secrets;
mod tool;

use std::collections::BTreeSet;

use entity::{agent_configurations, agent_tools, connectors, prompt_versions, tools};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};

pub use code::ProblemCode;
pub use definition::{
    TIERS, VERBS, catalog_problems, definition_problems, name_problem, schema_problem,
};
use report::Problems;
pub use report::{Counts, Problem, Report, Severity};
use rows::Rows;

use crate::execute::executors::Executors;
use crate::registry::catalog::Catalog;

/// The check as the API and the console report it: every rule, on the database
/// as it is now, with the shared seeds and the executors loaded afresh.
pub async fn current(
    db: &sea_orm::DatabaseConnection,
    secrets: &crate::secrets::Keyring,
) -> crate::error::Result<Report> {
    let seeds = super::catalog::Seeds::shared().map_err(crate::error::Error::internal)?;
    let executors = Executors::load(db, None)
        .await?
        .with_keyring(secrets.clone());
    Ok(run(db, &seeds.catalog, &executors).await?)
}

/// Runs every rule against the database.
pub async fn run(
    db: &impl ConnectionTrait,
    catalog: &Catalog,
    executors: &Executors,
) -> Result<Report, DbErr> {
    run_rules(db, catalog, executors, true).await
}

/// The rules that can raise an error, which is all the write guard compares before
/// and after a write: the label rules raise warnings only, so a write neither
/// reads nor parses any label's revision (1,415 labels cost a write 0.4–0.8 s).
pub async fn errors_only(
    db: &impl ConnectionTrait,
    catalog: &Catalog,
    executors: &Executors,
) -> Result<Report, DbErr> {
    run_rules(db, catalog, executors, false).await
}

/// The error-raising rules about some agents only (their texts, template lint and
/// links), which is all a write that changes only those agents can change: the write
/// guard of such a write reads these agents, their links and tools, and the state of
/// every tool name (not every tool row, agent and link in the registry).
pub async fn agents(
    db: &impl ConnectionTrait,
    catalog: &Catalog,
    executors: &Executors,
    ids: &BTreeSet<i32>,
) -> Result<Report, DbErr> {
    if ids.is_empty() {
        return Ok(Report::finish(Vec::new(), Counts::default()));
    }
    let ids: Vec<i32> = ids.iter().copied().collect();
    let agents = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Id.is_in(ids.clone()))
        .all(db)
        .await?;
    let links = agent_tools::Entity::find()
        .filter(agent_tools::Column::AgentId.is_in(ids.clone()))
        .all(db)
        .await?;
    let linked: BTreeSet<i32> = links.iter().map(|l| l.tool_id).collect();
    let mut tools = Vec::with_capacity(linked.len());
    let linked: Vec<i32> = linked.into_iter().collect();
    for chunk in linked.chunks(500) {
        let found = tools::Entity::find()
            .filter(tools::Column::Id.is_in(chunk.iter().copied()))
            .all(db)
            .await?;
        tools.extend(found);
    }
    let forced: BTreeSet<(i32, i32)> = prompt_versions::Entity::find()
        .filter(prompt_versions::Column::AgentId.is_in(ids))
        .filter(prompt_versions::Column::Kind.eq("template"))
        .filter(prompt_versions::Column::Forced.eq(true))
        .all(db)
        .await?
        .into_iter()
        .map(|v| (v.agent_id, v.version))
        .collect();
    // The state of each tool name these agents' texts mention, not every tool's:
    // the rules below only ever look up words of the texts.
    let texts = agents.iter().flat_map(|a| {
        [
            Some(a.soul.as_str()),
            a.prompt_template.as_deref(),
            a.operating_model.as_deref(),
            a.interaction_learning.as_deref(),
        ]
        .into_iter()
        .flatten()
    });
    let words: Vec<&str> = crate::prompt::lint::mentioned(texts).into_iter().collect();
    let mut states: Vec<(String, bool, bool)> = Vec::new();
    for chunk in words.chunks(500) {
        let found: Vec<(String, bool, bool)> = tools::Entity::find()
            .select_only()
            .column(tools::Column::Name)
            .column(tools::Column::IsActive)
            .column_as(tools::Column::DeletedAt.is_null(), "live")
            .filter(tools::Column::Name.is_in(chunk.iter().copied()))
            .into_tuple()
            .all(db)
            .await?;
        states.extend(found);
    }
    let (catalog, executors) = (catalog.clone(), executors.clone());
    tokio::task::spawn_blocking(move || {
        let pairs = states.iter().map(|(n, a, live)| (n.as_str(), *a && *live));
        let names = rows::tool_names(&catalog, pairs);
        let rows = Rows::of_agents(
            &catalog, &executors, &tools, &agents, &links, &forced, names,
        );
        let mut out = Problems::default();
        prompt::stale_names_in_souls(&rows, &mut out);
        prompt::stale_names_in_templates(&rows, &mut out);
        prompt::template_lint(&rows, &mut out);
        agent::links(&rows, &mut out);
        agent::policies(&rows, &mut out);
        Report::finish(out.0, rows.counts())
    })
    .await
    .map_err(|e| DbErr::Custom(format!("the registry check did not finish: {e}")))
}

async fn run_rules(
    db: &impl ConnectionTrait,
    catalog: &Catalog,
    executors: &Executors,
    with_labels: bool,
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
    let secrets = secrets::problems(
        &connectors::Entity::find().all(db).await?,
        executors.keyring(),
    );
    let labeled = match with_labels {
        true => Some(labels::Labeled::read(db).await?),
        false => None,
    };
    // The rules (template lint among them) are CPU work over every row: run them
    // off the async workers, so one huge template cannot stall other requests.
    let (catalog, executors) = (catalog.clone(), executors.clone());
    tokio::task::spawn_blocking(move || {
        let labels = labeled
            .map(|l| labels::problems(&l, &agents, &tools, &links, &executors))
            .unwrap_or_default();
        check(&catalog, &executors, &tools, &agents, &links, &forced).with(labels)
    })
    .await
    .map(|report| report.with(secrets))
    .map_err(|e| DbErr::Custom(format!("the registry check did not finish: {e}")))
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
    tool::remote_gone(&rows, &mut out);
    prompt::stale_names_in_tool_sections(&rows, &mut out);
    prompt::stale_names_in_souls(&rows, &mut out);
    prompt::stale_names_in_templates(&rows, &mut out);
    prompt::template_lint(&rows, &mut out);
    agent::links(&rows, &mut out);
    agent::policies(&rows, &mut out);
    agent::agents_without_tools(&rows, &mut out);
    Report::finish(out.0, rows.counts())
}
