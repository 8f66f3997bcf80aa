//! Syncing an `mcp` connector's tools into the registry: `tools/list` on the
//! server, then, in one guarded write, each remote tool added or updated as an
//! `mcp` tool bound to the connector, and tools the server no longer has switched
//! off (never deleted). `dry_run` plans the same write and rolls it back.
//!
//! - Names follow the vocabulary: the remote verb is mapped (list/fetch/read → get,
//!   find/query → search, add/new → create, edit/modify/patch → update,
//!   remove → delete; get, search, create, update, delete, set, link kept) and the
//!   connector's name goes after it: `get_forecast` on `weather` is
//!   `get_weather_forecast`. A name that cannot be mapped is refused with the
//!   reason unless `rename` maps it.
//! - Schemas are taken as servers write them: [`super::schema::normalize`] makes
//!   them strict (optional properties required and nullable; a call drops those
//!   nulls again before the remote is called) and refuses, with the reason, what
//!   strict mode cannot express. A tool named in `allow_loose` is then taken as it
//!   is, with `strict` off: exported with `strict: false`, warned about by
//!   `loadout check`. The server's schema is kept in `remote_schema`.
//! - The tier comes from the annotations and the name: `readOnlyHint` (and not
//!   destructive) makes a `get_` or `search_` tool `auto`; anything else is
//!   `requires_approval`. Never a silent default. A sync never lowers a tier below
//!   what an earlier sync made it (a server cannot turn its own approval off);
//!   raising is allowed.
//! - An admin's edit of a synced tool's description or tier (it differs from what
//!   the last sync wrote) survives a re-sync unless `overwrite`.
//! - Pins ([`super::pins`]): every synced tool records its remote definition's
//!   fingerprint. On a connector that is not `trusted`, a new remote tool arrives
//!   switched off and a changed one keeps serving its pin; both are held as pending
//!   changes for an operator (`held` in the report). A trusted connector's sync
//!   applies them at once and moves the pin.
//! - Bounds: at most [`mcp::ListLimits`] tools and pages, each answer within the
//!   connector cap, each schema within [`MAX_SCHEMA_BYTES`] (a larger one is
//!   refused, the rest still sync).

use std::collections::{BTreeMap, BTreeSet};

use entity::{connectors, tools};
use rmcp::model::Tool;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::pins::{self, ToolChangeKind};
use super::schema::{MAX_SCHEMA_BYTES, normalize};
use super::store;
use crate::connectors::client::mcp::{self, McpError, Server};
use crate::connectors::client::{Kind, Outbound, sealing};
use crate::db::Writer;
use crate::error::{Error, Result};
use crate::registry::check::{ProblemCode, definition_problems, name_problem};
use crate::registry::tools as tools_owner;
use crate::registry::{Tier, guard, links};

/// The body of `POST /v1/connectors/{connector}/sync`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncRequest {
    /// Plan and report, write nothing.
    #[serde(default)]
    pub dry_run: bool,
    /// Replace admins' edits of synced descriptions and tiers with the server's.
    #[serde(default)]
    pub overwrite: bool,
    /// Remote name → loadout name, for names the verb mapping cannot place.
    #[serde(default)]
    pub rename: BTreeMap<String, String>,
    /// Remote names of tools to take as they are when strict mode cannot express
    /// their schemas (open maps, `patternProperties`, ...): exported with
    /// `strict: false`, and `loadout check` warns. A schema that can be made strict
    /// is made strict anyway.
    #[serde(default)]
    pub allow_loose: BTreeSet<String>,
    /// Also link the synced tools to this agent: missing links are made, on; a
    /// link an admin switched off stays off.
    pub agent: Option<String>,
}

/// One remote tool in a sync's answer.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct SyncEntry {
    /// Its name on the server.
    pub remote: String,
    /// Its name in loadout (`null` when no name could be made).
    pub name: Option<String>,
    /// Why it was refused, or why a tool in `allow_loose` was taken loose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What a sync did (or, with `dry_run`, would do).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct SyncReport {
    pub connector: String,
    pub dry_run: bool,
    pub added: Vec<SyncEntry>,
    pub updated: Vec<SyncEntry>,
    pub unchanged: Vec<SyncEntry>,
    /// Tools whose remote tool is gone: switched off.
    pub disabled: Vec<SyncEntry>,
    /// New or changed remote tools held for an operator (a connector that is not
    /// `trusted`): a new one is stored switched off, a changed one serves its pin.
    pub held: Vec<SyncEntry>,
    pub refused: Vec<SyncEntry>,
}

