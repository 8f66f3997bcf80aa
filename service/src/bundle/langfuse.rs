//! `loadout import langfuse DIR`: prompts exported from Langfuse become agents'
//! templates and revisions, and their labels loadout's labels. A plan first, as
//! configuration as code does; the apply carries it out.
//!
//! - **Input**: every `.json` file under DIR holding a prompt as Langfuse's API
//!   answers it (`GET /api/public/v2/prompts/{name}?version=N`), an array of them,
//!   or an object whose `data` is one. DIR is read by a bundle's rules
//!   ([`super::folder`]): no link out of it, regular files only, sizes bounded.
//! - **Names**: a Langfuse name is the agent's when loadout can hold it; otherwise
//!   it is lowercased and each run of other characters becomes `-` (said in the
//!   plan). Two prompts that would share an agent are refused.
//! - **Versions**: in version order, each is one template save (one write, one
//!   revision) unless a revision of the agent already has its template: so
//!   importing twice saves nothing, and a crash between two saves is finished by
//!   the next run. `{{variable}}` becomes `${variable}` when loadout fills it
//!   ([`crate::prompt::mustache`]); any other is kept as written and reported.
//!   A chat prompt imports when all its messages are `system` (joined by a blank
//!   line); with other roles it cannot be one system prompt and is refused.
//! - **`latest`** serves what Langfuse's served: loadout's follows every save, so
//!   when Langfuse's latest version repeats an earlier text (the saves would leave
//!   `latest` elsewhere) it is saved once more, reusing the revision with that
//!   text: each Langfuse version does not become a revision of its own, because a
//!   revision is a content, stored once, and two revisions with one content would
//!   make "which revision serves this text" ambiguous for diffs and rollbacks.
//! - **Labels**: each version's other labels (any Langfuse allows, `_canary` too)
//!   point at the newest revision with its template, through the label path:
//!   moved, or a change request on a gated agent's protected label. A label
//!   that already serves that template is left where it is, so a second import
//!   never moves one. `config` is not imported (model settings are per agent).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::folder::{Folder, entries};
use crate::agents::definition::{self, NewAgent};
use crate::agents::template;
use crate::auth::Principal;
use crate::db::Writer;
use crate::error::Result;
use crate::promotion::change_requests;
use crate::promotion::labels::{self, LabelPut, Outcome, Writing};
use crate::prompt::{builder, mustache};
use crate::releases::read::{self, Templates};
use crate::releases::{LATEST, PRODUCTION, ReleaseMode};

/// The largest export file read.
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// One prompt version as Langfuse's API answers it (fields loadout does not read
/// are ignored).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Exported {
    pub name: String,
    pub version: i32,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    pub prompt: Value,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub config: Value,
}

/// Every prompt version in the `.json` files under `dir` (sorted by path), read
/// as a bundle's files are ([`Folder`]): nothing outside `dir`, regular files only,
/// each at most [`MAX_FILE_BYTES`] however it grows while it is read.
pub fn read_dir(dir: &Path) -> anyhow::Result<Vec<Exported>> {
    let folder = Folder::new(dir, MAX_FILE_BYTES)?;
    let mut files = Vec::new();
    let mut seen = BTreeSet::new();
    walk(&folder, dir, &mut seen, &mut files)?;
    files.sort();
    if files.is_empty() {
        bail!("{} holds no .json file of Langfuse prompts", dir.display());
    }
    let mut found: BTreeMap<(String, i32), Exported> = BTreeMap::new();
    for file in files {
        for prompt in prompts_in(&file, &folder.get(&file)?)? {
            let key = (prompt.name.clone(), prompt.version);
            match found.get(&key) {
                Some(seen) if *seen != prompt => bail!(
                    "{}: {} version {} differs from the copy read before",
                    file.display(),
                    prompt.name,
                    prompt.version
                ),
                _ => {
                    found.insert(key, prompt);
                }
            }
        }
    }
    Ok(found.into_values().collect())
}

