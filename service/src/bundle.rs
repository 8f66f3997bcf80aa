//! Configuration as code (issue 27): an instance's configuration (agents with their
//! links and evaluation datasets, tools, channels, connectors) as one [`Bundle`],
//! written to and read from a folder ([`files`]), read from a database ([`read`]),
//! compared with what a database holds ([`plan`]) and applied to it in one guarded
//! write ([`apply`]).
//!
//! Every object has a fingerprint: the SHA-256 of its canonical JSON (keys in
//! order, ids and timestamps left out, a connector's header *names* only). The
//! instance's fingerprint is the SHA-256 of the list of `kind/name fingerprint`
//! lines. An export writes them in the folder's root file, a plan in its file,
//! and apply refuses, naming the objects, when the database moved on since.

pub mod apply;
pub mod files;
pub mod folder;
pub mod langfuse;
pub mod plan;
pub mod read;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// The layout's version: the root file's `version`. A folder of another version is
/// refused rather than read wrongly.
pub const LAYOUT_VERSION: u32 = 1;

/// An instance's configuration, as files hold it and as `POST /v1/config/plan` and
/// `/apply` take it. Lists are sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Bundle {
    /// The layout version; 1.
    pub version: u32,
    #[serde(default)]
    pub agents: Vec<AgentDoc>,
    #[serde(default)]
    pub tools: Vec<ToolDoc>,
    #[serde(default)]
    pub channels: Vec<ChannelDoc>,
    #[serde(default)]
    pub connectors: Vec<ConnectorDoc>,
    /// The state this configuration was exported from; apply without a plan
    /// refuses when the instance changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
}

/// Fingerprints of an instance's configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ConfigState)]
pub struct State {
    /// `sha256:` and the hex SHA-256 of the object fingerprints' list.
    pub instance: String,
    /// Each object's fingerprint by `kind/name` (`agent/support`, `tool/get_tasks`,
    /// `dataset/support/smoke`).
    pub objects: BTreeMap<String, String>,
}

/// An agent: its texts, settings and the tools it is linked to (links switched on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentDoc {
    pub name: String,
    /// `{display_name, role, description}` (null fields are left out).
    #[schema(value_type = Object)]
    pub identity: Value,
    pub soul: String,
    /// `null`: the built-in assembly renders the prompt.
    #[serde(default)]
    pub template: Option<String>,
    #[serde(default)]
    pub operating_model: Option<String>,
    #[serde(default)]
    pub interaction_learning: Option<String>,
    /// `direct` or `gated`.
    pub release_mode: String,
    /// The tools it is linked to, by name.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Its Cedar policy (`policy.cedar`; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The policy's test cases (`policy-tests.json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy_tests: Vec<crate::policies::cases::Case>,
    /// Its model settings (`model.json`; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<crate::releases::model::ModelSettings>,
    /// Its evaluation datasets, the latest version of each: name → cases
    /// (`datasets/NAME.json`). Each is an object of its own (`dataset/AGENT/NAME`),
    /// fingerprinted, planned and applied apart from the agent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub datasets: BTreeMap<String, Vec<crate::evals::cases::Case>>,
}

/// A tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDoc {
    pub name: String,
    /// `builtin`, `api` or `mcp`.
    #[serde(rename = "type")]
    pub tool_type: String,
    pub description: String,
    pub approval_tier: String,
    /// The arguments' JSON Schema.
    #[schema(value_type = Object)]
    pub parameters: Value,
    #[serde(default)]
    pub prompt_section: Option<String>,
    /// The connector that runs it (`api` and `mcp` tools).
    #[serde(default)]
    pub connector: Option<String>,
    /// `false`: a synced schema taken loose on purpose.
    pub strict: bool,
    pub active: bool,
}

/// A channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelDoc {
    pub name: String,
    pub description: String,
    pub guidance: String,
    pub include_operating_model: bool,
    pub include_interaction_learning: bool,
    pub include_session_section: bool,
}

/// A connector. Header values are never in a file, a plan or an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectorDoc {
    pub name: String,
    /// `http` or `mcp`.
    pub kind: String,
    pub url: String,
    pub method: String,
    pub timeout_ms: i32,
    /// Apply the server's new and changed tools on sync at once (`true`) or hold
    /// them for an operator (`false`); absent: a new connector holds them, an
    /// existing one keeps its setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted: Option<bool>,
    /// Header names and where each value comes from.
    #[serde(default)]
    pub headers: BTreeMap<String, HeaderValue>,
}

/// Where a header's value comes from. In files: `{ env = "NAME" }`, read from the
/// environment of the `loadout apply` that applies it. Over HTTP: `{"value": ...}`
/// (write-only: sealed on save, never echoed or logged), or `{"env": ...}` to keep
/// the value the instance holds (a server never reads its own environment for a
/// caller: that would hand its secrets to whoever names them).
#[derive(Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum HeaderValue {
    Env {
        env: String,
    },
    #[serde(serialize_with = "hidden")]
    Value {
        value: String,
    },
}

