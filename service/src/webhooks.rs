//! Signed webhooks (issue 26, item 4): subscriptions ([`subscriptions`]), the
//! Standard Webhooks signature ([`sign`]) and the delivery of the outbox that
//! [`crate::events::record`] fills ([`deliver`]).
//!
//! **Delivery** is at least once. A background job of every serving process
//! (`app::jobs`) claims due deliveries with a lease (a conditional `UPDATE` whose
//! row count says who won, so several processes or replicas never post the same
//! attempt twice at once; a process that dies mid-post leaves a lease that runs out),
//! posts them through the connectors' outbound client (the address check at connect
//! time, no redirects, a timeout) and records each attempt. Success is any 2xx.
//! Otherwise the delivery is retried with the same `webhook-id` after
//! `base · 4^(n-1)` (capped at 6 h) with ±20 % jitter: by default 5 s, 20 s, 80 s,
//! 5 min, 21 min, 85 min, 5.7 h, 6 h, 6 h (10 attempts, about 20 h), then it is
//! `failed`. A subscription whose attempts fail `--webhook-disable-after` times in a
//! row (20 by default), across its deliveries, is switched off with the reason;
//! enabling it again resets the run and its pending deliveries resume.
//!
//! **Fan-out** happens after the write: the write records one event
//! ([`crate::events::record`]) and the delivery job derives its deliveries
//! ([`fan_out`]). **Isolation:** a process has at most one attempt in flight per
//! subscription and `--webhook-concurrency-per-tenant` per tenant, and starts each
//! attempt as a slot frees, never waiting for a batch; tenants take turns
//! ([`deliver::pick`]). A silent receiver holds one slot for the timeout, and the
//! attempt is recorded as failed.

pub mod deliver;
pub mod fan_out;
pub mod sign;
pub mod subscriptions;

/// How webhooks are delivered: `serve`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct WebhookSettings {
    /// How long a receiver may take to answer a delivery, in milliseconds.
    #[arg(long, env = "LOADOUT_WEBHOOK_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=120_000))]
    pub webhook_timeout_ms: u64,
    /// The wait before a delivery's first retry, in milliseconds; each later wait is
    /// four times the one before (at most 6 h), with ±20 % jitter.
    #[arg(long, env = "LOADOUT_WEBHOOK_RETRY_BASE_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub webhook_retry_base_ms: u64,
    /// Attempts per delivery before it is given up (`failed`).
    #[arg(long, env = "LOADOUT_WEBHOOK_ATTEMPTS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub webhook_attempts: u32,
    /// Failed attempts in a row (across a subscription's deliveries) that switch the
    /// subscription off.
    #[arg(long, env = "LOADOUT_WEBHOOK_DISABLE_AFTER", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub webhook_disable_after: u32,
    /// Deliveries this process attempts at once, in all (one per subscription at most).
    #[arg(long, env = "LOADOUT_WEBHOOK_CONCURRENCY", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub webhook_concurrency: u32,
    /// Deliveries this process attempts at once for one tenant's subscriptions, so a
    /// tenant's slow receivers never hold every slot.
    #[arg(long, env = "LOADOUT_WEBHOOK_CONCURRENCY_PER_TENANT", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub webhook_concurrency_per_tenant: u32,
    /// Subscriptions one tenant may hold (deleted ones not counted).
    #[arg(long, env = "LOADOUT_WEBHOOK_MAX_SUBSCRIPTIONS", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub webhook_max_subscriptions: u32,
    /// Pending deliveries one tenant's subscriptions may hold; past it, a new event's
    /// deliveries to that tenant are recorded as failed, unattempted.
    #[arg(long, env = "LOADOUT_WEBHOOK_MAX_PENDING", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub webhook_max_pending: u64,
    /// Do not deliver webhooks from this process (another replica does); events are
    /// still written to the outbox.
    #[arg(long, env = "LOADOUT_NO_WEBHOOK_DELIVERY", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_webhook_delivery: bool,
}
