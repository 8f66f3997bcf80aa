//! Outcomes (issue 26, item 2): what clients report about conversations a
//! revision served, and the per-revision report that puts them beside what
//! loadout counted itself ([`super::signals`]).
//!
//! A report is stored once per tenant, revision and conversation: a repeated
//! report for the same conversation replaces the earlier one (an upsert on that
//! unique key), so the latest report per conversation counts once and a client
//! cannot weigh a side by repeating itself. The tenant is the reporting key's.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use entity::{agent_revisions, outcomes, revision_signals, rollouts as rollout_rows};
use sea_orm::sea_query::{Expr, Func, OnConflict, SimpleExpr};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter,
    QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::guard::{self, Counts, Decision, Guard};
use super::read::agent;
use super::serve::revision_not_found;
use super::signals::Signal;
use super::traffic::{self, EventKind, RolloutState, Transition};
use crate::db::Writer;
use crate::error::{Error, Result, check_id};

crate::closed_set! {
    /// What a client says a conversation came to.
    pub enum OutcomeKind as "outcome" {
        Success = "success",
        Failure = "failure",
    }
}

/// The body of `POST /v1/agents/{agent}/outcomes`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewOutcome {
    /// The revision that served the conversation (`Loadout-Revision`).
    pub revision: i32,
    pub conversation_id: String,
    /// Whose conversation, when known.
    #[serde(default)]
    pub user_id: Option<String>,
    pub outcome: OutcomeKind,
    /// Any finite number the client scores with (its mean is reported).
    #[serde(default)]
    pub score: Option<f64>,
}

/// A stored outcome: the latest report for its conversation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OutcomeView {
    pub id: i32,
    pub agent: String,
    pub revision: i32,
    pub conversation_id: String,
    pub user_id: Option<String>,
    pub outcome: OutcomeKind,
    pub score: Option<f64>,
    /// When the conversation's first report arrived.
    pub created_at: DateTime<Utc>,
    /// When its latest report arrived (equal to `created_at` for the first).
    pub updated_at: DateTime<Utc>,
}

/// What [`record`] stored, with what the rollout guard needs to know.
#[derive(Debug)]
pub struct Recorded {
    pub view: OutcomeView,
    pub agent_id: i32,
    pub revision_id: i32,
}

fn check_report(report: &NewOutcome) -> Result<()> {
    check_id("conversation_id", &report.conversation_id)?;
    if let Some(user) = &report.user_id {
        check_id("user_id", user)?;
    }
    if report.score.is_some_and(|score| !score.is_finite()) {
        return Err(Error::invalid("score must be a finite number"));
    }
    Ok(())
}

/// Checks the report, finds the agent's revision (404 `revision_not_found`) and
/// begins the write: stores the report in `txn` (replacing an earlier report of
/// the conversation), read back as stored. The caller commits, so what else the
/// outcome decides (the rollout guard) is in the same transaction.
pub async fn record(
    txn: &DatabaseTransaction,
    tenant: &str,
    agent_name: &str,
    report: NewOutcome,
    now: DateTime<Utc>,
    most_per_subject: u64,
) -> Result<Recorded> {
    check_report(&report)?;
    let agent = agent(txn, agent_name).await?;
    let revision = agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(agent.id))
        .filter(agent_revisions::Column::Number.eq(report.revision))
        .one(txn)
        .await?
        .ok_or_else(|| revision_not_found(agent_name, report.revision))?;
    if let Some(user) = &report.user_id {
        bound_per_subject(
            txn,
            tenant,
            revision.id,
            &report.conversation_id,
            user,
            most_per_subject,
        )
        .await?;
    }
    let row = outcomes::ActiveModel {
        tenant_id: Set(tenant.to_owned()),
        agent_id: Set(agent.id),
        revision_id: Set(revision.id),
        conversation_id: Set(report.conversation_id.clone()),
        user_id: Set(report.user_id),
        outcome: Set(report.outcome.as_str().to_owned()),
        score: Set(report.score),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    };
    let latest_wins = OnConflict::columns([
        outcomes::Column::TenantId,
        outcomes::Column::RevisionId,
        outcomes::Column::ConversationId,
    ])
    .update_columns([
        outcomes::Column::UserId,
        outcomes::Column::Outcome,
        outcomes::Column::Score,
        outcomes::Column::UpdatedAt,
    ])
    .to_owned();
    outcomes::Entity::insert(row)
        .on_conflict(latest_wins)
        .exec_without_returning(txn)
        .await?;
    let stored = outcomes::Entity::find()
        .filter(outcomes::Column::TenantId.eq(tenant))
        .filter(outcomes::Column::RevisionId.eq(revision.id))
        .filter(outcomes::Column::ConversationId.eq(&report.conversation_id))
        .one(txn)
        .await?
        .ok_or_else(|| Error::internal("the outcome just stored is not there"))?;
    let view = OutcomeView {
        id: stored.id,
        agent: agent.name,
        revision: revision.number,
        conversation_id: stored.conversation_id,
        user_id: stored.user_id,
        outcome: report.outcome,
        score: stored.score,
        created_at: stored.created_at,
        updated_at: stored.updated_at,
    };
    Ok(Recorded {
        view,
        agent_id: agent.id,
        revision_id: revision.id,
    })
}

