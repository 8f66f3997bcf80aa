//! Write tools don't act, they propose: tool calls ([`call`]), the proposal ledger
//! ([`ledger`]), what an approver reads ([`describe`], [`views`]) and decides
//! ([`decide`]), users' preferences, and the connectors operators keep and sync
//! ([`connector`]). What carries out an approved call (the executors, connector
//! kinds, argument validation) is [`crate::execute`], below the registry.

pub mod call;
pub mod connector;
pub mod decide;
pub mod describe;
pub mod ledger;
pub mod preferences;
pub mod requirements;
pub mod views;
pub mod withdrawn;

use std::collections::BTreeMap;
use std::sync::Arc;

use sea_orm::{DatabaseConnection, DbErr};

use crate::cache::Generation;
use crate::execute::connector::Outbound;
use crate::execute::executors::Executors;
use crate::secrets::Keyring;
use crate::vocab::Tier;

/// How long a proposal waits for a decision unless configured per tier.
pub const DEFAULT_PROPOSAL_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// How long a proposal of a tool of `tier` waits for a decision, given the
/// configured lifetimes per tier (`serve --proposal-ttl TIER=SECONDS`).
pub fn proposal_ttl(ttls: &BTreeMap<Tier, chrono::TimeDelta>, tier: Tier) -> chrono::TimeDelta {
    ttls.get(&tier).copied().unwrap_or(DEFAULT_PROPOSAL_TTL)
}

/// What running a tool takes, lent by the state: the database, the generation
/// (observed after a run, since a builtin may change what prompts render), and
/// the outbound client and secrets the executors use.
#[derive(Clone, Copy)]
pub struct Runner<'a> {
    pub db: &'a DatabaseConnection,
    /// Shared, so a run finished in its own task can still observe it.
    pub generation: &'a Arc<Generation>,
    pub outbound: &'a Outbound,
    pub secrets: &'a Keyring,
}

impl Runner<'_> {
    /// The executors as the database binds them now.
    pub async fn executors(&self) -> Result<Executors, DbErr> {
        let executors = Executors::load(self.db, Some(self.outbound.clone())).await?;
        Ok(executors.with_keyring(self.secrets.clone()))
    }
}
