//! loadout: each LLM agent's tools and prompt, held in a database and served over HTTP.

pub mod catalog;
pub mod cli;
pub mod db;
pub mod migrate;
pub mod prompt;
pub mod prompt_cli;
pub mod seed;
pub mod telemetry;
pub mod template_cli;
