//! An agent's revisions, labels and label history, as the API shows them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use entity::{agent_configurations, agent_labels, agent_revisions, label_moves};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::Serialize;
use utoipa::ToSchema;

use super::content::Content;
use crate::db::page;
use crate::error::{Error, Result, check_label, check_name};

/// One revision, without its content.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevisionSummary {
    pub number: i32,
    /// Hex SHA-256 of the content's canonical JSON.
    pub content_hash: String,
    /// Who first published this content (a key name, `seed`, `migration`), when known.
    pub author: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// A page of an agent's revisions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevisionList {
    pub agent: String,
    pub revisions: Vec<RevisionSummary>,
    /// Pass as `before` for the next (older) page; `null`: this page is the last.
    pub next_before: Option<i32>,
}

/// Revisions in a page unless asked otherwise, and the most one page holds.
pub const DEFAULT_PAGE: u64 = 100;
pub const MAX_PAGE: u64 = 1_000;

/// Which revisions to list: at most `limit` (1 to [`MAX_PAGE`]), newest first,
/// numbered below `before` when given.
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub limit: u64,
    pub before: Option<i32>,
}

impl Page {
    /// The first page of [`DEFAULT_PAGE`].
    pub fn first() -> Page {
        Page {
            limit: DEFAULT_PAGE,
            before: None,
        }
    }
}

/// One revision with what it serves.
#[derive(Debug, Serialize, ToSchema)]
pub struct RevisionView {
    pub agent: String,
    pub number: i32,
    pub content_hash: String,
    pub author: Option<String>,
    pub created_at: DateTime<Utc>,
    pub content: Content,
}

/// Where a label points.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelView {
    pub name: String,
    /// The revision's number.
    pub revision: i32,
    /// In `gated` mode, moved only by an approved change request or a rollback
    /// (`production` always is).
    pub protected: bool,
    /// Approving a change request for it needs its release checks to pass.
    pub require_checks: bool,
    /// The evaluation a change request to it must pass (`evals`), as set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub require_evals: Option<serde_json::Value>,
    pub updated_at: DateTime<Utc>,
}

/// An agent's labels, by name.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelList {
    pub agent: String,
    pub labels: Vec<LabelView>,
}

/// One move of a label.
#[derive(Debug, Serialize, ToSchema)]
pub struct MoveView {
    /// The move's id: the order of moves, and the cursor of the next page.
    pub id: i32,
    /// The revision it left; `null` for the label's first position.
    pub from_revision: Option<i32>,
    pub to_revision: i32,
    /// `publish`, `move` (by hand), `promote` (an approved change request) or
    /// `rollback` (back to the revision the label held just before).
    pub kind: String,
    /// Who made it (for a `promote`: who asked), when known.
    pub actor: Option<String>,
    /// Who signed off a `promote`.
    pub approver: Option<String>,
    /// Why, as the one who asked said.
    pub reason: Option<String>,
    /// The change request a `promote` carried out.
    pub change_request: Option<i32>,
    pub created_at: DateTime<Utc>,
}

/// The names of the labels at revision `revision_id` (its row id), by name.
pub async fn labels_at(db: &impl ConnectionTrait, revision_id: i32) -> Result<Vec<String>> {
    let names = agent_labels::Entity::find()
        .select_only()
        .column(agent_labels::Column::Name)
        .filter(agent_labels::Column::RevisionId.eq(revision_id))
        .order_by_asc(agent_labels::Column::Name)
        .into_tuple::<String>()
        .all(db)
        .await?;
    Ok(names)
}

/// An agent as an import compares with it: its id and release mode, each
/// revision's number with its template (oldest first), and where its labels point.
pub struct Templates {
    pub agent_id: i32,
    pub release_mode: String,
    pub revisions: Vec<(i32, Option<String>)>,
    /// Label name to revision number.
    pub labels: BTreeMap<String, i32>,
}

impl Templates {
    /// The newest revision whose template is `template`.
    pub fn newest_with(&self, template: &str) -> Option<i32> {
        self.revisions
            .iter()
            .rev()
            .find(|(_, t)| t.as_deref() == Some(template))
            .map(|(n, _)| *n)
    }

