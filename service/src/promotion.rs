//! Promotion, in one room: how a label moves. An operator moves a label at once or,
//! for a protected label of a gated agent, by a change request that someone else
//! signs off ([`labels`], [`change_requests`]); a rollout serves a candidate to a
//! share of users until it is completed or aborted ([`rollouts`]). Every write
//! goes through the registry write guard; the rows and the record of each move are
//! [`crate::releases`]' ([`crate::releases::moves`], [`crate::releases::traffic`]).

pub mod change_requests;
pub mod checks;
pub mod labels;
pub mod replay;
pub mod rollouts;
pub mod snapshots;
