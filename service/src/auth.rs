//! Who is calling: API keys, their roles and tenants.

pub mod keys;

pub use keys::{Principal, Role};
