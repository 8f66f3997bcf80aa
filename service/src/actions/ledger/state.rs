//! A proposal's states, and what refuses a move: [`LedgerError`], the guards'
//! reasons, and the rules read from a row ([`approvable`], [`retryable`]).

use chrono::{DateTime, Utc};
use entity::proposals;
use sea_orm::DbErr;
use serde_json::Value;

crate::closed_set! {
    /// A proposal's state.
    pub enum State as "proposal state" {
        Proposed = "proposed",
        Approved = "approved",
        Executing = "executing",
        Succeeded = "succeeded",
        Failed = "failed",
        Declined = "declined",
        Expired = "expired",
    }
}

/// Why a ledger call did not happen: the ledger's one error (`From` it into the
/// domain's `Error` is in `actions::decide`).
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No such proposal for this tenant (another tenant's proposal looks the same).
    #[error("no such proposal")]
    NotFound,
    /// The proposal is in a state this call cannot move it from, or a guard refused
    /// the move (`reason` says which: expired, not retryable, no attempts left).
    #[error("the proposal is {state}")]
    Conflict {
        state: String,
        reason: Option<&'static str>,
        proposal: Box<proposals::Model>,
    },
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// The reasons a guard gives.
pub const EXPIRED: &str = "it expired before it was approved";
pub const OUTCOME_UNKNOWN: &str =
    "its last outcome is unknown (it may have run): check the backend before calling again";
pub const NOT_RETRYABLE: &str = "its last attempt failed in a way a retry cannot fix";
pub const NO_ATTEMPTS_LEFT: &str = "it has no attempts left";

/// The refusal of a move from the state `row` is in.
pub(super) fn conflict(row: proposals::Model) -> LedgerError {
    refused(row, None)
}

/// The refusal of a move, with the guard's reason when a guard refused it.
pub(super) fn refused(row: proposals::Model, reason: Option<&'static str>) -> LedgerError {
    LedgerError::Conflict {
        state: row.state.clone(),
        reason,
        proposal: Box::new(row),
    }
}

/// Why an approval of `row` cannot happen now, if it cannot: a proposal past its
/// `expires_at` is expired, and a decided one (declined, failed, expired) stays so.
/// Approved, executing and succeeded proposals may be approved again (answered as
/// they are, or, if a crash left one `approved`, claimed).
pub fn approvable(row: &proposals::Model, now: DateTime<Utc>) -> Result<(), LedgerError> {
    match row.state.parse() {
        Ok(State::Proposed) if row.expires_at <= now => Err(refused(row.clone(), Some(EXPIRED))),
        Ok(State::Proposed | State::Approved | State::Executing | State::Succeeded) => Ok(()),
        _ => Err(conflict(row.clone())),
    }
}

/// Why a retry of `row` cannot happen, if it cannot: only a failed proposal with
/// attempts left, whose outcome is known and whose failure a retry may fix.
pub fn retryable(row: &proposals::Model) -> Result<(), LedgerError> {
    let not_retryable = row
        .result
        .as_ref()
        .and_then(|r| r.get("retryable"))
        .and_then(Value::as_bool)
        == Some(false);
    let reason = if row.state.parse() != Ok(State::Failed) {
        return Err(conflict(row.clone()));
    } else if row.outcome_unknown {
        Some(OUTCOME_UNKNOWN)
    } else if not_retryable {
        Some(NOT_RETRYABLE)
    } else if row.attempts >= row.max_attempts {
        Some(NO_ATTEMPTS_LEFT)
    } else {
        None
    };
    match reason {
        Some(reason) => Err(refused(row.clone(), Some(reason))),
        None => Ok(()),
    }
}
