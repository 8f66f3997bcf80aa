//! What carries out a tool call: the executors ([`executors`]), the connectors'
//! kinds, outbound client and sealed header values (`crate::connectors::client`), arguments
//! checked against a tool's schema ([`arguments`]), and what a call is given and
//! gives back ([`Call`], [`Outcome`]). It sits below the registry: `registry` asks
//! it what is runnable (`loadout check`, the write guard) and compiles schemas with
//! it; `actions` runs approved calls through it.

pub mod arguments;
pub mod executors;

pub use crate::connectors::client::{Call, Failure, Outcome};
