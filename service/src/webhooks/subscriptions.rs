//! Subscriptions: where a tenant's webhooks go, which event types, and the secret
//! they are signed with.
//!
//! A subscription belongs to a tenant: the creating key's, or for an operator the
//! one it names. It receives the shared configuration's events (revisions,
//! labels, rollouts, change requests) and its own tenant's proposal events only.
//! An admin sees and changes its tenant's subscriptions; an operator any; another
//! tenant's subscription is 404. The secret (`whsec_...`, generated or given) is
//! sealed at rest with the secrets keyring, bound to the subscription's id, and is
//! answered once: on creation and on rotation. Deletes are soft.

use chrono::{DateTime, Utc};
use entity::{webhook_attempts, webhook_deliveries, webhook_events, webhook_subscriptions};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::sign;
use crate::auth::{Principal, Role};
use crate::connectors::client::Outbound;
use crate::db::idempotency::Pending;
use crate::error::{Error, Result, check_size};
use crate::events::{ALL, TYPES};
use crate::secrets::{self, Keyring, SealError};

/// Longest URL accepted.
pub const MAX_URL_BYTES: usize = 2048;
/// Longest description accepted.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
/// A subscription that receives.
pub const ACTIVE: &str = "active";
/// A subscription switched off (by hand or after a run of failures).
pub const DISABLED: &str = "disabled";

/// The associated data of a subscription's sealed secret.
pub(super) fn context(id: i32) -> Vec<u8> {
    crate::secrets::webhook_secret_context(id)
}

/// Subscriptions, oldest first (`GET /v1/webhooks`, `loadout webhooks list --json`).
#[derive(Debug, Serialize, ToSchema)]
pub struct SubscriptionList {
    pub subscriptions: Vec<SubscriptionView>,
}

/// A subscription's delivery log, newest first (`GET /v1/webhooks/{id}/deliveries`,
/// `loadout webhooks deliveries ID --json`).
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptList {
    pub attempts: Vec<AttemptView>,
}

/// A subscription as the API shows it (never its secret).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubscriptionView {
    pub id: i32,
    pub tenant: String,
    pub url: String,
    /// The event types it receives; `["*"]` for every type.
    pub events: Vec<String>,
    pub description: Option<String>,
    /// `active` or `disabled`.
    pub state: String,
    /// Why it is disabled (by hand, or the run of failures and the last error).
    pub disabled_reason: Option<String>,
    /// Failed attempts in a row since the last success.
    pub failures: i32,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<webhook_subscriptions::Model> for SubscriptionView {
    fn from(row: webhook_subscriptions::Model) -> Self {
        SubscriptionView {
            id: row.id,
            tenant: row.tenant_id,
            url: row.url,
            events: row.events.split(',').map(str::to_owned).collect(),
            description: row.description,
            state: row.state,
            disabled_reason: row.disabled_reason,
            failures: row.failures,
            created_by: row.created_by,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

/// A subscription just made, or a secret just rotated: the only answers that hold
/// the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct WithSecret {
    pub subscription: SubscriptionView,
    /// The signing secret (`whsec_...`). Store it now: it is never shown again.
    pub secret: String,
}

/// What a new subscription asks.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSubscription {
    /// `https://...`; `http://` only to an address `--connector-allow` names.
    pub url: String,
    /// Event types (see the README); absent or `["*"]`: every type.
    pub events: Option<Vec<String>>,
    /// A `whsec_` secret of your own (base64 of 24 to 64 bytes); absent: one is made.
    pub secret: Option<String>,
    pub description: Option<String>,
    /// The tenant (operators only; an admin's subscriptions are in its own tenant).
    pub tenant: Option<String>,
}

/// What a change to a subscription asks; absent fields stay.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionPatch {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    /// `false` switches it off, `true` on again (and resets the run of failures).
    pub enabled: Option<bool>,
}

/// The tenant a request works in: the caller's own, or for an operator the one it
/// names. An admin naming another tenant is refused.
pub fn tenant_for<'a>(who: &'a Principal, named: Option<&'a str>) -> Result<&'a str> {
    match named {
        Some(tenant) if tenant != who.tenant() && who.role != Role::Operator => Err(
            Error::forbidden("an operator key (an admin works in its own tenant only)"),
        ),
        Some(tenant) => {
            crate::error::check_name("tenant", tenant)?;
            Ok(tenant)
        }
        None => Ok(who.tenant()),
    }
}

