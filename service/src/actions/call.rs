//! An agent calls a tool. Write tools don't act, they propose: every call is a
//! ledger row; an `auto` call, or a `user_configurable` one the user allowed, is
//! approved by `auto` and runs at once, anything else waits for an approver.
//!
//! The arguments are checked against the schema of the revision the caller was
//! served (the request's `revision`, else what `production` serves the caller's
//! user, else its conversation, while a rollout runs); the tier is the stricter
//! of that revision's and the working copy's, so a tier raised for safety applies at
//! once. The tool must still be the agent's in the working copy: one switched off,
//! unlinked or deleted since is refused whatever the revision says.
//!
//! That revision's policy (`crate::policies`) decides before the tier: a tool a
//! `forbid` hides from the caller is refused as unknown before its arguments are
//! checked; a `forbid` on the arguments is 403 `denied_by_policy`; a
//! `@requireApproval` permit waits; a `permit` runs. What it decided is recorded on
//! the proposal (`decided_by`). A `dry_run` answers the decision and writes nothing.

use chrono::{DateTime, Utc};
use entity::{agent_tools, proposals, tools, user_tool_preferences};
use std::sync::Arc;

use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::decide::{execute, not_connected};
use super::describe::describe;
use super::ledger::{self, Approval, NewProposal};
use super::views::{CallDecision, CallResult, DecidedBy, DryRunStatus};
use crate::auth::Principal;
use crate::error::{Error, Kind, Result, check_id, check_name};
use crate::fetch::Prompts;
use crate::policies::{Decision, INLINE_WORK, MAX_WORK, Outcome, Who};
use crate::vocab::Tier;

use super::Runner;
use crate::execute::arguments::{Key, Schema, Validators, validate};
use crate::releases::PRODUCTION;
use crate::releases::serve::{self, Served};
use crate::releases::signals::{self, At, Signal};
use crate::vocab::ToolDef;

/// Attempts a proposal gets (the first run and two retries).
const MAX_ATTEMPTS: i32 = 3;

/// The body of `POST /v1/agents/{agent}/tool-calls`.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// One of the agent's active tools.
    pub tool: String,
    /// Checked against the tool's JSON Schema.
    #[schema(value_type = Object)]
    pub arguments: Value,
    pub conversation_id: String,
    pub message_id: Option<String>,
    /// Whose call; decides `user_configurable` tools' preference.
    pub user_id: Option<String>,
    /// The same key with the same request answers the first response; with another, 409.
    pub idempotency_key: Option<String>,
    /// The revision the caller was served (`Loadout-Revision`): the arguments are
    /// checked against its schema of the tool. When absent, the revision
    /// `production` serves this caller (while a rollout of it runs, the side its
    /// `user_id`, else its `conversation_id`, is on); 404 `revision_not_found` when the agent has no such revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i32>,
    /// Answer how the call would be decided (`auto`, `approval` or `deny`, and the
    /// policy that decided) and write nothing, run nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

fn check_request(request: &ToolCall) -> Result<()> {
    check_name("tool", &request.tool)?;
    check_id("conversation_id", &request.conversation_id)?;
    let optional = [
        ("user_id", &request.user_id),
        ("message_id", &request.message_id),
        ("idempotency_key", &request.idempotency_key),
    ];
    for (what, id) in optional {
        if let Some(id) = id {
            check_id(what, id)?;
        }
    }
    Ok(())
}

/// The agent's active, attached tool of that name.
async fn attached_tool(
    db: &DatabaseConnection,
    agent_id: i32,
    agent: &str,
    tool: &str,
) -> Result<tools::Model> {
    tools::Entity::find()
        .inner_join(agent_tools::Entity)
        .filter(tools::Column::Name.eq(tool))
        .filter(tools::Column::IsActive.eq(true))
        .filter(tools::Column::DeletedAt.is_null())
        .filter(agent_tools::Column::AgentId.eq(agent_id))
        .filter(agent_tools::Column::IsActive.eq(true))
        .filter(agent_tools::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| no_such_tool(agent, tool))
}

/// The tool as the served revision holds it: 404 if that revision does not have it
/// (the caller was never served it there).
fn served_tool<'a>(served: &'a Served, agent: &str, tool: &str) -> Result<&'a ToolDef> {
    served
        .agent
        .tools
        .iter()
        .find(|def| def.name == tool)
        .ok_or_else(|| {
            Error::not_found(format!(
                "revision {} of agent {agent:?} has no tool {tool:?}",
                served.number
            ))
        })
}

