//! Pinned synced tools: a synced tool serves the remote definition an operator
//! accepted, whatever its server says later (the "rug pull": a server rewriting a
//! tool's description after it was trusted).
//!
//! - A definition's [`fingerprint`] is the SHA-256 of its canonical JSON: name,
//!   title, description, input and output schema, annotations.
//! - On a connector that is not `trusted`, a sync that finds a definition other
//!   than the pin holds it as a pending change ([`hold_in`]); a new remote tool
//!   arrives switched off, held as an `added` change. Nothing the tool serves
//!   changes until an operator accepts ([`accept`]); a rejected fingerprint is not
//!   held again. A trusted connector's sync applies changes at once, as before,
//!   and moves the pin with them.
//! - Accepting ([`super::review`]) is a registry write through the guard like any edit: on a `gated`
//!   agent it publishes a revision that `production` serves only once signed off.
//! - At call time the executor compares the server's input schema with the
//!   accepted one (`connectors::client::mcp`), so a call never sends arguments
//!   shaped for a schema nobody accepted.

use chrono::{DateTime, Utc};
use entity::{connectors, tool_changes, tools};
use rmcp::model::Tool;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{Error, Result};
use crate::events::{self, Event};
use crate::registry::guard;
use crate::releases::compat::{self, ContractChange};
use crate::releases::diff::{TextChange, lines};

/// The most changes one list shows.
pub const LIST_LIMIT: u64 = 200;

/// The parts of a remote tool its fingerprint covers, as the server sent them.
const FINGERPRINTED: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

crate::closed_set! {
    /// Where a held change is in its life.
    pub enum ToolChangeState as "tool change state" {
        /// Held: the tool serves its pin.
        Pending = "pending",
        /// An operator accepted it: the tool serves it, pinned.
        Accepted = "accepted",
        /// An operator rejected it: the pin stays and the fingerprint is not held again.
        Rejected = "rejected",
        /// A later sync found another definition (or the pinned one again).
        Superseded = "superseded",
    }
}

crate::closed_set! {
    /// What the server did.
    pub enum ToolChangeKind as "tool change kind" {
        /// A tool it did not have: stored switched off until accepted.
        Added = "added",
        /// A tool whose definition differs from the pin.
        Changed = "changed",
    }
}

/// The definition a remote tool is pinned by: what [`fingerprint`] covers.
pub fn definition(tool: &Tool) -> Value {
    let sent = serde_json::to_value(tool).unwrap_or(Value::Null);
    let mut kept = serde_json::Map::new();
    for key in FINGERPRINTED {
        if let Some(value) = sent.get(key).filter(|v| !v.is_null()) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    Value::Object(kept)
}

/// SHA-256 (hex) of a remote tool's canonical [`definition`].
pub fn fingerprint(tool: &Tool) -> String {
    let canonical = crate::digest::canonical(&definition(tool)).unwrap_or_default();
    crate::digest::sha256_hex(canonical)
}

/// A held change, with what the tool serves now and what the server sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolChangeView {
    pub id: i32,
    pub tool: String,
    pub connector: String,
    pub kind: ToolChangeKind,
    pub state: ToolChangeState,
    pub fingerprint: String,
    /// The fingerprint the tool serves (`null` for a tool synced before pins).
    pub pinned_fingerprint: Option<String>,
    /// The description the tool serves now.
    pub serving_description: String,
    /// The description the server sent.
    pub proposed_description: String,
    /// The line diff from the served description to the server's.
    pub description_diff: TextChange,
    /// The server's definition: name, title, description, input and output
    /// schema, annotations.
    #[schema(value_type = Object)]
    pub definition: Value,
    /// The input schema's changes from the served one, classified for callers.
    pub contract: Vec<ContractChange>,
    pub created_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    pub decided_by: Option<String>,
}

/// Held changes, newest first (at most [`LIST_LIMIT`]).
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolChangeList {
    pub changes: Vec<ToolChangeView>,
}

/// Which changes a list shows: `pending` (the default), another state, or all.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ChangeFilter {
    /// `pending` (default), `accepted`, `rejected`, `superseded` or `all`.
    pub state: Option<String>,
    /// Only this connector's.
    pub connector: Option<String>,
}

/// What [`hold_in`] did with a definition that differs from the pin.
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    /// A new pending change, with its id.
    New(i32),
    /// The same definition is already pending.
    Pending(i32),
    /// The same definition was rejected: still held back, not asked again.
    Rejected(i32),
}

