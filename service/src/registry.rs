//! The tool registry: the embedded catalog and its seeding, the definition rules,
//! `loadout check`, and the tool shapes agents are served.

pub mod catalog;
pub mod check;
pub mod formats;
pub mod kinds;
pub mod seed;

pub use kinds::{Tier, ToolType};
