//! Replay: the calls agents actually made, checked against a candidate revision
//! before it is released. For each tool the candidate changes (its schema, tier
//! or presence; every tool when the policy changes), the tenant's last `limit`
//! recorded calls from the proposal ledger are validated against the candidate's
//! schema and decided by its policy, the way the call path does it, and decided
//! by the base revision too, so a decision that would change is named.
//!
//! The arguments never leave the server: the report holds proposal ids, JSON
//! Pointer paths and the refusals' messages, which never echo a value.

use std::collections::BTreeMap;

use entity::proposals;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::actions::call::{denied, no_such_tool};
use crate::actions::views::DecidedBy;
use crate::error::{Error, Result};
use crate::execute::arguments;
use crate::policies::{Outcome, Policy, Who};
use crate::releases::content::{Content, ToolContent};
use crate::releases::read;
use crate::releases::serve;
use crate::vocab::Tier;

/// The most recorded calls replayed per tool.
pub const MAX_LIMIT: u64 = 1000;
/// Refusals and changed decisions listed per tool (the counts cover them all).
pub const LISTED: usize = 20;
/// Rows read from the ledger at once.
const PAGE: u64 = 100;

/// What to replay (`GET /v1/agents/{agent}/replay`).
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReplayQuery {
    /// The candidate revision's number; default: where `latest` points.
    pub candidate: Option<i32>,
    /// The revision compared against; default: where `production` points.
    pub base: Option<i32>,
    /// Recorded calls per tool, newest first: 1 to 1000 (default 1000).
    pub limit: Option<u64>,
}

/// The replay of one changed tool.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolReplay {
    pub tool: String,
    /// Recorded calls replayed (at most the limit).
    pub recorded: usize,
    /// How many the candidate would refuse.
    pub refused: usize,
    /// The first refusals, newest call first (at most 20).
    pub refusals: Vec<Refusal>,
    /// How many would be decided differently (refused, denied, waiting, run at once).
    pub decisions_changed: usize,
    /// The first changed decisions (at most 20).
    pub changes: Vec<DecisionChange>,
}

/// A recorded call the candidate would refuse, with the refusal a call would get.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Refusal {
    pub proposal: i32,
    /// The error code (`invalid_arguments`, `denied_by_policy`, `not_found`).
    pub code: String,
    /// The error message, word for word.
    pub message: String,
}

/// A recorded call whose decision would change.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DecisionChange {
    pub proposal: i32,
    pub before: Verdict,
    pub after: Verdict,
}

crate::closed_set! {
    /// What a revision does with a call.
    pub enum Verdict as "replay verdict" {
        /// Refused before any decision: unknown or hidden tool, invalid arguments.
        Refused = "refused",
        /// A policy denies it.
        Denied = "denied",
        /// It waits for an approver.
        Approval = "approval",
        /// It runs at once.
        Auto = "auto",
        /// The tier and the user's preference decide (`user_configurable`).
        Tier = "tier",
    }
}

/// What a replay found.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayReport {
    pub agent: String,
    pub base: i32,
    pub candidate: i32,
    pub limit: u64,
    /// The tools the candidate changes, by name (tools with no recorded call too).
    pub tools: Vec<ToolReplay>,
    /// Calls refused, over every tool.
    pub refused: usize,
    /// Decisions changed, over every tool.
    pub decisions_changed: usize,
}

impl ReplayReport {
    /// One line per tool: "of 1000 recorded calls to `create_tasks`, 37 would now be
    /// refused (first: /due: …)".
    pub fn summary(&self) -> Vec<String> {
        self.tools
            .iter()
            .filter(|t| t.recorded > 0)
            .map(|t| {
                let first = t
                    .refusals
                    .first()
                    .map(|r| format!(" (first: {})", r.message))
                    .unwrap_or_default();
                format!(
                    "of {} recorded calls to {}, {} would now be refused{first}; {} decisions would change",
                    t.recorded, t.tool, t.refused, t.decisions_changed
                )
            })
            .collect()
    }
}

/// Who replays: the key's tenant (whose calls are read) and member.
#[derive(Clone, Copy)]
pub struct Replayer<'a> {
    pub tenant: &'a str,
    pub member: &'a str,
}

/// Replays the tenant's recorded calls of agent `name` against `query`'s candidate.
pub async fn run(
    db: &impl ConnectionTrait,
    who: Replayer<'_>,
    name: &str,
    query: ReplayQuery,
) -> Result<ReplayReport> {
    let limit = query.limit.unwrap_or(MAX_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid(format!("limit must be 1 to {MAX_LIMIT}")));
    }
    let labels = read::labels(db, name).await?;
    let at = |label: &str| {
        labels
            .labels
            .iter()
            .find(|l| l.name == label)
            .map(|l| l.revision)
            .ok_or_else(|| crate::releases::serve::label_not_found(name, label))
    };
    let candidate = match query.candidate {
        Some(n) => n,
        None => at("latest")?,
    };
    let base = match query.base {
        Some(n) => n,
        None => at("production")?,
    };
    let old = read::revision(db, name, base).await?;
    let new = read::revision(db, name, candidate).await?;
    let agent_id = crate::registry::links::agent(db, name).await?.id;
    let revisions = Revisions {
        agent_id,
        name: &old.agent,
        base: (base, &old.content),
        candidate: (candidate, &new.content),
    };
    between(db, who, revisions, limit).await
}

