//! Model connections: the OpenAI-compatible endpoints evaluations ask. Operators
//! register them (shared, like connectors); admins read them to pick one for a run.
//!
//! The base URL is checked with the connectors' address rules when saved (and the
//! client checks it again at every connect, redirects never followed); the API key
//! is sealed at rest bound to the connection's id, write-only, never logged.

use chrono::{DateTime, Utc};
use entity::model_connections;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::chat::Structured;
use crate::connectors::client::Outbound;
use crate::db::idempotency::{Pending, record_if};
use crate::error::{Error, Result, check_size};
use crate::secrets::{self, Keyring, SealError, Secret};

/// The most connections an instance holds.
pub const MAX_CONNECTIONS: usize = 100;
/// The most model names a connection lists.
pub const MAX_MODELS: usize = 50;
/// Timeouts per model call, in milliseconds.
pub const TIMEOUT_MS: std::ops::RangeInclusive<i32> = 1_000..=600_000;
const DEFAULT_TIMEOUT_MS: i32 = 120_000;
const MAX_URL_BYTES: usize = 2048;
const MAX_KEY_BYTES: usize = 4096;

/// A connection as the API shows it: never its key.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ConnectionView {
    pub name: String,
    pub base_url: String,
    pub models: Vec<String>,
    /// Whether an API key is stored (it is never shown).
    pub has_api_key: bool,
    pub timeout_ms: i32,
    pub structured: Structured,
    /// Price per million prompt tokens, for `cost` assertions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_price: Option<f64>,
    /// Price per million completion tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_price: Option<f64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The live connections.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConnectionList {
    pub connections: Vec<ConnectionView>,
}

/// A new connection.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConnection {
    pub name: String,
    /// `https://api.openai.com/v1`; `/chat/completions` is added. `http://` and
    /// private or loopback addresses only where `--connector-allow` names them.
    pub base_url: String,
    /// The model names runs may ask for; the first is the default.
    pub models: Vec<String>,
    /// Sent as `Authorization: Bearer …`; sealed at rest, never shown.
    #[serde(default)]
    pub api_key: Option<String>,
    /// Per model call (default 120000).
    #[serde(default)]
    pub timeout_ms: Option<i32>,
    /// How a response schema is asked for (default `json_schema`; llama.cpp's
    /// servers take `json_object_schema`).
    #[serde(default)]
    pub structured: Option<Structured>,
    #[serde(default)]
    pub input_price: Option<f64>,
    #[serde(default)]
    pub output_price: Option<f64>,
}

/// A change: each field given replaces the stored one; `api_key: ""` removes the key.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectionPatch {
    pub base_url: Option<String>,
    pub models: Option<Vec<String>>,
    pub api_key: Option<String>,
    pub timeout_ms: Option<i32>,
    pub structured: Option<Structured>,
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
}

/// A connection opened for a call: its endpoint and key.
pub struct Opened {
    pub row: model_connections::Model,
    pub models: Vec<String>,
    pub api_key: Option<Secret>,
    pub structured: Structured,
}

impl Opened {
    /// The model `asked`, or the connection's first; 422 when it lists no such model.
    pub fn model(&self, asked: Option<&str>) -> Result<String> {
        match asked {
            None => self
                .models
                .first()
                .cloned()
                .ok_or_else(|| Error::refused("invalid_model", "the connection lists no model")),
            Some(name) if self.models.iter().any(|m| m == name) => Ok(name.to_owned()),
            Some(name) => Err(Error::refused(
                "invalid_model",
                format!(
                    "the connection {} lists no model {name:?} (models: {})",
                    self.row.name,
                    self.models.join(", ")
                ),
            )),
        }
    }

    /// The cost of `prompt` and `completion` tokens, when the connection has prices.
    pub fn cost(&self, prompt: i64, completion: i64) -> Option<f64> {
        let (input, output) = (self.row.input_price?, self.row.output_price?);
        Some((prompt as f64 * input + completion as f64 * output) / 1_000_000.0)
    }
}

/// The stored mode; an unknown one reads as OpenAI's.
fn structured(text: &str) -> Structured {
    text.parse().unwrap_or(Structured::JsonSchema)
}

fn view(row: &model_connections::Model) -> ConnectionView {
    ConnectionView {
        name: row.name.clone(),
        base_url: row.base_url.clone(),
        models: models(row),
        has_api_key: row.api_key.as_deref().is_some_and(|k| !k.is_empty()),
        timeout_ms: row.timeout_ms,
        structured: structured(&row.structured),
        input_price: row.input_price,
        output_price: row.output_price,
        created_at: row.created_at,
        updated_at: row.updated_at,
    }
}

