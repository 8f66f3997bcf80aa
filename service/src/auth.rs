//! Who is calling: API keys, their roles and tenants.

pub mod cache;
pub mod failures;
pub mod keys;
pub mod members;
pub mod signers;
pub mod sso;

pub use keys::{Principal, Role};