/// One user's conversations on one revision are at most `most` outcomes (a new
/// conversation past it is refused; a conversation already reported is replaced
/// as ever), so no subject weighs in a rollout's guard without bound. One range
/// of the `outcomes_by_subject` index.
async fn bound_per_subject(
    txn: &DatabaseTransaction,
    tenant: &str,
    revision_id: i32,
    conversation: &str,
    user: &str,
    most: u64,
) -> Result<()> {
    use sea_orm::PaginatorTrait;
    let held = outcomes::Entity::find()
        .filter(outcomes::Column::RevisionId.eq(revision_id))
        .filter(outcomes::Column::UserId.eq(user))
        .filter(outcomes::Column::TenantId.eq(tenant))
        .count(txn)
        .await?;
    if held < most {
        return Ok(());
    }
    let replacing = outcomes::Entity::find()
        .filter(outcomes::Column::TenantId.eq(tenant))
        .filter(outcomes::Column::RevisionId.eq(revision_id))
        .filter(outcomes::Column::ConversationId.eq(conversation))
        .count(txn)
        .await?;
    match replacing {
        0 => Err(Error::limit_reached(
            "outcomes for this user on this revision",
            most,
            "--max-outcomes-per-subject",
        )),
        _ => Ok(()),
    }
}

/// Stores a report in a write transaction of its own ([`record`]), lets the
/// guard of every running rollout the revision is a side of judge it in the same
/// transaction ([`judge`]), and commits. A rollout the guard held or aborted
/// bumps the generation, which `generation` observes after the commit, so this
/// process serves the base at once (others on their next generation read).
pub async fn submit(
    w: &Writer<'_>,
    tenant: &str,
    agent_name: &str,
    report: NewOutcome,
    most_per_subject: u64,
) -> Result<OutcomeView> {
    let txn = crate::db::begin_write(w.db).await?;
    crate::db::idempotency::record_if(&txn, w.key).await?;
    let recorded = record(&txn, tenant, agent_name, report, w.now, most_per_subject).await?;
    let (_, bumped) = judge(&txn, recorded.agent_id, recorded.revision_id, w.now).await?;
    txn.commit().await?;
    if let Some(bumped) = bumped {
        w.generation.observe(bumped);
    }
    Ok(recorded.view)
}

/// A rollout the guard held or aborted, and why.
#[derive(Debug)]
pub struct Stopped {
    pub rollout_id: i32,
    /// [`EventKind::Held`] or [`EventKind::Aborted`].
    pub kind: EventKind,
    pub decision: Decision,
}

