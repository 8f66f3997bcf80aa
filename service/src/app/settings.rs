//! The one configuration value: `serve`'s flags as clap parses them, held once by
//! [`AppState`](crate::app::AppState). Groups are flattened where another command
//! shares them (`connectors sync` takes [`Connectors`] and the secrets flags).
//! Typed values (`TimeDelta`s, the outbound client, the HTTP limits) are derived
//! from it where they are used, never copied into a second struct.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Largest prompt template accepted unless configured (`--max-template-bytes`).
pub const DEFAULT_MAX_TEMPLATE_BYTES: usize = 262_144;
/// Largest rendered prompt unless configured: 4 MiB, some 500 times the seeded
/// prompt, yet small enough that a few hundred renders at once fit in memory.
pub const DEFAULT_MAX_PROMPT_BYTES: usize = 4 * 1024 * 1024;
/// MCP sessions one key may hold open, by default: a few clients' worth.
pub const DEFAULT_MCP_SESSIONS_PER_KEY: usize = 16;
/// MCP sessions a process holds open, by default (each is a task, a few
/// channels and at most 8 KiB of the client's `initialize`).
pub const DEFAULT_MCP_SESSIONS: usize = 4096;
/// MCP sessions one tenant may hold, unless configured: a quarter of the process's.
pub const DEFAULT_MCP_SESSIONS_PER_TENANT: usize = DEFAULT_MCP_SESSIONS / 4;

/// Everything `loadout serve` is configured with.
#[derive(Clone, Debug, clap::Args)]
pub struct Settings {
    /// Address to listen on.
    #[arg(long, env = "LOADOUT_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Also serve `/metrics`, without a key, on this address (e.g. 127.0.0.1:9090).
    #[arg(long, env = "LOADOUT_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,
    /// Start even when `loadout check` finds errors (each is logged as a warning).
    #[arg(long)]
    pub allow_drift: bool,
    /// Do not migrate or seed on start; refuse to start on an unmigrated database instead.
    #[arg(long)]
    pub no_migrate: bool,
    /// Largest prompt template accepted, in bytes.
    #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", default_value_t = DEFAULT_MAX_TEMPLATE_BYTES)]
    pub max_template_bytes: usize,
    /// Largest rendered prompt, in bytes: renders stop before it, and templates whose
    /// worst case passes it are refused (422).
    #[arg(long, env = "LOADOUT_MAX_PROMPT_BYTES", default_value_t = DEFAULT_MAX_PROMPT_BYTES)]
    pub max_prompt_bytes: usize,
    /// Memory for the per-process cache, in MiB (half of it for encoded responses).
    #[arg(long, env = "LOADOUT_CACHE_MIB", default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub cache_mib: u32,
    /// How long a cached key is trusted without reading the configuration generation,
    /// in milliseconds: the longest a revocation can go unheard while the database is
    /// away. A tuning knob, hidden from `--help`.
    #[arg(
        long,
        env = "LOADOUT_KEY_TRUST_MS",
        hide = true,
        default_value_t = 15_000
    )]
    pub key_trust_ms: u64,
    #[command(flatten)]
    pub replicas: Replicas,
    #[command(flatten)]
    pub connections: Connections,
    #[command(flatten)]
    pub proposals: crate::actions::ProposalSettings,
    #[command(flatten)]
    pub connectors: Connectors,
    #[command(flatten)]
    pub mcp: Mcp,
    #[command(flatten)]
    pub tenants: Tenants,
    #[command(flatten)]
    pub webhooks: crate::webhooks::WebhookSettings,
    #[command(flatten)]
    pub evals: crate::evals::EvalSettings,
    #[command(flatten)]
    pub secrets: crate::secrets::flags::SecretsArgs,
    #[command(flatten)]
    pub sso: crate::auth::sso::SsoSettings,
}

