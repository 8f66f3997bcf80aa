//! Reading the ledger, always in one tenant: a proposal and its events, a page of a
//! conversation's proposals, the queue, and how many wait for a decision.

use std::collections::BTreeMap;

use entity::{proposal_events, proposals};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::state::{LedgerError, State};

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

/// Up to `limit` of a conversation's proposals with an id above `after`, oldest
/// first (by id, which never changes, so pages neither skip nor repeat a
/// proposal), and the `after` of the next page when there is one.
pub async fn conversation(
    db: &impl ConnectionTrait,
    tenant: &str,
    conversation: &str,
    limit: u64,
    after: Option<i32>,
) -> Result<(Vec<proposals::Model>, Option<i32>), LedgerError> {
    let mut query = proposals::Entity::find()
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::ConversationId.eq(conversation))
        .order_by_asc(proposals::Column::Id)
        .limit(limit + 1);
    if let Some(after) = after {
        query = query.filter(proposals::Column::Id.gt(after));
    }
    let mut rows = query.all(db).await?;
    let more = rows.len() as u64 > limit;
    rows.truncate(limit as usize);
    let next = rows.last().filter(|_| more).map(|last| last.id);
    Ok((rows, next))
}

/// Up to `limit` of the tenant's proposals, newest first: those in `only` when
/// given, otherwise every state.
pub async fn queue(
    db: &impl ConnectionTrait,
    tenant: &str,
    only: Option<State>,
    limit: u64,
) -> Result<Vec<proposals::Model>, LedgerError> {
    let mut query = proposals::Entity::find()
        .filter(proposals::Column::TenantId.eq(tenant))
        .order_by_desc(proposals::Column::Id)
        .limit(limit);
    if let Some(only) = only {
        query = query.filter(proposals::Column::State.eq(only.as_str()));
    }
    Ok(query.all(db).await?)
}

/// How many of the tenant's proposals wait for a decision.
pub async fn pending(db: &impl ConnectionTrait, tenant: &str) -> Result<u64, LedgerError> {
    Ok(proposals::Entity::find()
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::State.eq(State::Proposed.as_str()))
        .count(db)
        .await?)
}

/// Proposals waiting for a decision in `tenant`, counted per agent (of `agents`).
pub async fn pending_by_agent(
    db: &impl ConnectionTrait,
    tenant: &str,
    agents: &[i32],
) -> Result<BTreeMap<i32, i64>, LedgerError> {
    let rows: Vec<(i32, i64)> = proposals::Entity::find()
        .select_only()
        .column(proposals::Column::AgentId)
        .column_as(proposals::Column::Id.count(), "waiting")
        .filter(proposals::Column::TenantId.eq(tenant))
        .filter(proposals::Column::State.eq(State::Proposed.as_str()))
        .filter(proposals::Column::AgentId.is_in(agents.iter().copied()))
        .group_by(proposals::Column::AgentId)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().collect())
}
