//! A tool as an agent holds it: what the prompt lists and the formats render.

use serde_json::Value;

use super::kinds::Tier;

/// One tool as the agent holds it.
#[derive(Clone, Debug)]
pub struct ToolDef {
    /// `verb_resource`, e.g. `get_tasks`.
    pub name: String,
    /// The model-facing description.
    pub description: String,
    /// `"auto"`, `"user_configurable"` or `"requires_approval"`; any other value is
    /// treated as `"requires_approval"` by [`ToolDef::approval_tier`].
    pub approval_tier: String,
    /// A JSON Schema object describing the tool's input.
    pub parameters: Value,
    /// `false` for a synced tool an admin took with a schema strict mode cannot
    /// express (`allow_loose`): the OpenAI shape carries it as it is, `strict: false`.
    pub strict: bool,
}

impl ToolDef {
    /// The parsed tier; anything unrecognised is the safest tier (see [`Tier::or_safest`]).
    pub fn approval_tier(&self) -> Tier {
        Tier::or_safest(&self.approval_tier)
    }
}
