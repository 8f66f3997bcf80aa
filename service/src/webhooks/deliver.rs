//! Delivering the outbox: claim due deliveries, post each once, record the attempt
//! (see the parent module for the schedule and the switch-off).

use crate::vocab::Clock;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use entity::{webhook_attempts, webhook_deliveries, webhook_events, webhook_subscriptions};

use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, DbBackend,
    EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set, Statement,
};

use super::subscriptions::{ACTIVE, DISABLED, context};
use super::{WebhookSettings, sign};
use crate::connectors::client::Outbound;
use crate::error::{Error, Result};
use crate::secrets::Keyring;

/// The longest wait between two attempts of one delivery.
pub const MAX_BACKOFF: Duration = Duration::from_secs(6 * 3600);
/// Attempts kept in the delivery log per subscription; older rows are pruned.
pub const LOG_ROWS: u64 = 200;
/// Bytes of a receiver's answer read and kept in the log; the rest is never read
/// (the connection is dropped).
pub const EXCERPT_BYTES: usize = 256;

/// Due deliveries read in one pass (at most one per subscription).
pub const WINDOW: u64 = 2_000;

/// A delivery waiting for its next attempt.
pub const PENDING: &str = "pending";
/// A delivery a receiver took (2xx).
pub const DELIVERED: &str = "delivered";
/// A delivery whose attempts ran out.
pub const FAILED: &str = "failed";

/// How deliveries are attempted (from `serve`'s flags, `WebhookSettings::policy`).
#[derive(Clone, Debug)]
pub struct Policy {
    /// How long a receiver may take to answer.
    pub timeout: Duration,
    /// The wait before the first retry.
    pub base: Duration,
    /// Attempts per delivery.
    pub attempts: i32,
    /// Failed attempts in a row that switch a subscription off.
    pub disable_after: i32,
    /// How long a claim holds a delivery (longer than the timeout).
    pub lease: Duration,
}

impl From<&WebhookSettings> for Policy {
    fn from(flags: &WebhookSettings) -> Self {
        let timeout = Duration::from_millis(flags.webhook_timeout_ms);
        Policy {
            timeout,
            base: Duration::from_millis(flags.webhook_retry_base_ms),
            attempts: flags.webhook_attempts as i32,
            disable_after: flags.webhook_disable_after as i32,
            lease: timeout + Duration::from_secs(30),
        }
    }
}

impl Policy {
    /// The wait after failed attempt `n` (1-based): `base · 4^(n-1)`, at most
    /// [`MAX_BACKOFF`], times a jitter factor in [0.8, 1.2).
    pub fn backoff(&self, n: i32, jitter: f64) -> Duration {
        let exp = 4f64.powi((n - 1).clamp(0, 30));
        let wait = (self.base.as_secs_f64() * exp).min(MAX_BACKOFF.as_secs_f64());
        Duration::from_secs_f64(wait * (0.8 + 0.4 * jitter.clamp(0.0, 1.0)))
    }
}

/// What delivering takes, lent from the state.
pub struct Deliverer<'a> {
    pub db: &'a DatabaseConnection,
    pub outbound: &'a Outbound,
    pub keyring: &'a Keyring,
    pub policy: Policy,
    pub clock: &'a dyn Clock,
}

/// What one attempt came to.
struct Attempted {
    status: Option<u16>,
    error: Option<String>,
    excerpt: Option<String>,
    duration: Duration,
}

impl Attempted {
    /// A 2xx whose answer arrived in time: a timeout or a broken answer after a 2xx
    /// status is a failed attempt.
    fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s)) && self.error.is_none()
    }
}

/// How many deliveries one process attempts at once: in all, and per tenant.
#[derive(Clone, Copy, Debug)]
pub struct Concurrency {
    pub total: usize,
    pub per_tenant: usize,
}

impl From<&WebhookSettings> for Concurrency {
    fn from(flags: &WebhookSettings) -> Self {
        Concurrency {
            total: flags.webhook_concurrency as usize,
            per_tenant: flags.webhook_concurrency_per_tenant as usize,
        }
    }
}

/// A due delivery: its subscription and that subscription's tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    pub id: i32,
    pub subscription: i32,
    pub tenant: String,
}

/// What this process has in flight: at most one delivery per subscription, so a
/// slow or silent receiver holds up only itself, and at most
/// [`Concurrency::per_tenant`] per tenant, so one tenant's receivers never take
/// every slot.
#[derive(Default, Debug)]
pub struct InFlight {
    subscriptions: HashSet<i32>,
    tenants: HashMap<String, usize>,
}

impl InFlight {
    pub fn len(&self) -> usize {
        self.subscriptions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subscriptions.is_empty()
    }