/// Two revisions of an agent: its row id and name, each revision's number and content.
pub struct Revisions<'a> {
    pub agent_id: i32,
    pub name: &'a str,
    pub base: (i32, &'a Content),
    pub candidate: (i32, &'a Content),
}

/// Replays the tenant's recorded calls of each tool `revisions.candidate` changes.
pub async fn between(
    db: &impl ConnectionTrait,
    who: Replayer<'_>,
    revisions: Revisions<'_>,
    limit: u64,
) -> Result<ReplayReport> {
    let (base, old) = revisions.base;
    let (candidate, new) = revisions.candidate;
    let sides = Sides {
        agent: revisions.name,
        base: Side::new(base, old, serve::policy_off_workers(old).await?),
        candidate: Side::new(candidate, new, serve::policy_off_workers(new).await?),
    };
    let mut report = ReplayReport {
        agent: revisions.name.to_owned(),
        base,
        candidate,
        limit,
        tools: Vec::new(),
        refused: 0,
        decisions_changed: 0,
    };
    for tool in changed(old, new) {
        let replayed = replay_tool(db, who, revisions.agent_id, &sides, &tool, limit).await?;
        report.refused += replayed.refused;
        report.decisions_changed += replayed.decisions_changed;
        report.tools.push(replayed);
    }
    Ok(report)
}

/// The tools whose recorded calls may be decided differently: changed or removed
/// ones, or every tool of the base when the policy changed.
fn changed(old: &Content, new: &Content) -> Vec<String> {
    let after: BTreeMap<&str, &ToolContent> =
        new.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    old.tools
        .iter()
        .filter(|t| {
            old.policy != new.policy
                || after.get(t.name.as_str()).is_none_or(|n| {
                    n.parameters != t.parameters || n.approval_tier != t.approval_tier
                })
        })
        .map(|t| t.name.clone())
        .collect()
}

/// Both revisions as a call is decided by them.
struct Sides<'a> {
    agent: &'a str,
    base: Side<'a>,
    candidate: Side<'a>,
}

struct Side<'a> {
    number: i32,
    tools: BTreeMap<&'a str, &'a ToolContent>,
    policy: Option<Policy>,
    /// The groups the revision carries.
    groups: Option<&'a crate::releases::content::Groups>,
}

impl<'a> Side<'a> {
    fn new(number: i32, content: &'a Content, policy: Option<Policy>) -> Self {
        Side {
            number,
            tools: content.tools.iter().map(|t| (t.name.as_str(), t)).collect(),
            policy,
            groups: content.groups.as_ref(),
        }
    }
}

/// One recorded call as the ledger has it.
struct Recorded {
    id: i32,
    user_id: Option<String>,
    arguments: Value,
}

async fn replay_tool(
    db: &impl ConnectionTrait,
    who: Replayer<'_>,
    agent_id: i32,
    sides: &Sides<'_>,
    tool: &str,
    limit: u64,
) -> Result<ToolReplay> {
    let mut out = ToolReplay {
        tool: tool.to_owned(),
        recorded: 0,
        refused: 0,
        refusals: Vec::new(),
        decisions_changed: 0,
        changes: Vec::new(),
    };
    let base = Judge::new(&sides.base, sides.agent, tool);
    let candidate = Judge::new(&sides.candidate, sides.agent, tool);
    let mut before: Option<i32> = None;
    // A user's groups, read once per replay.
    let mut groups_of: BTreeMap<String, Vec<String>> = BTreeMap::new();
    while (out.recorded as u64) < limit {
        let page = recorded(
            db,
            who.tenant,
            agent_id,
            tool,
            before,
            PAGE.min(limit - out.recorded as u64),
        )
        .await?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        let full = page.len() as u64 == PAGE.min(limit - out.recorded as u64);
        for call in &page {
            out.recorded += 1;
            let user = call.user_id.clone().unwrap_or_default();
            // The live groups only for a side that carries none (one published before
            // revisions carried groups).
            let needs_live = sides.base.groups.is_none() || sides.candidate.groups.is_none();
            if needs_live && !groups_of.contains_key(&user) {
                let found =
                    crate::policies::groups::of_user(db, who.tenant, call.user_id.as_deref())
                        .await?;
                groups_of.insert(user.clone(), found);
            }
            let live = groups_of.get(&user).cloned().unwrap_or_default();
            // Each side decides with the groups it carries (live for one that predates them).
            let carried = |side: &Side<'_>| {
                crate::releases::content::groups_of(
                    side.groups,
                    who.tenant,
                    call.user_id.as_deref(),
                )
                .unwrap_or_else(|| live.clone())
            };
            let (before_groups, after_groups) = (carried(&sides.base), carried(&sides.candidate));
            let principal = |groups| Who {
                tenant: who.tenant,
                member: who.member,
                user: call.user_id.as_deref(),
                groups,
            };
            let (after, refusal) = candidate.judge(call, principal(&after_groups));
            let (was, _) = base.judge(call, principal(&before_groups));
            if let Some(refusal) = refusal {
                out.refused += 1;
                if out.refusals.len() < LISTED {
                    out.refusals.push(Refusal {
                        proposal: call.id,
                        ..refusal
                    });
                }
            }
            if after != was {
                out.decisions_changed += 1;
                if out.changes.len() < LISTED {
                    out.changes.push(DecisionChange {
                        proposal: call.id,
                        before: was,
                        after,
                    });
                }
            }
        }
        if !full {
            break;
        }
    }
    Ok(out)
}

