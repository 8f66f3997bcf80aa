//! The start-up path `serve` takes, and the test harness with it: the secrets key,
//! then migrate, seed, check and the first key under the migration lock, then the
//! serving pool and the state; the background jobs on request.

use chrono::{DateTime, Utc};
use std::sync::Arc;

use sea_orm::DatabaseConnection;

use crate::app::{AppState, Settings};
use crate::auth::keys::{self, Role};
use crate::db::{self, migrate};
use crate::registry::{catalog::Seeds, seed};
use crate::vocab::Clock;

/// A state ready to serve, and the operator key made for a database that never had
/// a key (its name and the key, shown once).
pub struct Started {
    pub state: AppState,
    pub new_key: Option<(String, String)>,
}

/// Prepares the database at `database_url` as `settings` say and builds the state.
pub async fn start(
    database_url: &str,
    settings: Settings,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<Started> {
    let (secrets, key_source) = settings.secrets.keyring(database_url, true)?;
    crate::secrets::flags::announce(&secrets, &key_source);
    let new_key = {
        // Its own pool: prepared statements cached before a migration's ALTER TABLE
        // must not serve requests afterwards.
        // Migrate, seed and the first key all under the migration lock: two
        // replicas starting together on a fresh database take turns, and the second
        // finds the schema, the seed and a key already there (one key printed).
        let db = db::connect(database_url).await?;
        let new_key = migrate::with_lock(&db, async || {
            if settings.no_migrate {
                migrate::ensure_current(&db).await?;
            } else {
                migrate::apply(&db, migrate::MigrateCommand::Up { n: None }).await?;
                let report = seed::run(&db, &Seeds::embedded()?, clock.now()).await?;
                tracing::info!(%report, "migrated and seeded");
            }
            publish_unrecorded(&db, clock.now()).await?;
            check_registry(&db, settings.allow_drift, &secrets).await?;
            bootstrap_operator_key(&db, clock.now()).await
        })
        .await;
        db.close().await.ok();
        new_key?
    };
    let db = db::connect_with(database_url, settings.replicas.db_pool_size).await?;
    let state = AppState::new(db, settings, secrets, clock).await?;
    Ok(Started { state, new_key })
}

/// The background jobs of a serving process; dropping them stops them.
pub struct Jobs(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Jobs {
    fn drop(&mut self) {
        for job in &self.0 {
            job.abort();
        }
    }
}

impl AppState {
    /// Starts the proposal sweeper, the generation poller and (on Postgres, unless
    /// `--no-listen`) the listener for other processes' changes.
    pub fn spawn_jobs(&self) -> Jobs {
        let replicas = &self.settings.replicas;
        let listener = match replicas.no_listen {
            true => None,
            false => self.spawn_generation_listener(),
        };
        let every = replicas
            .generation_poll_ms
            .map(std::time::Duration::from_millis)
            .unwrap_or(match listener {
                Some(_) => crate::app::FALLBACK_POLL_INTERVAL,
                None => crate::app::POLL_INTERVAL,
            });
        let mut jobs = vec![
            self.spawn_generation_poller_every(every),
            self.spawn_proposal_sweeper(),
        ];
        jobs.extend(listener);
        jobs.push(tokio::spawn(
            self.changes
                .clone()
                .serve(self.db.clone(), self.generation.clone()),
        ));
        if !self.settings.webhooks.no_webhook_delivery {
            jobs.push(self.spawn_webhook_deliverer());
        }
        if !self.settings.evals.no_eval_runner {
            jobs.push(self.spawn_eval_runner());
        }
        Jobs(jobs)
    }
}

/// Publishes every agent whose served content is not a revision yet: on the first
/// start after migration 16, revision 1 per agent with `production` and `latest`
/// on it. Afterwards it finds every agent published (each write publishes) and
/// writes nothing. It takes its turn with the API's writes (the generation row).
pub(crate) async fn publish_unrecorded(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
) -> anyhow::Result<()> {
    let txn = db::begin_write(db).await?;
    db::generation::bump(&txn).await?;
    let published = crate::releases::publish_all(&txn, Some("migration"), now).await?;
    txn.commit().await?;
    let created = published.iter().filter(|p| p.created).count();
    if created > 0 {
        tracing::info!(
            revisions = created,
            "published the agents' current configuration"
        );
    }
    Ok(())
}

/// The same check as `loadout check`: errors stop the start unless `allow_drift`.
async fn check_registry(
    db: &DatabaseConnection,
    allow_drift: bool,
    secrets: &crate::secrets::Keyring,
) -> anyhow::Result<()> {
    let catalog = Seeds::embedded()?.catalog;
    let executors = crate::execute::executors::Executors::load(db, None)
        .await?
        .with_keyring(secrets.clone());
    let report = crate::registry::check::run(db, &catalog, &executors).await?;
    if allow_drift {
        for problem in report
            .problems
            .iter()
            .filter(|p| p.severity == crate::registry::check::Severity::Error)
        {
            tracing::warn!(%problem, "registry check (allowed by --allow-drift)");
        }
    }
    if report.warnings > 0 {
        tracing::info!(
            warnings = report.warnings,
            "registry check found warnings; `loadout check` lists them"
        );
    }
    if !report.ok && !allow_drift {
        eprint!("{}", report.text());
        anyhow::bail!(
            "the registry check found {} errors (listed above); fix them, or start with --allow-drift",
            report.errors
        );
    }
    Ok(())
}

/// The first key of a database that never had one: an operator key named
/// `operator` (returned with its name, for the caller to print once it is
/// committed). Count and insert are one write transaction, so two processes cannot
/// both find no key. A database whose keys were all revoked gets none: printing a
/// working key to whoever reads the log would undo the revocation. The operator
/// makes one with `loadout keys create`, which needs the database itself.
async fn bootstrap_operator_key(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
) -> anyhow::Result<Option<(String, String)>> {
    let txn = db::begin_write(db).await?;
    if keys::count_ever(&txn).await? > 0 {
        if keys::count_usable(&txn).await? == 0 {
            tracing::warn!(
                "every API key is revoked; make one with `loadout keys create --role operator --name NAME`"
            );
        }
        return Ok(None);
    }
    let name = "operator".to_owned();
    let key = keys::create(&txn, &name, Role::Operator, now).await?;
    crate::auth::signers::grant_first(&txn, &name, now).await?;
    txn.commit().await?;
    Ok(Some((name, key)))
}
