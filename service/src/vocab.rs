//! The words several domains share, kept below all of them: approval tiers and tool
//! types, a tool as an agent holds it, the clock, the name rule and the text limit.
//! `prompt` and `registry` both use these, so neither has to import the other for
//! them (before, `prompt::builder` imported the registry's tiers and the registry's
//! check imported the prompt's lint: a cycle between the two folders).
//! Nothing here depends on another module of the crate except `closed`.

pub mod clock;
pub mod kinds;
pub mod tool;

pub use clock::{Clock, FixedClock, SystemClock};
pub use kinds::{Tier, ToolType};
pub use tool::ToolDef;

/// Soul, sections and instructions are limited to this many bytes each.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;

/// `[a-z0-9][a-z0-9._-]{0,63}`: agent, tool, channel, connector and key names.
pub fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|&b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
}

/// `[a-z0-9._-]{1,64}` but `.` and `..`: label names. Every label Langfuse allows
/// (`^[a-z0-9_\-.]+$`, at most 36) is one, so an imported `_canary` keeps its name;
/// `.` and `..` are not, as a URL path segment (`/labels/{label}`) cannot carry them.
pub fn valid_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && name != "."
        && name != ".."
        && bytes.iter().all(|&b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_langfuse_allows_is_a_label_but_the_dot_segments() {
        for good in ["production", "_canary", "-x", ".hidden", "v1.2", "a", "_"] {
            assert!(valid_label(good), "{good}");
        }
        for bad in ["", ".", "..", "Prod", "with space", "a/b", &"x".repeat(65)] {
            assert!(!valid_label(bad), "{bad}");
        }
        // Every name is a label.
        assert!(valid_name("staging") && valid_label("staging"));
    }
}
