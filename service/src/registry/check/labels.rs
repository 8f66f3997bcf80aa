//! Labels that serve tools which can no longer run: a revision keeps the tools it
//! was published with, while the working copy may since have deleted, switched off
//! or detached them (a call needs the working copy's active, attached tool), or
//! they may have no connector.
//!
//! Both codes are warnings. The write guard refuses a write that adds an error, so
//! as errors they would refuse switching off a tool that a pinned label (a gated
//! agent's `production`, a `staging`) still serves, and in `gated` mode the way out,
//! a promotion, waits for a sign-off: turning off a tool for safety must never wait.
//! A call of such a tool is refused at call time anyway (the working copy decides
//! what runs), so the label serves a tool that fails, not drift that breaks serve.
//!
//! A label on the same revision as the agent's `latest` is left out: `latest` is
//! the working copy as published, whose tools the working-copy rules
//! (`not_connected`, `link_to_inactive_tool`, ...) already report. So a fresh
//! database, and a `direct` agent with no labels of its own, has no label problems
//! (nor does the check read any revision's content); a `gated` agent's
//! `production` held back from `latest` is reported.

use std::collections::{BTreeMap, BTreeSet};

use entity::{agent_configurations, agent_labels, agent_revisions, agent_tools, rollouts, tools};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect};

use super::code::ProblemCode;
use super::report::{Problem, Problems, Severity};
use crate::execute::executors::Executors;
use crate::registry::ToolType;
use crate::releases::compat::{self, Compat};
use crate::releases::{LATEST, PRODUCTION, content::Content};

/// Every label, and the revisions they point at (text not parsed: the rules run
/// off the async workers).
pub(super) struct Labeled {
    /// (agent id, label, revision id), by agent and label.
    labels: Vec<(i32, String, i32)>,
    /// Running rollouts: (agent id, label, base revision id, candidate revision id).
    rollouts: Vec<(i32, String, i32, i32)>,
    /// Revision id → (number, canonical content).
    revisions: BTreeMap<i32, (i32, String)>,
}

impl Labeled {
    pub(super) async fn read(db: &impl ConnectionTrait) -> Result<Labeled, DbErr> {
        let mut labels: Vec<(i32, String, i32)> = agent_labels::Entity::find()
            .select_only()
            .column(agent_labels::Column::AgentId)
            .column(agent_labels::Column::Name)
            .column(agent_labels::Column::RevisionId)
            .into_tuple()
            .all(db)
            .await?;
        labels.sort();
        let latest = latest(&labels);
        let rollouts: Vec<(i32, String, i32, i32)> = rollouts::Entity::find()
            .select_only()
            .column(rollouts::Column::AgentId)
            .column(rollouts::Column::Label)
            .column(rollouts::Column::BaseRevisionId)
            .column(rollouts::Column::CandidateRevisionId)
            .filter(rollouts::Column::State.is_in(["active", "paused"]))
            .into_tuple()
            .all(db)
            .await?;
        // Only the revisions the rules look at: labels on `latest`'s are left out,
        // but `latest` itself is read where a label is elsewhere (to compare them).
        let mut ids: BTreeSet<i32> = labels
            .iter()
            .filter(|(agent, _, id)| latest.get(agent) != Some(id))
            .map(|(_, _, id)| *id)
            .collect();
        let behind: BTreeSet<i32> = labels
            .iter()
            .filter(|(agent, label, id)| label == PRODUCTION && latest.get(agent) != Some(id))
            .map(|(agent, _, _)| *agent)
            .collect();
        ids.extend(
            latest
                .iter()
                .filter(|(a, _)| behind.contains(a))
                .map(|(_, id)| *id),
        );
        ids.extend(
            rollouts
                .iter()
                .flat_map(|(_, _, base, candidate)| [*base, *candidate]),
        );
        let mut revisions = BTreeMap::new();
        // Bounded batches: a database with many agents could exceed a backend's
        // bind parameter limit in one IN list.
        let ids: Vec<i32> = ids.into_iter().collect();
        for batch in ids.chunks(500) {
            let rows: Vec<(i32, i32, String)> = agent_revisions::Entity::find()
                .select_only()
                .column(agent_revisions::Column::Id)
                .column(agent_revisions::Column::Number)
                .column(agent_revisions::Column::Content)
                .filter(agent_revisions::Column::Id.is_in(batch.to_vec()))
                .into_tuple()
                .all(db)
                .await?;
            revisions.extend(rows.into_iter().map(|(id, n, text)| (id, (n, text))));
        }
        Ok(Labeled {
            labels,
            rollouts,
            revisions,
        })
    }
}

/// How one tool a label serves fails now.
enum Gone {
    /// Deleted, switched off, or no longer attached to the agent: a call is refused.
    Missing,
    /// An `api` or `mcp` tool with no connector: a call fails.
    Unconnected,
}

