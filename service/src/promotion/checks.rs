//! Release checks: what a change request carries, computed when it opens (and
//! again on demand) for the revision it would release against the one the label
//! serves. A protected label with `require_checks` refuses approval while any
//! check fails.
//!
//! - `registry`: the agent's error-raising registry rules pass (`loadout check`).
//! - `breaking`: each tool change classified for callers ([`crate::releases::compat`]);
//!   a breaking change warns, it does not fail: whether it breaks anyone is what
//!   `replay` measures.
//! - `replay`: the requesting tenant's last recorded calls of each changed tool
//!   ([`super::replay`]); fails if the candidate would refuse any.
//! - `policy_tests`: the agent's policy tests pass against the candidate's policy.
//! - `render`: the tenant's render snapshots ([`super::snapshots`]) match the
//!   candidate's renders; a difference fails until it is accepted (recorded again
//!   from the candidate) and the checks are run again.
//!
//! What is stored holds counts, codes and masked messages: never arguments,
//! proposal ids, user ids or rendered text (another tenant's admin may read the
//! request). The diff of a render is read per tenant from the snapshots API.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::replay::{self, Replayer, Revisions};
use super::snapshots;
use crate::error::{Error, Result};
use crate::evals::EvalSettings;
use crate::evals::gate::{self as evals_gate, EvalGate};
use crate::policies::cases;
use crate::policies::{Policy, ToolShape};
use crate::registry::check::Severity;
use crate::releases::compat::{self, Compat, ContractChange};
use crate::releases::content::Content;

/// Recorded calls a change request's replay reads per tool.
pub const REPLAY_LIMIT: u64 = 1000;

crate::closed_set! {
    /// A release check.
    pub enum CheckName as "release check" {
        Registry = "registry",
        Breaking = "breaking",
        Replay = "replay",
        PolicyTests = "policy_tests",
        Render = "render",
        Evals = "evals",
    }
}

crate::closed_set! {
    /// How a check came out.
    pub enum CheckStatus as "release check status" {
        Pass = "pass",
        /// Worth a look; does not block approval.
        Warn = "warn",
        /// Blocks approval where the label requires checks.
        Fail = "fail",
        /// Still being worked out (evaluation runs going); blocks approval as a failure does.
        Pending = "pending",
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CheckResult {
    pub name: CheckName,
    pub status: CheckStatus,
    /// In words, e.g. "of 1000 recorded calls to create_tasks, 37 would now be refused (first: ...)".
    pub summary: Vec<String>,
    /// The classified tool changes (`breaking` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contract: Vec<ContractChange>,
    /// The evaluation runs compared (`evals` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<EvalRuns>,
}

/// The runs an `evals` check compared: `GET /v1/eval-runs/{candidate}/compare?base={base}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EvalRuns {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<i32>,
}

/// A change request's release checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReleaseChecks {
    /// No check fails.
    pub passed: bool,
    pub computed_at: DateTime<Utc>,
    /// The revisions compared: what the label serves, and the candidate.
    pub base: i32,
    pub candidate: i32,
    pub checks: Vec<CheckResult>,
}

impl ReleaseChecks {
    /// The failing (or still pending) checks' names.
    pub fn failing(&self) -> Vec<&'static str> {
        self.checks
            .iter()
            .filter(|c| matches!(c.status, CheckStatus::Fail | CheckStatus::Pending))
            .map(|c| c.name.as_str())
            .collect()
    }

    /// Read back from a change request's stored text.
    pub fn parse(text: Option<&str>) -> Option<ReleaseChecks> {
        text.and_then(|t| serde_json::from_str(t).ok())
    }
}

