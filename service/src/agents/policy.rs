//! An agent's policy as an admin edits it: the Cedar text and its test cases. A
//! save is a guarded write like any other: the policy must compile against the
//! agent's tools and pass its tests, and it reaches `production` as every change
//! does (at once on a `direct` agent, by a signed-off change request on a `gated`
//! one). See [`crate::policies`] for what a policy decides.

use entity::{agent_configurations, agent_tools, tools};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::row;
use crate::db::Writer;
use crate::error::{Error, Result};
use crate::policies::cases::{self, Case};
use crate::policies::{CompileError, Outcome, Policy, PolicyProblem, Rules, ToolShape, Who};
use crate::registry::guard;
use crate::vocab::{Tier, ToolDef};

/// An agent's policy and its tests.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct PolicyView {
    pub agent: String,
    /// Cedar text; `null`: none (the tiers decide).
    pub policy: Option<String>,
    /// The policy's test cases (`loadout check` runs them).
    pub tests: Vec<Case>,
}

/// The body of `PUT /v1/agents/{agent}/policy`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyPut {
    /// Cedar text; `null` or empty: remove the policy.
    pub policy: Option<String>,
    #[serde(default)]
    pub tests: Vec<Case>,
}

/// The body of `POST /v1/agents/{agent}/policy/validate`: a policy to check
/// against the agent's tools (nothing is saved), and optionally a call to try.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyTry {
    pub policy: String,
    #[serde(default)]
    pub tests: Vec<Case>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<TriedCall>,
}

/// A call to decide under a policy being edited.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TriedCall {
    pub tool: String,
    #[schema(value_type = Object)]
    pub arguments: Value,
    pub user_id: Option<String>,
    /// The user's groups; absent: the groups the tenant gives that user now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<String>>,
}

/// What a policy decided, and which policy decided it.
#[derive(Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DecisionView {
    pub decision: Outcome,
    /// The deciding policy's id (`null`: none applied, or the set could not decide).
    pub policy: Option<String>,
    pub reason: Option<String>,
}

/// The validator's answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PolicyCheck {
    /// Empty: the policy compiles against the agent's tools.
    pub problems: Vec<PolicyProblem>,
    /// One message per failing test case.
    pub test_failures: Vec<String>,
    /// The tried call's decision (when the policy compiles and a call was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecisionView>,
}

/// The details of a 422 `invalid_policy`.
#[derive(Debug, Serialize)]
struct Problems {
    problems: Vec<PolicyProblem>,
}

/// The details of a 422 `policy_test_failed`.
#[derive(Debug, Serialize)]
struct Failures {
    failures: Vec<String>,
}

fn shapes(defs: &[ToolDef]) -> Vec<ToolShape<'_>> {
    defs.iter()
        .map(|d| ToolShape {
            name: &d.name,
            tier: &d.approval_tier,
            parameters: &d.parameters,
        })
        .collect()
}