/// The `.json` files under `dir`, into `out`. A folder linked from inside is walked
/// once (`seen`: the real folders walked), one linked from outside is refused.
fn walk(
    folder: &Folder,
    dir: &Path,
    seen: &mut BTreeSet<PathBuf>,
    out: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    if !seen.insert(folder.inside(dir)?) {
        return Ok(());
    }
    for (_, path) in entries(dir)? {
        if path.is_dir() {
            walk(folder, &path, seen, out)?;
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
    Ok(())
}

/// The prompt versions one file holds: one, an array, or `{"data": [...]}`.
fn prompts_in(file: &Path, text: &str) -> anyhow::Result<Vec<Exported>> {
    let value: Value =
        serde_json::from_str(text).with_context(|| format!("{} is not JSON", file.display()))?;
    let items = match value {
        Value::Array(items) => items,
        Value::Object(mut object)
            if object.contains_key("data") && !object.contains_key("name") =>
        {
            match object.remove("data") {
                Some(Value::Array(items)) => items,
                _ => bail!("{}: `data` is not an array of prompts", file.display()),
            }
        }
        one => vec![one],
    };
    items
        .into_iter()
        .map(|item| {
            serde_json::from_value(item).with_context(|| {
                format!(
                    "{}: not a Langfuse prompt (name, version, prompt)",
                    file.display()
                )
            })
        })
        .collect()
}

/// What the import would do, prompt by prompt.
#[derive(Debug, Serialize)]
pub struct ImportPlan {
    pub prompts: Vec<PromptPlan>,
    /// Whether applying would save, move or request anything.
    pub changes_anything: bool,
}

/// One Langfuse prompt.
#[derive(Debug, Serialize)]
pub struct PromptPlan {
    /// Its name in Langfuse.
    pub langfuse: String,
    /// The agent it becomes; `None`: it is not imported (see `notes`).
    pub agent: Option<String>,
    /// The agent does not exist yet.
    pub create_agent: bool,
    pub versions: Vec<VersionPlan>,
    pub labels: Vec<LabelPlan>,
    pub notes: Vec<String>,
}

/// What happens to one version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Saved as a new revision.
    Save,
    /// Saved again: Langfuse's `latest`, repeating an earlier version's template. A
    /// save is what moves loadout's `latest`, and the revision with that template
    /// is reused (a revision is stored once per content), so `latest` serves the
    /// text Langfuse's did.
    Repeat,
    /// A revision already has its template.
    Exists,
    /// Not imported (see the note).
    Skip,
}

#[derive(Debug, Serialize)]
pub struct VersionPlan {
    pub version: i32,
    pub step: Step,
    /// The revision with its template, when there is one already.
    pub revision: Option<i32>,
    /// `{{variables}}` that became loadout placeholders.
    pub placeholders: Vec<String>,
    /// `{{...}}` kept as written, for a Langfuse client's `compile`.
    pub kept: Vec<String>,
    pub note: Option<String>,
    #[serde(skip)]
    template: Option<String>,
}

impl VersionPlan {
    /// Whether the apply saves its template.
    pub fn saves(&self) -> bool {
        matches!(self.step, Step::Save | Step::Repeat)
    }
}

/// What happens to one label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelStep {
    /// Already serves the version's template.
    Unchanged,
    /// Moved (or made) to point at it.
    Move,
    /// A change request is opened (a gated agent's protected label).
    Request,
    /// Left alone (see the note).
    Skip,
}

#[derive(Debug, Serialize)]
pub struct LabelPlan {
    pub label: String,
    pub version: i32,
    pub step: LabelStep,
    pub note: Option<String>,
}

/// `name` as an agent name: as it is when valid, else lowercased with each run of
/// other characters made `-` (trimmed); `None` when nothing valid is left.
fn agent_name(name: &str) -> Option<String> {
    if crate::vocab::valid_name(name) {
        return Some(name.to_owned());
    }
    let mut out = String::with_capacity(name.len());
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_owned();
    crate::vocab::valid_name(&out).then_some(out)
}

/// The version's text: a text prompt's, or a chat prompt's when every message is `system`.
fn text_of(p: &Exported) -> std::result::Result<String, String> {
    match &p.prompt {
        Value::String(text) => Ok(text.clone()),
        Value::Array(messages) => {
            let mut parts = Vec::with_capacity(messages.len());
            for m in messages {
                let role = m.get("role").and_then(Value::as_str);
                let content = m.get("content").and_then(Value::as_str);
                match (role, content) {
                    (Some("system"), Some(content)) => parts.push(content),
                    _ => {
                        return Err(format!(
                            "a chat prompt with a message that is not a system message ({}): loadout serves one system prompt",
                            role.unwrap_or("a placeholder")
                        ));
                    }
                }
            }
            Ok(parts.join("\n\n"))
        }
        _ => Err("its `prompt` is neither text nor a list of chat messages".to_owned()),
    }
}

