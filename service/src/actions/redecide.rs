//! An approval is an input to a new decision: before an approved proposal runs,
//! the policy that `production` serves the proposal's user now (the rollout's side
//! included) decides it again, so a proposal approved under rules since tightened
//! to deny does not run.

use entity::{agent_configurations, proposal_events, proposals};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};

use super::views::DecidedBy;
use crate::error::Result;
use crate::policies::{Outcome, Who};
use crate::releases::content::Content;
use crate::releases::traffic::Side;
use crate::releases::{PRODUCTION, serve, traffic};
use crate::vocab::Tier;

/// The revision and policy that deny `row` now; `None` when it may run.
pub async fn denied_now(
    db: &DatabaseConnection,
    row: &proposals::Model,
) -> Result<Option<DecidedBy>> {
    let Some(agent) = agent_configurations::Entity::find_by_id(row.agent_id)
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let Some(base) = serve::by_label(db, agent.id, PRODUCTION).await? else {
        return Ok(None);
    };
    let subject = row.user_id.as_deref().or(Some(&row.conversation_id));
    let revision = match traffic::running(db, agent.id, PRODUCTION).await? {
        Some(running) if running.side(&agent.name, PRODUCTION, subject) == Side::Candidate => {
            serve::by_number(db, agent.id, running.candidate)
                .await?
                .unwrap_or(base)
        }
        _ => base,
    };
    let content = Content::parse(&revision.content)?;
    let Some(policy) = serve::policy_off_workers(&content).await? else {
        return Ok(None);
    };
    let Some(tool) = content.tools.iter().find(|t| t.name == row.tool_name) else {
        // Not served any more: `withdrawn` ends it unrun.
        return Ok(None);
    };
    // The member who made the call: its proposal's first event's actor.
    let member = proposal_events::Entity::find()
        .filter(proposal_events::Column::ProposalId.eq(row.id))
        .order_by_asc(proposal_events::Column::Id)
        .one(db)
        .await?
        .map(|e| e.actor)
        .unwrap_or_default();
    let groups = match content.groups_of(&row.tenant_id, row.user_id.as_deref()) {
        Some(groups) => groups,
        None => {
            crate::policies::groups::of_user(db, &row.tenant_id, row.user_id.as_deref()).await?
        }
    };
    let who = Who {
        tenant: &row.tenant_id,
        member: &member,
        user: row.user_id.as_deref(),
        groups: &groups,
    };
    let tier = Tier::or_safest(&tool.approval_tier);
    let decision = policy.decide(&row.tool_name, tier, &row.arguments, who);
    Ok((decision.outcome == Outcome::Deny).then_some(DecidedBy {
        revision: revision.number,
        policy: decision.policy,
        reason: decision.reason,
    }))
}