/// What the checks compare, and for whom.
pub struct Subject<'a> {
    pub agent_id: i32,
    pub agent: &'a str,
    /// The tenant whose recorded calls and snapshots are read, and its member.
    pub tenant: &'a str,
    pub member: &'a str,
    pub base: (i32, &'a Content),
    pub candidate: (i32, &'a Content),
    /// The agent's policy tests (the working copy's).
    pub policy_tests: Option<&'a str>,
    /// The label's required evaluation, if it has one (or why it cannot be read).
    pub evals: Option<std::result::Result<EvalGate, String>>,
    /// The bounds of the evaluation runs the check starts.
    pub limits: &'a EvalSettings,
}

/// Runs every check.
pub async fn compute(
    db: &impl sea_orm::ConnectionTrait,
    subject: Subject<'_>,
    now: DateTime<Utc>,
) -> Result<ReleaseChecks> {
    let (base, old) = subject.base;
    let (candidate, new) = subject.candidate;
    let mut checks = vec![registry(db, subject.agent_id).await?];
    checks.push(breaking(old, new));
    let who = Replayer {
        tenant: subject.tenant,
        member: subject.member,
    };
    let revisions = Revisions {
        agent_id: subject.agent_id,
        name: subject.agent,
        base: subject.base,
        candidate: subject.candidate,
    };
    let report = replay::between(db, who, revisions, REPLAY_LIMIT).await?;
    checks.push(CheckResult {
        name: CheckName::Replay,
        status: match report.refused {
            0 => CheckStatus::Pass,
            _ => CheckStatus::Fail,
        },
        summary: match report.tools.iter().any(|t| t.recorded > 0) {
            true => report.summary(),
            false => vec!["no recorded calls of the changed tools".to_owned()],
        },
        contract: Vec::new(),
        runs: None,
    });
    let (content, tests) = (new.clone(), subject.policy_tests.map(str::to_owned));
    checks.push(crate::cpu::run(move || policy_tests(&content, tests.as_deref())).await?);
    let renders =
        snapshots::compare(db, subject.tenant, subject.agent_id, subject.agent, new).await?;
    let differ: Vec<String> = renders
        .iter()
        .filter(|r| !r.matches)
        .map(|r| match &r.error {
            Some(why) => format!("channel {}: cannot render: {why}", r.channel),
            None => format!(
                "channel {}: the render differs from its snapshot",
                r.channel
            ),
        })
        .collect();
    checks.push(CheckResult {
        name: CheckName::Render,
        status: match differ.is_empty() {
            true => CheckStatus::Pass,
            false => CheckStatus::Fail,
        },
        summary: match (renders.is_empty(), differ.is_empty()) {
            (true, _) => vec!["no render snapshots recorded".to_owned()],
            (false, true) => vec![format!("{} snapshots match", renders.len())],
            (false, false) => differ,
        },
        contract: Vec::new(),
        runs: None,
    });
    if let Some(gate) = &subject.evals {
        let who = evals_gate::For {
            tenant: subject.tenant,
            member: subject.member,
            agent: subject.agent,
        };
        checks.push(evals(db, who, gate, (base, candidate), Some(subject.limits), now).await?);
    }
    Ok(ReleaseChecks {
        passed: checks
            .iter()
            .all(|c| matches!(c.status, CheckStatus::Pass | CheckStatus::Warn)),
        computed_at: now,
        base,
        candidate,
        checks,
    })
}

/// The `evals` check: the gate's runs of base and candidate (revision numbers),
/// started when `start` and missing.
pub async fn evals(
    db: &impl sea_orm::ConnectionTrait,
    who: evals_gate::For<'_>,
    gate: &std::result::Result<EvalGate, String>,
    revisions: (i32, i32),
    start: Option<&EvalSettings>,
    now: DateTime<Utc>,
) -> Result<CheckResult> {
    let found = match gate {
        Ok(gate) => evals_gate::evaluate(db, who, gate, revisions, start, now).await?,
        Err(why) => evals_gate::Evaluated {
            verdict: evals_gate::Verdict::Fail,
            summary: vec![format!("the label's require_evals cannot be read: {why}")],
            base_run: None,
            candidate_run: None,
        },
    };
    Ok(CheckResult {
        name: CheckName::Evals,
        status: match found.verdict {
            evals_gate::Verdict::Pass => CheckStatus::Pass,
            evals_gate::Verdict::Fail => CheckStatus::Fail,
            evals_gate::Verdict::Pending => CheckStatus::Pending,
        },
        summary: found.summary,
        contract: Vec::new(),
        runs: Some(EvalRuns {
            base: found.base_run,
            candidate: found.candidate_run,
        }),
    })
}

async fn registry(db: &impl sea_orm::ConnectionTrait, agent_id: i32) -> Result<CheckResult> {
    let seeds = crate::registry::catalog::Seeds::shared().map_err(Error::internal)?;
    let executors = crate::execute::executors::Executors::load(db, None).await?;
    let ids = BTreeSet::from([agent_id]);
    let report = crate::registry::check::agents(db, &seeds.catalog, &executors, &ids).await?;
    let errors: Vec<String> = report
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| format!("{} {}: {}", p.kind, p.subject, p.message))
        .collect();
    Ok(CheckResult {
        name: CheckName::Registry,
        status: match errors.is_empty() {
            true => CheckStatus::Pass,
            false => CheckStatus::Fail,
        },
        summary: match errors.is_empty() {
            true => vec!["no registry errors".to_owned()],
            false => errors,
        },
        contract: Vec::new(),
        runs: None,
    })
}