/// What one tenant may hold or do, so that no tenant exhausts what all share
/// (webhook subscriptions: `--webhook-max-subscriptions`; MCP sessions:
/// `--mcp-max-sessions-per-tenant`).
#[derive(Clone, Debug, clap::Args)]
pub struct Tenants {
    /// Live keys (not revoked) one tenant may hold; keys made on the database
    /// (`loadout keys create`) are not refused.
    #[arg(long, env = "LOADOUT_MAX_KEYS_PER_TENANT", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_keys_per_tenant: u64,
    /// Outcomes (conversations) one tenant may report for one user on one revision.
    #[arg(long, env = "LOADOUT_MAX_OUTCOMES_PER_SUBJECT", default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_outcomes_per_subject: u64,
    /// Configuration plans (`POST /v1/config/plan`) one key may ask for per minute
    /// (a burst of this many, then one every 60/N s).
    #[arg(long, env = "LOADOUT_PLANS_PER_MINUTE", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub plans_per_minute: u32,
    /// Change streams (`GET /v1/changes`) one tenant's keys may hold open at once in
    /// this process; one more is 429.
    #[arg(long, env = "LOADOUT_MAX_STREAMS_PER_TENANT", default_value_t = crate::changes::bounds::DEFAULT_PER_TENANT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_streams_per_tenant: usize,
    /// Change streams this process holds open at once (each holds a connection:
    /// keep it under `--max-connections`); one more is 429.
    #[arg(long, env = "LOADOUT_MAX_STREAMS", default_value_t = crate::changes::bounds::DEFAULT_TOTAL, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_streams: usize,
    /// Changes each process keeps for a reconnecting stream's replay (older ones
    /// come from the outbox, up to as many again). A tuning knob, hidden from `--help`.
    #[arg(long, env = "LOADOUT_STREAM_HISTORY", hide = true, default_value_t = crate::changes::RING, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub stream_history: usize,
}

/// Running beside other processes on one database.
#[derive(Clone, Debug, clap::Args)]
pub struct Replicas {
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
}

/// What one client may hold and how slowly it may send.
#[derive(Clone, Debug, clap::Args)]
pub struct Connections {
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
    #[arg(long, env = "LOADOUT_MAX_AUTH_FAILURES", default_value_t = crate::auth::failures::DEFAULT_FAILURES_PER_MINUTE, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_auth_failures: u32,
    /// Proxies in front of loadout (comma-separated IPs): their connections count only
    /// against --max-connections, and their `X-Forwarded-For` names the client.
    #[arg(
        long = "trusted-proxy",
        env = "LOADOUT_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    pub trusted_proxies: Vec<IpAddr>,
}

/// Where connectors may reach and how much of a server a sync reads (`serve` and
/// `connectors sync`).
#[derive(Clone, Debug, clap::Args)]
pub struct Connectors {
    /// Private or loopback IPs connectors may reach (comma-separated), e.g. 127.0.0.1.
    #[arg(long, env = "LOADOUT_CONNECTOR_ALLOW", value_delimiter = ',')]
    pub connector_allow: Vec<IpAddr>,
    /// A PEM bundle of CA certificates connectors trust besides the Mozilla roots
    /// (for a private CA).
    #[arg(long, env = "LOADOUT_CONNECTOR_CA")]
    pub connector_ca: Option<PathBuf>,
    /// Most tools a sync reads from one MCP server; a longer tools/list fails the sync.
    #[arg(long, env = "LOADOUT_CONNECTOR_MAX_TOOLS", default_value_t = crate::connectors::client::mcp::DEFAULT_MAX_TOOLS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub connector_max_tools: usize,
    /// Most tools/list pages a sync follows; a longer list fails the sync.
    #[arg(long, env = "LOADOUT_CONNECTOR_MAX_PAGES", default_value_t = crate::connectors::client::mcp::DEFAULT_MAX_PAGES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub connector_max_pages: usize,
}