/// The loadout name of remote tool `remote` on connector `connector`, or why none.
pub fn loadout_name(remote: &str, connector: &str) -> Result<String, String> {
    let snake = snake_case(remote);
    let Some((verb, noun)) = snake.split_once('_') else {
        return Err(format!(
            "{remote:?} has no verb to map (names are verb_noun); map it with rename"
        ));
    };
    let verb = match verb {
        "get" | "list" | "fetch" | "read" => "get",
        "search" | "find" | "query" => "search",
        "create" | "add" | "new" => "create",
        "update" | "edit" | "modify" | "patch" => "update",
        "delete" | "remove" => "delete",
        "set" => "set",
        "link" => "link",
        other => {
            return Err(format!(
                "the verb {other:?} of {remote:?} has no canonical mapping; map it with rename"
            ));
        }
    };
    let connector = snake_case(connector);
    let name = if noun == connector || noun.starts_with(&format!("{connector}_")) {
        format!("{verb}_{noun}")
    } else {
        format!("{verb}_{connector}_{noun}")
    };
    match name_problem(&name) {
        Some(why) => Err(format!(
            "{remote:?} maps to {name:?}, which breaks the vocabulary: {why}"
        )),
        None => Ok(name),
    }
}

/// `getForecast`, `get-forecast` and `get.forecast` as `get_forecast`.
fn snake_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_ascii_uppercase() && previous_lower {
            out.push('_');
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(match c {
            '-' | '.' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        });
    }
    out
}

/// A remote tool as loadout would store it.
struct Wanted {
    /// As its server sent it (what the pin's fingerprint covers).
    tool: Tool,
    /// Its fingerprint ([`pins::fingerprint`]), computed once.
    fingerprint: String,
    remote: String,
    name: String,
    description: String,
    tier: Tier,
    /// What the agent sees: the remote's schema normalized, or as sent when loose.
    schema: Value,
    /// The schema as the server sent it.
    remote_schema: Value,
    /// Why it was taken loose (`allow_loose`); `None` for a strict tool.
    loose: Option<String>,
}

impl Wanted {
    /// What the registry's synced-tool writes take.
    fn synced(&self, connector: &connectors::Model) -> tools_owner::Synced {
        tools_owner::Synced {
            fingerprint: self.fingerprint.clone(),
            connector_id: connector.id,
            remote_name: self.remote.clone(),
            description: self.description.clone(),
            tier: self.tier.as_str().to_owned(),
            schema: self.schema.clone(),
            remote_schema: self.remote_schema.clone(),
            strict: self.loose.is_none(),
        }
    }
}

/// The tier the annotations ask for, and the name allows: read-only and not
/// destructive → `auto`, but only for a `get_` or `search_` tool (a server may not
/// call its `delete_` tool harmless); anything else → `requires_approval`.
fn tier_of(tool: &Tool, name: &str) -> Tier {
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint) == Some(true);
    let destructive = hints.and_then(|a| a.destructive_hint) == Some(true);
    let reads = matches!(name.split('_').next(), Some("get" | "search"));
    if read_only && !destructive && reads {
        Tier::Auto
    } else {
        Tier::RequiresApproval
    }
}

/// The loadout name of a remote tool: its rename, or the verb mapping.
fn name_of(
    remote: &str,
    connector: &str,
    rename: &BTreeMap<String, String>,
) -> Result<String, (Option<String>, String)> {
    match rename.get(remote) {
        Some(name) => match name_problem(name) {
            None => Ok(name.clone()),
            Some(why) => Err((
                Some(name.clone()),
                format!("the rename breaks the vocabulary: {why}"),
            )),
        },
        None => loadout_name(remote, connector).map_err(|why| (None, why)),
    }
}

