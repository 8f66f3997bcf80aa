//! Background jobs of a serving process: the proposal sweeper and the generation poller.

use std::sync::Arc;

use super::{AppState, POLL_INTERVAL, SWEEP_INTERVAL};

impl AppState {
    /// Sweeps the proposal ledger now and every [`SWEEP_INTERVAL`]: dead executions fail
    /// with outcome unknown, approvals a crash left unclaimed are claimed and run,
    /// undecided proposals expire.
    pub fn spawn_proposal_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let now = state.clock.now();
                match crate::actions::ledger::sweep(&state.db, now, state.proposal_lease).await {
                    Ok(found) => {
                        let m = &state.metrics;
                        m.orphans_failed.inc_by(found.failed.len() as u64);
                        m.orphans_approved.set(found.approved.len() as u64);
                        m.proposals_expired.inc_by(found.expired.len() as u64);
                        if !found.failed.is_empty() {
                            tracing::warn!(failed = ?found.failed, "executions presumed dead; outcome unknown (`loadout proposals orphans` lists them)");
                        }
                        // Approved but never claimed: a crash between approval and
                        // claim. They never ran, so claiming and running them is safe.
                        for (tenant, id) in found.approved {
                            let app = AppState(state.clone());
                            let resumed =
                                crate::actions::decide::approve_as(&app, &tenant, "sweeper", id)
                                    .await;
                            if let Err(e) = resumed {
                                tracing::warn!(proposal = id, error = %e.message, "cannot resume an approved proposal");
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot sweep the proposal ledger"),
                }
            }
        })
    }

    /// Polls the database generation until the state is dropped everywhere else.
    pub fn spawn_generation_poller(&self) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                match crate::db::generation::current(&state.db).await {
                    Ok(generation) => state.cache.observe(generation),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the configuration generation")
                    }
                }
            }
        })
    }
}