impl Connectors {
    /// The one outbound HTTP client: the address check, and `--connector-ca`'s
    /// certificates trusted besides the Mozilla roots.
    pub fn outbound(&self) -> anyhow::Result<crate::connectors::client::Outbound> {
        use anyhow::Context;
        let ca = self.connector_ca.as_deref();
        let pem = match ca {
            Some(path) => Some(std::fs::read(path).with_context(|| {
                format!("cannot read the connector CA bundle {}", path.display())
            })?),
            None => None,
        };
        crate::connectors::client::Outbound::new(self.connector_allow.clone(), pem.as_deref())
            .with_context(|| match ca {
                Some(path) => format!("the connector CA bundle {} is not usable", path.display()),
                None => "the outbound HTTP client could not be built".to_owned(),
            })
    }

    /// How much of an MCP server's `tools/list` a sync reads.
    pub fn list_limits(&self) -> crate::connectors::client::mcp::ListLimits {
        crate::connectors::client::mcp::ListLimits {
            max_tools: self.connector_max_tools,
            max_pages: self.connector_max_pages,
        }
    }
}

/// Who may reach the MCP endpoint from where, and how many sessions it holds.
#[derive(Clone, Debug, clap::Args)]
pub struct Mcp {
    /// Host names the MCP endpoint answers to (comma-separated; DNS rebinding protection).
    #[arg(
        long = "mcp-allowed-host",
        env = "LOADOUT_MCP_ALLOWED_HOSTS",
        value_delimiter = ',',
        default_values = ["localhost", "127.0.0.1", "::1"]
    )]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call the MCP endpoint (comma-separated); a request
    /// with any other `Origin` is refused. None when absent.
    #[arg(
        long = "mcp-allowed-origin",
        env = "LOADOUT_MCP_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
    /// MCP sessions one key may hold open at once; an `initialize` over it is 429.
    #[arg(long = "mcp-max-sessions-per-key", env = "LOADOUT_MCP_MAX_SESSIONS_PER_KEY", default_value_t = DEFAULT_MCP_SESSIONS_PER_KEY, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_sessions_per_key: usize,
    /// MCP sessions one tenant's keys may hold open at once in this process, so a
    /// tenant never takes another's share; an `initialize` over it is 429.
    #[arg(long = "mcp-max-sessions-per-tenant", env = "LOADOUT_MCP_MAX_SESSIONS_PER_TENANT", default_value_t = DEFAULT_MCP_SESSIONS_PER_TENANT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_sessions_per_tenant: usize,
    /// MCP sessions this process holds open at once; an `initialize` over it is 503.
    #[arg(long = "mcp-max-sessions", env = "LOADOUT_MCP_MAX_SESSIONS", default_value_t = DEFAULT_MCP_SESSIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_sessions: usize,
}

/// Parses settings as `serve` would from `flags` (without the program name),
/// reading the same environment variables: how tests and tools get the settings
/// a command line would give, defaults included.
#[derive(Debug, clap::Parser)]
#[command(no_binary_name = true)]
struct Flags {
    #[command(flatten)]
    settings: Settings,
}

impl Settings {
    /// The settings `loadout serve FLAGS…` runs with.
    pub fn from_flags<I, T>(flags: I) -> Result<Settings, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        Flags::try_parse_from(flags).map(|f| f.settings)
    }

    /// The settings `loadout serve` runs with when given no flags: the defaults and
    /// whatever `LOADOUT_*` variables set.
    pub fn from_env() -> Result<Settings, clap::Error> {
        Self::from_flags(std::iter::empty::<&str>())
    }

    /// The cache budget in bytes.
    pub fn cache_bytes(&self) -> usize {
        self.cache_mib as usize * 1024 * 1024
    }

    /// How long a cached key is trusted without a generation read.
    pub fn key_trust(&self) -> Duration {
        Duration::from_millis(self.key_trust_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_flags_give_the_documented_defaults() {
        let settings = Settings::from_env().expect("defaults");
        assert_eq!(settings.max_template_bytes, DEFAULT_MAX_TEMPLATE_BYTES);
        assert_eq!(
            settings.mcp.allowed_hosts,
            ["localhost", "127.0.0.1", "::1"]
        );
        assert_eq!(settings.proposals.lease(), chrono::TimeDelta::minutes(5));
        assert_eq!(settings.cache_bytes(), 128 * 1024 * 1024);
    }
}