/// The first response to this idempotency key, if it was used with this same request.
async fn replay(
    db: &DatabaseConnection,
    tenant: &str,
    key: &str,
    hash: &str,
) -> Result<Option<CallResult>> {
    let first = proposals::Entity::find()
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::IdempotencyKey.eq(key))
        .one(db)
        .await?;
    match first {
        Some(first) if first.request_hash.as_deref() != Some(hash) => Err(Error::conflict(
            "this idempotency key was used with a different request",
        )),
        found => Ok(found.map(CallResult::from)),
    }
}

/// Whether the call runs now: `auto` tools always, `user_configurable` ones when
/// this user allowed them in this tenant; any other (or unknown) tier waits.
async fn runs_now(
    db: &DatabaseConnection,
    tenant: &str,
    tool: &tools::Model,
    tier: Tier,
    user: Option<&str>,
) -> Result<bool> {
    match (tier, user) {
        (Tier::Auto, _) => Ok(true),
        (Tier::UserConfigurable, Some(user)) => Ok(user_tool_preferences::Entity::find()
            .filter(user_tool_preferences::Column::TenantId.eq(tenant))
            .filter(user_tool_preferences::Column::UserId.eq(user))
            .filter(user_tool_preferences::Column::ToolId.eq(tool.id))
            .one(db)
            .await?
            .is_some_and(|p| p.auto_approve)),
        _ => Ok(false),
    }
}

/// Counts an invalid-argument refusal, and the call it refused, for the revision
/// the call was validated under (one write of its own: a refusal writes nothing
/// else).
async fn count_refusal(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    tenant: &str,
    served: &Served,
    refused: &Error,
) -> Result<()> {
    if refused.code != "invalid_arguments" {
        return Ok(());
    }
    let at = At {
        tenant,
        agent_id: served.agent.id,
        revision_id: served.id,
    };
    let txn = crate::db::begin_write(db).await?;
    let counted = [Signal::ToolCalls, Signal::InvalidArguments];
    signals::count(&txn, at, &counted, now).await?;
    txn.commit().await?;
    Ok(())
}

/// The code of a call a policy denies (403).
pub const DENIED_BY_POLICY: &str = "denied_by_policy";

/// 403 `denied_by_policy`, with the reason and the revision and policy that denied.
pub fn denied(by: &DecidedBy) -> Error {
    let reason = by.reason.as_deref().unwrap_or("a policy forbids this call");
    Error::new(
        Kind::Forbidden,
        DENIED_BY_POLICY,
        format!("denied by policy: {reason}"),
    )
    .with_details(by.clone())
}

/// The served revision's policy's decision on the call, and what to record of it
/// (`None`: the revision has no policy, or none applied). A `forbid` that holds
/// whatever the arguments answers the same 404 as a tool the agent lacks.
async fn decide_by_policy(
    db: &DatabaseConnection,
    who: &Principal,
    served: &Arc<Served>,
    agent: &str,
    request: &ToolCall,
    tier: Tier,
) -> Result<Option<(Decision, DecidedBy)>> {
    let Some(policy) = &served.policy else {
        return Ok(None);
    };
    let work = policy.work(&request.tool, &request.arguments);
    if work > MAX_WORK {
        hidden(db, who, served, agent, request).await?;
        return Err(Error::refused(
            "policy_work_exceeded",
            format!(
                "deciding this call under the agent's policy takes {work} rule evaluations; a call may take {MAX_WORK}: send fewer items per call"
            ),
        ));
    }
    let groups = served
        .groups_of(db, who.tenant(), request.user_id.as_deref())
        .await?;
    let decision = match work > INLINE_WORK {
        // A large list under many rules: off the async workers, behind the CPU gate.
        true => {
            let served = Arc::clone(served);
            let (tenant, member) = (who.tenant().to_owned(), who.member.clone());
            let (tool, user) = (request.tool.clone(), request.user_id.clone());
            let arguments = request.arguments.clone();
            crate::cpu::run(move || {
                let principal = Who {
                    tenant: &tenant,
                    member: &member,
                    user: user.as_deref(),
                    groups: &groups,
                };
                served
                    .policy
                    .as_ref()
                    .map(|p| p.decide(&tool, tier, &arguments, principal))
            })
            .await?
            .ok_or_else(|| Error::internal("the served policy went away"))?
        }
        false => {
            let principal = Who {
                tenant: who.tenant(),
                member: &who.member,
                user: request.user_id.as_deref(),
                groups: &groups,
            };
            policy.decide(&request.tool, tier, &request.arguments, principal)
        }
    };
    if decision.outcome == Outcome::Deny && decision.outright {
        return Err(no_such_tool(agent, &request.tool));
    }
    if decision.outcome == Outcome::Tier {
        return Ok(None);
    }
    let by = DecidedBy {
        revision: served.number,
        policy: decision.policy.clone(),
        reason: decision.reason.clone(),
    };
    Ok(Some((decision, by)))
}