/// The schema a tool is stored with and, when it is taken loose, why; or why the
/// tool is refused.
fn schema_of(
    remote: &Value,
    name: &str,
    tier: Tier,
    allow_loose: bool,
) -> Result<(Value, Option<String>), String> {
    let size = serde_json::to_vec(remote).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {size} bytes; the cap is {} KiB",
            MAX_SCHEMA_BYTES / 1024
        ));
    }
    let (schema, loose) = match normalize(remote) {
        Ok(strict) => (strict, None),
        Err(why) if allow_loose => (remote.clone(), Some(format!("taken loose: {why}"))),
        Err(why) => {
            return Err(format!(
                "{why}; to take it as it is, name it in allow_loose"
            ));
        }
    };
    let problems: Vec<String> = definition_problems(name, tier.as_str(), &schema, false)
        .into_iter()
        .filter(|(code, _, _)| loose.is_none() || *code != ProblemCode::SchemaNotStrict.as_str())
        .map(|(_, message, hint)| format!("{message} ({hint})"))
        .collect();
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    Ok((schema, loose))
}

/// Each remote tool as wanted, or refused with the reason.
fn plan(
    remote: Vec<Tool>,
    connector: &str,
    request: &SyncRequest,
) -> (Vec<Wanted>, Vec<SyncEntry>) {
    let mut wanted: Vec<Wanted> = Vec::new();
    let mut refused = Vec::new();
    for tool in remote {
        let remote = tool.name.to_string();
        let refuse = |name: Option<String>, reason: String| SyncEntry {
            remote: remote.clone(),
            name,
            reason: Some(reason),
        };
        let name = match name_of(&remote, connector, &request.rename) {
            Ok(name) => name,
            Err((name, why)) => {
                refused.push(refuse(name, why));
                continue;
            }
        };
        let description = tool
            .description
            .as_deref()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if description.is_empty() || description.len() > 4096 {
            refused.push(refuse(
                Some(name),
                "the server gives no description (or one over 4096 bytes)".into(),
            ));
            continue;
        }
        if let Some(first) = wanted.iter().find(|w| w.name == name) {
            let reason = format!(
                "{:?} also maps to {name:?}; rename one of them",
                first.remote
            );
            refused.push(refuse(Some(name), reason));
            continue;
        }
        let allow_loose = request.allow_loose.contains(&remote);
        match want(tool, name.clone(), description, allow_loose) {
            Ok(want) => wanted.push(want),
            Err(why) => refused.push(refuse(Some(name), why)),
        }
    }
    (wanted, refused)
}

/// The remote tool `tool` stored as `name`, or why it cannot be.
fn want(
    tool: Tool,
    name: String,
    description: String,
    allow_loose: bool,
) -> Result<Wanted, String> {
    let tier = tier_of(&tool, &name);
    let remote_schema = Value::Object((*tool.input_schema).clone());
    let (schema, loose) = schema_of(&remote_schema, &name, tier, allow_loose)?;
    Ok(Wanted {
        remote: tool.name.to_string(),
        fingerprint: pins::fingerprint(&tool),
        tool,
        name,
        description,
        tier,
        schema,
        remote_schema,
        loose,
    })
}

/// What reading a connector's server takes, lent by the state: the outbound
/// client, the secrets its header values are sealed with, and how much of a
/// `tools/list` to read.
#[derive(Clone, Copy)]
pub struct Remote<'a> {
    pub outbound: &'a Outbound,
    pub secrets: &'a crate::secrets::Keyring,
    pub limits: mcp::ListLimits,
}

/// Reads the connector's server and brings the registry in line with it.
pub async fn run(
    w: &Writer<'_>,
    remote: &Remote<'_>,
    connector: &str,
    request: SyncRequest,
) -> Result<SyncReport> {
    let row = store::live(w.db, connector).await?;
    if row.kind.parse() != Ok(Kind::Mcp) {
        return Err(Error::refused(
            "not_an_mcp_connector",
            format!(
                "{connector} is an {} connector; sync reads an MCP server's tools/list (OpenAPI documents are not read yet)",
                row.kind
            ),
        ));
    }
    if let Some(agent) = &request.agent {
        links::agent(w.db, agent).await?;
    }
    let remote = list(remote, &row).await?;
    let (wanted, refused) = plan(remote, &row.name, &request);
    let write = w.begin().await?;
    let mut report = apply(&write, &row, wanted, &request).await?;
    // The plan's refusals first, then the names the write found taken.
    let taken = std::mem::replace(&mut report.refused, refused);
    report.refused.extend(taken);
    report.dry_run = request.dry_run;
    if request.dry_run {
        guard::rollback(write).await?;
    } else {
        w.commit(write).await?;
    }
    Ok(report)
}