fn models(row: &model_connections::Model) -> Vec<String> {
    serde_json::from_str(&row.models).unwrap_or_default()
}

/// The live connection `name`, or 404.
pub async fn find(db: &impl ConnectionTrait, name: &str) -> Result<model_connections::Model> {
    model_connections::Entity::find()
        .filter(model_connections::Column::Name.eq(name))
        .filter(model_connections::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no model connection {name:?}")))
}

/// Connection `id`, deleted ones too: a run names the connection it started with.
pub async fn by_id(db: &impl ConnectionTrait, id: i32) -> Result<model_connections::Model> {
    model_connections::Entity::find_by_id(id)
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no model connection {id}")))
}

/// `row` with its key opened for a call.
pub fn open(keyring: &Keyring, row: model_connections::Model) -> Result<Opened> {
    let api_key = match row.api_key.as_deref() {
        None | Some("") => None,
        Some(stored) => Some(
            keyring
                .open(stored, &secrets::model_key_context(row.id))
                .map_err(|e| Error::refused("secrets_unreadable", format!("{}: {e}", row.name)))?,
        ),
    };
    Ok(Opened {
        models: models(&row),
        structured: structured(&row.structured),
        api_key,
        row,
    })
}

/// `row` without its key: what a plan needs (its models), never sent anywhere.
pub fn unopened(row: model_connections::Model) -> Opened {
    Opened {
        models: models(&row),
        structured: structured(&row.structured),
        api_key: None,
        row,
    }
}

/// Every live connection, by name.
pub async fn list(db: &DatabaseConnection) -> Result<ConnectionList> {
    let rows = model_connections::Entity::find()
        .filter(model_connections::Column::DeletedAt.is_null())
        .order_by_asc(model_connections::Column::Name)
        .all(db)
        .await?;
    Ok(ConnectionList {
        connections: rows.iter().map(view).collect(),
    })
}

/// The live connection `name` as the API shows it.
pub async fn get(db: &DatabaseConnection, name: &str) -> Result<ConnectionView> {
    Ok(view(&find(db, name).await?))
}

/// What saving a connection needs besides the request.
pub struct Sealing<'a> {
    pub outbound: &'a Outbound,
    pub keyring: &'a Keyring,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::refused("invalid_connection", message)
}

fn check_models(models: &[String]) -> Result<String> {
    if models.is_empty() || models.len() > MAX_MODELS {
        return Err(invalid(format!(
            "models: list 1 to {MAX_MODELS} model names"
        )));
    }
    for name in models {
        check_size("models[]", name, crate::releases::model::MAX_MODEL_BYTES)?;
        if name.trim().is_empty() || name.chars().any(char::is_control) {
            return Err(invalid(format!("models: {name:?} is not a model name")));
        }
    }
    serde_json::to_string(models).map_err(Error::internal)
}

fn check_timeout(ms: i32) -> Result<i32> {
    match TIMEOUT_MS.contains(&ms) {
        true => Ok(ms),
        false => Err(invalid(format!(
            "timeout_ms must be {} to {}",
            TIMEOUT_MS.start(),
            TIMEOUT_MS.end()
        ))),
    }
}

fn check_price(what: &str, price: Option<f64>) -> Result<Option<f64>> {
    match price {
        Some(p) if !p.is_finite() || p < 0.0 => Err(invalid(format!(
            "{what} is a price per million tokens, 0 or more"
        ))),
        other => Ok(other),
    }
}

async fn check_base_url(outbound: &Outbound, url: &str) -> Result<String> {
    check_size("base_url", url, MAX_URL_BYTES)?;
    outbound
        .check_url(url)
        .await
        .map_err(|e| Error::refused("url_refused", e.0))?;
    Ok(url.trim_end_matches('/').to_owned())
}

async fn store_key(
    db: &impl ConnectionTrait,
    keyring: &Keyring,
    row: model_connections::Model,
    key: Option<&str>,
) -> Result<model_connections::Model> {
    let sealed = match key {
        None | Some("") => None,
        Some(key) => {
            check_size("api_key", key, MAX_KEY_BYTES)?;
            let sealed = keyring
                .seal(key, &secrets::model_key_context(row.id))
                .map_err(|e| match e {
                    SealError::NoKey => crate::connectors::client::sealing::no_key(),
                    other => Error::internal(other),
                })?;
            Some(sealed)
        }
    };
    let mut active: model_connections::ActiveModel = row.into();
    active.api_key = Set(sealed);
    Ok(active.update(db).await?)
}

