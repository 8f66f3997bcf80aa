//! Whether a `user_configurable` tool runs for a user without asking, per tenant.

use entity::{tools, user_tool_preferences as prefs};
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Set};
use serde::Deserialize;
use utoipa::ToSchema;

use super::views::PreferenceView;
use crate::auth::Principal;
use crate::db::Writer;
use crate::error::{Error, Result, check_id, check_name};
use crate::vocab::Tier;

/// The body of `PUT /v1/users/{user_id}/tools/{tool}/preference`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Preference {
    pub auto_approve: bool,
}

pub async fn set(
    w: &Writer<'_>,
    who: &Principal,
    user: &str,
    tool: &str,
    preference: Preference,
) -> Result<PreferenceView> {
    check_id("user_id", user)?;
    check_name("tool", tool)?;
    let row = tools::Entity::find()
        .filter(tools::Column::Name.eq(tool))
        .filter(tools::Column::DeletedAt.is_null())
        .one(w.db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no tool named {tool:?}")))?;
    if row.approval_tier.parse() != Ok(Tier::UserConfigurable) {
        return Err(Error::refused(
            "not_user_configurable",
            format!(
                "{tool} is {}; only user_configurable tools take a user preference",
                row.approval_tier
            ),
        ));
    }
    // One upsert on the unique (tenant, user, tool) key: concurrent PUTs never race
    // a check-then-insert, and the last one wins, as a PUT should.
    let now = w.now;
    let row = prefs::ActiveModel {
        tenant_id: Set(who.tenant().to_owned()),
        user_id: Set(user.to_owned()),
        tool_id: Set(row.id),
        auto_approve: Set(preference.auto_approve),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    };
    let txn = crate::db::begin_write(w.db).await?;
    crate::db::idempotency::record_if(&txn, w.key).await?;
    prefs::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([
                prefs::Column::TenantId,
                prefs::Column::UserId,
                prefs::Column::ToolId,
            ])
            .update_columns([prefs::Column::AutoApprove, prefs::Column::UpdatedAt])
            .to_owned(),
        )
        .exec(&txn)
        .await?;
    txn.commit().await?;
    Ok(PreferenceView {
        user_id: user.to_owned(),
        tool: tool.to_owned(),
        auto_approve: preference.auto_approve,
    })
}
