//! The state every handler and background job shares, and the settings it carries.

pub mod jobs;

use std::sync::Arc;
use std::time::Duration;

use sea_orm::DatabaseConnection;

use crate::execute::arguments::Validators;
use crate::auth::cache::Keys;
use crate::cache::{DEFAULT_BUDGET, Generation};
use crate::fetch::cache::PromptCache;
use crate::fetch::encoded::Responses;
use crate::metrics::Metrics;
use crate::registry::Tier;
use crate::vocab::Clock;

/// How long an execution may run before the sweeper presumes its process dead (default).
pub const PROPOSAL_LEASE: chrono::TimeDelta = chrono::TimeDelta::minutes(5);
pub use crate::actions::DEFAULT_PROPOSAL_TTL;
/// Largest rendered prompt unless configured: 4 MiB, some 500 times the seeded
/// prompt, yet small enough that a few hundred renders at once fit in memory.
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 4 * 1024 * 1024;
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
/// The first wait before the listener tries to reconnect, doubled after each
/// failure up to [`LISTEN_BACKOFF_MAX`].
pub const LISTEN_BACKOFF_MIN: Duration = Duration::from_millis(250);
/// The longest wait between the listener's attempts to reconnect.
pub const LISTEN_BACKOFF_MAX: Duration = Duration::from_secs(4);

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

/// Where the MCP endpoint may be reached from.
#[derive(Clone, Debug)]
pub struct McpOptions {
    /// `Host` header values rmcp accepts (DNS rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// Browser `Origin`s allowed; a request with any other `Origin` is refused.
    pub allowed_origins: Vec<String>,
    /// Sessions one key may hold open at once (`--mcp-max-sessions-per-key`).
    pub max_sessions_per_key: usize,
    /// Sessions this process holds open at once (`--mcp-max-sessions`).
    pub max_sessions: usize,
}

/// MCP sessions one key may hold open, by default: a few clients' worth.
pub const DEFAULT_MCP_SESSIONS_PER_KEY: usize = 16;
/// MCP sessions a process holds open, by default (each is a task, a few
/// channels and at most 8 KiB of the client's `initialize`).
pub const DEFAULT_MCP_SESSIONS: usize = 4096;

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            allowed_hosts: ["localhost", "127.0.0.1", "::1"]
                .map(str::to_owned)
                .to_vec(),
            allowed_origins: Vec::new(),
            max_sessions_per_key: DEFAULT_MCP_SESSIONS_PER_KEY,
            max_sessions: DEFAULT_MCP_SESSIONS,
        }
    }
}

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
    pub max_template_bytes: usize,
    /// Largest rendered prompt (`serve --max-prompt-bytes`): renders stop before it,
    /// and saves whose worst case passes it are refused.
    pub max_prompt_bytes: usize,
    /// The one outbound HTTP client and its address check (`--connector-allow`,
    /// `--connector-ca`).
    pub outbound: crate::execute::connector::Outbound,
    /// Who may reach the MCP endpoint from where (`--mcp-allowed-host`, `--mcp-allowed-origin`).
    pub mcp: McpOptions,
    /// How much of an MCP server's `tools/list` a sync reads (`--connector-max-tools`,
    /// `--connector-max-pages`).
    pub sync_limits: crate::execute::connector::mcp::ListLimits,
    /// The keys connectors' header values are sealed with (`LOADOUT_SECRETS_KEY`,
    /// `--secrets-key-file`, or beside an embedded SQLite database); none by default.
    pub secrets: crate::secrets::Keyring,
    /// How long an execution may hold a proposal before the sweeper presumes it dead.
    pub proposal_lease: chrono::TimeDelta,
    /// How long a proposal waits for a decision, by approval tier (default 24 h).
    pub proposal_ttls: std::collections::BTreeMap<Tier, chrono::TimeDelta>,
    /// Set on SIGTERM: `/ready` answers 503 while requests are still served, so a
    /// balancer takes this replica out before it stops accepting.
    pub draining: std::sync::atomic::AtomicBool,
    /// Failed authentications per client address (`--max-auth-failures`).
    pub auth_failures: crate::auth::failures::Failures,
}

