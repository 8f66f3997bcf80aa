//! Background jobs of a serving process: the proposal sweeper, and the generation
//! listener and poller that bring other processes' writes into the cache.

use std::sync::Arc;
use std::time::Duration;

use super::{
    AppState, Inner, LISTEN_BACKOFF_MAX, LISTEN_BACKOFF_MIN, POLL_INTERVAL, SWEEP_INTERVAL,
    WEBHOOK_NUDGE_DELAY, WEBHOOK_POLL_INTERVAL,
};
use crate::db::generation::listen::{Heard, Listener};

impl AppState {
    /// Sweeps the proposal ledger now and every [`SWEEP_INTERVAL`]: dead executions fail
    /// with outcome unknown, approvals a crash left unclaimed are claimed and run (or
    /// ended unrun when their tool may no longer run for the agent), undecided
    /// proposals expire.
    pub fn spawn_proposal_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let now = state.clock.now();
                match crate::actions::ledger::sweep(
                    &state.db,
                    now,
                    state.settings.proposals.lease(),
                )
                .await
                {
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
                            let resumed = crate::actions::decide::approve_as(
                                &app.runner(),
                                &tenant,
                                "sweeper",
                                id,
                                None,
                            )
                            .await;
                            match resumed {
                                // Its tool or agent went meanwhile: ended unrun, by "sweeper".
                                Err(e) if e.code == crate::actions::decide::TOOL_UNAVAILABLE => {
                                    tracing::info!(proposal = id, reason = %e.message, "an approved proposal ended without running");
                                }
                                Err(e) => {
                                    tracing::warn!(proposal = id, error = %e.message, "cannot resume an approved proposal");
                                }
                                Ok(_) => {}
                            }
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot sweep the proposal ledger"),
                }
                match crate::promotion::change_requests::expire_due(&state.db, now).await {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(expired = n, "change requests expired"),
                    Err(e) => tracing::warn!(error = %e.message, "cannot expire change requests"),
                }
            }
        })
    }

    /// Delivers webhooks: every [`WEBHOOK_POLL_INTERVAL`], [`WEBHOOK_NUDGE_DELAY`]
    /// after an event is recorded in this process, and whenever an attempt ends, it
    /// fans out recorded events and starts due deliveries into the free slots
    /// (`webhooks::deliver::pick`); attempts run side by side and none waits for
    /// another.
    pub fn spawn_webhook_deliverer(&self) -> tokio::task::JoinHandle<()> {
        use crate::webhooks::deliver::{self, Due, InFlight};
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut running: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
            let mut started: std::collections::HashMap<tokio::task::Id, Due> = Default::default();
            let mut in_flight = InFlight::default();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(WEBHOOK_POLL_INTERVAL) => {}
                    _ = crate::events::recorded().notified() => {
                        tokio::time::sleep(WEBHOOK_NUDGE_DELAY).await;
                    }
                    Some(ended) = running.join_next_with_id(), if !running.is_empty() => {
                        let id = match &ended {
                            Ok((id, _)) => *id,
                            Err(e) => e.id(),
                        };
                        if let Some(due) = started.remove(&id) {
                            in_flight.finish(&due);
                        }
                    }
                }
                let Some(state) = weak.upgrade() else { return };
                let app = AppState(state);
                let settings = &app.settings.webhooks;
                loop {
                    match crate::webhooks::fan_out::run(
                        &app.db,
                        settings.webhook_max_pending,
                        app.clock.now(),
                    )
                    .await
                    {
                        Ok(n) if n as u64 == crate::webhooks::fan_out::EVENTS_PER_PASS => continue,
                        Ok(_) => break,
                        Err(e) => {
                            tracing::warn!(error = %e.chain(), "cannot fan out webhook events");
                            break;
                        }
                    }
                }
                let limits = deliver::Concurrency::from(settings);
                if in_flight.len() >= limits.total {
                    continue;
                }
                let now = app.clock.now();
                let due = match deliver::due(&app.db, now).await {
                    Ok(due) => due,
                    Err(e) => {
                        tracing::warn!(error = %e.chain(), "cannot read due webhook deliveries");
                        continue;
                    }
                };
                for due in deliver::pick(due, &in_flight, limits) {
                    let claimed = match deliver::claim(&app.deliverer(), due.id, now).await {
                        Ok(Some(row)) => row,
                        Ok(None) => continue,
                        Err(e) => {
                            tracing::warn!(error = %e.chain(), "cannot claim a webhook delivery");
                            break;
                        }
                    };
                    in_flight.start(&due);
                    let app = app.clone();
                    let handle = running.spawn(async move {
                        if let Err(e) = deliver::attempt(&app.deliverer(), claimed).await {
                            tracing::warn!(error = %e.chain(), "a webhook delivery could not be recorded");
                        }
                    });
                    started.insert(handle.id(), due);
                }
            }
        })
    }

    /// Polls the database generation every [`POLL_INTERVAL`] until the state is
    /// dropped everywhere else.
    pub fn spawn_generation_poller(&self) -> tokio::task::JoinHandle<()> {
        self.spawn_generation_poller_every(POLL_INTERVAL)
    }

    /// Polls the database generation every `interval` until the state is dropped
    /// everywhere else.
    pub fn spawn_generation_poller_every(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                read_generation(&state).await;
            }
        })
    }

    /// On Postgres, listens for other processes' commits and raises the cache's
    /// generation as each arrives; `None` on SQLite. It never ends the process: a
    /// lost connection is reopened with a backoff, and each time it listens again it
    /// reads the generation at once, so a write committed meanwhile is not left to
    /// the poll. Once the state is dropped everywhere else it stops at its next
    /// notification, reconnect or failed attempt.
    pub fn spawn_generation_listener(&self) -> Option<tokio::task::JoinHandle<()>> {
        let options = crate::db::generation::listen::options(&self.db)?;
        let weak = Arc::downgrade(&self.0);
        Some(tokio::spawn(async move {
            let mut backoff = LISTEN_BACKOFF_MIN;
            let mut failing = false;
            loop {
                let mut listener = match Listener::connect(&options).await {
                    Ok(listener) => listener,
                    Err(e) => {
                        if weak.strong_count() == 0 {
                            return;
                        }
                        if !failing {
                            tracing::warn!(error = %e, "cannot listen for other replicas' changes; retrying (the poll still runs)");
                            failing = true;
                        }
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(LISTEN_BACKOFF_MAX);
                        continue;
                    }
                };
                if failing {
                    tracing::info!("listening for other replicas' changes again");
                }
                // Listening now; anything committed before is read here.
                let mut heard = Heard::Gap;
                loop {
                    let Some(state) = weak.upgrade() else { return };
                    match heard {
                        Heard::Generation(generation) => state.generation.observe(generation),
                        Heard::Gap => read_generation(&state).await,
                    }
                    drop(state);
                    heard = match listener.next().await {
                        Ok(heard) => {
                            backoff = LISTEN_BACKOFF_MIN;
                            heard
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "lost the connection listening for other replicas' changes; reconnecting");
                            failing = true;
                            break;
                        }
                    };
                }
                tokio::time::sleep(backoff).await;
            }
        }))
    }

    /// Carries evaluation runs out (`evals::runner`): claims queued runs, and runs
    /// whose process died, into `--eval-concurrency` slots.
    pub fn spawn_eval_runner(&self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(self.eval_runner().serve())
    }

    /// The runner this process's runs go through (tests drive it directly).
    pub fn eval_runner(&self) -> crate::evals::runner::Runner {
        crate::evals::runner::Runner {
            db: self.db.clone(),
            outbound: self.outbound.clone(),
            keyring: Arc::new(self.secrets.clone()),
            clock: self.clock.clone(),
            settings: self.settings.evals.clone(),
            owner: crate::evals::runner::owner_id(),
            retry: crate::evals::chat::Retry::default(),
        }
    }
}

impl AppState {
    /// Makes sure this process serves at generation `wanted` or later: one that has
    /// not heard of it yet (another replica's commit, its notification still on
    /// the way) reads the generation now. A failed read is left to the poll.
    pub async fn at_least(&self, wanted: i64) {
        if self.generation.current() < wanted {
            read_generation(&self.0).await;
        }
    }
}

/// Reads the database generation into the cache; a failure is logged and left to
/// the next poll.
async fn read_generation(state: &Inner) {
    match crate::db::generation::current(&state.db).await {
        Ok(generation) => state.generation.observe(generation),
        Err(e) => tracing::warn!(error = %e, "cannot read the configuration generation"),
    }
}