    pub fn start(&mut self, due: &Due) {
        self.subscriptions.insert(due.subscription);
        *self.tenants.entry(due.tenant.clone()).or_default() += 1;
    }

    pub fn finish(&mut self, due: &Due) {
        self.subscriptions.remove(&due.subscription);
        if let Some(n) = self.tenants.get_mut(&due.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.tenants.remove(&due.tenant);
            }
        }
    }
}

/// The oldest due delivery of each active subscription that has one (at most
/// [`WINDOW`]), oldest first. One per subscription, so a subscription with a
/// backlog of thousands takes one place in the window, not the window.
pub async fn due(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<Vec<Due>> {
    let backend = db.get_database_backend();
    let (at, lease) = match backend {
        DbBackend::Postgres => ("$1", "$2"),
        _ => ("?", "?"),
    };
    let sql = format!(
        "SELECT d.id, d.subscription_id, s.tenant_id FROM ( \
           SELECT id, subscription_id, next_attempt_at, \
             ROW_NUMBER() OVER (PARTITION BY subscription_id ORDER BY next_attempt_at, id) AS n \
           FROM webhook_deliveries \
           WHERE state = '{PENDING}' AND next_attempt_at <= {at} \
             AND (lease_until IS NULL OR lease_until < {lease}) \
         ) d JOIN webhook_subscriptions s ON s.id = d.subscription_id \
         WHERE d.n = 1 AND s.state = '{ACTIVE}' AND s.deleted_at IS NULL \
         ORDER BY d.next_attempt_at, d.id LIMIT {WINDOW}"
    );
    let statement = Statement::from_sql_and_values(backend, sql, [now.into(), now.into()]);
    let rows = db.query_all_raw(statement).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        out.push(Due {
            id: row.try_get_by_index(0)?,
            subscription: row.try_get_by_index(1)?,
            tenant: row.try_get_by_index(2)?,
        });
    }
    Ok(out)
}

/// Which of `due` (oldest first) to start now: none of a subscription in flight,
/// within the caps, the tenants taken in turns (each tenant's oldest first), so a
/// tenant with many due deliveries waits its turn behind one with a few.
pub fn pick(due: Vec<Due>, in_flight: &InFlight, limits: Concurrency) -> Vec<Due> {
    let mut free = limits.total.saturating_sub(in_flight.len());
    let mut queues: Vec<(String, VecDeque<Due>)> = Vec::new();
    for d in due {
        if in_flight.subscriptions.contains(&d.subscription) {
            continue;
        }
        match queues.iter_mut().find(|(t, _)| *t == d.tenant) {
            Some((_, q)) => q.push_back(d),
            None => queues.push((d.tenant.clone(), VecDeque::from([d]))),
        }
    }
    let mut out = Vec::new();
    let mut taken: HashMap<String, usize> = HashMap::new();
    while free > 0 {
        let mut progressed = false;
        for (tenant, queue) in &mut queues {
            let running = in_flight.tenants.get(tenant).copied().unwrap_or(0);
            let mine = taken.entry(tenant.clone()).or_default();
            if free == 0 || running + *mine >= limits.per_tenant {
                continue;
            }
            if let Some(d) = queue.pop_front() {
                *mine += 1;
                free -= 1;
                progressed = true;
                out.push(d);
            }
        }
        if !progressed {
            break;
        }
    }
    out
}

fn unleased(now: DateTime<Utc>) -> Condition {
    Condition::any()
        .add(webhook_deliveries::Column::LeaseUntil.is_null())
        .add(webhook_deliveries::Column::LeaseUntil.lt(now))
}

/// Takes delivery `id` for this process: one conditional UPDATE, so of several
/// processes exactly one wins; `None` if another did.
pub async fn claim(
    deliverer: &Deliverer<'_>,
    id: i32,
    now: DateTime<Utc>,
) -> Result<Option<webhook_deliveries::Model>> {
    let lease = chrono::TimeDelta::from_std(deliverer.policy.lease).map_err(Error::internal)?;
    let won = webhook_deliveries::Entity::update_many()
        .col_expr(
            webhook_deliveries::Column::LeaseUntil,
            Expr::value(Some(now + lease)),
        )
        .filter(webhook_deliveries::Column::Id.eq(id))
        .filter(webhook_deliveries::Column::State.eq(PENDING))
        .filter(unleased(now))
        .exec(deliverer.db)
        .await?
        .rows_affected;
    if won != 1 {
        return Ok(None);
    }
    Ok(webhook_deliveries::Entity::find_by_id(id)
        .one(deliverer.db)
        .await?)
}

