//! loadout: each LLM agent's tools and prompt, held in a database and served over HTTP.
//!
//! Domain modules own their logic and can be used without the router: the CLI and
//! the tests call them directly. `http` and `cli` only translate their input into
//! domain calls and the results back.

pub mod actions;
pub mod agents;
pub mod app;
pub mod auth;
pub mod bundle;
pub mod cache;
pub mod changes;
pub mod cli;
pub mod closed;
pub mod connectors;
pub mod console;
pub mod cpu;
pub mod db;
pub mod digest;
pub mod error;
pub mod evals;
pub mod events;
pub mod execute;
pub mod fetch;
pub mod http;
pub mod mcp;
pub mod metrics;
pub mod policies;
pub mod promotion;
pub mod prompt;
pub mod registry;
pub mod releases;
pub mod secrets;
pub mod telemetry;
pub mod transport;
pub mod vocab;
pub mod web;
pub mod webhooks;