/// Plans the import of `exported` against the database.
pub async fn plan(
    db: &impl sea_orm::ConnectionTrait,
    exported: &[Exported],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<ImportPlan> {
    let mut by_name: BTreeMap<&str, Vec<&Exported>> = BTreeMap::new();
    for p in exported {
        by_name.entry(&p.name).or_default().push(p);
    }
    let mut taken: BTreeMap<String, &str> = BTreeMap::new();
    let mut prompts = Vec::with_capacity(by_name.len());
    for (name, mut versions) in by_name {
        versions.sort_by_key(|p| p.version);
        let mut plan = PromptPlan {
            langfuse: name.to_owned(),
            agent: None,
            create_agent: false,
            versions: Vec::new(),
            labels: Vec::new(),
            notes: Vec::new(),
        };
        let Some(agent) = agent_name(name) else {
            plan.notes
                .push("no agent name can be made of it: not imported".to_owned());
            prompts.push(plan);
            continue;
        };
        if let Some(first) = taken.get(&agent) {
            plan.notes.push(format!(
                "it would be agent {agent:?}, as {first:?} is: not imported (rename one in Langfuse's export)"
            ));
            prompts.push(plan);
            continue;
        }
        taken.insert(agent.clone(), name);
        if agent != name {
            plan.notes.push(format!("named {agent:?} in loadout"));
        }
        let current = read::templates(db, &agent).await?;
        plan.create_agent = current.is_none();
        plan_versions(&mut plan, &versions, current.as_ref());
        plan_labels(db, &mut plan, &versions, current.as_ref(), now).await?;
        if versions
            .iter()
            .any(|p| !p.config.is_null() && p.config != Value::Object(Default::default()))
        {
            plan.notes.push(
                "`config` is not imported: set model settings with PUT /v1/agents/{agent}/model"
                    .to_owned(),
            );
        }
        if plan.versions.iter().all(|v| v.step == Step::Skip) {
            plan.notes
                .push("no version of it can be imported".to_owned());
            plan.labels.clear();
            plan.create_agent = false;
            prompts.push(plan);
            continue;
        }
        plan.agent = Some(agent);
        prompts.push(plan);
    }
    let changes_anything = prompts.iter().any(|p| {
        p.versions.iter().any(VersionPlan::saves)
            || p.labels
                .iter()
                .any(|l| matches!(l.step, LabelStep::Move | LabelStep::Request))
    });
    Ok(ImportPlan {
        prompts,
        changes_anything,
    })
}

/// Each version's step, then the save that makes `latest` serve Langfuse's latest.
fn plan_versions(plan: &mut PromptPlan, versions: &[&Exported], current: Option<&Templates>) {
    let mut planned: BTreeSet<String> = BTreeSet::new();
    for p in versions {
        let mut version = VersionPlan {
            version: p.version,
            step: Step::Skip,
            revision: None,
            placeholders: Vec::new(),
            kept: Vec::new(),
            note: None,
            template: None,
        };
        match text_of(p) {
            Err(why) => version.note = Some(why),
            Ok(text) if text.trim().is_empty() => version.note = Some("an empty prompt".to_owned()),
            Ok(text) => {
                let converted = mustache::to_template(&text);
                version.placeholders = converted.converted;
                version.kept = converted.kept;
                let existing = current.and_then(|c| c.newest_with(&converted.template));
                version.step = match (existing, planned.contains(&converted.template)) {
                    (Some(number), _) => {
                        version.revision = Some(number);
                        Step::Exists
                    }
                    (None, true) => Step::Exists,
                    (None, false) => Step::Save,
                };
                planned.insert(converted.template.clone());
                version.template = Some(converted.template);
            }
        }
        plan.versions.push(version);
    }
    plan_latest(plan, versions, current);
}

/// Langfuse's `latest` is its newest version, even one that repeats an earlier
/// text; loadout's follows saves. When the saves planned leave `latest` on another
/// template, the latest version is saved again ([`Step::Repeat`]).
fn plan_latest(plan: &mut PromptPlan, versions: &[&Exported], current: Option<&Templates>) {
    let labelled = versions
        .iter()
        .rev()
        .find(|p| p.labels.iter().any(|l| l == LATEST));
    let Some(newest) = labelled.or(versions.last()).map(|p| p.version) else {
        return;
    };
    let last_save = plan
        .versions
        .iter()
        .rev()
        .find(|v| v.step == Step::Save)
        .and_then(|v| v.template.as_deref());
    let served = last_save
        .or_else(|| current.and_then(Templates::latest))
        .map(str::to_owned);
    let Some(version) = plan.versions.iter_mut().find(|v| v.version == newest) else {
        return;
    };
    match version.template.as_deref() {
        None => {}
        Some(template) if served.as_deref() == Some(template) => {}
        Some(_) => version.step = Step::Repeat,
    }
}

async fn plan_labels(
    db: &impl sea_orm::ConnectionTrait,
    plan: &mut PromptPlan,
    versions: &[&Exported],
    current: Option<&Templates>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<()> {
    let gated =
        current.is_some_and(|c| ReleaseMode::or_gated(&c.release_mode) == ReleaseMode::Gated);
    let saves = plan.versions.iter().any(|v| v.saves());
    let mut wanted: BTreeMap<&str, i32> = BTreeMap::new();
    for p in versions {
        for label in &p.labels {
            if label != LATEST {
                wanted.insert(label, p.version);
            }
        }
    }
    for (label, version) in wanted {
        let template = plan
            .versions
            .iter()
            .find(|v| v.version == version)
            .and_then(|v| v.template.as_deref());
        let mut out = LabelPlan {
            label: label.to_owned(),
            version,
            step: LabelStep::Skip,
            note: None,
        };
        let Some(template) = template else {
            out.note = Some(format!("version {version} is not imported"));
            plan.labels.push(out);
            continue;
        };
        if !crate::vocab::valid_label(label) {
            out.note = Some(
                "not a name loadout's labels can have (lowercase letters, digits, - _ .; not `.` or `..`, which a URL path cannot carry)"
                    .to_owned(),
            );
            plan.labels.push(out);
            continue;
        }
        let at = current.and_then(|c| c.labels.get(label).and_then(|n| c.template_of(*n)));
        // On a direct agent every save moves `production`: it is moved back after.
        let follows_saves = label == PRODUCTION && saves && !gated;
        let protected = label == PRODUCTION || gated;
        out.step = if at == Some(template) && !follows_saves {
            LabelStep::Unchanged
        } else if gated && protected {
            LabelStep::Request
        } else {
            LabelStep::Move
        };
        if out.step == LabelStep::Request
            && let Some(c) = current
            && let Some(id) = change_requests::pending_for(db, c.agent_id, label, now).await?
        {
            out.step = LabelStep::Skip;
            out.note = Some(format!(
                "change request #{id} for it is pending: approve or decline it, then import again"
            ));
        }
        plan.labels.push(out);
    }
    Ok(())
}

/// What an apply did.
#[derive(Debug, Default, Serialize)]
pub struct Imported {
    /// `(agent, Langfuse version, revision)` of each save.
    pub saved: Vec<(String, i32, i32)>,
    /// `(agent, label, revision)` of each label moved.
    pub moved: Vec<(String, String, i32)>,
    /// `(agent, label, change request id)` of each request opened.
    pub requested: Vec<(String, String, i32)>,
}

/// Carries out `plan`: each save its own guarded write (a revision each), then
/// the labels through the label path. A version whose lint has errors stops the
/// import before its save, with what was done so far kept (a second run goes on).
pub async fn apply(
    w: &Writer<'_>,
    plan: &ImportPlan,
    who: &Principal,
    max_template_bytes: usize,
    request_ttl: chrono::TimeDelta,
) -> Result<Imported> {
    let mut done = Imported {
        saved: Vec::new(),
        moved: Vec::new(),
        requested: Vec::new(),
    };
    let names = template::lint_tool_names(w.db, None).await?;
    for prompt in &plan.prompts {
        let Some(agent) = &prompt.agent else { continue };
        for version in prompt.versions.iter().filter(|v| v.saves()) {
            let Some(text) = &version.template else {
                continue;
            };
            template::lint_with(&names, max_template_bytes, text).map_err(|mut e| {
                e.message = format!(
                    "{} version {}: {}",
                    prompt.langfuse, version.version, e.message
                );
                e
            })?;
            let mut write = w.begin_for_agents().await?.by(&who.member);
            match read::templates(&*write, agent).await? {
                None => {
                    let new = NewAgent {
                        name: agent.clone(),
                        identity: identity(&prompt.langfuse),
                        soul: builder::DEFAULT_SOUL.to_owned(),
                        prompt_template: Some(text.clone()),
                        operating_model: None,
                        interaction_learning: None,
                    };
                    definition::create_in(&mut write, &who.member, new, None).await?;
                }
                // Saved since the plan was made: `latest` already serves it.
                Some(current) if current.latest() == Some(text.as_str()) => {
                    crate::registry::guard::rollback(write).await?;
                    continue;
                }
                Some(_) => {
                    let how = template::Version {
                        forced: false,
                        reason: None,
                        author: &who.member,
                    };
                    template::save_in(&mut write, agent, Some(text.clone()), None, &how).await?;
                }
            }
            w.commit(write).await?;
            let number = read::templates(w.db, agent)
                .await?
                .and_then(|t| t.newest_with(text))
                .unwrap_or_default();
            done.saved.push((agent.clone(), version.version, number));
        }
        let writing = Writing {
            db: w.db,
            generation: w.generation,
            request_ttl,
            now: w.now,
            evals: &crate::evals::DEFAULTS,
        };
        for label in prompt.labels.iter().filter(|l| l.step != LabelStep::Skip) {
            let Some(text) = prompt
                .versions
                .iter()
                .find(|v| v.version == label.version)
                .and_then(|v| v.template.as_deref())
            else {
                continue;
            };
            let Some(current) = read::templates(w.db, agent).await? else {
                continue;
            };
            let Some(target) = current.newest_with(text) else {
                continue;
            };
            let at = current.labels.get(&label.label).copied();
            if at.and_then(|n| current.template_of(n)) == Some(text) {
                continue;
            }
            let put = LabelPut {
                revision: target,
                protected: None,
                require_checks: None,
                require_evals: None,
                reason: Some(format!(
                    "imported from Langfuse: {} version {}",
                    prompt.langfuse, label.version
                )),
            };
            match labels::put(&writing, who, agent, &label.label, put, None).await? {
                Outcome::Moved(_) => done
                    .moved
                    .push((agent.clone(), label.label.clone(), target)),
                Outcome::Requested(request) => {
                    done.requested
                        .push((agent.clone(), label.label.clone(), request.id));
                }
            }
        }
    }
    Ok(done)
}

/// A new agent's identity: its Langfuse name, which is all the export says of it.
fn identity(langfuse: &str) -> Value {
    let mut identity = serde_json::Map::new();
    identity.insert(
        "display_name".to_owned(),
        Value::String(langfuse.to_owned()),
    );
    identity.insert(
        "description".to_owned(),
        Value::String(format!("Imported from Langfuse prompt {langfuse:?}.")),
    );
    Value::Object(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn langfuse_names_become_agent_names_where_they_can() {
        assert_eq!(agent_name("support-bot").as_deref(), Some("support-bot"));
        assert_eq!(
            agent_name("Team/Support Bot!").as_deref(),
            Some("team-support-bot")
        );
        assert_eq!(agent_name("///"), None);
        assert_eq!(agent_name(""), None);
    }

    #[test]
    fn a_chat_prompt_imports_only_as_system_messages() {
        let chat = |messages: Value| Exported {
            name: "a".into(),
            version: 1,
            kind: Some("chat".into()),
            prompt: messages,
            labels: Vec::new(),
            config: Value::Null,
        };
        let system = serde_json::from_str(
            r#"[{"role":"system","content":"A"},{"role":"system","content":"B"}]"#,
        )
        .unwrap();
        assert_eq!(text_of(&chat(system)).unwrap(), "A\n\nB");
        let user = serde_json::from_str(
            r#"[{"role":"system","content":"A"},{"role":"user","content":"{{q}}"}]"#,
        )
        .unwrap();
        assert!(text_of(&chat(user)).unwrap_err().contains("user"));
        let placeholder =
            serde_json::from_str(r#"[{"type":"placeholder","name":"history"}]"#).unwrap();
        assert!(
            text_of(&chat(placeholder))
                .unwrap_err()
                .contains("placeholder")
        );
    }
}