/// Posts a claimed delivery once and records what came of it.
pub async fn attempt(deliverer: &Deliverer<'_>, delivery: webhook_deliveries::Model) -> Result<()> {
    let db = deliverer.db;
    let (Some(event), Some(sub)) = (
        webhook_events::Entity::find_by_id(delivery.event_id)
            .one(db)
            .await?,
        webhook_subscriptions::Entity::find_by_id(delivery.subscription_id)
            .one(db)
            .await?,
    ) else {
        return Err(Error::internal(
            "a delivery without its event or subscription",
        ));
    };
    let attempted = post(deliverer, &sub, &event).await;
    record(deliverer, delivery, &sub, attempted).await
}

async fn post(
    deliverer: &Deliverer<'_>,
    sub: &webhook_subscriptions::Model,
    event: &webhook_events::Model,
) -> Attempted {
    let started = Instant::now();
    let failed = |error: String| Attempted {
        status: None,
        error: Some(error),
        excerpt: None,
        duration: started.elapsed(),
    };
    let key = match deliverer.keyring.open(&sub.secret, &context(sub.id)) {
        Ok(secret) => match sign::key(secret.expose()) {
            Some(key) => key,
            None => return failed("the stored secret is not a whsec_ secret".into()),
        },
        Err(e) => return failed(format!("the secret cannot be opened: {e}")),
    };
    // An IP literal never reaches the client's checking resolver.
    let url = match super::subscriptions::check_url(deliverer.outbound, &sub.url).await {
        Ok(url) => url,
        Err(e) => return failed(e.message),
    };
    let timestamp = deliverer.clock.now().timestamp();
    let signature = sign::signature(&key, &event.message_id, timestamp, &event.body);
    let sent = deliverer
        .outbound
        .client()
        .post(url)
        .timeout(deliverer.policy.timeout)
        .header("content-type", "application/json")
        .header(
            "user-agent",
            concat!("loadout-webhooks/", env!("CARGO_PKG_VERSION")),
        )
        .header("webhook-id", &event.message_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(event.body.clone())
        .send()
        .await;
    let mut response = match sent {
        Ok(response) => response,
        Err(e) => return failed(describe(&e)),
    };
    let status = response.status().as_u16();
    let mut body = Vec::new();
    let mut error = None;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                body.extend_from_slice(
                    &chunk[..chunk.len().min(EXCERPT_BYTES.saturating_sub(body.len()))],
                );
                if body.len() >= EXCERPT_BYTES {
                    break;
                }
                if started.elapsed() > deliverer.policy.timeout {
                    error = Some("the receiver did not finish its answer in time".into());
                    break;
                }
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(describe(&e));
                break;
            }
        }
    }
    if !(200..300).contains(&status) && error.is_none() {
        error = Some(match status {
            300..400 => format!("answered {status}; redirects are not followed"),
            _ => format!("answered {status}"),
        });
    }
    Attempted {
        status: Some(status),
        error,
        excerpt: (!body.is_empty()).then(|| String::from_utf8_lossy(&body).into_owned()),
        duration: started.elapsed(),
    }
}

/// An error of the client in words that name no address.
fn describe(e: &reqwest::Error) -> String {
    if let Some(refused) = crate::connectors::client::outbound::refused_by_check(e) {
        return refused.0.clone();
    }
    if e.is_timeout() {
        "the receiver did not answer in time".into()
    } else if e.is_connect() {
        "could not connect to the receiver".into()
    } else {
        "the request failed".into()
    }
}

