//! Write tools don't act, they propose: tool calls ([`call`]), the proposal ledger
//! ([`ledger`]), argument validation ([`arguments`]), what an approver reads
//! ([`describe`], [`views`]) and decides ([`decide`]), users' preferences, and the
//! executors and connectors that carry out approved calls.

pub mod arguments;
pub mod call;
pub mod connector;
pub mod decide;
pub mod describe;
pub mod executors;
pub mod ledger;
pub mod preferences;
pub mod requirements;
pub mod views;
pub mod withdrawn;
