//! What carries out a tool call. A `builtin` tool needs an executor compiled into
//! this binary; an `api` or `mcp` tool needs a connector an operator configured.
//! The proposals issue fills this in; today the registry knows loadout's own builtin
//! (`update_instructions`: loadout owns users' instructions) and no connectors.

use std::collections::BTreeSet;

/// Builtin tools this build can execute.
pub const BUILTIN: [&str; 1] = ["update_instructions"];

/// The executors available to this process.
#[derive(Clone, Debug, Default)]
pub struct Executors {
    builtin: BTreeSet<String>,
    connectors: BTreeSet<String>,
}

impl Executors {
    /// This build's builtins and no connectors.
    pub fn compiled_in() -> Self {
        Self {
            builtin: BUILTIN.iter().map(|s| (*s).to_owned()).collect(),
            connectors: BTreeSet::new(),
        }
    }

    /// Declares a connector for a tool (used by connectors and by tests).
    pub fn connect(&mut self, tool: &str) {
        self.connectors.insert(tool.to_owned());
    }

    pub fn has_builtin(&self, tool: &str) -> bool {
        self.builtin.contains(tool)
    }

    pub fn has_connector(&self, tool: &str) -> bool {
        self.connectors.contains(tool)
    }
}