/// Records one attempt: the log row, the delivery's next state, the
/// subscription's run of failures (switched off at the policy's limit), and the
/// log pruned, in one transaction.
async fn record(
    deliverer: &Deliverer<'_>,
    delivery: webhook_deliveries::Model,
    sub: &webhook_subscriptions::Model,
    attempted: Attempted,
) -> Result<()> {
    let policy = &deliverer.policy;
    let now = deliverer.clock.now();
    let ok = attempted.ok();
    let number = delivery.attempts + 1;
    let txn = crate::db::begin_write(deliverer.db).await?;
    webhook_attempts::ActiveModel {
        delivery_id: Set(delivery.id),
        subscription_id: Set(sub.id),
        attempt: Set(number),
        status: Set(attempted.status.map(i32::from)),
        duration_ms: Set(attempted.duration.as_millis().min(i32::MAX as u128) as i32),
        error: Set(attempted.error.clone()),
        excerpt: Set(attempted.excerpt),
        at: Set(now),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    let mut row: webhook_deliveries::ActiveModel = delivery.into();
    row.attempts = Set(number);
    row.lease_until = Set(None);
    row.updated_at = Set(now);
    if ok {
        row.state = Set(DELIVERED.to_owned());
    } else if number >= policy.attempts {
        row.state = Set(FAILED.to_owned());
    } else {
        let wait = policy.backoff(number, jitter());
        let wait = chrono::TimeDelta::from_std(wait).map_err(Error::internal)?;
        row.next_attempt_at = Set(now + wait);
    }
    row.update(&txn).await?;
    let failures = match ok {
        true => Expr::value(0),
        false => Expr::col(webhook_subscriptions::Column::Failures).add(1),
    };
    webhook_subscriptions::Entity::update_many()
        .col_expr(webhook_subscriptions::Column::Failures, failures)
        .filter(webhook_subscriptions::Column::Id.eq(sub.id))
        .exec(&txn)
        .await?;
    if !ok {
        let error = attempted.error.unwrap_or_default();
        let reason = format!(
            "switched off after {} failed attempts in a row; the last: {error}",
            policy.disable_after
        );
        webhook_subscriptions::Entity::update_many()
            .col_expr(webhook_subscriptions::Column::State, Expr::value(DISABLED))
            .col_expr(
                webhook_subscriptions::Column::DisabledReason,
                Expr::value(reason),
            )
            .col_expr(webhook_subscriptions::Column::UpdatedAt, Expr::value(now))
            .filter(webhook_subscriptions::Column::Id.eq(sub.id))
            .filter(webhook_subscriptions::Column::State.eq(ACTIVE))
            .filter(webhook_subscriptions::Column::Failures.gte(policy.disable_after))
            .exec(&txn)
            .await?;
    }
    prune(&txn, sub.id).await?;
    txn.commit().await?;
    Ok(())
}

/// Keeps the newest [`LOG_ROWS`] attempts of a subscription.
async fn prune(db: &impl sea_orm::ConnectionTrait, subscription: i32) -> Result<()> {
    let oldest_kept: Option<i32> = webhook_attempts::Entity::find()
        .select_only()
        .column(webhook_attempts::Column::Id)
        .filter(webhook_attempts::Column::SubscriptionId.eq(subscription))
        .order_by_desc(webhook_attempts::Column::Id)
        .offset(LOG_ROWS - 1)
        .limit(1)
        .into_tuple()
        .one(db)
        .await?;
    if let Some(id) = oldest_kept {
        webhook_attempts::Entity::delete_many()
            .filter(webhook_attempts::Column::SubscriptionId.eq(subscription))
            .filter(webhook_attempts::Column::Id.lt(id))
            .exec(db)
            .await?;
    }
    Ok(())
}

/// A number in [0, 1) for the backoff's jitter.
fn jitter() -> f64 {
    let mut random = [0u8; 4];
    match getrandom::fill(&mut random) {
        Ok(()) => f64::from(u32::from_le_bytes(random)) / (f64::from(u32::MAX) + 1.0),
        Err(_) => 0.5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(id: i32, subscription: i32, tenant: &str) -> Due {
        Due {
            id,
            subscription,
            tenant: tenant.to_owned(),
        }
    }

    #[test]
    fn tenants_take_turns_within_their_cap_and_a_busy_subscription_waits() {
        let limits = Concurrency {
            total: 6,
            per_tenant: 3,
        };
        let mut in_flight = InFlight::default();
        in_flight.start(&due(100, 9, "acme"));
        // 16 of tb's subscriptions are due before the default tenant's one.
        let mut waiting: Vec<Due> = (1..=16).map(|i| due(i, i, "tb")).collect();
        waiting.push(due(50, 50, "default"));
        waiting.push(due(51, 9, "acme"));
        let picked = pick(waiting, &in_flight, limits);
        let ids: Vec<i32> = picked.iter().map(|d| d.id).collect();
        assert_eq!(
            ids,
            vec![1, 50, 2, 3],
            "tb capped at 3, default served, acme's busy one waits"
        );
    }

    #[test]
    fn the_backoff_grows_fourfold_to_its_cap_with_jitter() {
        let policy = Policy {
            timeout: Duration::from_secs(10),
            base: Duration::from_secs(5),
            attempts: 10,
            disable_after: 20,
            lease: Duration::from_secs(40),
        };
        assert_eq!(policy.backoff(1, 0.5), Duration::from_secs(5));
        assert_eq!(policy.backoff(3, 0.5), Duration::from_secs(80));
        assert_eq!(policy.backoff(9, 0.5), MAX_BACKOFF);
        assert!(policy.backoff(1, 0.0) >= Duration::from_secs(4));
        assert!(policy.backoff(1, 1.0) <= Duration::from_secs(6));
    }
}
