//! What loadout records itself per revision (issue 26, item 2): counters per
//! tenant, revision and [`Signal`], each upserted (`count = count + 1`) in the
//! transaction of the event it counts, so a counter never disagrees with the
//! ledger and costs one statement per event.
//!
//! Where each is counted: tool calls and invalid-argument refusals by the tool
//! call (`actions::call`: a valid call with its proposal, a refused one on its
//! own), decisions and declines and executions by the ledger's moves
//! (`actions::ledger`), for the revision the call was validated under
//! (`proposals.revision_id`).

use chrono::{DateTime, Utc};
use entity::revision_signals as signals;
use sea_orm::sea_query::{Expr, ExprTrait, OnConflict};
use sea_orm::{ConnectionTrait, DbErr, EntityTrait, Set};

crate::closed_set! {
    /// A counter loadout keeps per revision.
    pub enum Signal as "signal" {
        /// Tool calls whose arguments were checked (the denominator of refusals).
        ToolCalls = "tool_calls",
        /// Tool calls refused because their arguments did not match the schema.
        InvalidArguments = "invalid_arguments",
        /// Proposals an approver approved or declined (auto approvals are not decisions).
        ProposalsDecided = "proposals_decided",
        /// Proposals an approver declined.
        ProposalsDeclined = "proposals_declined",
        /// Executions that finished (or were lost), successful or not.
        Executions = "executions",
        /// Executions that failed (an executor's failure, or an outcome lost in a crash).
        ExecutionsFailed = "executions_failed",
    }
}

/// Where a signal is counted: which tenant, agent and revision (by id).
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub tenant: &'a str,
    pub agent_id: i32,
    pub revision_id: i32,
}

/// Adds one to each of `signals` at `at`, inside the caller's transaction.
pub async fn count(
    db: &impl ConnectionTrait,
    at: At<'_>,
    signals: &[Signal],
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    for signal in signals {
        let row = signals::ActiveModel {
            tenant_id: Set(at.tenant.to_owned()),
            agent_id: Set(at.agent_id),
            revision_id: Set(at.revision_id),
            signal: Set(signal.as_str().to_owned()),
            count: Set(1),
            updated_at: Set(now),
            ..Default::default()
        };
        let add_one = OnConflict::columns([
            signals::Column::TenantId,
            signals::Column::RevisionId,
            signals::Column::Signal,
        ])
        .value(
            signals::Column::Count,
            Expr::col((signals::Entity, signals::Column::Count)).add(1),
        )
        .value(signals::Column::UpdatedAt, Expr::value(now))
        .to_owned();
        signals::Entity::insert(row)
            .on_conflict(add_one)
            .exec_without_returning(db)
            .await?;
    }
    Ok(())
}
