//! The outbox rows the stream carries, read as [`Change`]s with their frames; and
//! the keys revoked since a moment. Reads only: the rows belong to `events`.

use chrono::{DateTime, Duration, Utc};
use entity::{api_keys, webhook_events as outbox};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::Deserialize;

use super::event::{Change, TYPES};
use super::frame::{self, Data};

/// How many rows one catch-up reads at a time.
pub const BATCH: usize = 512;

/// How far back a revocation is looked for again: the slack for replicas' clocks.
const CLOCK_SLACK: Duration = Duration::seconds(60);

/// Changes read, in id order, and the generation read after them (at least that
/// of every change's commit).
pub struct Read {
    pub changes: Vec<Change>,
    pub generation: i64,
}

/// A row of the outbox, as read.
type Row = (i32, String, Option<String>, String, DateTime<Utc>);

/// The fields of an event's `data` the stream names.
#[derive(Debug, Default, Deserialize)]
struct Fields {
    #[serde(default)]
    agent: String,
    label: Option<String>,
    /// `label.moved`: the revision it points at now.
    to: Option<i32>,
    /// `rollout.*`: its sides and the candidate's share.
    base: Option<i32>,
    candidate: Option<i32>,
    share: Option<f64>,
    /// `instructions.changed`: whose.
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Body {
    data: Fields,
}

fn query() -> sea_orm::Select<outbox::Entity> {
    outbox::Entity::find()
        .select_only()
        .columns([
            outbox::Column::Id,
            outbox::Column::EventType,
            outbox::Column::TenantId,
            outbox::Column::Body,
            outbox::Column::CreatedAt,
        ])
        .filter(outbox::Column::EventType.is_in(TYPES.iter().copied()))
}

async fn finish(db: &impl ConnectionTrait, rows: Vec<Row>) -> Result<Read, DbErr> {
    // Read after the rows: no row read can have committed at a later generation.
    let generation = crate::db::generation::current(db).await?;
    let changes = rows
        .into_iter()
        .filter_map(|row| change(row, generation))
        .collect();
    Ok(Read {
        changes,
        generation,
    })
}

/// Up to `most` changes recorded after `after`.
pub async fn after(db: &impl ConnectionTrait, after: i64, most: usize) -> Result<Read, DbErr> {
    between(db, after, i64::MAX, most).await
}

/// Up to `most` changes with an id in `(after, upto]`.
pub async fn between(
    db: &impl ConnectionTrait,
    after: i64,
    upto: i64,
    most: usize,
) -> Result<Read, DbErr> {
    let rows: Vec<Row> = query()
        .filter(outbox::Column::Id.gt(after))
        .filter(outbox::Column::Id.lte(upto))
        .order_by_asc(outbox::Column::Id)
        .limit(most as u64)
        .into_tuple()
        .all(db)
        .await?;
    finish(db, rows).await
}

/// The newest `most` changes, oldest first.
pub async fn newest(db: &impl ConnectionTrait, most: usize) -> Result<Read, DbErr> {
    let mut rows: Vec<Row> = query()
        .order_by_desc(outbox::Column::Id)
        .limit(most as u64)
        .into_tuple()
        .all(db)
        .await?;
    rows.reverse();
    finish(db, rows).await
}

/// A row as a change, or `None` for a body that names no agent (never written).
fn change(row: Row, generation: i64) -> Option<Change> {
    let (id, kind, tenant, body, at) = row;
    let fields = serde_json::from_str::<Body>(&body).ok()?.data;
    if fields.agent.is_empty() {
        return None;
    }
    let revision = match kind.as_str() {
        "label.moved" => fields.to,
        _ => fields.base,
    };
    let data = Data {
        kind: "refetchEvaluation",
        etag: frame::etag(generation),
        last_modified: Some(at.timestamp()),
        generation,
        change: Some(&kind),
        agent: Some(&fields.agent),
        label: fields.label.as_deref(),
        revision,
        candidate: fields.candidate,
        share: fields.share,
        user: fields.user.as_deref(),
        reason: None,
    };
    let id = i64::from(id);
    Some(Change {
        id,
        frame: frame::encode(id, &data),
        tenant: tenant.map(String::into_boxed_str),
        agent: fields.agent.into_boxed_str(),
        label: fields.label.map(String::into_boxed_str),
    })
}

/// Keys revoked or deleted at or after `since` (less [`CLOCK_SLACK`]), and the
/// newest such moment.
pub struct Revoked {
    pub keys: Vec<i32>,
    pub newest: Option<DateTime<Utc>>,
}

pub async fn revoked_keys(
    db: &impl ConnectionTrait,
    since: Option<DateTime<Utc>>,
) -> Result<Revoked, DbErr> {
    let Some(since) = since else {
        return Ok(Revoked {
            keys: Vec::new(),
            newest: None,
        });
    };
    let from = since - CLOCK_SLACK;
    type Key = (i32, Option<DateTime<Utc>>, Option<DateTime<Utc>>);
    let rows: Vec<Key> = api_keys::Entity::find()
        .select_only()
        .columns([
            api_keys::Column::Id,
            api_keys::Column::RevokedAt,
            api_keys::Column::DeletedAt,
        ])
        .filter(
            Condition::any()
                .add(api_keys::Column::RevokedAt.gte(from))
                .add(api_keys::Column::DeletedAt.gte(from)),
        )
        .into_tuple()
        .all(db)
        .await?;
    let newest = rows.iter().flat_map(|(_, r, d)| [*r, *d]).flatten().max();
    Ok(Revoked {
        keys: rows.into_iter().map(|(id, _, _)| id).collect(),
        newest: newest.map(|n| n.max(since)).or(Some(since)),
    })
}
