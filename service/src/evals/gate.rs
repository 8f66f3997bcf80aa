//! A label's required evaluation: the `evals` release check.
//!
//! A label may name a dataset and a model connection (`require_evals`); a change
//! request to it then carries the `evals` check. The check runs the dataset on the
//! candidate and on the base, in the requesting tenant, or reuses runs of exactly
//! that (revision, dataset version, connection, model, judge); while they run it is
//! `pending`, which blocks approval like a failure. Once both are done it fails
//! when the candidate's pass rate is under `min_pass_rate`, or when `not_worse` is
//! on and McNemar's exact test says the candidate is worse than the base with
//! confidence (`alpha`); it names the cases that turned from pass to fail.

use chrono::{DateTime, Utc};
use sea_orm::ConnectionTrait;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::EvalSettings;
use super::runs::{self, NewRun, RunState};
use crate::error::{Error, Result};

/// How many regressed cases the check names.
const NAMED: usize = 10;

/// What a label requires of a candidate's evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalGate {
    /// The agent's dataset (its latest version when the request opens).
    pub dataset: String,
    pub connection: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_connection: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_model: Option<String>,
    /// The least pass rate (0 to 1) the candidate must reach; absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pass_rate: Option<f64>,
    /// Fail when the candidate is worse than the base with confidence (default on).
    #[serde(default = "yes")]
    pub not_worse: bool,
    /// The test's level (default 0.05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

fn yes() -> bool {
    true
}

/// The default level of the "not worse" test.
pub const ALPHA: f64 = 0.05;

impl EvalGate {
    /// 422 `invalid_eval_gate` for a value out of range.
    pub fn check(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::refused("invalid_eval_gate", m.to_owned()));
        if self
            .min_pass_rate
            .is_some_and(|r| !(0.0..=1.0).contains(&r))
        {
            return bad("require_evals.min_pass_rate is a share, 0 to 1");
        }
        if self.alpha.is_some_and(|a| !(a > 0.0 && a < 0.5)) {
            return bad("require_evals.alpha must be above 0 and below 0.5");
        }
        Ok(())
    }

    /// Stored form.
    pub fn to_text(&self) -> Result<String> {
        serde_json::to_string(self).map_err(Error::internal)
    }

    /// Read back; a row that no longer parses requires nothing it can check, so it
    /// is reported as a failing gate by [`evaluate`]'s caller.
    pub fn parse(text: Option<&str>) -> Option<std::result::Result<EvalGate, String>> {
        text.map(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
    }

    fn run(&self, revision: i32) -> NewRun {
        NewRun {
            dataset: self.dataset.clone(),
            dataset_version: None,
            revision: Some(revision),
            label: None,
            connection: self.connection.clone(),
            model: self.model.clone(),
            judge_connection: self.judge_connection.clone(),
            judge_model: self.judge_model.clone(),
            token_budget: None,
        }
    }
}

/// How the check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    Pending,
}

/// The check's outcome: its verdict, its words, and the runs it read.
#[derive(Debug, Clone)]
pub struct Evaluated {
    pub verdict: Verdict,
    pub summary: Vec<String>,
    pub base_run: Option<i32>,
    pub candidate_run: Option<i32>,
}

/// Who the runs are for.
pub struct For<'a> {
    pub tenant: &'a str,
    pub member: &'a str,
    pub agent: &'a str,
}

/// Runs (or reuses runs of) the gate's dataset on `base` and `candidate`
/// (revision numbers) and judges them; `start`: queue the runs that are missing
/// with these bounds (a request opening), or `None`: only read (an approval
/// deciding).
pub async fn evaluate(
    db: &impl ConnectionTrait,
    who: For<'_>,
    gate: &EvalGate,
    (base, candidate): (i32, i32),
    start: Option<&EvalSettings>,
    now: DateTime<Utc>,
) -> Result<Evaluated> {
    let mut ids = [None, None];
    let mut rows = Vec::new();
    for (slot, revision) in [base, candidate].into_iter().enumerate() {
        let planned = match runs::plan(db, who.agent, &gate.run(revision)).await {
            Ok(planned) => planned,
            Err(e) => {
                return Ok(Evaluated {
                    verdict: Verdict::Fail,
                    summary: vec![format!("cannot evaluate: {}", e.message)],
                    base_run: None,
                    candidate_run: None,
                });
            }
        };
        let row = match runs::reusable(db, who.tenant, &planned).await? {
            Some(row) => Some(row),
            None if let Some(limits) = start => {
                let row =
                    runs::start_in(db, limits, who.tenant, who.member, planned, None, now).await?;
                runs::nudge();
                Some(row)
            }
            None => None,
        };
        ids[slot] = row.as_ref().map(|r| r.id);
        rows.push(row);
    }
    let [base_run, candidate_run] = ids;
    let waiting = |summary: String| Evaluated {
        verdict: Verdict::Pending,
        summary: vec![summary],
        base_run,
        candidate_run,
    };
    let (Some(Some(b)), Some(Some(c))) = (rows.first(), rows.get(1)) else {
        return Ok(waiting(
            "no evaluation runs yet: run the checks again to start them".to_owned(),
        ));
    };
    for row in [b, c] {
        let state = row.state.parse::<RunState>().unwrap_or(RunState::Failed);
        if !state.ended() {
            return Ok(waiting(format!(
                "evaluation run {} is {} ({} of {} cases); run the checks again when it ends",
                row.id,
                state.as_str(),
                row.done,
                row.total
            )));
        }
    }
    let (b_cases, c_cases) = (
        runs::results_of(db, b).await?,
        runs::results_of(db, c).await?,
    );
    let alpha = gate.alpha.unwrap_or(ALPHA);
    let (comparison, _, pairs) = runs::pair(&b_cases, &c_cases, alpha);
    let mut summary = vec![format!(
        "pass rate {:.0} % (base {:.0} %) on {} cases of dataset {}; runs {} and {}",
        comparison.candidate_pass_rate * 100.0,
        comparison.base_pass_rate * 100.0,
        comparison.cases,
        gate.dataset,
        c.id,
        b.id
    )];
    let mut fail = false;
    if let Some(min) = gate.min_pass_rate
        && comparison.candidate_pass_rate < min
    {
        fail = true;
        summary.push(format!(
            "the pass rate is under the required {:.0} %",
            min * 100.0
        ));
    }
    if gate.not_worse && comparison.worse {
        fail = true;
        summary.push(format!(
            "worse than the base with confidence: {} cases turned from pass to fail, {} from fail to pass (McNemar p = {:.4} < {alpha})",
            comparison.turned_fail, comparison.turned_pass, comparison.p_worse
        ));
    }
    let regressed: Vec<String> = pairs
        .iter()
        .filter(|p| p.change == "regressed")
        .take(NAMED)
        .map(|p| match &p.description {
            Some(d) => format!("case {} ({d}) turned from pass to fail", p.index),
            None => format!("case {} turned from pass to fail", p.index),
        })
        .collect();
    summary.extend(regressed);
    for row in [b, c] {
        if row.state != RunState::Succeeded.as_str() {
            fail = true;
            summary.push(format!(
                "evaluation run {} {}: {}",
                row.id,
                row.state,
                row.error.as_deref().unwrap_or("it did not finish")
            ));
        }
    }
    Ok(Evaluated {
        verdict: match fail {
            true => Verdict::Fail,
            false => Verdict::Pass,
        },
        summary,
        base_run,
        candidate_run,
    })
}
