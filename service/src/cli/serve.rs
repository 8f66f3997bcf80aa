//! `loadout serve`: migrate and seed (unless told not to), give a database that
//! never had a key an operator key, then serve the API until SIGINT or SIGTERM,
//! finishing in-flight requests.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use crate::app::AppState;
use crate::auth::keys::{self, Role};
use crate::db::{self, migrate};
use crate::http;
use crate::prompt::builder::SystemClock;
use crate::registry::{Tier, catalog::Seeds, seed};

/// `serve`'s flags as typed.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "LOADOUT_BIND", default_value = "127.0.0.1:8080")]
    pub bind: std::net::SocketAddr,
    /// Also serve `/metrics`, without a key, on this address (e.g. 127.0.0.1:9090).
    #[arg(long, env = "LOADOUT_METRICS_BIND")]
    pub metrics_bind: Option<std::net::SocketAddr>,
    /// Private or loopback IPs connectors may reach (comma-separated), e.g. 127.0.0.1.
    #[arg(long, env = "LOADOUT_CONNECTOR_ALLOW", value_delimiter = ',')]
    pub connector_allow: Vec<std::net::IpAddr>,
    /// A PEM bundle of CA certificates connectors trust besides the Mozilla roots
    /// (for a private CA).
    #[arg(long, env = "LOADOUT_CONNECTOR_CA")]
    pub connector_ca: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub sync_limits: SyncLimitArgs,
    /// Host names the MCP endpoint answers to (comma-separated); loopback names when absent.
    #[arg(
        long = "mcp-allowed-host",
        env = "LOADOUT_MCP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub mcp_allowed_hosts: Vec<String>,
    /// Browser origins allowed to call the MCP endpoint (comma-separated); none when absent.
    #[arg(
        long = "mcp-allowed-origin",
        env = "LOADOUT_MCP_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub mcp_allowed_origins: Vec<String>,
    /// MCP sessions one key may hold open at once; an `initialize` over it is 429.
    #[arg(long, env = "LOADOUT_MCP_MAX_SESSIONS_PER_KEY", default_value_t = crate::app::DEFAULT_MCP_SESSIONS_PER_KEY, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub mcp_max_sessions_per_key: usize,
    /// MCP sessions this process holds open at once; an `initialize` over it is 503.
    #[arg(long, env = "LOADOUT_MCP_MAX_SESSIONS", default_value_t = crate::app::DEFAULT_MCP_SESSIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub mcp_max_sessions: usize,
    /// How long an approved proposal may wait unclaimed before the sweeper reports it.
    /// At least the longest call timeout (30 s): an executing call's own lease is its
    /// timeout plus a margin.
    #[arg(long, env = "LOADOUT_PROPOSAL_LEASE_SECONDS", default_value_t = 300, value_parser = parse_lease)]
    pub proposal_lease_seconds: u32,
    /// How long a proposal of a tier waits for a decision, e.g. requires_approval=3600;
    /// repeatable; 86400 (24 h) for any tier not given.
    #[arg(long = "proposal-ttl", env = "LOADOUT_PROPOSAL_TTL", value_delimiter = ',', value_parser = parse_ttl)]
    pub proposal_ttls: Vec<(Tier, u32)>,
    /// Start even when `loadout check` finds errors (each is logged as a warning).
    #[arg(long)]
    pub allow_drift: bool,
    /// Do not migrate or seed on start; refuse to start on an unmigrated database instead.
    #[arg(long)]
    pub no_migrate: bool,
    /// Largest prompt template accepted, in bytes.
    #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", default_value_t = crate::cli::template::DEFAULT_MAX_TEMPLATE_BYTES)]
    pub max_template_bytes: usize,
    /// Largest rendered prompt, in bytes: renders stop before it, and templates whose
    /// worst case passes it are refused (422).
    #[arg(long, env = "LOADOUT_MAX_PROMPT_BYTES", default_value_t = crate::app::DEFAULT_MAX_PROMPT_BYTES)]
    pub max_prompt_bytes: usize,
    /// How long a client may take to send a request's head, in milliseconds (also how
    /// long an idle keep-alive connection stays open).
    #[arg(long, env = "LOADOUT_HEADER_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_ms: u64,
    /// Close a connection on which no byte has moved for this many seconds.
    #[arg(long, env = "LOADOUT_IDLE_TIMEOUT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle_timeout_secs: u64,
    /// Connections served at once; more wait in the accept queue.
    #[arg(long, env = "LOADOUT_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Connections one client address may hold at once (an IPv6 address counts by
    /// its /64); one more is closed at once. Keep it well below --max-connections.
    #[arg(long, env = "LOADOUT_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_address: u64,
    /// A request's whole body must arrive within this many seconds of its head.
    #[arg(long, env = "LOADOUT_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout_secs: u64,
    /// Bytes a second a request body must average once it has taken 5 s (0: no minimum).
    #[arg(long, env = "LOADOUT_BODY_MIN_RATE", default_value_t = 1024)]
    pub body_min_rate: u64,
    /// Failed authentications (unknown, revoked or malformed keys) one client address
    /// may make per minute; past them it is answered 429 before any key is looked up.
    #[arg(long, env = "LOADOUT_MAX_AUTH_FAILURES", default_value_t = crate::http::limits::DEFAULT_FAILURES_PER_MINUTE, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_auth_failures: u32,
    /// Proxies in front of loadout (comma-separated IPs): their connections count only
    /// against --max-connections, and their `X-Forwarded-For` names the client.
    #[arg(
        long = "trusted-proxy",
        env = "LOADOUT_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Memory for the per-process cache, in MiB (half of it for encoded responses).
    #[arg(long, env = "LOADOUT_CACHE_MIB", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub cache_mib: u32,
    /// Do not LISTEN for other replicas' changes on Postgres (e.g. behind PgBouncer in
    /// transaction mode, where LISTEN does not work): rely on the poll alone.
    #[arg(long, env = "LOADOUT_NO_LISTEN", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_listen: bool,
    /// How often to read the configuration generation for other processes' writes, in
    /// milliseconds (default: 1000 on Postgres while listening, 250 otherwise).
    #[arg(long, env = "LOADOUT_GENERATION_POLL_MS", value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub generation_poll_ms: Option<u64>,
    /// On SIGTERM, keep serving this many seconds with `/ready` answering 503, so a
    /// balancer's health check takes the replica out before it stops accepting
    /// (SIGINT, Ctrl-C, stops at once).
    #[arg(long, env = "LOADOUT_DRAIN_SECONDS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=600))]
    pub drain_seconds: u64,
    /// Database connections in the serving pool (default: 4 on SQLite, 8 on Postgres).
    #[arg(long, env = "LOADOUT_DB_POOL_SIZE", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub db_pool_size: Option<u32>,
    #[command(flatten)]
    pub secrets: crate::cli::secrets::SecretsArgs,
}