impl Held {
    /// Why the tool did not change, for the sync report.
    pub fn reason(&self) -> String {
        match self {
            Held::New(id) | Held::Pending(id) => {
                format!(
                    "held as pending change {id}: it serves its pinned definition until an operator accepts"
                )
            }
            Held::Rejected(id) => {
                format!(
                    "the server's definition was rejected in change {id}: it serves its pinned definition"
                )
            }
        }
    }
}

/// Holds `tool`'s definition `remote` for an operator inside the sync's write: an
/// earlier pending change of the tool is superseded; a definition already pending
/// or rejected is not held again.
pub async fn hold_in(
    write: &guard::Write,
    row: &tools::Model,
    connector: &connectors::Model,
    kind: ToolChangeKind,
    remote: &Tool,
) -> Result<Held> {
    let db = &**write;
    let fingerprint = fingerprint(remote);
    let earlier = tool_changes::Entity::find()
        .filter(tool_changes::Column::ToolId.eq(row.id))
        .filter(tool_changes::Column::Fingerprint.eq(&fingerprint))
        .filter(tool_changes::Column::State.is_in([
            ToolChangeState::Pending.as_str(),
            ToolChangeState::Rejected.as_str(),
        ]))
        .order_by_desc(tool_changes::Column::Id)
        .one(db)
        .await?;
    if let Some(earlier) = earlier {
        return Ok(match earlier.state.parse() {
            Ok(ToolChangeState::Rejected) => Held::Rejected(earlier.id),
            _ => Held::Pending(earlier.id),
        });
    }
    supersede_in(write, row, connector).await?;
    let definition = serde_json::to_string(&definition(remote))
        .map_err(|e| Error::internal(format!("a remote tool could not be encoded: {e}")))?;
    let saved = tool_changes::ActiveModel {
        tool_id: Set(row.id),
        kind: Set(kind.as_str().to_owned()),
        fingerprint: Set(fingerprint),
        definition: Set(definition),
        state: Set(ToolChangeState::Pending.as_str().to_owned()),
        created_at: Set(write.now()),
        ..Default::default()
    }
    .insert(db)
    .await?;
    announce(db, &saved, row, connector, None, write.now()).await?;
    Ok(Held::New(saved.id))
}

/// Whether the tool waits for its `added` change: stored switched off by a sync
/// of an untrusted connector and never served.
pub async fn waits_for_acceptance(db: &impl ConnectionTrait, tool_id: i32) -> Result<bool> {
    let pending = tool_changes::Entity::find()
        .filter(tool_changes::Column::ToolId.eq(tool_id))
        .filter(tool_changes::Column::State.eq(ToolChangeState::Pending.as_str()))
        .filter(tool_changes::Column::Kind.eq(ToolChangeKind::Added.as_str()))
        .count(db)
        .await?;
    Ok(pending > 0)
}

/// Ends the tool's pending change as `superseded` (the server sent the pin again,
/// or another definition, or the connector is trusted now).
pub async fn supersede_in(
    write: &guard::Write,
    row: &tools::Model,
    connector: &connectors::Model,
) -> Result<()> {
    let db = &**write;
    let pending = tool_changes::Entity::find()
        .filter(tool_changes::Column::ToolId.eq(row.id))
        .filter(tool_changes::Column::State.eq(ToolChangeState::Pending.as_str()))
        .all(db)
        .await?;
    for change in pending {
        let decided = decide_in(db, change, ToolChangeState::Superseded, None, write.now()).await?;
        announce(db, &decided, row, connector, None, write.now()).await?;
    }
    Ok(())
}

/// Stores a decision on a change.
pub(super) async fn decide_in(
    db: &impl ConnectionTrait,
    change: tool_changes::Model,
    state: ToolChangeState,
    who: Option<&Principal>,
    now: DateTime<Utc>,
) -> Result<tool_changes::Model> {
    let mut active: tool_changes::ActiveModel = change.into();
    active.state = Set(state.as_str().to_owned());
    active.decided_at = Set(Some(now));
    active.decided_by = Set(who.map(|w| w.member.clone()));
    active.decided_member_id = Set(who.map(|w| w.member_id));
    Ok(active.update(db).await?)
}

