//! loadout: each LLM agent's tools and prompt, held in a database and served over HTTP.

pub mod catalog;
pub mod check;
pub mod cli;
pub mod connector;
pub mod db;
pub mod executors;
pub mod generation;
pub mod http;
pub mod keys;
pub mod migrate;
pub mod prompt;
pub mod prompt_cli;
pub mod proposals;
pub mod schema;
pub mod seed;
pub mod serve;
pub mod telemetry;
pub mod template_cli;
pub mod tool_formats;