/// How much of a server's `tools/list` a sync reads (`serve` and `connectors sync`).
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct SyncLimitArgs {
    /// Most tools a sync reads from one MCP server; a longer tools/list fails the sync.
    #[arg(long, env = "LOADOUT_CONNECTOR_MAX_TOOLS", default_value_t = crate::execute::connector::mcp::DEFAULT_MAX_TOOLS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub connector_max_tools: usize,
    /// Most tools/list pages a sync follows; a longer list fails the sync.
    #[arg(long, env = "LOADOUT_CONNECTOR_MAX_PAGES", default_value_t = crate::execute::connector::mcp::DEFAULT_MAX_PAGES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub connector_max_pages: usize,
}

impl From<SyncLimitArgs> for crate::execute::connector::mcp::ListLimits {
    fn from(args: SyncLimitArgs) -> Self {
        Self {
            max_tools: args.connector_max_tools,
            max_pages: args.connector_max_pages,
        }
    }
}

fn parse_lease(text: &str) -> Result<u32, String> {
    let longest = crate::execute::executors::EXECUTION_TIMEOUT.as_secs();
    match text.parse::<u32>() {
        Ok(seconds) if u64::from(seconds) >= longest => Ok(seconds),
        Ok(_) => Err(format!(
            "a lease shorter than the longest call timeout ({longest} s) would fail live calls"
        )),
        Err(_) => Err(format!("{text:?} is not a number of seconds")),
    }
}

fn parse_ttl(text: &str) -> Result<(Tier, u32), String> {
    let (tier, seconds) = text
        .split_once('=')
        .ok_or_else(|| "expected TIER=SECONDS, e.g. requires_approval=3600".to_owned())?;
    let tier: Tier = tier
        .parse()
        .map_err(|e: crate::closed::UnknownValue| e.to_string())?;
    let seconds: u32 = seconds
        .parse()
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("{seconds:?} is not a positive number of seconds"))?;
    Ok((tier, seconds))
}

