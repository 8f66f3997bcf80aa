//! Write tools don't act, they propose: the proposal ledger, argument validation,
//! the executors that carry out approved calls, and the connectors they reach.

pub mod arguments;
pub mod connector;
pub mod executors;
pub mod ledger;
