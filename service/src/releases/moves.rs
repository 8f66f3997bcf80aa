//! Labels: named pointers from an agent to one of its revisions, and the record
//! of every move.

use chrono::{DateTime, Utc};
use entity::{agent_labels, label_moves};
use sea_orm::{ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Set};

use crate::error::Result;
use crate::events::{self, Event, LabelMoved};

/// The label every publish moves.
pub const LATEST: &str = "latest";
/// The label served when none is asked for; a publish moves it in `direct` mode.
/// Always protected.
pub const PRODUCTION: &str = "production";

/// A move made by publishing.
pub const PUBLISH: &str = "publish";
/// A move an operator made by hand (an unprotected label, or any of a `direct` agent).
pub const MOVE: &str = "move";
/// A move an approved change request made.
pub const PROMOTE: &str = "promote";
/// A move back to the revision the label held just before, made at once.
pub const ROLLBACK: &str = "rollback";
/// A move to a rollout's candidate when the rollout completed.
pub const ROLLOUT: &str = "rollout";

/// Where a label is to go, why, by whom and when.
pub struct Move<'a> {
    pub agent_id: i32,
    pub to_revision_id: i32,
    pub kind: &'static str,
    pub actor: Option<&'a str>,
    pub at: DateTime<Utc>,
}

/// What a move by hand or by sign-off records besides [`Move`].
#[derive(Default)]
pub struct Why<'a> {
    /// Who signed off a `promote`.
    pub approver: Option<&'a str>,
    pub reason: Option<&'a str>,
    /// The change request a `promote` carries out.
    pub change_request_id: Option<i32>,
}

/// Points `label` at the move's revision, creating the label if the agent has
/// none of that name, and records the move. A label already there does not move
/// and records nothing (false).
pub async fn move_label(db: &impl ConnectionTrait, label: &str, mv: &Move<'_>) -> Result<bool> {
    move_label_why(db, label, mv, &Why::default()).await
}

/// [`move_label`], recording who signed off, why and which change request.
pub async fn move_label_why(
    db: &impl ConnectionTrait,
    label: &str,
    mv: &Move<'_>,
    why: &Why<'_>,
) -> Result<bool> {
    let found = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(mv.agent_id))
        .filter(agent_labels::Column::Name.eq(label))
        .one(db)
        .await?;
    let from = match found {
        Some(row) if row.revision_id == mv.to_revision_id => return Ok(false),
        Some(row) => {
            let from = row.revision_id;
            let mut active: agent_labels::ActiveModel = row.into();
            active.revision_id = Set(mv.to_revision_id);
            active.updated_at = Set(mv.at);
            active.update(db).await?;
            Some(from)
        }
        None => {
            agent_labels::ActiveModel {
                agent_id: Set(mv.agent_id),
                name: Set(label.to_owned()),
                revision_id: Set(mv.to_revision_id),
                protected: Set(label == PRODUCTION),
                updated_at: Set(mv.at),
                ..Default::default()
            }
            .insert(db)
            .await?;
            None
        }
    };
    label_moves::ActiveModel {
        agent_id: Set(mv.agent_id),
        label: Set(label.to_owned()),
        from_revision_id: Set(from),
        to_revision_id: Set(mv.to_revision_id),
        kind: Set(mv.kind.to_owned()),
        actor: Set(mv.actor.map(str::to_owned)),
        approver: Set(why.approver.map(str::to_owned)),
        reason: Set(why.reason.map(str::to_owned)),
        change_request_id: Set(why.change_request_id),
        created_at: Set(mv.at),
        ..Default::default()
    }
    .insert(db)
    .await?;
    let moved = LabelMoved {
        agent: events::agent_name(db, mv.agent_id).await?,
        label: label.to_owned(),
        from: match from {
            Some(id) => Some(events::revision_number(db, id).await?),
            None => None,
        },
        to: events::revision_number(db, mv.to_revision_id).await?,
        kind: mv.kind.to_owned(),
        actor: mv.actor.map(str::to_owned),
        approver: why.approver.map(str::to_owned),
        reason: why.reason.map(str::to_owned),
        change_request: why.change_request_id,
    };
    events::record(db, mv.at, Event::LabelMoved(moved)).await?;
    Ok(true)
}
