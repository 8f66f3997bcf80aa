//! A connector's header values sealed at rest ([`crate::secrets`]): sealed when
//! saved, opened only for the outbound request that sends them. Each value is bound
//! to its connector's id and its header's name, so a sealed value copied to another
//! header or connector does not open. Values saved before sealing existed stay
//! plain and keep working until `loadout secrets seal` seals them. `seal` and
//! `rotate` reseal the webhook subscriptions' signing secrets in the same
//! transaction (their associated data is `secrets::webhook_secret_context`), and
//! the model connections' API keys (`secrets::model_key_context`).

use entity::{connectors, model_connections, webhook_subscriptions};
use sea_orm::{ActiveModelTrait, ConnectionTrait, DatabaseConnection, EntityTrait, Set};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::secrets::{self, Key, Keyring, SealError, Secret};

/// The associated data of a header value: which connector, which header.
fn context(connector_id: i32, header: &str) -> Vec<u8> {
    format!("loadout connector header\0{connector_id}\0{header}").into_bytes()
}

/// The refusal of a header value where no key is configured (422).
pub fn no_key() -> Error {
    Error::refused(
        "secrets_key_missing",
        format!(
            "header values are sealed at rest and this server has no secrets key: {}; connectors saved before keep working",
            secrets::HOW_TO_CONFIGURE
        ),
    )
}

/// `headers` (names to text values, already checked) sealed for connector
/// `connector_id`. No header needs no key; any header without a key is refused.
pub fn seal(keyring: &Keyring, connector_id: i32, headers: Map<String, Value>) -> Result<Value> {
    let mut sealed = Map::new();
    for (name, value) in headers {
        let text = value.as_str().unwrap_or_default();
        let value = keyring
            .seal(text, &context(connector_id, &name))
            .map_err(|e| match e {
                SealError::NoKey => no_key(),
                other => Error::internal(other),
            })?;
        sealed.insert(name, Value::String(value));
    }
    Ok(Value::Object(sealed))
}

