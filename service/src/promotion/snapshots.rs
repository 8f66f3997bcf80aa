//! Render snapshots: an agent's expected prompt for chosen channels and users,
//! which a change request's render check compares a candidate revision against.
//! A snapshot is rendered as of a fixed moment ([`as_of`], so `$current_time`
//! does not change it) in UTC, with the recording tenant's instructions for the
//! user. A difference is shown as a line diff; accepting it records the
//! candidate's render as the new expectation.

use chrono::{DateTime, Utc};
use entity::render_snapshots;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::{Error, Result, check_id, check_name};
use crate::releases::content::Content;
use crate::releases::diff::{TextChange, lines};
use crate::releases::read;
use crate::releases::serve::Rendering;

/// The moment every snapshot is rendered at.
pub fn as_of() -> DateTime<Utc> {
    crate::releases::serve::fixed_moment()
}

/// The largest render a snapshot holds (a prompt over it is refused).
pub const MAX_RENDER_BYTES: usize = 1024 * 1024;

/// The most snapshots an agent keeps per tenant.
pub const MAX_SNAPSHOTS: usize = 50;

/// A stored expectation.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotView {
    pub agent: String,
    pub channel: String,
    /// `null`: rendered without a user.
    pub user_id: Option<String>,
    pub expected: String,
    pub updated_at: DateTime<Utc>,
}

/// An agent's snapshots for the key's tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnapshotList {
    pub snapshots: Vec<SnapshotView>,
}

/// The body of `PUT /v1/agents/{agent}/snapshots`: record (or accept) one render.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotPut {
    pub channel: String,
    pub user_id: Option<String>,
    /// The revision whose render becomes the expectation; default: `production`'s.
    /// Accepting a change request's difference is recording its candidate.
    pub revision: Option<i32>,
}

/// One snapshot compared with a candidate.
#[derive(Debug, PartialEq, Serialize, ToSchema)]
pub struct RenderCheck {
    pub channel: String,
    pub user_id: Option<String>,
    pub matches: bool,
    /// The line diff from the expected render to the candidate's (`null` when it matches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<TextChange>,
    /// Why the candidate could not be rendered (the channel is gone, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn user_key(user: Option<&str>) -> String {
    user.unwrap_or_default().to_owned()
}

/// `content`'s render for `channel` and `user` as a snapshot holds it.
pub async fn render(
    db: &impl ConnectionTrait,
    tenant: &str,
    agent_id: i32,
    name: &str,
    content: &Content,
    channel: &str,
    user: Option<&str>,
) -> Result<String> {
    let at = Rendering {
        tenant,
        agent_id,
        name,
        now: as_of(),
        max_bytes: MAX_RENDER_BYTES,
    };
    crate::releases::serve::render(db, &at, content, channel, user).await
}

/// The tenant's snapshots of the agent.
pub async fn list(db: &impl ConnectionTrait, tenant: &str, name: &str) -> Result<SnapshotList> {
    let agent = crate::registry::links::agent(db, name).await?;
    let rows = live(db, tenant, agent.id).await?;
    Ok(SnapshotList {
        snapshots: rows.into_iter().map(|r| view(&agent.name, r)).collect(),
    })
}

async fn live(
    db: &impl ConnectionTrait,
    tenant: &str,
    agent_id: i32,
) -> Result<Vec<render_snapshots::Model>> {
    Ok(render_snapshots::Entity::find()
        .filter(render_snapshots::Column::AgentId.eq(agent_id))
        .filter(render_snapshots::Column::TenantId.eq(tenant))
        .filter(render_snapshots::Column::DeletedAt.is_null())
        .order_by_asc(render_snapshots::Column::Channel)
        .order_by_asc(render_snapshots::Column::UserId)
        .all(db)
        .await?)
}

fn view(agent: &str, row: render_snapshots::Model) -> SnapshotView {
    SnapshotView {
        agent: agent.to_owned(),
        channel: row.channel,
        user_id: Some(row.user_id).filter(|u| !u.is_empty()),
        expected: row.expected,
        updated_at: row.updated_at,
    }
}