/// Records the change's webhook event: `tool_change.pending` for a new one,
/// `tool_change.decided` for a decision.
pub(super) async fn announce(
    db: &impl ConnectionTrait,
    change: &tool_changes::Model,
    row: &tools::Model,
    connector: &connectors::Model,
    actor: Option<&str>,
    now: DateTime<Utc>,
) -> Result<()> {
    let payload = events::ToolChange {
        id: change.id,
        tool: row.name.clone(),
        connector: connector.name.clone(),
        kind: change.kind.clone(),
        state: change.state.clone(),
        actor: actor.map(str::to_owned),
    };
    let event = match change.state.parse() {
        Ok(ToolChangeState::Pending) => Event::ToolChangePending(payload),
        _ => Event::ToolChangeDecided(payload),
    };
    events::record(db, now, event).await?;
    Ok(())
}

/// The changes `filter` asks for, newest first.
pub async fn list(db: &DatabaseConnection, filter: ChangeFilter) -> Result<ToolChangeList> {
    let mut query = tool_changes::Entity::find();
    match filter.state.as_deref().unwrap_or("pending") {
        "all" => {}
        state => {
            let state: ToolChangeState = state.parse().map_err(|_| {
                Error::invalid("state must be pending, accepted, rejected, superseded or all")
            })?;
            query = query.filter(tool_changes::Column::State.eq(state.as_str()));
        }
    }
    if let Some(name) = &filter.connector {
        let connector = super::store::live(db, name).await?;
        let ids: Vec<i32> = tools::Entity::find()
            .filter(tools::Column::ConnectorId.eq(connector.id))
            .select_only()
            .column(tools::Column::Id)
            .into_tuple()
            .all(db)
            .await?;
        query = query.filter(tool_changes::Column::ToolId.is_in(ids));
    }
    let rows = query
        .order_by_desc(tool_changes::Column::Id)
        .limit(LIST_LIMIT)
        .all(db)
        .await?;
    let mut changes = Vec::with_capacity(rows.len());
    for row in rows {
        changes.push(view(db, row).await?);
    }
    Ok(ToolChangeList { changes })
}

/// One change; 404 if there is none.
pub async fn get(db: &DatabaseConnection, id: i32) -> Result<ToolChangeView> {
    let row = find(db, id).await?;
    view(db, row).await
}

pub(super) async fn find(db: &impl ConnectionTrait, id: i32) -> Result<tool_changes::Model> {
    tool_changes::Entity::find_by_id(id)
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no tool change {id}")))
}

/// The tool and connector a change belongs to.
pub(super) async fn owners(
    db: &impl ConnectionTrait,
    change: &tool_changes::Model,
) -> Result<(tools::Model, connectors::Model)> {
    let tool = tools::Entity::find_by_id(change.tool_id)
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("the tool of change {} is gone", change.id)))?;
    let connector = match tool.connector_id {
        Some(id) => connectors::Entity::find_by_id(id).one(db).await?,
        None => None,
    }
    .ok_or_else(|| Error::not_found(format!("the connector of change {} is gone", change.id)))?;
    Ok((tool, connector))
}

pub(super) async fn view(
    db: &impl ConnectionTrait,
    row: tool_changes::Model,
) -> Result<ToolChangeView> {
    let (tool, connector) = owners(db, &row).await?;
    let definition: Value = serde_json::from_str(&row.definition).unwrap_or(Value::Null);
    let proposed_description = definition
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_owned();
    let proposed_schema = definition
        .get("inputSchema")
        .cloned()
        .unwrap_or(Value::Null);
    let served_schema = tool.remote_schema.clone().unwrap_or(Value::Null);
    let contract = match ToolChangeKind::Added.as_str() == row.kind {
        true => Vec::new(),
        false => compat::schema(&tool.name, &served_schema, &proposed_schema),
    };
    Ok(ToolChangeView {
        id: row.id,
        kind: row.kind.parse().unwrap_or(ToolChangeKind::Changed),
        state: row.state.parse().unwrap_or(ToolChangeState::Pending),
        fingerprint: row.fingerprint,
        pinned_fingerprint: tool.pinned_fingerprint.clone(),
        description_diff: lines(&tool.description, &proposed_description),
        serving_description: tool.description,
        proposed_description,
        definition,
        contract,
        created_at: row.created_at,
        decided_at: row.decided_at,
        decided_by: row.decided_by,
        tool: tool.name,
        connector: connector.name,
    })
}
