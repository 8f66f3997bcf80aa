//! The living catalog in `seeds/`: canonical tools, renames, retired names, the
//! default agent and the channels. Embedded at build time so the binary is self-contained.

use std::collections::BTreeMap;

use anyhow::Context;
use serde::Deserialize;

const CATALOG: &str = include_str!("../../../seeds/catalog.toml");
const ASSISTANT: &str = include_str!("../../../seeds/agents/assistant.toml");
const CHANNELS: &str = include_str!("../../../seeds/channels.toml");

/// Everything in `seeds/`.
#[derive(Clone, Debug)]
pub struct Seeds {
    pub catalog: Catalog,
    pub assistant: AgentSeed,
    pub channels: Vec<ChannelSeed>,
}

impl Seeds {
    /// The compiled-in copy, parsed once per process (the HTTP handlers read it on
    /// every admin write). Parsing is tested, so an error here is a build defect.
    pub fn shared() -> anyhow::Result<&'static Self> {
        static SHARED: std::sync::OnceLock<Result<Seeds, String>> = std::sync::OnceLock::new();
        SHARED
            .get_or_init(|| Self::embedded().map_err(|e| format!("{e:#}")))
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// The copy compiled into this binary.
    pub fn embedded() -> anyhow::Result<Self> {
        Ok(Self {
            catalog: Catalog::parse(CATALOG).context("seeds/catalog.toml")?,
            assistant: toml::from_str(ASSISTANT).context("seeds/agents/assistant.toml")?,
            channels: toml::from_str::<ChannelsFile>(CHANNELS)
                .context("seeds/channels.toml")?
                .channel,
        })
    }
}

/// `seeds/catalog.toml`, or a team's own file of the same format.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    pub vocabulary: Vec<String>,
    /// Retired names with no successor.
    pub deactivated: Vec<String>,
    /// Legacy name → canonical name.
    pub renamed: BTreeMap<String, String>,
    #[serde(rename = "tool")]
    pub tools: Vec<CatalogTool>,
}

impl Catalog {
    /// Parses a catalog file; the schemas are JSON text inside the TOML.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let catalog: Catalog = toml::from_str(text)?;
        for tool in &catalog.tools {
            serde_json::from_str::<serde_json::Value>(&tool.schema)
                .with_context(|| format!("tool {}: schema is not valid JSON", tool.name))?;
        }
        Ok(catalog)
    }
}

/// One canonical tool.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogTool {
    pub name: String,
    pub verb: String,
    #[serde(rename = "type")]
    pub tool_type: String,
    pub tier: String,
    pub description: String,
    pub prompt_section: String,
    /// A singular resource (one per user): create_/update_ need not take a list.
    #[serde(default)]
    pub singular: bool,
    /// JSON Schema as JSON text (checked to parse by [`Catalog::parse`]).
    pub schema: String,
}

impl CatalogTool {
    /// The parsed schema; `Null` cannot happen after [`Catalog::parse`].
    pub fn schema_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.schema).unwrap_or(serde_json::Value::Null)
    }
}

/// `seeds/agents/*.toml`: a default agent.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSeed {
    pub name: String,
    pub soul: String,
    pub operating_model: String,
    pub interaction_learning: String,
    pub prompt_template: String,
    /// `"all"`: every catalog tool.
    pub tools: String,
    pub identity: Identity,
}

/// Who the agent is, as shown in its prompt.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub display_name: String,
    pub role: String,
    pub description: String,
}

#[derive(Deserialize)]
struct ChannelsFile {
    channel: Vec<ChannelSeed>,
}

/// `seeds/channels.toml`: one channel's guidance and the optional sections it gets.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSeed {
    pub name: String,
    pub description: String,
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
}

#[cfg(test)]
mod tests {
    use super::Seeds;

    #[test]
    fn the_embedded_seeds_parse() {
        let seeds = Seeds::embedded().expect("embedded seeds parse");
        assert_eq!(seeds.catalog.tools.len(), 23);
        assert_eq!(seeds.assistant.name, "assistant");
        let channels: Vec<&str> = seeds.channels.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            channels,
            ["web", "telegram", "scheduled", "heartbeat", "session_open"]
        );
    }
}