fn no_key() -> Error {
    Error::refused(
        "secrets_key_missing",
        format!(
            "webhook secrets are sealed at rest and this server has no secrets key: {}",
            secrets::HOW_TO_CONFIGURE
        ),
    )
}

/// `events` checked: each a known type, or `*` alone; stored comma-separated.
fn check_events(events: Option<Vec<String>>) -> Result<String> {
    let events = events.unwrap_or_else(|| vec![ALL.to_owned()]);
    if events.is_empty() {
        return Err(Error::invalid(
            "events may not be empty; leave it out (or [\"*\"]) for every type",
        ));
    }
    if events.iter().any(|e| e == ALL) {
        return match events.len() {
            1 => Ok(ALL.to_owned()),
            _ => Err(Error::invalid("\"*\" takes every type; list it alone")),
        };
    }
    for event in &events {
        if !TYPES.contains(&event.as_str()) {
            return Err(Error::refused(
                "unknown_event_type",
                format!("unknown event type {event:?}; known: {}", TYPES.join(", ")),
            ));
        }
    }
    let mut events = events;
    events.sort();
    events.dedup();
    Ok(events.join(","))
}

/// `url` checked as a connector's is (a global address unless allow-listed), and
/// `https` unless every address it names is allow-listed.
pub async fn check_url(outbound: &Outbound, url: &str) -> Result<String> {
    check_size("url", url, MAX_URL_BYTES)?;
    let parsed = outbound
        .check_url(url)
        .await
        .map_err(|e| Error::refused("url_refused", e.0))?;
    if parsed.scheme() == "http" && !allow_listed(&parsed, outbound.allow()).await {
        return Err(Error::refused(
            "url_refused",
            "a webhook URL must start with https:// (http:// only to an address --connector-allow names)",
        ));
    }
    Ok(url.to_owned())
}

/// Whether every address `url`'s host names is on the allow-list.
async fn allow_listed(url: &reqwest::Url, allow: &[std::net::IpAddr]) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => allow.contains(&ip.into()),
        Some(url::Host::Ipv6(ip)) => allow.contains(&ip.into()),
        Some(url::Host::Domain(name)) => match tokio::net::lookup_host((name, 0)).await {
            Ok(found) => {
                let found: Vec<_> = found.collect();
                !found.is_empty() && found.iter().all(|a| allow.contains(&a.ip()))
            }
            Err(_) => false,
        },
        None => false,
    }
}

/// What creating a subscription takes besides the request.
pub struct Sealing<'a> {
    pub outbound: &'a Outbound,
    pub keyring: &'a Keyring,
    /// Subscriptions a tenant may hold (`--webhook-max-subscriptions`).
    pub most: u32,
}

