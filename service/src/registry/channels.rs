//! Channels as an admin edits them: guidance and which optional sections render.

use crate::db::Writer;
use chrono::{DateTime, Utc};
use entity::channels;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::guard;
use crate::error::{Error, Result, check_name, check_size};

/// Guidance is limited to this many bytes.
const MAX_GUIDANCE_BYTES: usize = 64 * 1024;

/// A channel.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelView {
    pub name: String,
    pub description: String,
    /// `$channel_guidance`.
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
    pub updated_at: DateTime<Utc>,
}

impl From<channels::Model> for ChannelView {
    fn from(c: channels::Model) -> Self {
        Self {
            name: c.name,
            description: c.description,
            guidance: c.guidance,
            include_operating_model: c.include_operating_model,
            include_interaction_learning: c.include_interaction_learning,
            include_session_section: c.include_session_section,
            updated_at: c.updated_at,
        }
    }
}

/// Channels by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChannelList {
    pub channels: Vec<ChannelView>,
}

/// The fields of `PATCH /v1/channels/{channel}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelUpdate {
    pub description: Option<String>,
    /// At most 65536 bytes.
    pub guidance: Option<String>,
    pub include_operating_model: Option<bool>,
    pub include_interaction_learning: Option<bool>,
    pub include_session_section: Option<bool>,
}

async fn row(db: &impl ConnectionTrait, name: &str) -> Result<channels::Model> {
    check_name("channel", name)?;
    channels::Entity::find()
        .filter(channels::Column::Name.eq(name))
        .filter(channels::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no channel named {name:?}")))
}

pub async fn list(db: &DatabaseConnection) -> Result<ChannelList> {
    let rows = channels::Entity::find()
        .filter(channels::Column::DeletedAt.is_null())
        .order_by_asc(channels::Column::Name)
        .all(db)
        .await?;
    Ok(ChannelList {
        channels: rows.into_iter().map(ChannelView::from).collect(),
    })
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<ChannelView> {
    Ok(row(db, name).await?.into())
}

/// A new channel, whole (configuration as code makes channels; the API edits them).
#[derive(Debug, Clone)]
pub struct NewChannel {
    pub name: String,
    pub description: String,
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
}

fn check_guidance(text: &str) -> Result<()> {
    check_size("guidance", text, MAX_GUIDANCE_BYTES)
}

/// Creates a channel inside an open registry write.
pub async fn create_in(write: &guard::Write, new: NewChannel) -> Result<channels::Model> {
    write.covers_registry()?;
    check_name("channel", &new.name)?;
    check_guidance(&new.guidance)?;
    let now = write.now();
    let name = new.name.clone();
    channels::ActiveModel {
        name: Set(new.name),
        description: Set(new.description),
        guidance: Set(new.guidance),
        include_operating_model: Set(new.include_operating_model),
        include_interaction_learning: Set(new.include_interaction_learning),
        include_session_section: Set(new.include_session_section),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&**write)
    .await
    .map_err(|e| {
        Error::from_db(e, || {
            format!(
                "a channel named {name:?} exists (or existed: names of deleted channels stay taken)"
            )
        })
    })
}

/// Applies `PATCH /v1/channels/{channel}` inside an open registry write.
pub async fn update_in(
    write: &guard::Write,
    name: &str,
    update: ChannelUpdate,
) -> Result<channels::Model> {
    write.covers_registry()?;
    if let Some(text) = &update.guidance {
        check_guidance(text)?;
    }
    let found = row(&**write, name).await?;
    let mut active: channels::ActiveModel = found.into();
    if let Some(text) = update.description {
        active.description = Set(text);
    }
    if let Some(text) = update.guidance {
        active.guidance = Set(text);
    }
    if let Some(on) = update.include_operating_model {
        active.include_operating_model = Set(on);
    }
    if let Some(on) = update.include_interaction_learning {
        active.include_interaction_learning = Set(on);
    }
    if let Some(on) = update.include_session_section {
        active.include_session_section = Set(on);
    }
    active.updated_at = Set(write.now());
    Ok(active.update(&**write).await?)
}

/// Soft-deletes a live channel inside an open registry write.
pub async fn delete_in(write: &guard::Write, name: &str) -> Result<channels::Model> {
    write.covers_registry()?;
    let found = row(&**write, name).await?;
    let now = write.now();
    let mut active: channels::ActiveModel = found.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(active.update(&**write).await?)
}

pub async fn update(w: &Writer<'_>, name: &str, update: ChannelUpdate) -> Result<ChannelView> {
    if let Some(text) = &update.guidance {
        check_guidance(text)?;
    }
    let write = w.begin().await?;
    let saved = update_in(&write, name, update).await?;
    w.commit(write).await?;
    Ok(saved.into())
}