/// Records the render of `put.revision` (default `production`'s) as the tenant's
/// expectation for that channel and user, replacing the one before.
pub async fn record(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
    put: SnapshotPut,
    now: DateTime<Utc>,
) -> Result<SnapshotView> {
    check_name("channel", &put.channel)?;
    if let Some(user) = &put.user_id {
        check_id("user_id", user)?;
    }
    let agent = crate::registry::links::agent(db, name).await?;
    let number = match put.revision {
        Some(n) => n,
        None => read::labels(db, name)
            .await?
            .labels
            .iter()
            .find(|l| l.name == crate::releases::PRODUCTION)
            .map(|l| l.revision)
            .ok_or_else(|| crate::releases::serve::label_not_found(name, "production"))?,
    };
    let revision = read::revision(db, name, number).await?;
    let user = put.user_id.as_deref();
    let text = render(
        db,
        tenant,
        agent.id,
        name,
        &revision.content,
        &put.channel,
        user,
    )
    .await?;
    let existing = live(db, tenant, agent.id).await?;
    let same = existing
        .iter()
        .find(|r| r.channel == put.channel && r.user_id == user_key(user))
        .cloned();
    let saved = match same {
        Some(row) => {
            let mut active: render_snapshots::ActiveModel = row.into();
            active.expected = Set(text);
            active.updated_at = Set(now);
            active.update(db).await?
        }
        None => {
            if existing.len() >= MAX_SNAPSHOTS {
                return Err(Error::refused(
                    "too_many_snapshots",
                    format!(
                        "an agent keeps at most {MAX_SNAPSHOTS} snapshots per tenant; delete one first"
                    ),
                ));
            }
            render_snapshots::ActiveModel {
                agent_id: Set(agent.id),
                tenant_id: Set(tenant.to_owned()),
                channel: Set(put.channel.clone()),
                user_id: Set(user_key(user)),
                expected: Set(text),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(db)
            .await?
        }
    };
    Ok(view(&agent.name, saved))
}

/// Soft-deletes the tenant's snapshot of that channel and user; 404 if none.
pub async fn delete(
    db: &impl ConnectionTrait,
    tenant: &str,
    name: &str,
    channel: &str,
    user: Option<&str>,
    now: DateTime<Utc>,
) -> Result<SnapshotView> {
    let agent = crate::registry::links::agent(db, name).await?;
    let row = live(db, tenant, agent.id)
        .await?
        .into_iter()
        .find(|r| r.channel == channel && r.user_id == user_key(user))
        .ok_or_else(|| {
            Error::not_found(format!("no snapshot of {name:?} for channel {channel:?}"))
        })?;
    let mut active: render_snapshots::ActiveModel = row.into();
    active.deleted_at = Set(Some(now));
    active.updated_at = Set(now);
    Ok(view(&agent.name, active.update(db).await?))
}

/// The tenant's snapshots of the agent compared with `candidate`'s renders.
pub async fn compare(
    db: &impl ConnectionTrait,
    tenant: &str,
    agent_id: i32,
    name: &str,
    candidate: &Content,
) -> Result<Vec<RenderCheck>> {
    let mut out = Vec::new();
    for row in live(db, tenant, agent_id).await? {
        let user = Some(row.user_id.as_str()).filter(|u| !u.is_empty());
        let check = match render(db, tenant, agent_id, name, candidate, &row.channel, user).await {
            Ok(text) if text == row.expected => RenderCheck {
                channel: row.channel,
                user_id: user.map(str::to_owned),
                matches: true,
                diff: None,
                error: None,
            },
            Ok(text) => RenderCheck {
                diff: Some(lines(&row.expected, &text)),
                channel: row.channel,
                user_id: user.map(str::to_owned),
                matches: false,
                error: None,
            },
            Err(e) => RenderCheck {
                channel: row.channel,
                user_id: user.map(str::to_owned),
                matches: false,
                diff: None,
                error: Some(e.message),
            },
        };
        out.push(check);
    }
    Ok(out)
}