/// Judges every `active` or `held` rollout of the agent with a guard whose base or
/// candidate is `revision_id` (the generation it bumped, if it stopped one), on the outcomes reported for each side since the
/// rollout started (or since a signer resumed it after a hold). Only reported
/// outcomes are judged: loadout's own signals count other things (tool calls,
/// decisions) with other denominators, so they are shown beside the outcomes and
/// never mixed in.
///
/// **One guard per tenant; no tenant decides alone** ([`guard::joint`]). A rollout
/// splits a label every tenant is served, so each tenant's outcomes are judged by
/// a guard of their own: one tenant's planted successes cannot hide what another's
/// outcomes show, and its planted failures trip its own guard only. When one
/// tenant's guard trips, the rollout is **held** at once (the base serves
/// everyone, event `rollout.held` naming the tenant and the statistic). It is
/// **aborted** when a second tenant's guard agrees, or when the tenant that
/// tripped is the only one that reported. A signer resumes a held rollout (the
/// guard then judges what is reported from then on), or anyone aborts it.
/// Tenants that reported nothing take no part.
pub async fn judge(
    txn: &DatabaseTransaction,
    agent_id: i32,
    revision_id: i32,
    now: DateTime<Utc>,
) -> Result<(Vec<Stopped>, Option<i64>)> {
    let judged = [RolloutState::Active, RolloutState::Held].map(RolloutState::as_str);
    let guarded = rollout_rows::Entity::find()
        .filter(rollout_rows::Column::AgentId.eq(agent_id))
        .filter(rollout_rows::Column::State.is_in(judged))
        .filter(rollout_rows::Column::GuardMinOutcomes.is_not_null())
        .filter(rollout_rows::Column::GuardAlpha.is_not_null())
        .filter(
            Condition::any()
                .add(rollout_rows::Column::BaseRevisionId.eq(revision_id))
                .add(rollout_rows::Column::CandidateRevisionId.eq(revision_id)),
        )
        .all(txn)
        .await?;
    if guarded.is_empty() {
        return Ok((Vec::new(), None));
    }
    let population = tenants_with_agent_keys(txn).await?;
    let mut stopped = Vec::new();
    let mut bumped = None;
    for row in guarded {
        let (Some(min_outcomes), Some(alpha)) = (row.guard_min_outcomes, row.guard_alpha) else {
            continue;
        };
        let guard = Guard {
            min_outcomes: u64::try_from(min_outcomes).unwrap_or(1),
            alpha,
        };
        let since = row
            .guard_since
            .unwrap_or(row.created_at)
            .max(row.created_at);
        let base = counts_by_tenant(txn, row.base_revision_id, since).await?;
        let candidate = counts_by_tenant(txn, row.candidate_revision_id, since).await?;
        let tenants: Vec<&String> = base
            .keys()
            .chain(candidate.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let sides: Vec<(Counts, Counts)> = tenants
            .iter()
            .map(|t| {
                let side = |m: &BTreeMap<String, Counts>| m.get(*t).copied().unwrap_or_default();
                (side(&base), side(&candidate))
            })
            .collect();
        let joint = guard::joint(guard, population, &sides);
        let held = row.state == RolloutState::Held.as_str();
        let kind = match joint.ruling {
            guard::Ruling::Continue => continue,
            guard::Ruling::Hold if held => continue,
            guard::Ruling::Hold => EventKind::Held,
            guard::Ruling::Abort => EventKind::Aborted,
        };
        let Some((_, decision)) = joint.tripped.first().copied() else {
            continue;
        };
        if !claim(txn, &row, now).await? {
            continue;
        }
        let names: Vec<String> = joint
            .tripped
            .iter()
            .map(|(i, _)| tenants[*i].clone())
            .collect();
        let what = match kind {
            EventKind::Held => {
                "held: the base serves everyone until a second tenant's guard agrees or a signer decides"
            }
            _ if joint.tripped.len() > 1 => "aborted: the guards of two tenants agree",
            _ => "aborted: the only tenant that reported",
        };
        let reason = format!(
            "{} (tenant {}; {} of {} reporting tenants; {what})",
            decision.reason(),
            names.join(", "),
            joint.tripped.len(),
            joint.reporters,
        );
        let trip = crate::events::GuardTrip {
            tenants: names,
            base_failure_rate: decision.base_failure_rate,
            base_outcomes: decision.base_outcomes,
            candidate_failure_rate: decision.candidate_failure_rate,
            candidate_outcomes: decision.candidate_outcomes,
            likelihood_ratio: decision.likelihood_ratio,
            threshold: decision.threshold,
        };
        let step = Transition {
            kind,
            actor: Some(GUARD_ACTOR),
            reason: Some(&reason),
            change_request_id: None,
            trip: Some(&trip),
            at: now,
        };
        let rollout_id = row.id;
        // The bump first: its lock orders this transition's event among the
        // change stream's (see `changes`).
        if bumped.is_none() {
            bumped = Some(crate::db::generation::bump(txn).await?);
        }
        traffic::transition(txn, row.into(), step).await?;
        stopped.push(Stopped {
            rollout_id,
            kind,
            decision,
        });
    }
    Ok((stopped, bumped))
}

/// How many tenants hold a live agent key: the population a shared rollout serves.
async fn tenants_with_agent_keys(db: &impl ConnectionTrait) -> Result<usize> {
    let tenants: Vec<Option<String>> = entity::api_keys::Entity::find()
        .select_only()
        .column(entity::api_keys::Column::TenantId)
        .distinct()
        .filter(entity::api_keys::Column::Role.eq(crate::auth::Role::Agent.as_str()))
        .filter(entity::api_keys::Column::RevokedAt.is_null())
        .filter(entity::api_keys::Column::DeletedAt.is_null())
        .into_tuple()
        .all(db)
        .await?;
    // The default tenant is stored as NULL and, on older rows, by name.
    let named: std::collections::BTreeSet<&str> = tenants
        .iter()
        .map(|t| t.as_deref().unwrap_or(crate::auth::keys::DEFAULT_TENANT))
        .collect();
    Ok(named.len())
}

/// Successes and failures of one revision per tenant, of the conversations last
/// reported at or after `since`.
async fn counts_by_tenant(
    db: &impl ConnectionTrait,
    revision_id: i32,
    since: DateTime<Utc>,
) -> Result<BTreeMap<String, Counts>> {
    let rows: Vec<(String, String, i64)> = outcomes::Entity::find()
        .select_only()
        .column(outcomes::Column::TenantId)
        .column(outcomes::Column::Outcome)
        .column_as(
            SimpleExpr::from(Func::count(Expr::col(outcomes::Column::Id))),
            "n",
        )
        .filter(outcomes::Column::RevisionId.eq(revision_id))
        .filter(outcomes::Column::UpdatedAt.gte(since))
        .group_by(outcomes::Column::TenantId)
        .group_by(outcomes::Column::Outcome)
        .into_tuple()
        .all(db)
        .await?;
    let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
    for (tenant, outcome, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        let side = counts.entry(tenant).or_default();
        match outcome.parse() {
            Ok(OutcomeKind::Success) => side.successes += n,
            Ok(OutcomeKind::Failure) => side.failures += n,
            Err(_) => {}
        }
    }
    Ok(counts)
}

/// Who the rollout's history names for an abort by the guard.
pub const GUARD_ACTOR: &str = "guard";

/// Takes the rollout's row for this transaction while it is still in the state
/// it was read in (an UPDATE that changes nothing but `updated_at`): on Postgres a
/// concurrent outcome that judged the same rollout waits here and then finds its
/// state changed, so a rollout is held once and aborted once. SQLite's write
/// transactions are serial already.
async fn claim(
    txn: &DatabaseTransaction,
    row: &rollout_rows::Model,
    now: DateTime<Utc>,
) -> Result<bool> {
    let claimed = rollout_rows::Entity::update_many()
        .col_expr(rollout_rows::Column::UpdatedAt, Expr::value(now))
        .filter(rollout_rows::Column::Id.eq(row.id))
        .filter(rollout_rows::Column::State.eq(&row.state))
        .exec(txn)
        .await?
        .rows_affected;
    Ok(claimed == 1)
}

/// Successes and failures of one revision (by id) in every tenant, of the
/// conversations last reported at or after `since` when given: what the rollout
/// guard judges. Reads inside the caller's transaction.
pub async fn counts(
    db: &impl ConnectionTrait,
    revision_id: i32,
    since: Option<DateTime<Utc>>,
) -> Result<Counts> {
    let mut query = outcomes::Entity::find()
        .select_only()
        .column(outcomes::Column::Outcome)
        .column_as(
            SimpleExpr::from(Func::count(Expr::col(outcomes::Column::Id))),
            "n",
        )
        .filter(outcomes::Column::RevisionId.eq(revision_id))
        .group_by(outcomes::Column::Outcome);
    if let Some(since) = since {
        query = query.filter(outcomes::Column::UpdatedAt.gte(since));
    }
    let rows: Vec<(String, i64)> = query.into_tuple().all(db).await?;
    let mut counts = Counts::default();
    for (outcome, n) in rows {
        let n = u64::try_from(n).unwrap_or(0);
        match outcome.parse() {
            Ok(OutcomeKind::Success) => counts.successes += n,
            Ok(OutcomeKind::Failure) => counts.failures += n,
            Err(_) => {}
        }
    }
    Ok(counts)
}

/// A count and its rate over a denominator (`null` while the denominator is 0).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Rate {
    pub count: u64,
    pub of: u64,
    pub rate: Option<f64>,
}

