//! What the console's overview shows of each agent's releases: its labels and the
//! revisions they serve, its running rollouts, and its change requests waiting for
//! a sign-off. One query per table for a page of agents.

use std::collections::BTreeMap;

use entity::{agent_configurations, agent_labels, agent_revisions, change_requests, rollouts};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::Serialize;

use crate::error::Result;
use crate::promotion::change_requests::ChangeState;
use crate::releases::traffic::RolloutState;

/// One agent's releases at a glance.
#[derive(Debug, Default, Serialize)]
pub struct Board {
    #[serde(skip)]
    pub agent_id: i32,
    /// Label name and the revision number it serves, by name.
    pub labels: Vec<(String, i32)>,
    pub rollouts: Vec<Running>,
    /// Change requests waiting for a sign-off.
    pub waiting: usize,
}

/// A rollout that has not ended (active or paused).
#[derive(Debug, Serialize)]
pub struct Running {
    pub label: String,
    pub state: String,
    /// The candidate's share, in percent.
    pub percent: f64,
}

/// The boards of the live agents named, by name.
pub async fn boards(
    db: &impl ConnectionTrait,
    names: &[String],
) -> Result<BTreeMap<String, Board>> {
    let ids: Vec<(i32, String)> = agent_configurations::Entity::find()
        .select_only()
        .column(agent_configurations::Column::Id)
        .column(agent_configurations::Column::Name)
        .filter(agent_configurations::Column::Name.is_in(names.iter().map(String::as_str)))
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .into_tuple()
        .all(db)
        .await?;
    let agents: Vec<i32> = ids.iter().map(|(id, _)| *id).collect();
    let mut out: BTreeMap<i32, Board> = ids
        .iter()
        .map(|(id, _)| {
            let board = Board {
                agent_id: *id,
                ..Board::default()
            };
            (*id, board)
        })
        .collect();
    let labels = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.is_in(agents.iter().copied()))
        .order_by_asc(agent_labels::Column::Name)
        .all(db)
        .await?;
    let numbers: BTreeMap<i32, i32> = agent_revisions::Entity::find()
        .select_only()
        .column(agent_revisions::Column::Id)
        .column(agent_revisions::Column::Number)
        .filter(agent_revisions::Column::Id.is_in(labels.iter().map(|l| l.revision_id)))
        .into_tuple()
        .all(db)
        .await?
        .into_iter()
        .collect();
    for label in labels {
        if let (Some(board), Some(number)) = (
            out.get_mut(&label.agent_id),
            numbers.get(&label.revision_id),
        ) {
            board.labels.push((label.name, *number));
        }
    }
    let running = rollouts::Entity::find()
        .filter(rollouts::Column::AgentId.is_in(agents.iter().copied()))
        .filter(rollouts::Column::State.is_in(RolloutState::RUNNING.map(RolloutState::as_str)))
        .all(db)
        .await?;
    for r in running {
        if let Some(board) = out.get_mut(&r.agent_id) {
            board.rollouts.push(Running {
                label: r.label,
                state: r.state,
                percent: f64::from(r.share_bp) / 100.0,
            });
        }
    }
    let waiting: Vec<i32> = change_requests::Entity::find()
        .select_only()
        .column(change_requests::Column::AgentId)
        .filter(change_requests::Column::AgentId.is_in(agents.iter().copied()))
        .filter(change_requests::Column::State.eq(ChangeState::Pending.as_str()))
        .into_tuple()
        .all(db)
        .await?;
    for agent in waiting {
        if let Some(board) = out.get_mut(&agent) {
            board.waiting += 1;
        }
    }
    Ok(ids
        .into_iter()
        .filter_map(|(id, name)| Some((name, out.remove(&id)?)))
        .collect())
}
