//! An agent's datasets: named, versioned lists of evaluation cases. A save whose
//! cases differ from the latest version's makes the next version; the same cases
//! again make nothing. Runs name the version they ran, so a result always reads
//! against the cases it was scored on. Operators write them (they are shared
//! configuration, in configuration as code too); admins read them.

use chrono::{DateTime, Utc};
use entity::{channels, eval_datasets};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::cases::{self, Case};
use crate::db::idempotency::{Pending, record_if};
use crate::error::{Error, Result};

/// The most live datasets an agent holds.
pub const MAX_DATASETS: usize = 50;

/// A dataset version, without its cases.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DatasetSummary {
    pub agent: String,
    pub name: String,
    pub version: i32,
    /// How many cases it holds.
    pub case_count: i32,
    /// SHA-256 of the cases' canonical JSON.
    pub hash: String,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// A dataset version with its cases.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DatasetView {
    #[serde(flatten)]
    pub summary: DatasetSummary,
    pub cases: Vec<Case>,
}

/// An agent's datasets, the latest version of each.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct DatasetList {
    pub datasets: Vec<DatasetSummary>,
}

/// What saving a dataset answers: the version, and whether the save made it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Saved {
    #[serde(flatten)]
    pub summary: DatasetSummary,
    /// `false`: the cases equal the latest version's; nothing was written.
    pub created: bool,
}

fn summary(agent: &str, row: &eval_datasets::Model) -> DatasetSummary {
    DatasetSummary {
        agent: agent.to_owned(),
        name: row.name.clone(),
        version: row.version,
        case_count: row.case_count,
        hash: row.hash.clone(),
        created_by: row.created_by.clone(),
        created_at: row.created_at,
    }
}

/// The cases a stored version holds.
pub fn cases_of(row: &eval_datasets::Model) -> Result<Vec<Case>> {
    serde_json::from_str(&row.cases).map_err(Error::internal)
}

/// The canonical text and hash of `cases`.
fn canonical(cases: &[Case]) -> Result<(String, String)> {
    let value = serde_json::to_value(cases).map_err(Error::internal)?;
    let text = serde_json::to_string(&crate::digest::sorted(&value)).map_err(Error::internal)?;
    let hash = crate::digest::sha256_hex(&text);
    Ok((text, hash))
}

/// The newest live version of dataset `name` of agent `agent_id` (`version`: that one).
pub async fn find(
    db: &impl ConnectionTrait,
    agent_id: i32,
    name: &str,
    version: Option<i32>,
) -> Result<eval_datasets::Model> {
    let mut query = eval_datasets::Entity::find()
        .filter(eval_datasets::Column::AgentId.eq(agent_id))
        .filter(eval_datasets::Column::Name.eq(name))
        .filter(eval_datasets::Column::DeletedAt.is_null());
    if let Some(version) = version {
        query = query.filter(eval_datasets::Column::Version.eq(version));
    }
    query
        .order_by_desc(eval_datasets::Column::Version)
        .one(db)
        .await?
        .ok_or_else(|| match version {
            Some(v) => Error::not_found(format!("no version {v} of dataset {name:?}")),
            None => Error::not_found(format!("no dataset {name:?}")),
        })
}

