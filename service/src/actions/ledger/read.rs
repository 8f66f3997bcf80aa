//! Reading the ledger: one proposal and its events, in its tenant.

use entity::{proposal_events, proposals};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};

use super::state::LedgerError;

/// A proposal of this tenant.
pub async fn get(
    db: &impl ConnectionTrait,
    tenant: &str,
    id: i32,
) -> Result<proposals::Model, LedgerError> {
    proposals::Entity::find_by_id(id)
        .filter(proposals::Column::TenantId.eq(tenant))
        .one(db)
        .await?
        .ok_or(LedgerError::NotFound)
}

/// A proposal's events, oldest first.
pub async fn events(
    db: &impl ConnectionTrait,
    tenant: &str,
    id: i32,
) -> Result<Vec<proposal_events::Model>, LedgerError> {
    get(db, tenant, id).await?;
    Ok(proposal_events::Entity::find()
        .filter(proposal_events::Column::ProposalId.eq(id))
        .filter(proposal_events::Column::TenantId.eq(tenant))
        .order_by_asc(proposal_events::Column::Id)
        .all(db)
        .await?)
}