/// Makes a subscription; the answer holds its secret, once.
pub async fn create(
    db: &DatabaseConnection,
    sealing: &Sealing<'_>,
    who: &Principal,
    new: NewSubscription,
    now: DateTime<Utc>,
) -> Result<WithSecret> {
    let tenant = tenant_for(who, new.tenant.as_deref())?.to_owned();
    let url = check_url(sealing.outbound, &new.url).await?;
    let events = check_events(new.events)?;
    if let Some(description) = &new.description {
        check_size("description", description, MAX_DESCRIPTION_BYTES)?;
    }
    let secret = match new.secret {
        Some(secret) if sign::key(&secret).is_some() => secret,
        Some(_) => {
            return Err(Error::refused(
                "invalid_secret",
                "a webhook secret is whsec_ and the base64 of 24 to 64 random bytes; leave it out to have one made",
            ));
        }
        None => sign::generate().map_err(Error::internal)?,
    };
    if sealing.keyring.sealing().is_none() {
        return Err(no_key());
    }
    let txn = crate::db::begin_write(db).await?;
    crate::db::bounds::serialize(&txn, "webhook_subscriptions", &tenant).await?;
    let held = webhook_subscriptions::Entity::find()
        .filter(webhook_subscriptions::Column::TenantId.eq(&tenant))
        .filter(webhook_subscriptions::Column::DeletedAt.is_null())
        .count(&txn)
        .await?;
    if held >= u64::from(sealing.most) {
        txn.rollback().await?;
        return Err(Error::limit_reached(
            "webhook subscriptions",
            u64::from(sealing.most),
            "--webhook-max-subscriptions",
        ));
    }
    let row = webhook_subscriptions::ActiveModel {
        tenant_id: Set(tenant),
        url: Set(url),
        events: Set(events),
        secret: Set(String::new()),
        description: Set(new.description),
        state: Set(ACTIVE.to_owned()),
        disabled_reason: Set(None),
        failures: Set(0),
        created_by: Set(who.member.clone()),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    let row = store_secret(&txn, sealing.keyring, row, &secret, now).await?;
    txn.commit().await?;
    Ok(WithSecret {
        subscription: row.into(),
        secret,
    })
}

async fn store_secret(
    db: &impl ConnectionTrait,
    keyring: &Keyring,
    row: webhook_subscriptions::Model,
    secret: &str,
    now: DateTime<Utc>,
) -> Result<webhook_subscriptions::Model> {
    let sealed = keyring
        .seal(secret, &context(row.id))
        .map_err(|e| match e {
            SealError::NoKey => no_key(),
            other => Error::internal(other),
        })?;
    let mut active: webhook_subscriptions::ActiveModel = row.into();
    active.secret = Set(sealed);
    active.updated_at = Set(now);
    Ok(active.update(db).await?)
}

/// The live subscription `id` as `who` may see it: 404 if there is none, it is
/// deleted, or it is another tenant's (and `who` is no operator).
pub async fn find(
    db: &impl ConnectionTrait,
    who: &Principal,
    id: i32,
) -> Result<webhook_subscriptions::Model> {
    webhook_subscriptions::Entity::find_by_id(id)
        .filter(webhook_subscriptions::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .filter(|row| who.role == Role::Operator || row.tenant_id == who.tenant())
        .ok_or_else(|| Error::not_found(format!("no webhook subscription {id}")))
}

/// The live subscriptions of `tenant` (an operator naming none: every tenant's),
/// oldest first.
pub async fn list(
    db: &DatabaseConnection,
    who: &Principal,
    tenant: Option<&str>,
) -> Result<Vec<SubscriptionView>> {
    let mut query = webhook_subscriptions::Entity::find()
        .filter(webhook_subscriptions::Column::DeletedAt.is_null())
        .order_by_asc(webhook_subscriptions::Column::Id);
    match (who.role, tenant) {
        (Role::Operator, None) => {}
        _ => {
            let tenant = tenant_for(who, tenant)?;
            query = query.filter(webhook_subscriptions::Column::TenantId.eq(tenant));
        }
    }
    Ok(query.all(db).await?.into_iter().map(Into::into).collect())
}

/// Changes a subscription (see [`SubscriptionPatch`]).
pub async fn update(
    db: &DatabaseConnection,
    outbound: &Outbound,
    who: &Principal,
    id: i32,
    patch: SubscriptionPatch,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<SubscriptionView> {
    let url = match &patch.url {
        Some(url) => Some(check_url(outbound, url).await?),
        None => None,
    };
    let events = match patch.events {
        Some(events) => Some(check_events(Some(events))?),
        None => None,
    };
    if let Some(description) = &patch.description {
        check_size("description", description, MAX_DESCRIPTION_BYTES)?;
    }
    let txn = crate::db::begin_write(db).await?;
    crate::db::idempotency::record_if(&txn, key).await?;
    let row = find(&txn, who, id).await?;
    let mut active: webhook_subscriptions::ActiveModel = row.into();
    if let Some(url) = url {
        active.url = Set(url);
    }
    if let Some(events) = events {
        active.events = Set(events);
    }
    if let Some(description) = patch.description {
        active.description = Set(Some(description));
    }
    match patch.enabled {
        Some(true) => {
            active.state = Set(ACTIVE.to_owned());
            active.disabled_reason = Set(None);
            active.failures = Set(0);
        }
        Some(false) => {
            active.state = Set(DISABLED.to_owned());
            active.disabled_reason = Set(Some(format!("switched off by {}", who.member)));
        }
        None => {}
    }
    active.updated_at = Set(now);
    let row = active.update(&txn).await?;
    txn.commit().await?;
    Ok(row.into())
}

/// Deletes a subscription (softly): it receives nothing more.
pub async fn delete(
    db: &DatabaseConnection,
    who: &Principal,
    id: i32,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<SubscriptionView> {
    let txn = crate::db::begin_write(db).await?;
    crate::db::idempotency::record_if(&txn, key).await?;
    let row = find(&txn, who, id).await?;
    let mut active: webhook_subscriptions::ActiveModel = row.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    let row = active.update(&txn).await?;
    txn.commit().await?;
    Ok(row.into())
}

/// Replaces a subscription's secret (given, or made); the answer holds it, once.
/// Deliveries signed from now on use the new one, retries of older events too.
pub async fn rotate(
    db: &DatabaseConnection,
    keyring: &Keyring,
    who: &Principal,
    id: i32,
    secret: Option<String>,
    now: DateTime<Utc>,
) -> Result<WithSecret> {
    let secret = match secret {
        Some(secret) if sign::key(&secret).is_some() => secret,
        Some(_) => {
            return Err(Error::refused(
                "invalid_secret",
                "a webhook secret is whsec_ and the base64 of 24 to 64 random bytes",
            ));
        }
        None => sign::generate().map_err(Error::internal)?,
    };
    let txn = crate::db::begin_write(db).await?;
    let row = find(&txn, who, id).await?;
    let row = store_secret(&txn, keyring, row, &secret, now).await?;
    txn.commit().await?;
    Ok(WithSecret {
        subscription: row.into(),
        secret,
    })
}

/// One attempt in a subscription's delivery log.
#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    /// The `webhook-id` (the same for every attempt of one event).
    pub message_id: String,
    pub event_type: String,
    pub delivery: i32,
    /// 1 for a delivery's first attempt.
    pub attempt: i32,
    /// The receiver's HTTP status, if it answered.
    pub status: Option<i32>,
    pub duration_ms: i32,
    pub error: Option<String>,
    /// The first bytes of the receiver's answer.
    pub excerpt: Option<String>,
    /// `pending`, `delivered` or `failed`: the delivery's state now.
    pub delivery_state: String,
    pub at: DateTime<Utc>,
}

/// The newest attempts (at most `limit`) of subscription `id`, newest first.
pub async fn attempts(
    db: &DatabaseConnection,
    who: &Principal,
    id: i32,
    limit: u64,
) -> Result<Vec<AttemptView>> {
    let sub = find(db, who, id).await?;
    let rows = webhook_attempts::Entity::find()
        .filter(webhook_attempts::Column::SubscriptionId.eq(sub.id))
        .order_by_desc(webhook_attempts::Column::Id)
        .limit(limit)
        .all(db)
        .await?;
    let delivery_ids: Vec<i32> = rows.iter().map(|r| r.delivery_id).collect();
    let deliveries: std::collections::HashMap<i32, webhook_deliveries::Model> =
        webhook_deliveries::Entity::find()
            .filter(webhook_deliveries::Column::Id.is_in(delivery_ids))
            .all(db)
            .await?
            .into_iter()
            .map(|d| (d.id, d))
            .collect();
    let event_ids: Vec<i32> = deliveries.values().map(|d| d.event_id).collect();
    let events: std::collections::HashMap<i32, webhook_events::Model> =
        webhook_events::Entity::find()
            .filter(webhook_events::Column::Id.is_in(event_ids))
            .all(db)
            .await?
            .into_iter()
            .map(|e| (e.id, e))
            .collect();
    Ok(rows
        .into_iter()
        .map(|row| {
            let delivery = deliveries.get(&row.delivery_id);
            let event = delivery.and_then(|d| events.get(&d.event_id));
            AttemptView {
                message_id: event.map(|e| e.message_id.clone()).unwrap_or_default(),
                event_type: event.map(|e| e.event_type.clone()).unwrap_or_default(),
                delivery: row.delivery_id,
                attempt: row.attempt,
                status: row.status,
                duration_ms: row.duration_ms,
                error: row.error,
                excerpt: row.excerpt,
                delivery_state: delivery.map(|d| d.state.clone()).unwrap_or_default(),
                at: row.at,
            }
        })
        .collect())
}