impl From<ServeArgs> for Options {
    fn from(args: ServeArgs) -> Self {
        let seconds = |s: u32| chrono::TimeDelta::seconds(i64::from(s));
        Options {
            bind: args.bind,
            metrics_bind: args.metrics_bind,
            connector_allow: args.connector_allow,
            connector_ca: args.connector_ca,
            sync_limits: args.sync_limits.into(),
            mcp: crate::app::McpOptions {
                max_sessions_per_key: args.mcp_max_sessions_per_key,
                max_sessions: args.mcp_max_sessions,
                ..mcp_options(args.mcp_allowed_hosts, args.mcp_allowed_origins)
            },
            proposal_lease: seconds(args.proposal_lease_seconds),
            proposal_ttls: args
                .proposal_ttls
                .into_iter()
                .map(|(t, s)| (t, seconds(s)))
                .collect(),
            allow_drift: args.allow_drift,
            no_migrate: args.no_migrate,
            max_template_bytes: args.max_template_bytes,
            max_prompt_bytes: args.max_prompt_bytes,
            db_pool_size: args.db_pool_size,
            secrets: args.secrets,
            listen: !args.no_listen,
            generation_poll: args
                .generation_poll_ms
                .map(std::time::Duration::from_millis),
            cache_bytes: args.cache_mib as usize * 1024 * 1024,
            drain: std::time::Duration::from_secs(args.drain_seconds),
            limits: http::server::Limits {
                header_read_timeout: std::time::Duration::from_millis(args.header_timeout_ms),
                idle_timeout: std::time::Duration::from_secs(args.idle_timeout_secs),
                max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
                max_connections_per_address: usize::try_from(args.max_connections_per_address)
                    .unwrap_or(usize::MAX),
                body: http::deadline::BodyLimits {
                    timeout: std::time::Duration::from_secs(args.body_timeout_secs),
                    min_rate: args.body_min_rate,
                    grace: http::deadline::GRACE,
                },
                trusted_proxies: args.trusted_proxies,
            },
            auth_failures_per_minute: args.max_auth_failures,
        }
    }
}

/// `serve`'s settings.
#[derive(Clone, Debug)]
pub struct Options {
    pub bind: SocketAddr,
    pub metrics_bind: Option<SocketAddr>,
    pub connector_allow: Vec<std::net::IpAddr>,
    pub connector_ca: Option<std::path::PathBuf>,
    pub sync_limits: crate::execute::connector::mcp::ListLimits,
    pub mcp: crate::app::McpOptions,
    pub proposal_lease: chrono::TimeDelta,
    pub proposal_ttls: std::collections::BTreeMap<Tier, chrono::TimeDelta>,
    pub allow_drift: bool,
    pub no_migrate: bool,
    pub max_template_bytes: usize,
    pub max_prompt_bytes: usize,
    pub db_pool_size: Option<u32>,
    /// Where the secrets key comes from (made beside an embedded SQLite database).
    pub secrets: crate::cli::secrets::SecretsArgs,
    /// LISTEN for other processes' changes (Postgres only).
    pub listen: bool,
    /// How often to poll the generation; `None` picks by whether a listener runs.
    pub generation_poll: Option<std::time::Duration>,
    /// See [`ServeArgs::drain_seconds`].
    pub drain: std::time::Duration,
    pub cache_bytes: usize,
    pub limits: http::server::Limits,
    /// See [`ServeArgs::max_auth_failures`].
    pub auth_failures_per_minute: u32,
}