/// A page of the tenant's recorded calls of `tool`, newest first, below `before`.
async fn recorded(
    db: &impl ConnectionTrait,
    tenant: &str,
    agent_id: i32,
    tool: &str,
    before: Option<i32>,
    limit: u64,
) -> Result<Vec<Recorded>> {
    let mut query = proposals::Entity::find()
        .select_only()
        .column(proposals::Column::Id)
        .column(proposals::Column::UserId)
        .column(proposals::Column::Arguments)
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::AgentId.eq(agent_id))
        .filter(proposals::Column::ToolName.eq(tool));
    if let Some(id) = before {
        query = query.filter(proposals::Column::Id.lt(id));
    }
    let rows: Vec<(i32, Option<String>, Value)> = query
        .order_by_desc(proposals::Column::Id)
        .limit(limit)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(id, user_id, arguments)| Recorded {
            id,
            user_id,
            arguments,
        })
        .collect())
}

/// One side's judgement of one tool's calls: its schema compiled once.
struct Judge<'a> {
    side: &'a Side<'a>,
    agent: &'a str,
    tool: &'a str,
    def: Option<&'a ToolContent>,
    validator: Option<std::result::Result<jsonschema::Validator, String>>,
}

impl<'a> Judge<'a> {
    fn new(side: &'a Side<'a>, agent: &'a str, tool: &'a str) -> Self {
        let def = side.tools.get(tool).copied();
        let validator = def.map(|d| arguments::compile(&d.parameters));
        Judge {
            side,
            agent,
            tool,
            def,
            validator,
        }
    }

    /// What this side does with `call`, and the refusal a call would get.
    fn judge(&self, call: &Recorded, who: Who<'_>) -> (Verdict, Option<Refusal>) {
        let refused = |e: Error| {
            let refusal = Refusal {
                proposal: call.id,
                code: e.code.to_owned(),
                message: e.message,
            };
            (Verdict::Refused, Some(refusal))
        };
        let (Some(def), Some(validator)) = (self.def, &self.validator) else {
            return refused(no_such_tool(self.agent, self.tool));
        };
        if let Some(policy) = self.side.policy.as_ref().filter(|p| p.can_hide())
            && policy.hides(self.tool, who)
        {
            return refused(no_such_tool(self.agent, self.tool));
        }
        let validator = match validator {
            Ok(validator) => validator,
            Err(why) => {
                return refused(Error::refused(
                    "invalid_arguments",
                    format!(
                        "the tool {:?} has a schema that is not valid JSON Schema ({why}); no call can pass it until an admin fixes it",
                        self.tool
                    ),
                ));
            }
        };
        if let Err(e) = arguments::check(validator, &call.arguments) {
            return refused(e);
        }
        if let Err(e) =
            crate::actions::requirements::check(self.tool, call.user_id.as_deref(), &call.arguments)
        {
            return refused(e);
        }
        let tier = Tier::or_safest(&def.approval_tier);
        let decision = match &self.side.policy {
            Some(policy) => policy.decide(self.tool, tier, &call.arguments, who),
            None => return (by_tier(tier), None),
        };
        match decision.outcome {
            Outcome::Deny => {
                let by = DecidedBy {
                    revision: self.side.number,
                    policy: decision.policy,
                    reason: decision.reason,
                };
                let e = denied(&by);
                let refusal = Refusal {
                    proposal: call.id,
                    code: e.code.to_owned(),
                    message: e.message,
                };
                (Verdict::Denied, Some(refusal))
            }
            Outcome::Approval => (Verdict::Approval, None),
            Outcome::Auto => (Verdict::Auto, None),
            Outcome::Tier => (by_tier(tier), None),
        }
    }
}

fn by_tier(tier: Tier) -> Verdict {
    match tier {
        Tier::Auto => Verdict::Auto,
        Tier::RequiresApproval => Verdict::Approval,
        Tier::UserConfigurable => Verdict::Tier,
    }
}