fn breaking(old: &Content, new: &Content) -> CheckResult {
    let contract = compat::tools(&old.tools, &new.tools);
    let broken: Vec<String> = contract
        .iter()
        .filter(|c| c.compat == Compat::Breaking)
        .map(|c| match c.path.is_empty() {
            true => format!("{} {}: {}", c.tool, c.kind.as_str(), c.detail),
            false => format!("{} {} {}: {}", c.tool, c.kind.as_str(), c.path, c.detail),
        })
        .collect();
    CheckResult {
        name: CheckName::Breaking,
        status: match broken.is_empty() {
            true => CheckStatus::Pass,
            false => CheckStatus::Warn,
        },
        summary: match (contract.is_empty(), broken.is_empty()) {
            (true, _) => vec!["no tool changes".to_owned()],
            (false, true) => vec![format!("{} compatible tool changes", contract.len())],
            (false, false) => broken,
        },
        contract,
        runs: None,
    }
}

fn policy_tests(candidate: &Content, tests: Option<&str>) -> CheckResult {
    let cases = tests
        .map(|t| cases::parse(t).unwrap_or_default())
        .unwrap_or_default();
    let shapes: Vec<ToolShape<'_>> = candidate
        .tools
        .iter()
        .map(|t| ToolShape {
            name: &t.name,
            tier: &t.approval_tier,
            parameters: &t.parameters,
        })
        .collect();
    let failures = match (&candidate.policy, cases.is_empty()) {
        (None, _) | (_, true) => Vec::new(),
        (Some(text), false) => {
            match crate::policies::Rules::compile(text, shapes.iter().copied()) {
                Ok(rules) => match cases::within_bounds(&rules, &cases) {
                    Ok(()) => cases::run(&Policy::Ready(Box::new(rules)), &shapes, &cases),
                    Err(e) => vec![e],
                },
                Err(e) => e.problems(text).iter().map(ToString::to_string).collect(),
            }
        }
    };
    CheckResult {
        name: CheckName::PolicyTests,
        status: match failures.is_empty() {
            true => CheckStatus::Pass,
            false => CheckStatus::Fail,
        },
        summary: match (failures.is_empty(), cases.len()) {
            (true, 0) => vec!["no policy tests".to_owned()],
            (true, n) => vec![format!("{n} policy tests pass")],
            (false, _) => failures,
        },
        contract: Vec::new(),
        runs: None,
    }
}