/// 422 naming the first case whose channel is not a live channel.
async fn check_channels(db: &impl ConnectionTrait, cases: &[Case]) -> Result<()> {
    let live: Vec<String> = channels::Entity::find()
        .filter(channels::Column::DeletedAt.is_null())
        .all(db)
        .await?
        .into_iter()
        .map(|c| c.name)
        .collect();
    for (i, case) in cases.iter().enumerate() {
        if !live.contains(&case.channel) {
            return Err(Error::refused(
                "invalid_dataset",
                format!(
                    "cases[{i}].channel: there is no channel {:?} (channels: {})",
                    case.channel,
                    live.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A dataset save.
pub struct Save<'a> {
    pub agent: &'a str,
    pub name: &'a str,
    pub cases: Vec<Case>,
    /// Who saves it (the member).
    pub by: &'a str,
}

/// Saves `save.cases` as the next version of the dataset (operators).
pub async fn put(
    db: &DatabaseConnection,
    save: Save<'_>,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<Saved> {
    let txn = crate::db::begin_write(db).await?;
    let saved = put_in(&txn, save, now).await?;
    record_if(&txn, key).await?;
    txn.commit().await?;
    Ok(saved)
}

/// [`put`] inside the caller's transaction (configuration as code applies many).
pub async fn put_in(
    txn: &impl ConnectionTrait,
    save: Save<'_>,
    now: DateTime<Utc>,
) -> Result<Saved> {
    if !crate::vocab::valid_name(save.name) {
        return Err(Error::refused(
            "invalid_name",
            format!(
                "{:?} is not a dataset name: lowercase letters, digits and _",
                save.name
            ),
        ));
    }
    // Regexes and schemas compiled for up to 1000 cases: behind the CPU gate.
    let checked = save.cases.clone();
    crate::cpu::run(move || cases::check(&checked)).await??;
    let agent = crate::registry::links::agent(txn, save.agent).await?;
    check_channels(txn, &save.cases).await?;
    let (text, hash) = canonical(&save.cases)?;
    crate::db::bounds::serialize(txn, "eval_datasets", save.agent).await?;
    let latest = find(txn, agent.id, save.name, None).await.ok();
    if let Some(latest) = latest.as_ref().filter(|l| l.hash == hash) {
        return Ok(Saved {
            summary: summary(save.agent, latest),
            created: false,
        });
    }
    if latest.is_none() {
        let held = live_names(txn, agent.id).await?.len();
        if held >= MAX_DATASETS {
            return Err(Error::refused(
                crate::error::LIMIT_REACHED,
                format!(
                    "the agent holds {MAX_DATASETS} datasets, the most it may; delete one first"
                ),
            ));
        }
    }
    // A deleted dataset's versions stay; a new one of the same name numbers on.
    let last = eval_datasets::Entity::find()
        .filter(eval_datasets::Column::AgentId.eq(agent.id))
        .filter(eval_datasets::Column::Name.eq(save.name))
        .order_by_desc(eval_datasets::Column::Version)
        .one(txn)
        .await?
        .map_or(0, |r| r.version);
    let row = eval_datasets::ActiveModel {
        agent_id: Set(agent.id),
        name: Set(save.name.to_owned()),
        version: Set(last + 1),
        cases: Set(text),
        case_count: Set(save.cases.len() as i32),
        hash: Set(hash),
        created_by: Set(save.by.to_owned()),
        created_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(txn)
    .await?;
    Ok(Saved {
        summary: summary(save.agent, &row),
        created: true,
    })
}

async fn live_names(db: &impl ConnectionTrait, agent_id: i32) -> Result<Vec<eval_datasets::Model>> {
    let rows = eval_datasets::Entity::find()
        .filter(eval_datasets::Column::AgentId.eq(agent_id))
        .filter(eval_datasets::Column::DeletedAt.is_null())
        .order_by_asc(eval_datasets::Column::Name)
        .order_by_desc(eval_datasets::Column::Version)
        .all(db)
        .await?;
    let mut latest: Vec<eval_datasets::Model> = Vec::new();
    for row in rows {
        if latest.last().is_none_or(|l| l.name != row.name) {
            latest.push(row);
        }
    }
    Ok(latest)
}

/// The agent's live datasets, the latest version of each, by name.
pub async fn list(db: &impl ConnectionTrait, agent: &str) -> Result<DatasetList> {
    let found = crate::registry::links::agent(db, agent).await?;
    let rows = live_names(db, found.id).await?;
    Ok(DatasetList {
        datasets: rows.iter().map(|r| summary(agent, r)).collect(),
    })
}

/// Every live dataset of the agent with its latest cases (configuration as code).
pub async fn latest(db: &impl ConnectionTrait, agent_id: i32) -> Result<Vec<(String, Vec<Case>)>> {
    live_names(db, agent_id)
        .await?
        .iter()
        .map(|r| Ok((r.name.clone(), cases_of(r)?)))
        .collect()
}

/// One version (the latest unless `version`) with its cases.
pub async fn get(
    db: &impl ConnectionTrait,
    agent: &str,
    name: &str,
    version: Option<i32>,
) -> Result<DatasetView> {
    let found = crate::registry::links::agent(db, agent).await?;
    let row = find(db, found.id, name, version).await?;
    Ok(DatasetView {
        summary: summary(agent, &row),
        cases: cases_of(&row)?,
    })
}

/// Deletes the dataset, every version (softly); runs keep their results.
pub async fn delete(
    db: &DatabaseConnection,
    agent: &str,
    name: &str,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<DatasetSummary> {
    let txn = crate::db::begin_write(db).await?;
    let summary = delete_in(&txn, agent, name, now).await?;
    record_if(&txn, key).await?;
    txn.commit().await?;
    Ok(summary)
}

/// [`delete`] inside the caller's transaction.
pub async fn delete_in(
    txn: &impl ConnectionTrait,
    agent: &str,
    name: &str,
    now: DateTime<Utc>,
) -> Result<DatasetSummary> {
    let found = crate::registry::links::agent(txn, agent).await?;
    let latest = find(txn, found.id, name, None).await?;
    eval_datasets::Entity::update_many()
        .col_expr(
            eval_datasets::Column::DeletedAt,
            sea_orm::sea_query::Expr::value(now),
        )
        .filter(eval_datasets::Column::AgentId.eq(found.id))
        .filter(eval_datasets::Column::Name.eq(name))
        .filter(eval_datasets::Column::DeletedAt.is_null())
        .exec(txn)
        .await?;
    Ok(summary(agent, &latest))
}