/// The tools a policy of the agent is checked against: every tool linked to it
/// that is not deleted, switched off or not, as `loadout check` takes them; a
/// tool switched off stays nameable, so a policy naming it still saves.
async fn working_tools(db: &impl ConnectionTrait, name: &str) -> Result<Vec<ToolDef>> {
    let agent = row(db, name).await?;
    let rows = tools::Entity::find()
        .inner_join(agent_tools::Entity)
        .filter(agent_tools::Column::AgentId.eq(agent.id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .filter(tools::Column::DeletedAt.is_null())
        .order_by_asc(tools::Column::Name)
        .distinct()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|t| ToolDef {
            name: t.name,
            description: t.description,
            approval_tier: t.approval_tier,
            parameters: t.parameters,
            strict: t.strict,
        })
        .collect())
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<PolicyView> {
    let found = row(db, name).await?;
    let tests = match found.policy_tests.as_deref() {
        Some(text) => cases::parse(text).unwrap_or_default(),
        None => Vec::new(),
    };
    Ok(PolicyView {
        agent: found.name,
        policy: found.policy,
        tests,
    })
}

/// 400 for more tests than a policy may carry (checked before any is run).
fn too_many_tests(tests: &[Case]) -> Result<()> {
    match tests.len() > cases::MAX_CASES {
        true => Err(Error::invalid(format!(
            "a policy has at most {} tests",
            cases::MAX_CASES
        ))),
        false => Ok(()),
    }
}

/// 422 `policy_too_large` or `policy_too_deep` for a bound passed, naming it.
fn exceeded(e: crate::policies::Exceeded) -> Error {
    Error::refused(e.code(), e.to_string())
}

/// `text` compiled against `defs` (422 `invalid_policy` with every problem, or
/// past a bound, see [`exceeded`]) with `tests` within their bound of work
/// (422 `policy_too_large`).
fn compiled(text: &str, tests: &[Case], defs: &[ToolDef]) -> Result<Rules> {
    let shapes = shapes(defs);
    let rules = Rules::compile(text, shapes.iter().copied()).map_err(|e| match e {
        CompileError::Exceeded(e) => exceeded(e),
        CompileError::Problems(problems) => {
            let first = problems
                .first()
                .map(ToString::to_string)
                .unwrap_or_default();
            Error::refused(
                "invalid_policy",
                format!("the policy does not compile: {first}"),
            )
            .with_details(Problems { problems })
        }
    })?;
    cases::within_bounds(&rules, tests)
        .map_err(|message| Error::refused("policy_too_large", message))?;
    Ok(rules)
}

/// 422 `invalid_policy` with every problem, `policy_test_failed` with every
/// failing case, or a bound passed, for `text` and `tests` against `defs`. CPU
/// work in proportion to the text and the tests: run it through [`crate::cpu`].
pub fn check(text: &str, tests: &[Case], defs: &[ToolDef]) -> Result<()> {
    let rules = compiled(text, tests, defs)?;
    let failures = cases::run(&Policy::Ready(Box::new(rules)), &shapes(defs), tests);
    if let Some(first) = failures.first() {
        return Err(Error::refused(
            "policy_test_failed",
            format!("a policy test failed: {first}"),
        )
        .with_details(Failures { failures }));
    }
    Ok(())
}

/// Saves the agent's policy and tests inside an open write: checked against the
/// agent's tools as they are in this write.
pub async fn save_in(
    write: &mut guard::Write,
    name: &str,
    put: PolicyPut,
) -> Result<agent_configurations::Model> {
    let found = row(&**write, name).await?;
    write.touch(found.id).await?;
    let policy = put.policy.filter(|p| !p.trim().is_empty());
    too_many_tests(&put.tests)?;
    if let Some(text) = &policy {
        let defs = working_tools(&**write, name).await?;
        let (text, tests) = (text.clone(), put.tests.clone());
        crate::cpu::run(move || check(&text, &tests, &defs)).await??;
    }
    let tests = match put.tests.is_empty() {
        true => None,
        false => Some(serde_json::to_string(&put.tests).map_err(Error::internal)?),
    };
    agent_configurations::Entity::update_many()
        .col_expr(agent_configurations::Column::Policy, Expr::value(policy))
        .col_expr(
            agent_configurations::Column::PolicyTests,
            Expr::value(tests),
        )
        .col_expr(
            agent_configurations::Column::UpdatedAt,
            Expr::value(write.now()),
        )
        .filter(agent_configurations::Column::Id.eq(found.id))
        .exec(&**write)
        .await?;
    row(&**write, name).await
}

/// Saves the agent's policy (a new revision; on a gated agent, `latest` only).
pub async fn save(w: &Writer<'_>, author: &str, name: &str, put: PolicyPut) -> Result<PolicyView> {
    let mut write = w.begin_for_agents().await?.by(author);
    let saved = save_in(&mut write, name, put).await?;
    w.commit(write).await?;
    let tests = saved
        .policy_tests
        .as_deref()
        .map(|t| cases::parse(t).unwrap_or_default())
        .unwrap_or_default();
    Ok(PolicyView {
        agent: saved.name,
        policy: saved.policy,
        tests,
    })
}

/// Checks a policy being edited against the agent's working tools, runs its tests
/// and decides a tried call; nothing is saved.
pub async fn validate(
    db: &DatabaseConnection,
    tenant: &str,
    member: &str,
    name: &str,
    tried: PolicyTry,
) -> Result<PolicyCheck> {
    too_many_tests(&tried.tests)?;
    crate::policies::bounds::measure(&tried.policy).map_err(exceeded)?;
    let defs = working_tools(db, name).await?;
    let groups = match &tried.call {
        Some(TriedCall {
            groups: Some(groups),
            ..
        }) => groups.clone(),
        Some(call) => crate::policies::groups::of_user(db, tenant, call.user_id.as_deref()).await?,
        None => Vec::new(),
    };
    let (tenant, member, name) = (tenant.to_owned(), member.to_owned(), name.to_owned());
    crate::cpu::run(move || tried_out(&tenant, &member, &name, tried, &defs, &groups)).await?
}

/// [`validate`]'s CPU work, off the async workers.
fn tried_out(
    tenant: &str,
    member: &str,
    name: &str,
    tried: PolicyTry,
    defs: &[ToolDef],
    groups: &[String],
) -> Result<PolicyCheck> {
    let shapes = shapes(defs);
    let rules = match Rules::compile(&tried.policy, shapes.iter().copied()) {
        Ok(rules) => rules,
        Err(CompileError::Exceeded(e)) => return Err(exceeded(e)),
        Err(CompileError::Problems(problems)) => {
            return Ok(PolicyCheck {
                problems,
                test_failures: Vec::new(),
                decision: None,
            });
        }
    };
    cases::within_bounds(&rules, &tried.tests)
        .map_err(|message| Error::refused("policy_too_large", message))?;
    let rules = Policy::Ready(Box::new(rules));
    let test_failures = cases::run(&rules, &shapes, &tried.tests);
    let decision = match tried.call {
        Some(call) => {
            let Some(tool) = defs.iter().find(|d| d.name == call.tool) else {
                return Err(Error::not_found(format!(
                    "agent {name:?} has no active tool {:?}",
                    call.tool
                )));
            };
            let who = Who {
                tenant,
                member,
                user: call.user_id.as_deref(),
                groups,
            };
            let tier = Tier::or_safest(&tool.approval_tier);
            let d = rules.decide(&tool.name, tier, &call.arguments, who);
            Some(DecisionView {
                decision: d.outcome,
                policy: d.policy,
                reason: d.reason,
            })
        }
        None => None,
    };
    Ok(PolicyCheck {
        problems: Vec::new(),
        test_failures,
        decision,
    })
}
