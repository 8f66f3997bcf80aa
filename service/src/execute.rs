//! What carries out a tool call, below the registry that asks whether a tool can
//! run and above nothing of the action path: the executors ([`executors`]), the
//! connectors' kinds, outbound client and sealed header values ([`connector`]),
//! arguments checked against a tool's schema ([`arguments`]), and what a call is
//! given and gives back ([`Call`], [`Outcome`]). `registry` uses it to check and
//! guard what is runnable; `actions` to run approved calls.

pub mod arguments;
pub mod connector;
pub mod executors;
mod outcome;

pub use outcome::{Call, Failure, Outcome};