/// Registers a connection (operators).
pub async fn create(
    db: &DatabaseConnection,
    sealing: &Sealing<'_>,
    new: NewConnection,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<ConnectionView> {
    if !crate::vocab::valid_name(&new.name) {
        return Err(Error::refused(
            "invalid_name",
            format!(
                "{:?} is not a name: lowercase letters, digits and _",
                new.name
            ),
        ));
    }
    let base_url = check_base_url(sealing.outbound, &new.base_url).await?;
    let models = check_models(&new.models)?;
    let timeout = check_timeout(new.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS))?;
    let input_price = check_price("input_price", new.input_price)?;
    let output_price = check_price("output_price", new.output_price)?;
    let txn = crate::db::begin_write(db).await?;
    crate::db::bounds::serialize(&txn, "model_connections", "").await?;
    let live = model_connections::Entity::find()
        .filter(model_connections::Column::DeletedAt.is_null())
        .all(&txn)
        .await?;
    if live.iter().any(|c| c.name == new.name) {
        return Err(Error::conflict(format!(
            "a model connection {:?} exists",
            new.name
        )));
    }
    if live.len() >= MAX_CONNECTIONS {
        return Err(Error::refused(
            crate::error::LIMIT_REACHED,
            format!("this instance holds {MAX_CONNECTIONS} model connections, the most it may"),
        ));
    }
    let row = model_connections::ActiveModel {
        name: Set(new.name),
        base_url: Set(base_url),
        models: Set(models),
        api_key: Set(None),
        timeout_ms: Set(timeout),
        structured: Set(new
            .structured
            .unwrap_or(Structured::JsonSchema)
            .as_str()
            .to_owned()),
        input_price: Set(input_price),
        output_price: Set(output_price),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&txn)
    .await?;
    let row = store_key(&txn, sealing.keyring, row, new.api_key.as_deref()).await?;
    record_if(&txn, key).await?;
    txn.commit().await?;
    Ok(view(&row))
}

/// Changes a connection (operators).
pub async fn update(
    db: &DatabaseConnection,
    sealing: &Sealing<'_>,
    name: &str,
    patch: ConnectionPatch,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<ConnectionView> {
    let base_url = match &patch.base_url {
        Some(url) => Some(check_base_url(sealing.outbound, url).await?),
        None => None,
    };
    let models = patch.models.as_deref().map(check_models).transpose()?;
    let timeout = patch.timeout_ms.map(check_timeout).transpose()?;
    let input_price = check_price("input_price", patch.input_price)?;
    let output_price = check_price("output_price", patch.output_price)?;
    let txn = crate::db::begin_write(db).await?;
    let row = find(&txn, name).await?;
    let mut active: model_connections::ActiveModel = row.into();
    if let Some(url) = base_url {
        active.base_url = Set(url);
    }
    if let Some(models) = models {
        active.models = Set(models);
    }
    if let Some(ms) = timeout {
        active.timeout_ms = Set(ms);
    }
    if let Some(structured) = patch.structured {
        active.structured = Set(structured.as_str().to_owned());
    }
    if input_price.is_some() {
        active.input_price = Set(input_price);
    }
    if output_price.is_some() {
        active.output_price = Set(output_price);
    }
    active.updated_at = Set(now);
    let mut row = active.update(&txn).await?;
    if let Some(api_key) = patch.api_key.as_deref() {
        row = store_key(&txn, sealing.keyring, row, Some(api_key)).await?;
    }
    record_if(&txn, key).await?;
    txn.commit().await?;
    Ok(view(&row))
}

/// Deletes a connection (softly) and erases its key. Runs that used it keep their
/// results; a queued or running one fails at its next case.
pub async fn delete(
    db: &DatabaseConnection,
    name: &str,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<ConnectionView> {
    let txn = crate::db::begin_write(db).await?;
    let row = find(&txn, name).await?;
    let mut active: model_connections::ActiveModel = row.into();
    active.api_key = Set(None);
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    let row = active.update(&txn).await?;
    record_if(&txn, key).await?;
    txn.commit().await?;
    Ok(view(&row))
}