    /// The template `latest` serves (`None`: the built-in assembly, or no `latest`).
    pub fn latest(&self) -> Option<&str> {
        self.labels
            .get(super::LATEST)
            .and_then(|n| self.template_of(*n))
    }

    /// The template of revision `number` (`None`: the built-in assembly, or no such revision).
    pub fn template_of(&self, number: i32) -> Option<&str> {
        self.revisions
            .iter()
            .find(|(n, _)| *n == number)
            .and_then(|(_, t)| t.as_deref())
    }
}

/// The live agent `name` as [`Templates`]; `None` when there is none.
pub async fn templates(db: &impl ConnectionTrait, name: &str) -> Result<Option<Templates>> {
    let Some(found) = live(db, name).await? else {
        return Ok(None);
    };
    let rows = agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(found.id))
        .order_by_asc(agent_revisions::Column::Number)
        .all(db)
        .await?;
    let mut revisions = Vec::with_capacity(rows.len());
    let mut numbers = BTreeMap::new();
    for row in rows {
        let content: Content = serde_json::from_str(&row.content).map_err(Error::internal)?;
        numbers.insert(row.id, row.number);
        revisions.push((row.number, content.template));
    }
    let labels = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(found.id))
        .all(db)
        .await?
        .into_iter()
        .map(|l| Ok((l.name, number_of(&numbers, l.revision_id)?)))
        .collect::<Result<_>>()?;
    Ok(Some(Templates {
        agent_id: found.id,
        release_mode: found.release_mode,
        revisions,
        labels,
    }))
}

/// A page of a label's moves, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct LabelHistory {
    pub agent: String,
    pub label: String,
    pub moves: Vec<MoveView>,
    /// Pass as `before` for the next (older) page; `null`: this page is the last.
    pub next_before: Option<i32>,
}

/// The live agent of that name; 404 otherwise.
pub(super) async fn agent(
    db: &impl ConnectionTrait,
    name: &str,
) -> Result<agent_configurations::Model> {
    live(db, name)
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent named {name:?}")))
}

/// The live agent of that name, if any.
async fn live(
    db: &impl ConnectionTrait,
    name: &str,
) -> Result<Option<agent_configurations::Model>> {
    check_name("agent", name)?;
    Ok(agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq(name))
        .filter(agent_configurations::Column::DeletedAt.is_null())
        .one(db)
        .await?)
}

/// Each of the agent's revision ids with its number.
async fn numbers(db: &impl ConnectionTrait, agent_id: i32) -> Result<BTreeMap<i32, i32>> {
    let rows: Vec<(i32, i32)> = agent_revisions::Entity::find()
        .select_only()
        .column(agent_revisions::Column::Id)
        .column(agent_revisions::Column::Number)
        .filter(agent_revisions::Column::AgentId.eq(agent_id))
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().collect())
}

fn number_of(numbers: &BTreeMap<i32, i32>, id: i32) -> Result<i32> {
    numbers
        .get(&id)
        .copied()
        .ok_or_else(|| Error::internal(format!("revision id {id} is not the agent's")))
}

/// The agent's revisions, newest first.
pub async fn revisions(db: &impl ConnectionTrait, name: &str, page: Page) -> Result<RevisionList> {
    if !(1..=MAX_PAGE).contains(&page.limit) {
        return Err(Error::invalid(format!("limit must be 1 to {MAX_PAGE}")));
    }
    let found = agent(db, name).await?;
    let mut query = agent_revisions::Entity::find()
        .select_only()
        .column(agent_revisions::Column::Number)
        .column(agent_revisions::Column::ContentHash)
        .column(agent_revisions::Column::Author)
        .column(agent_revisions::Column::CreatedAt)
        .filter(agent_revisions::Column::AgentId.eq(found.id));
    if let Some(before) = page.before {
        query = query.filter(agent_revisions::Column::Number.lt(before));
    }
    let rows: Vec<(i32, String, Option<String>, DateTime<Utc>)> = query
        .order_by_desc(agent_revisions::Column::Number)
        .limit(page.limit + 1)
        .into_tuple()
        .all(db)
        .await?;
    let more = rows.len() as u64 > page.limit;
    let revisions: Vec<RevisionSummary> = rows
        .into_iter()
        .take(page.limit as usize)
        .map(
            |(number, content_hash, author, created_at)| RevisionSummary {
                number,
                content_hash,
                author,
                created_at,
            },
        )
        .collect();
    let next_before = match more {
        true => revisions.last().map(|r| r.number),
        false => None,
    };
    Ok(RevisionList {
        agent: found.name,
        revisions,
        next_before,
    })
}