impl Rate {
    fn new(count: u64, of: u64) -> Self {
        let rate = (of > 0).then(|| count as f64 / of as f64);
        Rate { count, of, rate }
    }
}

/// What loadout counted itself for a revision.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SignalsView {
    /// Invalid-argument refusals over the tool calls checked.
    pub invalid_arguments: Rate,
    /// Declined proposals over the proposals an approver decided.
    pub declined_proposals: Rate,
    /// Failed executions over the executions that ended.
    pub failed_executions: Rate,
}

/// One revision's outcomes and signals.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RevisionOutcomes {
    pub revision: i32,
    pub successes: u64,
    pub failures: u64,
    /// Failures over reported outcomes; `null` with none.
    pub failure_rate: Option<f64>,
    /// The mean of the reported scores; `null` with none.
    pub mean_score: Option<f64>,
    /// How many outcomes carried a score.
    pub scored: u64,
    pub signals: SignalsView,
}

/// An agent's outcomes per revision, newest revision first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OutcomeReport {
    pub agent: String,
    /// The tenant counted; `null`: every tenant (an operator's view).
    pub tenant: Option<String>,
    pub revisions: Vec<RevisionOutcomes>,
}

/// What one revision has accumulated while the report is read.
#[derive(Default)]
struct Tally {
    successes: u64,
    failures: u64,
    scored: u64,
    score_sum: f64,
    signals: BTreeMap<Signal, u64>,
}

