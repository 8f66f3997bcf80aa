//! A user's standing instructions for an agent, as an admin reads and sets them; always
//! within the admin key's tenant.

use entity::user_agent_prompt_customizations as uapc;
use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{MAX_TEXT_BYTES, row};
use crate::db::Writer;
use crate::error::{Result, check_id, check_size};

/// A user's instructions; `null` when there are none (or they are switched off).
#[derive(Debug, Serialize, ToSchema)]
pub struct InstructionsView {
    pub agent: String,
    pub user_id: String,
    pub instructions: Option<String>,
}

/// The body of `PUT .../users/{user_id}/instructions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstructionsPut {
    /// `null` switches the user's instructions off (the row is kept, inactive).
    pub instructions: Option<String>,
}

/// `tenant`'s user's instructions for the agent.
pub async fn get(
    db: &DatabaseConnection,
    tenant: &str,
    agent: &str,
    user: &str,
) -> Result<InstructionsView> {
    check_id("user_id", user)?;
    let found = row(db, agent).await?;
    let instructions = crate::prompt::load::user_instructions(db, tenant, found.id, user).await?;
    Ok(InstructionsView {
        agent: found.name,
        user_id: user.to_owned(),
        instructions,
    })
}

/// Sets `tenant`'s user's instructions, or switches them off; the next prompt shows it.
pub async fn put(
    w: &Writer<'_>,
    tenant: &str,
    agent: &str,
    user: &str,
    put: InstructionsPut,
) -> Result<InstructionsView> {
    check_id("user_id", user)?;
    if let Some(text) = &put.instructions {
        check_size("instructions", text, MAX_TEXT_BYTES)?;
    }
    let write = w.begin_for_agents().await?;
    let found = row(&*write, agent).await?;
    let existing = uapc::Entity::find()
        .filter(uapc::Column::TenantId.eq(tenant))
        .filter(uapc::Column::AgentId.eq(found.id))
        .filter(uapc::Column::UserId.eq(user))
        .one(&*write)
        .await?;
    let now = write.now();
    match (existing, &put.instructions) {
        (Some(existing), text) => {
            let mut active: uapc::ActiveModel = existing.into();
            if let Some(text) = text {
                active.instructions = Set(text.clone());
            }
            active.is_active = Set(text.is_some());
            active.deleted_at = Set(None);
            active.updated_at = Set(now);
            active.update(&*write).await?;
        }
        (None, Some(text)) => {
            uapc::ActiveModel {
                tenant_id: Set(tenant.to_owned()),
                user_id: Set(user.to_owned()),
                agent_id: Set(found.id),
                instructions: Set(text.clone()),
                is_active: Set(true),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(&*write)
            .await?;
        }
        (None, None) => {}
    }
    let changed = crate::events::Instructions {
        tenant: tenant.to_owned(),
        agent: found.name.clone(),
        user: user.to_owned(),
        active: put.instructions.is_some(),
    };
    crate::events::record(
        &*write,
        now,
        crate::events::Event::InstructionsChanged(changed),
    )
    .await?;
    w.commit(write).await?;
    Ok(InstructionsView {
        agent: found.name,
        user_id: user.to_owned(),
        instructions: put.instructions,
    })
}