impl std::ops::Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Reads the current generation so the cache starts in step with the database.
    pub async fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        max_template_bytes: usize,
    ) -> Result<Self, sea_orm::DbErr> {
        Self::with_connector_allow(db, clock, max_template_bytes, Vec::new()).await
    }

    /// Like [`AppState::new`], letting connectors reach the given private addresses.
    pub async fn with_connector_allow(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        max_template_bytes: usize,
        connector_allow: Vec<std::net::IpAddr>,
    ) -> Result<Self, sea_orm::DbErr> {
        let outbound = crate::execute::connector::Outbound::new(connector_allow, None)
            .map_err(|e| sea_orm::DbErr::Custom(e.to_string()))?;
        let generation = crate::db::generation::current(&db).await?;
        let generation = Arc::new(Generation::new(generation));
        let metrics = Metrics::new(&generation);
        Ok(Self(Arc::new(Inner {
            db,
            breaker: Default::default(),
            keys: Keys::new(generation.counts.clone()),
            prompt_cache: PromptCache::new(DEFAULT_BUDGET, generation.counts.clone()),
            responses: Responses::new(DEFAULT_BUDGET, generation.counts.clone()),
            validators: Validators::new(DEFAULT_BUDGET, generation.counts.clone()),
            generation,
            metrics,
            clock,
            max_template_bytes,
            max_prompt_bytes: DEFAULT_MAX_PROMPT_BYTES,
            outbound,
            mcp: McpOptions::default(),
            sync_limits: Default::default(),
            secrets: Default::default(),
            proposal_lease: PROPOSAL_LEASE,
            proposal_ttls: std::collections::BTreeMap::new(),
            draining: Default::default(),
            auth_failures: Default::default(),
        })))
    }

    /// The same state with per-tier proposal lifetimes (`serve --proposal-ttl TIER=SECONDS`).
    /// Call before the state is shared.
    pub fn with_proposal_ttls(
        mut self,
        ttls: std::collections::BTreeMap<Tier, chrono::TimeDelta>,
    ) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.proposal_ttls = ttls;
        }
        self
    }

    /// How long a proposal of a tool of `tier` waits for a decision.
    pub fn proposal_ttl(&self, tier: Tier) -> chrono::TimeDelta {
        crate::actions::proposal_ttl(&self.proposal_ttls, tier)
    }

    /// The same state with a cache of another size (`serve --cache-mib`). Call before
    /// the state is shared.
    pub fn with_cache_budget(mut self, bytes: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.generation = Arc::new(Generation::new(inner.generation.current()));
            let counts = &inner.generation.counts;
            inner.keys = Keys::new(counts.clone());
            inner.prompt_cache = PromptCache::new(bytes, counts.clone());
            inner.responses = Responses::new(bytes, counts.clone());
            inner.validators = Validators::new(bytes, counts.clone());
            inner.metrics = Metrics::new(&inner.generation);
        }
        self
    }

    /// The same state trusting cached keys for `trust` without a generation read
    /// (tests; `serve` keeps [`crate::cache::KEY_TRUST`]). Call before the state is
    /// shared.
    pub fn with_key_trust(mut self, trust: std::time::Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0)
            && let Some(generation) = Arc::get_mut(&mut inner.generation)
        {
            generation.set_key_trust(trust);
        }
        self
    }

    /// The same state with another rendered-prompt limit. Call before the state is shared.
    pub fn with_max_prompt_bytes(mut self, limit: usize) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.max_prompt_bytes = limit;
        }
        self
    }

    /// The same state with another outbound client (`serve --connector-ca`). Call
    /// before the state is shared.
    pub fn with_outbound(mut self, outbound: crate::execute::connector::Outbound) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.outbound = outbound;
        }
        self
    }

    /// The same state allowing `per_minute` failed authentications per client
    /// address (`serve --max-auth-failures`). Call before the state is shared.
    pub fn with_auth_failures(mut self, per_minute: u32) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.auth_failures = crate::auth::failures::Failures::new(per_minute);
        }
        self
    }

    /// The same state with other MCP host and origin lists. Call before the state is shared.
    pub fn with_mcp(mut self, mcp: McpOptions) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.mcp = mcp;
        }
        self
    }

    /// The same state with other bounds on what a sync reads. Call before the state
    /// is shared.
    pub fn with_sync_limits(mut self, limits: crate::execute::connector::mcp::ListLimits) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.sync_limits = limits;
        }
        self
    }

    /// The same state with these secrets keys. Call before the state is shared.
    pub fn with_secrets(mut self, keyring: crate::secrets::Keyring) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.secrets = keyring;
        }
        self
    }

    /// The same state with another execution lease (`serve --proposal-lease-seconds`).
    /// Call before the state is shared.
    pub fn with_proposal_lease(mut self, lease: chrono::TimeDelta) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.proposal_lease = lease;
        }
        self
    }

    /// What the prompt service reads through, lent from this state.
    pub fn prompts(&self) -> crate::fetch::Prompts<'_> {
        crate::fetch::Prompts {
            db: &self.db,
            cache: &self.prompt_cache,
            generation: &self.generation,
            clock: &*self.clock,
            max_prompt_bytes: self.max_prompt_bytes,
        }
    }

    /// What running a tool takes, lent from this state.
    pub fn runner(&self) -> crate::actions::Runner<'_> {
        crate::actions::Runner {
            db: &self.db,
            generation: &self.generation,
            outbound: &self.outbound,
            secrets: &self.secrets,
        }
    }

    /// What reading a connector's server takes, lent from this state.
    pub fn remote(&self) -> crate::actions::connector::sync::Remote<'_> {
        crate::actions::connector::sync::Remote {
            outbound: &self.outbound,
            secrets: &self.secrets,
            limits: self.sync_limits,
        }
    }
}
