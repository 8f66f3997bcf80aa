//! The folder layout: a [`Bundle`] written to files and read back.
//!
//! ```text
//! loadout.toml                 version, and the state the export was made from
//! agents/NAME/agent.toml       release_mode, tools (links), [identity]
//! agents/NAME/soul.md          the soul, as plain text
//! agents/NAME/template.md      the template (absent: the built-in assembly)
//! agents/NAME/operating_model.md, interaction_learning.md   (absent: none)
//! agents/NAME/policy.cedar     the Cedar policy (absent: none)
//! agents/NAME/policy-tests.json   its test cases, a JSON array (absent: none)
//! agents/NAME/model.json        its model settings (absent: none)
//! agents/NAME/datasets/DATASET.json   an evaluation dataset's latest cases, a JSON array
//! tools/NAME.json              type, description, tier, schema, connector, ...
//! channels/NAME.toml           description, guidance, the include_* switches
//! connectors/NAME.toml         kind, url, method, timeout_ms, [headers] X = { env = "VAR" }
//! ```
//!
//! Texts are written byte for byte; TOML and JSON keys in a fixed order, so an
//! unchanged instance exports the same bytes. Hidden files (`.gitkeep`) are
//! ignored; anything else the layout does not name is refused, so a typo is not
//! silently left out of an apply.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::folder::{Folder, entries};
use super::{
    AgentDoc, Bundle, ChannelDoc, ConnectorDoc, HeaderValue, LAYOUT_VERSION, State, ToolDoc,
};
use crate::evals::cases::Case;