/// `tools/list` within the connector's timeout.
async fn list(remote: &Remote<'_>, row: &connectors::Model) -> Result<Vec<Tool>> {
    let headers = sealing::open(remote.secrets, row.id, &sealing::stored(row)).map_err(|e| {
        Error::new(
            crate::error::Kind::NotRunnable,
            "connector_secrets_unreadable",
            format!("the headers of {} cannot be sent: {e}", row.name),
        )
    })?;
    let server = Server {
        url: &row.url,
        headers: &headers,
        outbound: remote.outbound,
    };
    let timeout = std::time::Duration::from_millis(u64::try_from(row.timeout_ms).unwrap_or(30_000));
    let unreachable = || {
        Error::new(
            crate::error::Kind::NotRunnable,
            "connector_unreachable",
            format!("the MCP server of {} could not be reached", row.name),
        )
    };
    match tokio::time::timeout(timeout, mcp::list_tools(&server, remote.limits)).await {
        Err(_) => Err(unreachable()),
        Ok(Ok(tools)) => Ok(tools),
        Ok(Err(McpError::Refused(why))) => Err(Error::refused("url_refused", why)),
        Ok(Err(McpError::Unreachable)) => Err(unreachable()),
        Ok(Err(McpError::Failed(why))) => Err(Error::new(
            crate::error::Kind::NotRunnable,
            "connector_failed",
            format!("the MCP server of {} refused tools/list: {why}", row.name),
        )),
        Ok(Err(McpError::TooMuch(why))) => Err(Error::new(
            crate::error::Kind::NotRunnable,
            "connector_over_limit",
            format!("the MCP server of {} sent too much: {why}", row.name),
        )),
    }
}

/// Writes the plan (inside the caller's transaction) and says what changed.
async fn apply(
    write: &guard::Write,
    connector: &connectors::Model,
    wanted: Vec<Wanted>,
    request: &SyncRequest,
) -> Result<SyncReport> {
    let db = &**write;
    let mut report = SyncReport {
        connector: connector.name.clone(),
        ..Default::default()
    };
    let names: Vec<String> = wanted.iter().map(|w| w.name.clone()).collect();
    let existing: BTreeMap<String, tools::Model> = tools::Entity::find()
        .filter(tools::Column::Name.is_in(names))
        .all(db)
        .await?
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let agent = match &request.agent {
        Some(name) => Some(links::agent(db, name).await?),
        None => None,
    };
    let mut seen = BTreeSet::new();
    for want in wanted {
        let entry = SyncEntry {
            remote: want.remote.clone(),
            name: Some(want.name.clone()),
            reason: want.loose.clone(),
        };
        seen.insert(want.remote.clone());
        let saved = match existing.get(&want.name) {
            None => {
                let on = connector.trusted;
                let saved =
                    tools_owner::create_synced_in(write, &want.name, &want.synced(connector), on)
                        .await?;
                if on {
                    report.added.push(entry);
                } else {
                    let held =
                        pins::hold_in(write, &saved, connector, ToolChangeKind::Added, &want.tool)
                            .await?;
                    report.held.push(SyncEntry {
                        reason: Some(held.reason()),
                        ..entry
                    });
                }
                saved
            }
            Some(row) if ours(row, connector, &want.remote) => {
                match pinned(write, row, &want, connector, request.overwrite).await? {
                    Pinned::Applied(saved, true) => {
                        report.updated.push(entry);
                        *saved
                    }
                    Pinned::Applied(saved, false) => {
                        report.unchanged.push(entry);
                        *saved
                    }
                    Pinned::Held(held) => {
                        report.held.push(SyncEntry {
                            reason: Some(held.reason()),
                            ..entry
                        });
                        row.clone()
                    }
                }
            }
            Some(_) => {
                report.refused.push(SyncEntry {
                    reason: Some(format!(
                        "a tool named {:?} exists and is not {}'s {:?}",
                        want.name, connector.name, want.remote
                    )),
                    ..entry
                });
                continue;
            }
        };
        if let Some(agent) = &agent {
            links::attach_in(write, agent, &saved).await?;
        }
    }
    report.disabled = disable_gone(write, connector, &seen).await?;
    Ok(report)
}