pub async fn run(database_url: &str, options: Options) -> anyhow::Result<()> {
    let Options {
        bind,
        metrics_bind,
        connector_allow,
        connector_ca,
        sync_limits,
        mcp,
        proposal_lease,
        proposal_ttls,
        allow_drift,
        no_migrate,
        max_template_bytes,
        max_prompt_bytes,
        db_pool_size,
        secrets,
        listen,
        generation_poll,
        cache_bytes,
        drain,
        limits,
        auth_failures_per_minute,
    } = options;
    let (secrets, key_source) = secrets.keyring(database_url, true)?;
    crate::cli::secrets::announce(&secrets, &key_source);
    {
        // Its own pool: prepared statements cached before a migration's ALTER TABLE
        // must not serve requests afterwards.
        // Migrate, seed and the first admin key all under the migration lock: two
        // replicas starting together on a fresh database take turns, and the second
        // finds the schema, the seed and a key already there (one key printed).
        let db = db::connect(database_url).await?;
        let new_key = migrate::with_lock(&db, async || {
            if no_migrate {
                migrate::ensure_current(&db).await?;
            } else {
                migrate::apply(&db, migrate::MigrateCommand::Up { n: None }).await?;
                let report = seed::run(&db, &Seeds::embedded()?).await?;
                tracing::info!(%report, "migrated and seeded");
            }
            check_registry(&db, allow_drift, &secrets).await?;
            bootstrap_operator_key(&db).await
        })
        .await?;
        db.close().await.ok();
        if let Some((name, key)) = new_key {
            println!(
                "This database had no API key, so an operator key named {name:?} was created."
            );
            println!("It is shown only this once; store it now (loadout keys create makes more):");
            println!("{key}");
        }
    }

    let outbound = outbound(connector_allow.clone(), connector_ca.as_deref())?;
    let db = db::connect_with(database_url, db_pool_size).await?;
    let state = AppState::with_connector_allow(
        db,
        Arc::new(SystemClock),
        max_template_bytes,
        connector_allow,
    )
    .await
    .context("cannot read the configuration generation")?
    .with_cache_budget(cache_bytes)
    .with_max_prompt_bytes(max_prompt_bytes)
    .with_proposal_lease(proposal_lease)
    .with_proposal_ttls(proposal_ttls)
    .with_outbound(outbound)
    .with_sync_limits(sync_limits)
    .with_auth_failures(auth_failures_per_minute)
    .with_secrets(secrets)
    .with_mcp(mcp);
    let generation_listener = listen.then(|| state.spawn_generation_listener()).flatten();
    let poller = state.spawn_generation_poller_every(generation_poll.unwrap_or(
        if generation_listener.is_some() {
            crate::app::FALLBACK_POLL_INTERVAL
        } else {
            crate::app::POLL_INTERVAL
        },
    ));
    let sweeper = state.spawn_proposal_sweeper();
    let metrics = match metrics_bind {
        Some(address) => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("cannot listen on {address} for metrics"))?;
            eprintln!(
                "loadout metrics on http://{}/metrics",
                listener.local_addr().unwrap_or(address)
            );
            let router = http::ops::metrics_router(state.clone());
            Some(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, router).await {
                    tracing::error!(error = %e, "the metrics server failed");
                }
            }))
        }
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr().unwrap_or(bind);
    tracing::info!(address = %local, "listening");
    if limits.max_connections_per_address > limits.max_connections / 2 {
        tracing::warn!(
            "--max-connections-per-address is over half of --max-connections: two client addresses can hold every connection"
        );
    }
    // Registered before anyone can read "listening": a SIGTERM sent at once drains.
    let stop = http::shutdown_signal();
    eprintln!("loadout listening on http://{local}");
    http::server::serve(
        listener,
        http::router(state.clone()),
        limits,
        drained(state, drain, stop),
    )
    .await
    .context("the server failed")?;
    poller.abort();
    if let Some(generation_listener) = generation_listener {
        generation_listener.abort();
    }
    sweeper.abort();
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    Ok(())
}

/// Resolves when the server should stop accepting: at once on SIGINT; on SIGTERM
/// after `drain`, during which `/ready` answers 503 and requests are served.
async fn drained(
    state: crate::app::AppState,
    drain: std::time::Duration,
    stop: impl std::future::Future<Output = http::Stop>,
) {
    if stop.await == http::Stop::Terminate && !drain.is_zero() {
        state
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(
            seconds = drain.as_secs(),
            "draining: /ready answers 503 while requests are still served"
        );
        tokio::time::sleep(drain).await;
    }
    tracing::info!("shutting down: finishing in-flight requests");
}

/// The MCP endpoint's lists; loopback host names when none are given.
fn mcp_options(hosts: Vec<String>, origins: Vec<String>) -> crate::app::McpOptions {
    let mut options = crate::app::McpOptions {
        allowed_origins: origins,
        ..Default::default()
    };
    if !hosts.is_empty() {
        options.allowed_hosts = hosts;
    }
    options
}

/// The outbound client, trusting `ca`'s certificates too when given.
pub fn outbound(
    allow: Vec<std::net::IpAddr>,
    ca: Option<&std::path::Path>,
) -> anyhow::Result<crate::execute::connector::Outbound> {
    let pem =
        match ca {
            Some(path) => Some(std::fs::read(path).with_context(|| {
                format!("cannot read the connector CA bundle {}", path.display())
            })?),
            None => None,
        };
    crate::execute::connector::Outbound::new(allow, pem.as_deref()).with_context(|| match ca {
        Some(path) => format!("the connector CA bundle {} is not usable", path.display()),
        None => "the outbound HTTP client could not be built".to_owned(),
    })
}

/// The same check as `loadout check`: errors stop the start unless `allow_drift`.
async fn check_registry(
    db: &sea_orm::DatabaseConnection,
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
    db: &sea_orm::DatabaseConnection,
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
    let key = keys::create(&txn, &name, Role::Operator).await?;
    txn.commit().await?;
    Ok(Some((name, key)))
}
