//! Agent configurations as an admin edits them: identity, soul and sections
//! ([`definition`]), the versioned prompt template ([`template`]), the policy
//! ([`policy`]), the model settings ([`model`]), users' standing instructions ([`instructions`]), previews of
//! unsaved templates ([`preview`]) and the console's overview ([`board`]).
//! Every write goes through the registry write guard ([`crate::registry::guard`]).

pub mod board;
pub mod definition;
pub mod groups;
pub mod instructions;
pub mod model;
pub mod policy;
pub mod preview;
pub mod template;

use crate::error::{Error, Result};
use crate::registry::links::agent as row;

pub use crate::vocab::MAX_TEXT_BYTES;

/// Identity must be a JSON object (display_name, role, description).
fn check_identity(identity: &serde_json::Value) -> Result<()> {
    if identity.is_object() {
        Ok(())
    } else {
        Err(Error::refused(
            "invalid_identity",
            "identity must be a JSON object (display_name, role, description)",
        ))
    }
}