/// `label_tools_missing` and `label_tools_unconnected`, one problem per label and
/// code, for the labels that point elsewhere than the agent's `latest`.
pub(super) fn problems(
    labeled: &Labeled,
    agents: &[agent_configurations::Model],
    tools: &[tools::Model],
    links: &[agent_tools::Model],
    executors: &Executors,
) -> Vec<Problem> {
    let live: BTreeMap<i32, &str> = agents
        .iter()
        .filter(|a| a.deleted_at.is_none())
        .map(|a| (a.id, a.name.as_str()))
        .collect();
    let by_name: BTreeMap<&str, &tools::Model> = tools
        .iter()
        .filter(|t| t.deleted_at.is_none())
        .map(|t| (t.name.as_str(), t))
        .collect();
    let attached: BTreeSet<(i32, i32)> = links
        .iter()
        .filter(|l| l.is_active && l.deleted_at.is_none())
        .map(|l| (l.agent_id, l.tool_id))
        .collect();
    let latest = latest(&labeled.labels);
    let mut out = Problems::default();
    for (agent, label, revision) in &labeled.labels {
        let Some(name) = live.get(agent) else {
            continue;
        };
        let Some((number, text)) = labeled.revisions.get(revision) else {
            continue;
        };
        // Content this build cannot read is serving's to report, not this rule's.
        let (false, Ok(content)) = (latest.get(agent) == Some(revision), Content::parse(text))
        else {
            continue;
        };
        let (mut missing, mut unconnected) = (Vec::new(), Vec::new());
        for tool in &content.tools {
            match gone(&tool.name, *agent, &by_name, &attached, executors) {
                Some(Gone::Missing) => missing.push(tool.name.as_str()),
                Some(Gone::Unconnected) => unconnected.push(tool.name.as_str()),
                None => {}
            }
        }
        let subject = format!("{name}/{label}");
        if !missing.is_empty() {
            out.add(
                Severity::Warning,
                "label",
                &subject,
                ProblemCode::LabelToolsMissing,
                format!(
                    "serves revision {number}, whose tools {} are deleted, switched off or detached; calls of them are refused",
                    missing.join(", ")
                ),
                format!(
                    "move the label to a revision without them (`loadout revisions {name}`), or switch them back on"
                ),
            );
        }
        if !unconnected.is_empty() {
            out.add(
                Severity::Warning,
                "label",
                &subject,
                ProblemCode::LabelToolsUnconnected,
                format!(
                    "serves revision {number}, whose tools {} have no connector; calls of them fail",
                    unconnected.join(", ")
                ),
                "bind them to a connector, or move the label to a revision without them",
            );
        }
    }
    breaking(labeled, &live, &mut out);
    out.0
}

/// `breaking_change`: `latest` against `production` where they differ, and each
/// running rollout's candidate against its base (warnings: releasing is a
/// person's decision, and a replay says whether anyone's calls break).
fn breaking(labeled: &Labeled, live: &BTreeMap<i32, &str>, out: &mut Problems) {
    let latest = latest(&labeled.labels);
    let content = |id: i32| {
        labeled
            .revisions
            .get(&id)
            .and_then(|(n, text)| Content::parse(text).ok().map(|c| (*n, c)))
    };
    let mut pairs: Vec<(i32, String, i32, i32)> = labeled
        .labels
        .iter()
        .filter(|(_, label, _)| label == PRODUCTION)
        .filter_map(|(agent, _, id)| {
            let newest = *latest.get(agent)?;
            (newest != *id).then(|| (*agent, LATEST.to_owned(), *id, newest))
        })
        .collect();
    pairs.extend(
        labeled
            .rollouts
            .iter()
            .map(|(agent, label, base, candidate)| {
                (*agent, format!("{label} rollout"), *base, *candidate)
            }),
    );
    for (agent, what, base, candidate) in pairs {
        let (Some(name), Some((from, old)), Some((to, new))) =
            (live.get(&agent), content(base), content(candidate))
        else {
            continue;
        };
        let broken: Vec<String> = compat::tools(&old.tools, &new.tools)
            .into_iter()
            .filter(|c| c.compat == Compat::Breaking)
            .map(|c| match c.path.is_empty() {
                true => format!("{} {}", c.tool, c.kind.as_str()),
                false => format!("{} {} {}", c.tool, c.kind.as_str(), c.path),
            })
            .collect();
        if broken.is_empty() {
            continue;
        }
        out.add(
            Severity::Warning,
            "label",
            &format!("{name}/{what}"),
            ProblemCode::BreakingChange,
            format!(
                "revision {to} breaks callers of revision {from}: {}",
                broken.join("; ")
            ),
            format!(
                "replay the recorded calls against it (`loadout replay {name} --candidate {to}`) before releasing it"
            ),
        );
    }
}

/// Each agent's `latest` revision id, by agent id.
fn latest(labels: &[(i32, String, i32)]) -> BTreeMap<i32, i32> {
    labels
        .iter()
        .filter(|(_, label, _)| label == LATEST)
        .map(|(agent, _, revision)| (*agent, *revision))
        .collect()
}

/// Why the tool `name` the agent's label serves cannot be called now, if it cannot.
fn gone(
    name: &str,
    agent: i32,
    by_name: &BTreeMap<&str, &tools::Model>,
    attached: &BTreeSet<(i32, i32)>,
    executors: &Executors,
) -> Option<Gone> {
    let Some(row) = by_name.get(name) else {
        return Some(Gone::Missing);
    };
    if !row.is_active || !attached.contains(&(agent, row.id)) {
        return Some(Gone::Missing);
    }
    match row.tool_type.parse() {
        Ok(ToolType::Api | ToolType::Mcp) if !executors.has_connector(&row.name) => {
            Some(Gone::Unconnected)
        }
        // A builtin without an executor is `no_executor`'s, an unknown type
        // `unknown_type`'s: both are errors of the working copy.
        _ => None,
    }
}
