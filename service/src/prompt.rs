//! Prompts: the `$placeholder` engine and the builder (no database in either), the lint, and the loader.

pub mod builder;
pub mod lint;
pub mod load;
pub mod mustache;
pub mod template;
