//! A policy's own test cases (`policy-tests.json` beside `policy.cedar`): a call, a
//! principal and the decision expected. `loadout check` runs them, so a wrong rule
//! blocks the release like any registry error.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::{Outcome, Policy, Rules, ToolShape, Who};
use crate::vocab::Tier;

/// The most test cases an agent's policy may carry.
pub const MAX_CASES: usize = 1000;

/// One test case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// Shown when the case fails (default: its position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub tool: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
    /// The user the agent acts for (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The user's groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// The caller's tenant (default `default`) and member (default `test`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// `deny`, `approval`, `auto` or `tier` (no policy applies).
    pub expect: Outcome,
    /// The policy expected to decide, when it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// The most rule evaluations a policy's tests may take together (see
/// [`super::MAX_WORK`] for one call's): a save or a check runs them all.
pub const MAX_TEST_WORK: usize = 1_000_000;

/// Whether running `cases` under `rules` stays within [`MAX_TEST_WORK`]; why not.
pub fn within_bounds(rules: &Rules, cases: &[Case]) -> Result<(), String> {
    let work = cases.iter().fold(0usize, |total, case| {
        total.saturating_add(rules.work(&case.tool, &case.arguments).max(1))
    });
    match work > MAX_TEST_WORK {
        true => Err(format!(
            "the policy's tests take {work} rule evaluations; at most {MAX_TEST_WORK} (fewer tests, fewer items per test, or fewer rules)"
        )),
        false => Ok(()),
    }
}

/// The cases in `text` (a JSON array), or why they cannot be read.
pub fn parse(text: &str) -> Result<Vec<Case>, String> {
    let cases: Vec<Case> =
        serde_json::from_str(text).map_err(|e| format!("the policy tests are not valid: {e}"))?;
    if cases.len() > MAX_CASES {
        return Err(format!("the policy has over {MAX_CASES} tests"));
    }
    Ok(cases)
}

/// Runs `cases` against `policy` over `tools`: one message per failing case.
pub fn run(policy: &Policy, tools: &[ToolShape<'_>], cases: &[Case]) -> Vec<String> {
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let name = case
            .name
            .clone()
            .unwrap_or_else(|| format!("test {}", i + 1));
        let Some(tool) = tools.iter().find(|t| t.name == case.tool) else {
            failures.push(format!("{name}: the agent has no tool {:?}", case.tool));
            continue;
        };
        let who = Who {
            tenant: case
                .tenant
                .as_deref()
                .unwrap_or(crate::auth::keys::DEFAULT_TENANT),
            member: case.member.as_deref().unwrap_or("test"),
            user: case.user.as_deref(),
            groups: &case.groups,
        };
        let decision = policy.decide(tool.name, Tier::or_safest(tool.tier), &case.arguments, who);
        let policy_ok = case.policy.is_none() || case.policy == decision.policy;
        if decision.outcome != case.expect || !policy_ok {
            let by = decision
                .policy
                .map(|p| format!(" by {p}"))
                .unwrap_or_default();
            let expected = match &case.policy {
                Some(p) => format!("{} by {p}", outcome(case.expect)),
                None => outcome(case.expect).to_owned(),
            };
            failures.push(format!(
                "{name}: expected {expected}, got {}{by}",
                outcome(decision.outcome)
            ));
        }
    }
    failures
}

fn outcome(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Deny => "deny",
        Outcome::Approval => "approval",
        Outcome::Auto => "auto",
        Outcome::Tier => "tier",
    }
}
