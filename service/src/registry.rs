//! The tool registry: the embedded catalog and its seeding, the definition rules,
//! `loadout check`, and the tool shapes agents are served.

pub mod catalog;
pub mod channels;
pub mod check;
pub mod formats;
pub mod guard;
pub mod links;
pub mod seed;
pub mod tools;

pub use crate::vocab::{Tier, ToolType};