/// A row's headers as stored: (name, sealed or plain value); values that are not
/// text are skipped.
pub fn stored(row: &connectors::Model) -> Vec<(String, String)> {
    row.headers
        .as_object()
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// The headers opened for one request; the first that does not open fails them all.
pub fn open(
    keyring: &Keyring,
    connector_id: i32,
    stored: &[(String, String)],
) -> Result<Vec<(String, Secret)>, SealError> {
    stored
        .iter()
        .map(|(name, value)| {
            keyring
                .open(value, &context(connector_id, name))
                .map(|secret| (name.clone(), secret))
        })
        .collect()
}

/// How many header values a row holds in plain text.
pub fn plain_values(row: &connectors::Model) -> usize {
    stored(row)
        .iter()
        .filter(|(_, v)| !secrets::is_sealed(v))
        .count()
}

/// The keys (by id) that sealed a row's values and that `keyring` does not hold.
pub fn unheld_keys(row: &connectors::Model, keyring: &Keyring) -> Vec<String> {
    let mut ids: Vec<String> = stored(row)
        .iter()
        .filter_map(|(_, v)| secrets::sealed_with(v))
        .filter(|id| !keyring.holds(*id))
        .map(|id| id.to_string())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// What `loadout secrets seal` or `rotate` changed.
#[derive(Debug, Default, Serialize)]
pub struct SealReport {
    /// The key every value is now sealed with.
    pub key_id: String,
    /// Values sealed (or sealed again) by this run.
    pub sealed: usize,
    /// Values that were already sealed with the key and were left as they are.
    pub unchanged: usize,
    /// Deleted connectors whose header values were erased.
    pub erased: usize,
}

/// Seals every plain header value (and any sealed with a previous key of
/// `keyring`) with `keyring`'s current key, and erases the
/// values still held by deleted connectors; one transaction.
pub async fn seal_all(db: &DatabaseConnection, keyring: &Keyring) -> Result<SealReport> {
    reseal(db, keyring, keyring).await
}

/// Seals every header value with `new`, opening each with `old` (which must hold
/// the keys they were sealed with; plain values need none; values already sealed
/// with `new` stay as they are), and erases the values
/// still held by deleted connectors; one transaction, so a failure changes nothing.
pub async fn rotate(db: &DatabaseConnection, old: &Keyring, new: Key) -> Result<SealReport> {
    reseal(db, old, &Keyring::new(new, Vec::new())).await
}

/// Every live value not sealed with `new`'s key opened with `old` and sealed with
/// `new`; deleted connectors' values erased.
async fn reseal(db: &DatabaseConnection, old: &Keyring, new: &Keyring) -> Result<SealReport> {
    let key_id = new.sealing().ok_or_else(no_key)?;
    let mut report = SealReport {
        key_id: key_id.to_string(),
        ..Default::default()
    };
    let txn = crate::db::begin_write(db).await?;
    crate::db::generation::bump(&txn).await?;
    for row in connectors::Entity::find().all(&txn).await? {
        let values = stored(&row);
        if row.deleted_at.is_some() {
            if !values.is_empty() {
                erase(&txn, row).await?;
                report.erased += 1;
            }
            continue;
        }
        let mut headers = Map::new();
        let mut changed = false;
        for (name, value) in values {
            if secrets::sealed_with(&value) == Some(key_id) {
                report.unchanged += 1;
                headers.insert(name, Value::String(value));
                continue;
            }
            let context = context(row.id, &name);
            let plain = old
                .open(&value, &context)
                .map_err(|e| Error::refused("secrets_unreadable", format!("{}: {e}", row.name)))?;
            let sealed = new
                .seal(plain.expose(), &context)
                .map_err(Error::internal)?;
            headers.insert(name, Value::String(sealed));
            report.sealed += 1;
            changed = true;
        }
        if changed {
            let mut active: connectors::ActiveModel = row.into();
            active.headers = Set(Value::Object(headers));
            active.update(&txn).await?;
        }
    }
    reseal_webhook_secrets(&txn, old, new, key_id, &mut report).await?;
    reseal_model_keys(&txn, old, new, key_id, &mut report).await?;
    txn.commit().await?;
    Ok(report)
}

/// The webhook subscriptions' signing secrets, in the same transaction as the
/// header values: every live one not sealed with `new`'s key opened with `old`
/// and sealed with `new`; a deleted subscription's secret erased.
async fn reseal_webhook_secrets(
    txn: &impl ConnectionTrait,
    old: &Keyring,
    new: &Keyring,
    key_id: secrets::KeyId,
    report: &mut SealReport,
) -> Result<()> {
    for row in webhook_subscriptions::Entity::find().all(txn).await? {
        if row.deleted_at.is_some() {
            if !row.secret.is_empty() {
                let mut active: webhook_subscriptions::ActiveModel = row.into();
                active.secret = Set(String::new());
                active.update(txn).await?;
                report.erased += 1;
            }
            continue;
        }
        if secrets::sealed_with(&row.secret) == Some(key_id) {
            report.unchanged += 1;
            continue;
        }
        let context = secrets::webhook_secret_context(row.id);
        let plain = old.open(&row.secret, &context).map_err(|e| {
            Error::refused(
                "secrets_unreadable",
                format!("webhook subscription {}: {e}", row.id),
            )
        })?;
        let sealed = new
            .seal(plain.expose(), &context)
            .map_err(Error::internal)?;
        let mut active: webhook_subscriptions::ActiveModel = row.into();
        active.secret = Set(sealed);
        active.update(txn).await?;
        report.sealed += 1;
    }
    Ok(())
}

/// The model connections' API keys, in the same transaction: every live one not
/// sealed with `new`'s key opened with `old` and sealed with `new`; a deleted
/// connection's key erased.
async fn reseal_model_keys(
    txn: &impl ConnectionTrait,
    old: &Keyring,
    new: &Keyring,
    key_id: secrets::KeyId,
    report: &mut SealReport,
) -> Result<()> {
    for row in model_connections::Entity::find().all(txn).await? {
        let Some(stored) = row.api_key.clone().filter(|k| !k.is_empty()) else {
            continue;
        };
        if row.deleted_at.is_some() {
            let mut active: model_connections::ActiveModel = row.into();
            active.api_key = Set(None);
            active.update(txn).await?;
            report.erased += 1;
            continue;
        }
        if secrets::sealed_with(&stored) == Some(key_id) {
            report.unchanged += 1;
            continue;
        }
        let context = secrets::model_key_context(row.id);
        let plain = old.open(&stored, &context).map_err(|e| {
            Error::refused(
                "secrets_unreadable",
                format!("model connection {}: {e}", row.name),
            )
        })?;
        let sealed = new
            .seal(plain.expose(), &context)
            .map_err(Error::internal)?;
        let mut active: model_connections::ActiveModel = row.into();
        active.api_key = Set(Some(sealed));
        active.update(txn).await?;
        report.sealed += 1;
    }
    Ok(())
}

async fn erase(db: &impl ConnectionTrait, row: connectors::Model) -> Result<()> {
    let mut active: connectors::ActiveModel = row.into();
    active.headers = Set(Value::Object(Map::new()));
    active.update(db).await?;
    Ok(())
}