/// What a sync did with an existing tool's remote definition.
enum Pinned {
    /// Applied (`true` when anything changed), or nothing to apply.
    Applied(Box<tools::Model>, bool),
    /// Held for an operator: the tool serves its pin.
    Held(pins::Held),
}

/// Applies the server's definition of an existing tool when its connector is
/// trusted, when it is the pinned one, or when a tool synced before pins stores
/// exactly it (the pin is then recorded); holds it otherwise. A tool still waiting
/// for its `added` change is not served: it is updated in place and held again.
async fn pinned(
    write: &guard::Write,
    row: &tools::Model,
    want: &Wanted,
    connector: &connectors::Model,
    overwrite: bool,
) -> Result<Pinned> {
    let waiting = pins::waits_for_acceptance(&**write, row.id).await?;
    if connector.trusted {
        pins::supersede_in(write, row, connector).await?;
        let (saved, changed) = update(write, row, want, connector, overwrite).await?;
        if waiting {
            let on = tools_owner::switch_on_in(write, saved).await?;
            return Ok(Pinned::Applied(Box::new(on), true));
        }
        return Ok(Pinned::Applied(Box::new(saved), changed));
    }
    let is_pin = row.pinned_fingerprint.as_deref() == Some(want.fingerprint.as_str());
    if waiting {
        // Never served: kept in line with the server, and held again.
        let saved = match is_pin {
            true => row.clone(),
            false => update(write, row, want, connector, overwrite).await?.0,
        };
        let held =
            pins::hold_in(write, &saved, connector, ToolChangeKind::Added, &want.tool).await?;
        return Ok(Pinned::Held(held));
    }
    if is_pin {
        // The server sends the pinned definition (again): nothing is held.
        pins::supersede_in(write, row, connector).await?;
        let (saved, changed) = update(write, row, want, connector, overwrite).await?;
        return Ok(Pinned::Applied(Box::new(saved), changed));
    }
    if row.pinned_fingerprint.is_none() && stores(row, want) {
        tools_owner::pin_in(write, row.clone(), &want.fingerprint).await?;
        return Ok(Pinned::Applied(Box::new(row.clone()), false));
    }
    let held = pins::hold_in(write, row, connector, ToolChangeKind::Changed, &want.tool).await?;
    Ok(Pinned::Held(held))
}

/// Whether a tool synced before pins stores exactly what the server sends now.
fn stores(row: &tools::Model, want: &Wanted) -> bool {
    row.synced_description.as_deref() == Some(want.description.as_str())
        && row.remote_schema.as_ref() == Some(&want.remote_schema)
        && row.remote_gone_at.is_none()
}

/// Accepts a held definition inside the operator's write: the tool serves it,
/// pinned, switched on when it was `added` (an admin's edit of the description or
/// tier is kept, as a re-sync keeps it).
pub(super) async fn accept_in(
    write: &guard::Write,
    row: &tools::Model,
    connector: &connectors::Model,
    remote: &Tool,
    added: bool,
) -> Result<tools::Model> {
    let description = remote
        .description
        .as_deref()
        .unwrap_or_default()
        .trim()
        .to_owned();
    // The sync held it only once it could be stored; a loose schema was allowed then.
    let want = want(remote.clone(), row.name.clone(), description, true).map_err(|why| {
        Error::conflict(format!("the held definition cannot be stored now: {why}"))
    })?;
    // The update pins the held definition's fingerprint with it.
    let (saved, _) = update(write, row, &want, connector, false).await?;
    if added {
        return tools_owner::switch_on_in(write, saved).await;
    }
    Ok(saved)
}