/// The root file's name.
pub const ROOT: &str = "loadout.toml";
/// The largest file read, in bytes.
const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// The largest dataset file read, in bytes: its owner holds a dataset to
/// `MAX_DATASET_BYTES` as compact JSON, and the file is that JSON indented.
const MAX_DATASET_FILE_BYTES: u64 = 4 * crate::evals::cases::MAX_DATASET_BYTES as u64;
/// An agent's folder of datasets.
const DATASETS: &str = "datasets";
const FOLDERS: [&str; 4] = ["agents", "tools", "channels", "connectors"];

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootFile {
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<State>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    release_mode: String,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    identity: Map<String, Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile {
    active: bool,
    approval_tier: String,
    connector: Option<String>,
    description: String,
    parameters: Value,
    prompt_section: Option<String>,
    strict: bool,
    #[serde(rename = "type")]
    tool_type: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelFile {
    description: String,
    guidance: String,
    include_operating_model: bool,
    include_interaction_learning: bool,
    include_session_section: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvRef {
    env: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConnectorFile {
    kind: String,
    url: String,
    method: String,
    timeout_ms: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    trusted: Option<bool>,
    #[serde(default)]
    headers: BTreeMap<String, EnvRef>,
}

const HEADER: &str = "# loadout configuration (`loadout export`); `loadout plan DIR` shows what `loadout apply DIR` would change.\n";

fn put(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn toml_text(value: &impl Serialize) -> anyhow::Result<String> {
    toml::to_string_pretty(value).context("cannot write TOML")
}

/// Writes `bundle` into `dir` (made if absent). The layout's own folders and root
/// file are replaced; nothing else in `dir` is touched.
pub fn write(dir: &Path, bundle: &Bundle) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    for folder in FOLDERS {
        let path = dir.join(folder);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("cannot clear {}", path.display()))?;
        }
        std::fs::create_dir(&path).with_context(|| format!("cannot make {}", path.display()))?;
    }
    let root = RootFile {
        version: bundle.version,
        state: bundle.state.clone(),
    };
    put(&dir.join(ROOT), &format!("{HEADER}{}", toml_text(&root)?))?;
    for agent in &bundle.agents {
        write_agent(&dir.join("agents").join(&agent.name), agent)?;
    }
    for tool in &bundle.tools {
        let file = ToolFile {
            active: tool.active,
            approval_tier: tool.approval_tier.clone(),
            connector: tool.connector.clone(),
            description: tool.description.clone(),
            parameters: super::sorted(&tool.parameters),
            prompt_section: tool.prompt_section.clone(),
            strict: tool.strict,
            tool_type: tool.tool_type.clone(),
        };
        let text = serde_json::to_string_pretty(&file)? + "\n";
        put(
            &dir.join("tools").join(format!("{}.json", tool.name)),
            &text,
        )?;
    }
    for c in &bundle.channels {
        let file = ChannelFile {
            description: c.description.clone(),
            guidance: c.guidance.clone(),
            include_operating_model: c.include_operating_model,
            include_interaction_learning: c.include_interaction_learning,
            include_session_section: c.include_session_section,
        };
        let path = dir.join("channels").join(format!("{}.toml", c.name));
        put(&path, &toml_text(&file)?)?;
    }
    for c in &bundle.connectors {
        let headers = c
            .headers
            .iter()
            .map(|(name, value)| {
                let env = match value {
                    HeaderValue::Env { env } => env.clone(),
                    HeaderValue::Value { .. } => super::env_name(&c.name, name),
                };
                (name.clone(), EnvRef { env })
            })
            .collect();
        let file = ConnectorFile {
            kind: c.kind.clone(),
            url: c.url.clone(),
            method: c.method.clone(),
            timeout_ms: c.timeout_ms,
            trusted: c.trusted,
            headers,
        };
        let path = dir.join("connectors").join(format!("{}.toml", c.name));
        put(&path, &toml_text(&file)?)?;
    }
    Ok(())
}

fn write_agent(dir: &Path, agent: &AgentDoc) -> anyhow::Result<()> {
    std::fs::create_dir(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let identity = match super::canonical(&agent.identity) {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let file = AgentFile {
        release_mode: agent.release_mode.clone(),
        tools: agent.tools.clone(),
        identity,
    };
    put(&dir.join("agent.toml"), &toml_text(&file)?)?;
    put(&dir.join("soul.md"), &agent.soul)?;
    let texts = [
        ("template.md", &agent.template),
        ("operating_model.md", &agent.operating_model),
        ("interaction_learning.md", &agent.interaction_learning),
    ];
    for (file, text) in texts {
        if let Some(text) = text {
            put(&dir.join(file), text)?;
        }
    }
    if let Some(policy) = &agent.policy {
        put(&dir.join("policy.cedar"), policy)?;
    }
    if !agent.policy_tests.is_empty() {
        let text = serde_json::to_string_pretty(&agent.policy_tests)?;
        put(&dir.join("policy-tests.json"), &format!("{text}\n"))?;
    }
    if let Some(model) = &agent.model {
        let text = serde_json::to_string_pretty(model)?;
        put(&dir.join("model.json"), &format!("{text}\n"))?;
    }
    if !agent.datasets.is_empty() {
        let folder = dir.join(DATASETS);
        std::fs::create_dir(&folder)
            .with_context(|| format!("cannot make {}", folder.display()))?;
        for (name, cases) in &agent.datasets {
            put(
                &folder.join(format!("{name}.json")),
                &super::dataset_text(cases)?,
            )?;
        }
    }
    Ok(())
}

/// The object name a file of the layout names (`get_tasks.json` → `get_tasks`).
fn stem<'a>(name: &'a str, ext: &str, path: &Path) -> anyhow::Result<&'a str> {
    name.strip_suffix(ext)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} is not part of the layout (expected NAME{ext})",
                path.display()
            )
        })
}

