//! Agent configurations as an admin edits them: identity, soul and sections
//! ([`config`]), the versioned prompt template ([`template`]), users' standing
//! instructions ([`instructions`]) and previews of unsaved templates ([`preview`]).
//! Every write goes through the registry write guard ([`crate::registry::guard`]).

pub mod config;
pub mod instructions;
pub mod preview;
pub mod template;

use entity::agent_configurations;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};

use crate::error::{Error, Result, check_name};

pub use crate::vocab::MAX_TEXT_BYTES;

/// The live agent of that name; 404 otherwise.
pub async fn row(db: &impl ConnectionTrait, name: &str) -> Result<agent_configurations::Model> {
    check_name("agent", name)?;
    agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(name))
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent named {name:?}")))
}

/// Identity must be a JSON object (display_name, role, description).
fn check_identity(identity: &serde_json::Value) -> Result<()> {
    if identity.is_object() {
        Ok(())
    } else {
        Err(Error::refused(
            "invalid_identity",
            "identity must be a JSON object (display_name, role, description)",
        ))
    }
}
