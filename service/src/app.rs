//! The state every handler and background job shares, and the settings it carries.

pub mod jobs;
pub mod settings;
pub mod start;

pub use settings::Settings;

use std::sync::Arc;
use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::auth::cache::Keys;
use crate::cache::Generation;
use crate::execute::arguments::Validators;
use crate::fetch::cache::PromptCache;
use crate::fetch::encoded::Responses;
use crate::metrics::Metrics;
use crate::vocab::Clock;

/// How often the proposal sweeper runs.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(30);
/// How often a process checks the database generation for other processes' writes
/// when nothing pushes them (SQLite, or `serve --no-listen`).
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// How often a process that listens for other processes' writes (Postgres) still
/// reads the generation: the bound on staleness should a notification be lost
/// without the connection failing (a half-open TCP connection), kept at the 1 s
/// that replicas were promised before notifications existed.
pub const FALLBACK_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How often the webhook deliverer looks for due deliveries when nothing nudged it.
pub const WEBHOOK_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long the deliverer waits after a nudge (an event recorded in this process)
/// before it looks: the nudge comes before the change's commit.
pub const WEBHOOK_NUDGE_DELAY: Duration = Duration::from_millis(25);
/// The first wait before the listener tries to reconnect, doubled after each
/// failure up to [`LISTEN_BACKOFF_MAX`].
pub const LISTEN_BACKOFF_MIN: Duration = Duration::from_millis(250);
/// The longest wait between the listener's attempts to reconnect.
pub const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(4);

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub db: DatabaseConnection,
    /// Open while the database does not answer: requests fail fast (`http::trace::edge`).
    pub breaker: crate::db::outage::Breaker,
    /// The configuration generation every cached entry is stamped with, and the
    /// cache's hit and miss counters.
    pub generation: Arc<Generation>,
    /// Authenticated keys (`auth::cache`).
    pub keys: Keys,
    /// Loaded agents, the channels and users' instructions (the prompt service's).
    pub prompt_cache: PromptCache,
    /// Whole encoded GET responses (the fetch path's).
    pub responses: Responses,
    /// Tools' compiled argument validators (the action path's).
    pub validators: Validators,
    pub metrics: Metrics,
    pub clock: Arc<dyn Clock>,
    /// The configuration, as `serve`'s flags gave it (`settings`).
    pub settings: Settings,
    /// The one outbound HTTP client and its address check, built from
    /// `settings.connectors` when the state is.
    pub outbound: crate::connectors::client::Outbound,
    /// The keys connectors' header values are sealed with (`LOADOUT_SECRETS_KEY`,
    /// `--secrets-key-file`, or beside an embedded SQLite database); none may be given.
    pub secrets: crate::secrets::Keyring,
    /// Set on SIGTERM: `/ready` answers 503 while requests are still served, so a
    /// balancer takes this replica out before it stops accepting.
    pub draining: std::sync::atomic::AtomicBool,
    /// Failed authentications per client address (`--max-auth-failures`).
    pub auth_failures: crate::auth::failures::Failures,
    /// Configuration plans per key (`--plans-per-minute`).
    pub plans: crate::auth::failures::Failures<i32>,
    /// The console's single sign-on (`--oidc-*`), off unless configured.
    pub sso: crate::auth::sso::Sso,
    /// The change stream's hub: the outbox read once per generation, broadcast.
    pub changes: Arc<crate::changes::Hub>,
}

impl std::ops::Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// The state `settings` describe over `db`: reads the current generation so the
    /// caches start in step with the database, sizes them by `--cache-mib`, and
    /// builds the outbound client once. `secrets` and `clock` are given because
    /// where they come from depends on the caller (`app::start`).
    pub async fn new(
        db: DatabaseConnection,
        settings: Settings,
        secrets: crate::secrets::Keyring,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let outbound = settings.connectors.outbound()?;
        let sso = crate::auth::sso::Sso::new(&settings.sso)?;
        let current = crate::db::generation::current(&db)
            .await
            .context("cannot read the configuration generation")?;
        let mut generation = Generation::new(current);
        generation.set_key_trust(settings.key_trust());
        let generation = Arc::new(generation);
        let budget = settings.cache_bytes();
        let counts = &generation.counts;
        let tenants = &settings.tenants;
        let streams = crate::changes::bounds::Streams::new(
            tenants.max_streams_per_tenant,
            tenants.max_streams,
        );
        let changes = Arc::new(crate::changes::Hub::new(streams, tenants.stream_history));
        changes
            .prime(&db, clock.now())
            .await
            .context("cannot read the outbox for the change stream")?;
        Ok(Self(Arc::new(Inner {
            db,
            breaker: Default::default(),
            keys: Keys::new(counts.clone()),
            prompt_cache: PromptCache::new(budget, counts.clone()),
            responses: Responses::new(budget, counts.clone()),
            validators: Validators::new(budget, counts.clone()),
            metrics: Metrics::new(&generation),
            generation,
            clock,
            outbound,
            secrets,
            draining: Default::default(),
            auth_failures: crate::auth::failures::Failures::new(
                settings.connections.max_auth_failures,
            ),
            plans: crate::auth::failures::Failures::new(settings.tenants.plans_per_minute),
            sso,
            changes,
            settings,
        })))
    }

    /// What the prompt service reads through, lent from this state.
    pub fn prompts(&self) -> crate::fetch::Prompts<'_> {
        crate::fetch::Prompts {
            db: &self.db,
            cache: &self.prompt_cache,
            generation: &self.generation,
            clock: &*self.clock,
            max_prompt_bytes: self.settings.max_prompt_bytes,
        }
    }

    /// What a write takes, lent from this state: its time from the state's clock,
    /// and the request's `Idempotency-Key` (`None` where there is none).
    pub fn writer<'a>(
        &'a self,
        key: Option<&'a crate::db::idempotency::Pending>,
    ) -> crate::db::Writer<'a> {
        crate::db::Writer {
            db: &self.db,
            generation: &self.generation,
            now: self.clock.now(),
            key,
        }
    }

    /// What running a tool takes, lent from this state.
    pub fn runner(&self) -> crate::actions::Runner<'_> {
        crate::actions::Runner {
            db: &self.db,
            generation: &self.generation,
            outbound: &self.outbound,
            secrets: &self.secrets,
            clock: &self.clock,
        }
    }

    /// What a label write takes, lent from this state; a change request waits as
    /// long as a `requires_approval` proposal.
    pub fn label_writing(&self) -> crate::promotion::labels::Writing<'_> {
        crate::promotion::labels::Writing {
            db: &self.db,
            generation: &self.generation,
            request_ttl: self
                .settings
                .proposals
                .ttl(crate::vocab::Tier::RequiresApproval),
            now: self.clock.now(),
            evals: &self.settings.evals,
        }
    }

    /// What delivering webhooks takes, lent from this state.
    pub fn deliverer(&self) -> crate::webhooks::deliver::Deliverer<'_> {
        crate::webhooks::deliver::Deliverer {
            db: &self.db,
            outbound: &self.outbound,
            keyring: &self.secrets,
            policy: (&self.settings.webhooks).into(),
            clock: &*self.clock,
        }
    }

    /// What reading a connector's server takes, lent from this state.
    pub fn remote(&self) -> crate::connectors::sync::Remote<'_> {
        crate::connectors::sync::Remote {
            outbound: &self.outbound,
            secrets: &self.secrets,
            limits: self.settings.connectors.list_limits(),
        }
    }
}