/// Reads the folder `dir` as a bundle.
pub fn read(dir: &Path) -> anyhow::Result<Bundle> {
    let root_path = dir.join(ROOT);
    if !root_path.exists() {
        bail!(
            "{} has no {ROOT}: is it a folder `loadout export` wrote?",
            dir.display()
        );
    }
    let folder = Folder::new(dir, MAX_FILE_BYTES)?;
    let dataset_folder = Folder::new(dir, MAX_DATASET_FILE_BYTES)?;
    let root: RootFile = folder.toml_file(&root_path)?;
    if root.version != LAYOUT_VERSION {
        bail!(
            "{} is layout version {}; this loadout reads version {LAYOUT_VERSION}",
            root_path.display(),
            root.version
        );
    }
    let mut bundle = Bundle {
        version: root.version,
        state: root.state,
        ..Bundle::default()
    };
    for (name, path) in entries(&dir.join("agents"))? {
        let mut agent = read_agent(&folder, &name, &path)?;
        agent.datasets = read_datasets(&dataset_folder, &path.join(DATASETS))?;
        bundle.agents.push(agent);
    }
    for (file, path) in entries(&dir.join("tools"))? {
        let name = stem(&file, ".json", &path)?;
        let f: ToolFile = serde_json::from_str(&folder.get(&path)?)
            .with_context(|| format!("{} is not valid", path.display()))?;
        bundle.tools.push(ToolDoc {
            name: name.to_owned(),
            tool_type: f.tool_type,
            description: f.description,
            approval_tier: f.approval_tier,
            parameters: super::sorted(&f.parameters),
            prompt_section: f.prompt_section,
            connector: f.connector,
            strict: f.strict,
            active: f.active,
        });
    }
    for (file, path) in entries(&dir.join("channels"))? {
        let name = stem(&file, ".toml", &path)?;
        let f: ChannelFile = folder.toml_file(&path)?;
        bundle.channels.push(ChannelDoc {
            name: name.to_owned(),
            description: f.description,
            guidance: f.guidance,
            include_operating_model: f.include_operating_model,
            include_interaction_learning: f.include_interaction_learning,
            include_session_section: f.include_session_section,
        });
    }
    for (file, path) in entries(&dir.join("connectors"))? {
        let name = stem(&file, ".toml", &path)?;
        let f: ConnectorFile = folder.toml_file(&path)?;
        bundle.connectors.push(ConnectorDoc {
            name: name.to_owned(),
            kind: f.kind,
            url: f.url,
            method: f.method,
            timeout_ms: f.timeout_ms,
            trusted: f.trusted,
            headers: f
                .headers
                .into_iter()
                .map(|(k, v)| (k, HeaderValue::Env { env: v.env }))
                .collect(),
        });
    }
    bundle.sort();
    Ok(bundle)
}

fn read_agent(folder: &Folder, name: &str, dir: &Path) -> anyhow::Result<AgentDoc> {
    if !dir.is_dir() {
        bail!(
            "{} is not part of the layout (agents are folders)",
            dir.display()
        );
    }
    const KNOWN: [&str; 9] = [
        "agent.toml",
        "soul.md",
        "template.md",
        "operating_model.md",
        "interaction_learning.md",
        "policy.cedar",
        "policy-tests.json",
        "model.json",
        DATASETS,
    ];
    for (file, path) in entries(dir)? {
        if !KNOWN.contains(&file.as_str()) {
            bail!(
                "{} is not part of the layout (an agent's folder holds {})",
                path.display(),
                KNOWN.join(", ")
            );
        }
    }
    let f: AgentFile = folder.toml_file(&dir.join("agent.toml"))?;
    Ok(AgentDoc {
        name: name.to_owned(),
        identity: super::canonical(&Value::Object(f.identity)),
        soul: folder.get(&dir.join("soul.md"))?,
        template: folder.get_optional(&dir.join("template.md"))?,
        operating_model: folder.get_optional(&dir.join("operating_model.md"))?,
        interaction_learning: folder.get_optional(&dir.join("interaction_learning.md"))?,
        release_mode: f.release_mode,
        tools: f.tools,
        policy: folder.get_optional(&dir.join("policy.cedar"))?,
        policy_tests: match folder.get_optional(&dir.join("policy-tests.json"))? {
            Some(text) => crate::policies::cases::parse(&text)
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join("policy-tests.json").display()))?,
            None => Vec::new(),
        },
        model: match folder.get_optional(&dir.join("model.json"))? {
            Some(text) => Some(
                serde_json::from_str(&text)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", dir.join("model.json").display()))?,
            ),
            None => None,
        },
        datasets: BTreeMap::new(),
    })
}

/// An agent's `datasets/` folder (absent: none): `NAME.json` files, each a JSON
/// array of cases. The cases' own rules are checked when they are applied.
fn read_datasets(folder: &Folder, dir: &Path) -> anyhow::Result<BTreeMap<String, Vec<Case>>> {
    let mut out = BTreeMap::new();
    if dir.symlink_metadata().is_ok() && !dir.is_dir() {
        bail!(
            "{} is not part of the layout (an agent's datasets are a folder of NAME.json files)",
            dir.display()
        );
    }
    for (file, path) in entries(dir)? {
        let name = stem(&file, ".json", &path)?;
        let cases: Vec<Case> = serde_json::from_str(&folder.get(&path)?)
            .with_context(|| format!("{} is not a valid dataset", path.display()))?;
        out.insert(name.to_owned(), cases);
    }
    Ok(out)
}