fn hidden<S: serde::Serializer>(_value: &str, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(1))?;
    map.serialize_entry("value", "(hidden)")?;
    map.end()
}

impl std::fmt::Debug for HeaderValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderValue::Env { env } => write!(f, "env:{env}"),
            HeaderValue::Value { .. } => f.write_str("(value hidden)"),
        }
    }
}

/// The environment variable an export names for a header: `LOADOUT_HEADER_`, the
/// connector and the header, upper case, anything else `_`.
pub fn env_name(connector: &str, header: &str) -> String {
    let text = format!("LOADOUT_HEADER_{connector}_{header}");
    text.chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect()
}

/// `value` with object keys sorted and nulls in objects dropped (TOML has no null;
/// an identity field that is null and one that is absent mean the same).
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                if !map[key].is_null() {
                    out.insert(key.clone(), canonical(&map[key]));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

pub use crate::digest::sorted;

fn sha256(text: &[u8]) -> String {
    crate::digest::sha256_hex(text)
}

fn fingerprint(value: &impl Serialize) -> String {
    let json = serde_json::to_value(value).unwrap_or(Value::Null);
    let text = serde_json::to_string(&sorted(&json)).unwrap_or_default();
    sha256(text.as_bytes())
}

/// A connector as fingerprinted: header names only.
#[derive(Serialize)]
struct ConnectorPrint<'a> {
    name: &'a str,
    kind: &'a str,
    url: &'a str,
    method: &'a str,
    timeout_ms: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    trusted: Option<bool>,
    headers: Vec<&'a str>,
}

impl Bundle {
    /// Each object's fingerprint by `kind/name`.
    pub fn fingerprints(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for agent in &self.agents {
            for (name, cases) in &agent.datasets {
                out.insert(dataset_key(&agent.name, name), fingerprint(cases));
            }
            let mut agent = agent.clone();
            agent.identity = canonical(&agent.identity);
            // Its datasets are objects of their own: a changed case is no agent change.
            agent.datasets.clear();
            out.insert(format!("agent/{}", agent.name), fingerprint(&agent));
        }
        for tool in &self.tools {
            out.insert(format!("tool/{}", tool.name), fingerprint(tool));
        }
        for channel in &self.channels {
            out.insert(format!("channel/{}", channel.name), fingerprint(channel));
        }
        for c in &self.connectors {
            let print = ConnectorPrint {
                name: &c.name,
                kind: &c.kind,
                url: &c.url,
                method: &c.method,
                timeout_ms: c.timeout_ms,
                trusted: c.trusted,
                headers: c.headers.keys().map(String::as_str).collect(),
            };
            out.insert(format!("connector/{}", c.name), fingerprint(&print));
        }
        out
    }

    /// The instance's state: every object's fingerprint and the instance's.
    pub fn state(&self) -> State {
        let objects = self.fingerprints();
        State {
            instance: instance_fingerprint(&objects),
            objects,
        }
    }

    /// Sorts every list by name (the order files and fingerprints use).
    pub fn sort(&mut self) {
        self.agents.sort_by(|a, b| a.name.cmp(&b.name));
        for agent in &mut self.agents {
            agent.tools.sort();
            agent.tools.dedup();
        }
        self.tools.sort_by(|a, b| a.name.cmp(&b.name));
        self.channels.sort_by(|a, b| a.name.cmp(&b.name));
        self.connectors.sort_by(|a, b| a.name.cmp(&b.name));
    }
}

/// A dataset's file: its cases as indented JSON, each case's fields in their
/// declared order and the free-form values' keys sorted, so the same cases are
/// always the same bytes (an export, and the line diff a plan shows).
pub fn dataset_text(cases: &[crate::evals::cases::Case]) -> serde_json::Result<String> {
    let stable: Vec<crate::evals::cases::Case> = cases
        .iter()
        .map(|case| {
            let mut case = case.clone();
            case.tool_choice = case.tool_choice.as_ref().map(sorted);
            for assertion in &mut case.assert {
                assertion.value = assertion.value.as_ref().map(sorted);
            }
            case
        })
        .collect();
    Ok(serde_json::to_string_pretty(&stable)? + "\n")
}

/// A dataset's `kind/name`: `dataset/AGENT/NAME` (neither name holds a `/`).
pub fn dataset_key(agent: &str, name: &str) -> String {
    format!("dataset/{agent}/{name}")
}

/// `sha256:` and the SHA-256 of `kind/name fingerprint` lines, in order.
pub fn instance_fingerprint(objects: &BTreeMap<String, String>) -> String {
    let mut text = String::new();
    for (key, print) in objects {
        text.push_str(key);
        text.push(' ');
        text.push_str(print);
        text.push('\n');
    }
    format!("sha256:{}", sha256(text.as_bytes()))
}