fn ours(row: &tools::Model, connector: &connectors::Model, remote: &str) -> bool {
    row.deleted_at.is_none()
        && row.connector_id == Some(connector.id)
        && row.remote_name.as_deref() == Some(remote)
}

/// Applies the server's tool to an existing synced tool; `true` when anything changed.
async fn update(
    write: &guard::Write,
    row: &tools::Model,
    want: &Wanted,
    connector: &connectors::Model,
    overwrite: bool,
) -> Result<(tools::Model, bool)> {
    // Never below what an earlier sync made it: the server may raise its tool's
    // tier, not lower it (a drifted stored value reads as the safest tier).
    let synced = row
        .synced_tier
        .as_deref()
        .map_or(want.tier, |t| Tier::or_safest(t).max(want.tier));
    let tier = synced.as_str();
    // An admin's edit is a value that differs from what the last sync wrote.
    let keep_description = !overwrite && Some(&row.description) != row.synced_description.as_ref();
    let keep_tier = !overwrite && Some(&row.approval_tier) != row.synced_tier.as_ref();
    let description = if keep_description {
        row.description.clone()
    } else {
        want.description.clone()
    };
    let approval_tier = if keep_tier {
        row.approval_tier.clone()
    } else {
        tier.to_owned()
    };
    let came_back = row.remote_gone_at.is_some();
    // A new pin alone (a tool synced before pins) is written, not reported.
    let repin = row.pinned_fingerprint.as_deref() != Some(want.fingerprint.as_str());
    let changed = description != row.description
        || approval_tier != row.approval_tier
        || want.schema != row.parameters
        || row.remote_schema.as_ref() != Some(&want.remote_schema)
        || row.strict != want.loose.is_none()
        || row.synced_description.as_deref() != Some(want.description.as_str())
        || row.synced_tier.as_deref() != Some(tier)
        || came_back;
    if !changed && !repin {
        return Ok((row.clone(), false));
    }
    let mut synced = want.synced(connector);
    synced.tier = tier.to_owned();
    let saved =
        tools_owner::update_synced_in(write, row.clone(), description, approval_tier, &synced)
            .await?;
    Ok((saved, changed))
}

/// Switches off this connector's synced tools whose remote tool is gone.
async fn disable_gone(
    write: &guard::Write,
    connector: &connectors::Model,
    seen: &BTreeSet<String>,
) -> Result<Vec<SyncEntry>> {
    let synced = tools::Entity::find()
        .filter(tools::Column::ConnectorId.eq(connector.id))
        .filter(tools::Column::RemoteName.is_not_null())
        .filter(tools::Column::RemoteGoneAt.is_null())
        .filter(tools::Column::DeletedAt.is_null())
        .all(&**write)
        .await?;
    let mut disabled = Vec::new();
    for row in synced {
        let remote = row.remote_name.clone().unwrap_or_default();
        if seen.contains(&remote) {
            continue;
        }
        disabled.push(SyncEntry {
            remote,
            name: Some(row.name.clone()),
            reason: None,
        });
        tools_owner::mark_gone_in(write, row).await?;
    }
    Ok(disabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_verbs_map_to_the_vocabulary_with_the_connector_after_the_verb() {
        for (remote, name) in [
            ("get_forecast", "get_weather_forecast"),
            ("list_alerts", "get_weather_alerts"),
            ("fetchStations", "get_weather_stations"),
            ("read-report", "get_weather_report"),
            ("find_cities", "search_weather_cities"),
            ("query_history", "search_weather_history"),
            ("add_note", "create_weather_note"),
            ("new_alert", "create_weather_alert"),
            ("edit_note", "update_weather_note"),
            ("modify_note", "update_weather_note"),
            ("patch_note", "update_weather_note"),
            ("remove_note", "delete_weather_note"),
            ("set_units", "set_weather_units"),
            ("link_station", "link_weather_station"),
            ("get_weather_now", "get_weather_now"),
        ] {
            assert_eq!(
                loadout_name(remote, "weather").as_deref(),
                Ok(name),
                "{remote}"
            );
        }
        for remote in ["frobnicate", "run_report", "forecast"] {
            let why = loadout_name(remote, "weather").expect_err(remote);
            assert!(why.contains("rename"), "{remote}: {why}");
        }
    }
}