/// One revision of the agent, with its content; 404 if it has no such number.
pub async fn revision(db: &impl ConnectionTrait, name: &str, number: i32) -> Result<RevisionView> {
    let found = agent(db, name).await?;
    let row = agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(found.id))
        .filter(agent_revisions::Column::Number.eq(number))
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("agent {name:?} has no revision {number}")))?;
    Ok(RevisionView {
        agent: found.name,
        number: row.number,
        content: Content::parse(&row.content)?,
        content_hash: row.content_hash,
        author: row.author,
        created_at: row.created_at,
    })
}

/// The agent's labels, by name.
pub async fn labels(db: &impl ConnectionTrait, name: &str) -> Result<LabelList> {
    let found = agent(db, name).await?;
    let numbers = numbers(db, found.id).await?;
    let rows = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(found.id))
        .order_by_asc(agent_labels::Column::Name)
        .all(db)
        .await?;
    let labels = rows
        .into_iter()
        .map(|l| {
            Ok(LabelView {
                revision: number_of(&numbers, l.revision_id)?,
                protected: l.protected || l.name == super::moves::PRODUCTION,
                require_checks: l.require_checks,
                require_evals: l
                    .require_evals
                    .as_deref()
                    .and_then(|t| serde_json::from_str(t).ok()),
                name: l.name,
                updated_at: l.updated_at,
            })
        })
        .collect::<Result<_>>()?;
    Ok(LabelList {
        agent: found.name,
        labels,
    })
}

/// A page of a label's moves, newest first (`page.cursor`: older than that move's
/// id); 404 if the agent has no such label.
pub async fn history(
    db: &impl ConnectionTrait,
    name: &str,
    label: &str,
    page: page::ByNumber,
) -> Result<LabelHistory> {
    check_label(label)?;
    let limit = crate::error::check_limit(page.limit)?;
    let found = agent(db, name).await?;
    let exists = agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(found.id))
        .filter(agent_labels::Column::Name.eq(label))
        .one(db)
        .await?;
    if exists.is_none() {
        return Err(Error::not_found(format!(
            "agent {name:?} has no label {label:?}"
        )));
    }
    let mut query = label_moves::Entity::find()
        .filter(label_moves::Column::AgentId.eq(found.id))
        .filter(label_moves::Column::Label.eq(label));
    if let Some(before) = page.cursor {
        query = query.filter(label_moves::Column::Id.lt(before));
    }
    let rows = query
        .order_by_desc(label_moves::Column::Id)
        .limit(limit + 1)
        .all(db)
        .await?;
    let (rows, next_before) = page::cut(rows, limit, |m| m.id);
    let numbers = numbers(db, found.id).await?;
    let moves = rows
        .into_iter()
        .map(|m| {
            Ok(MoveView {
                id: m.id,
                from_revision: m
                    .from_revision_id
                    .map(|id| number_of(&numbers, id))
                    .transpose()?,
                to_revision: number_of(&numbers, m.to_revision_id)?,
                kind: m.kind,
                actor: m.actor,
                approver: m.approver,
                reason: m.reason,
                change_request: m.change_request_id,
                created_at: m.created_at,
            })
        })
        .collect::<Result<_>>()?;
    Ok(LabelHistory {
        agent: found.name,
        label: label.to_owned(),
        moves,
        next_before,
    })
}