/// The unknown tool's 404 when the served policy hides the called tool from this
/// caller; a refusal decided before the policy (invalid arguments, a missing user)
/// asks this first, so it never tells a hidden tool's schema or existence. A call
/// that gets as far as the decision is refused the same way by the decision itself.
async fn hidden(
    db: &DatabaseConnection,
    who: &Principal,
    served: &Served,
    agent: &str,
    request: &ToolCall,
) -> Result<()> {
    let Some(policy) = served.policy.as_ref().filter(|p| p.can_hide()) else {
        return Ok(());
    };
    let groups = served
        .groups_of(db, who.tenant(), request.user_id.as_deref())
        .await?;
    let principal = Who {
        tenant: who.tenant(),
        member: &who.member,
        user: request.user_id.as_deref(),
        groups: &groups,
    };
    match policy.hides(&request.tool, principal) {
        true => Err(no_such_tool(agent, &request.tool)),
        false => Ok(()),
    }
}

/// The 404 of a tool the agent does not have (or a policy hides from the caller).
pub fn no_such_tool(agent: &str, tool: &str) -> Error {
    Error::not_found(format!("agent {agent:?} has no active tool {tool:?}"))
}

/// Validates and records the call; runs it now when its tier allows. The agent
/// comes through the prompt service (cached), the validator from `validators`;
/// `proposals` say how long a proposal waits, per tier.
pub async fn call(
    runner: &Runner<'_>,
    prompts: &Prompts<'_>,
    validators: &Validators,
    proposals: &super::ProposalSettings,
    who: &Principal,
    agent: &str,
    request: ToolCall,
) -> Result<CallResult> {
    check_request(&request)?;
    let tenant = who.tenant();
    let served = match request.revision {
        Some(number) => {
            let served = crate::fetch::revision(prompts, agent, number).await?;
            let now = runner.clock.now();
            if !serve::callable(runner.db, served.agent.id, served.id, now).await? {
                return Err(serve::not_served(agent, number));
            }
            served
        }
        None => {
            // The subject production's running rollout (if any) put the caller on.
            let subject = request
                .user_id
                .as_deref()
                .or(Some(&request.conversation_id));
            crate::fetch::pick(prompts, agent, PRODUCTION, subject)
                .await?
                .served
        }
    };
    let loaded = &served.agent;
    let stamp = runner.generation.current();
    let tool = attached_tool(runner.db, loaded.id, agent, &request.tool).await?;
    let def = served_tool(&served, agent, &tool.name)?;
    let schema = Schema {
        key: Key {
            revision_id: served.id,
            tool_id: tool.id,
        },
        tool: &tool.name,
        parameters: &def.parameters,
    };
    let arguments = &request.arguments;
    let tier = Tier::or_safest(&def.approval_tier).max(Tier::or_safest(&tool.approval_tier));
    if let Err(refused) = validate(validators, runner.generation, stamp, schema, arguments) {
        // A tool a policy hides from this caller is refused as if it did not exist:
        // a validation error would tell its schema.
        hidden(runner.db, who, &served, agent, &request).await?;
        // The caller's answer is the refusal even when counting it failed.
        if let Err(e) =
            count_refusal(runner.db, runner.clock.now(), tenant, &served, &refused).await
        {
            tracing::warn!(error = %e, "could not count an invalid-argument refusal");
        }
        return Err(refused);
    }
    if let Err(refused) =
        super::requirements::check(&tool.name, request.user_id.as_deref(), &request.arguments)
    {
        hidden(runner.db, who, &served, agent, &request).await?;
        return Err(refused);
    }
    let policy = decide_by_policy(runner.db, who, &served, agent, &request, tier).await?;
    if request.dry_run {
        let auto = match policy.as_ref().map(|(d, _)| d.outcome) {
            Some(Outcome::Auto) => true,
            Some(Outcome::Approval | Outcome::Deny) => false,
            Some(Outcome::Tier) | None => {
                runs_now(runner.db, tenant, &tool, tier, request.user_id.as_deref()).await?
            }
        };
        let decision = match policy.as_ref().map(|(d, _)| d.outcome) {
            Some(Outcome::Deny) => Outcome::Deny,
            _ if auto => Outcome::Auto,
            _ => Outcome::Approval,
        };
        return Ok(CallResult::DryRun(CallDecision {
            status: DryRunStatus::DryRun,
            decision,
            revision: served.number,
            decided_by: policy.map(|(_, by)| by),
        }));
    }
    // The agent is part of the request: another agent's call with the same key and
    // body is a different request (409), never a replay of that agent's proposal.
    let serialized = crate::digest::canonical(&request).map_err(Error::internal)?;
    let signed = format!("{agent:?}\n{serialized}");
    let request_hash = crate::digest::sha256_hex(signed.as_bytes());
    if let Some(key) = &request.idempotency_key
        && let Some(first) = replay(runner.db, tenant, key, &request_hash).await?
    {
        return Ok(first);
    }
    // After the replay: a retry of a call answered before gets its first answer.
    if let Some((decision, by)) = &policy
        && decision.outcome == Outcome::Deny
    {
        return Err(denied(by));
    }
    let auto = match policy.as_ref().map(|(d, _)| d.outcome) {
        Some(Outcome::Auto) => true,
        Some(Outcome::Approval | Outcome::Deny) => false,
        Some(Outcome::Tier) | None => {
            runs_now(runner.db, tenant, &tool, tier, request.user_id.as_deref()).await?
        }
    };
    let executors = runner
        .executors_for(loaded.id, &tool.name, &served.pins)
        .await?;
    if auto {
        executors
            .runnable(&tool.name, &tool.tool_type)
            .map_err(not_connected)?;
    }
    let (description, preview) = describe(&tool.name, &request.arguments);
    let now = runner.clock.now();
    let has_key = request.idempotency_key.is_some();
    let new = NewProposal {
        tenant_id: tenant.to_owned(),
        agent_id: loaded.id,
        tool_id: tool.id,
        tool_name: tool.name.clone(),
        user_id: request.user_id,
        conversation_id: request.conversation_id,
        message_id: request.message_id,
        arguments: request.arguments,
        description,
        preview: serde_json::to_value(preview).map_err(Error::internal)?,
        request_hash: request.idempotency_key.as_ref().map(|_| request_hash),
        idempotency_key: request.idempotency_key,
        ttl: proposals.ttl(tier),
        max_attempts: MAX_ATTEMPTS,
        revision_id: Some(served.id),
        decided_by: match &policy {
            Some((_, by)) => Some(serde_json::to_string(by).map_err(Error::internal)?),
            None => None,
        },
    };
    let created = ledger::create(runner.db, new, &who.member, now)
        .await
        .map_err(|e| {
            // Two concurrent calls with one idempotency key: the unique index picks one.
            Error::from_db(e, || match has_key {
                true => {
                    "a call with this idempotency key is in progress; retry it to read its result"
                        .to_owned()
                }
                false => "a concurrent call wrote the same proposal first".to_owned(),
            })
        })?;
    if !auto {
        return Ok(created.into());
    }
    let (db, generation) = (runner.db.clone(), runner.generation.clone());
    let clock = Arc::clone(runner.clock);
    let (tenant, kind) = (tenant.to_owned(), tool.tool_type);
    let ran = super::decide::in_task(async move {
        let lease = executors.lease_for(&created.tool_name);
        match ledger::approve(&db, &tenant, created.id, "auto", now, lease, None).await? {
            Approval::Run(claimed) => {
                execute(&db, &generation, &*clock, &executors, claimed, &kind).await
            }
            Approval::AsItIs(row) => Ok(row),
        }
    });
    Ok(ran.await?.into())
}
