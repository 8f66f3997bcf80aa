//! Prompts: the `$placeholder` engine (no database in it) and, next, the builder.

pub mod builder;
pub mod lint;
pub mod template;
