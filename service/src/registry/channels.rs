//! Channels as an admin edits them: guidance and which optional sections render.

use chrono::{DateTime, Utc};
use entity::channels;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::guard;
use crate::cache::Generation;
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

pub async fn update(
    db: &DatabaseConnection,
    generation: &Generation,
    name: &str,
    update: ChannelUpdate,
) -> Result<ChannelView> {
    if let Some(text) = &update.guidance {
        check_size("guidance", text, MAX_GUIDANCE_BYTES)?;
    }
    let write = guard::begin(db).await?;
    let found = row(&*write, name).await?;
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
    active.updated_at = Set(Utc::now());
    let saved = active.update(&*write).await?;
    guard::commit(write, generation).await?;
    Ok(saved.into())
}