impl Tally {
    fn view(&self, revision: i32) -> RevisionOutcomes {
        let reported = self.successes + self.failures;
        let signal = |s: Signal| self.signals.get(&s).copied().unwrap_or(0);
        RevisionOutcomes {
            revision,
            successes: self.successes,
            failures: self.failures,
            failure_rate: (reported > 0).then(|| self.failures as f64 / reported as f64),
            mean_score: (self.scored > 0).then(|| self.score_sum / self.scored as f64),
            scored: self.scored,
            signals: SignalsView {
                invalid_arguments: Rate::new(
                    signal(Signal::InvalidArguments),
                    signal(Signal::ToolCalls),
                ),
                declined_proposals: Rate::new(
                    signal(Signal::ProposalsDeclined),
                    signal(Signal::ProposalsDecided),
                ),
                failed_executions: Rate::new(
                    signal(Signal::ExecutionsFailed),
                    signal(Signal::Executions),
                ),
            },
        }
    }
}

/// The agent's outcomes and signals per revision, counted in `tenant` (every
/// tenant when `None`); only revision `only` when given (404 `revision_not_found`
/// if the agent has none of that number), else every revision with anything
/// counted.
pub async fn report(
    db: &impl ConnectionTrait,
    agent_name: &str,
    tenant: Option<&str>,
    only: Option<i32>,
) -> Result<OutcomeReport> {
    let agent = agent(db, agent_name).await?;
    let numbers: BTreeMap<i32, i32> = agent_revisions::Entity::find()
        .select_only()
        .column(agent_revisions::Column::Id)
        .column(agent_revisions::Column::Number)
        .filter(agent_revisions::Column::AgentId.eq(agent.id))
        .into_tuple::<(i32, i32)>()
        .all(db)
        .await?
        .into_iter()
        .collect();
    let only_id = match only {
        Some(number) => Some(
            numbers
                .iter()
                .find(|(_, n)| **n == number)
                .map(|(id, _)| *id)
                .ok_or_else(|| revision_not_found(agent_name, number))?,
        ),
        None => None,
    };
    let mut tallies: BTreeMap<i32, Tally> = BTreeMap::new();
    if let Some(id) = only_id {
        tallies.entry(id).or_default();
    }
    let mut outcome_rows = outcomes::Entity::find()
        .select_only()
        .column(outcomes::Column::RevisionId)
        .column(outcomes::Column::Outcome)
        .column_as(
            SimpleExpr::from(Func::count(Expr::col(outcomes::Column::Id))),
            "n",
        )
        .column_as(
            SimpleExpr::from(Func::count(Expr::col(outcomes::Column::Score))),
            "scored",
        )
        .column_as(
            SimpleExpr::from(Func::sum(Expr::col(outcomes::Column::Score))),
            "score_sum",
        )
        .filter(outcomes::Column::AgentId.eq(agent.id))
        .group_by(outcomes::Column::RevisionId)
        .group_by(outcomes::Column::Outcome);
    let mut signal_rows = revision_signals::Entity::find()
        .select_only()
        .column(revision_signals::Column::RevisionId)
        .column(revision_signals::Column::Signal)
        .column(revision_signals::Column::Count)
        .filter(revision_signals::Column::AgentId.eq(agent.id));
    if let Some(tenant) = tenant {
        outcome_rows = outcome_rows.filter(outcomes::Column::TenantId.eq(tenant));
        signal_rows = signal_rows.filter(revision_signals::Column::TenantId.eq(tenant));
    }
    if let Some(id) = only_id {
        outcome_rows = outcome_rows.filter(outcomes::Column::RevisionId.eq(id));
        signal_rows = signal_rows.filter(revision_signals::Column::RevisionId.eq(id));
    }
    let outcome_rows: Vec<(i32, String, i64, i64, Option<f64>)> =
        outcome_rows.into_tuple().all(db).await?;
    for (revision_id, outcome, n, scored, score_sum) in outcome_rows {
        let tally = tallies.entry(revision_id).or_default();
        let n = u64::try_from(n).unwrap_or(0);
        match outcome.parse() {
            Ok(OutcomeKind::Success) => tally.successes += n,
            Ok(OutcomeKind::Failure) => tally.failures += n,
            Err(_) => continue,
        }
        tally.scored += u64::try_from(scored).unwrap_or(0);
        tally.score_sum += score_sum.unwrap_or(0.0);
    }
    let signal_rows: Vec<(i32, String, i64)> = signal_rows.into_tuple().all(db).await?;
    for (revision_id, signal, count) in signal_rows {
        if let Ok(signal) = signal.parse::<Signal>() {
            *tallies
                .entry(revision_id)
                .or_default()
                .signals
                .entry(signal)
                .or_default() += u64::try_from(count).unwrap_or(0);
        }
    }
    let mut revisions: Vec<RevisionOutcomes> = tallies
        .iter()
        .filter_map(|(id, tally)| numbers.get(id).map(|number| tally.view(*number)))
        .collect();
    revisions.sort_by_key(|r| std::cmp::Reverse(r.revision));
    Ok(OutcomeReport {
        agent: agent.name,
        tenant: tenant.map(str::to_owned),
        revisions,
    })
}
