//! Links `delete_reminders` where its siblings are (issue 11, item 8).
//!
//! Migration 2 links each canonical tool to the agents that had a tool it replaces;
//! `delete_reminders` replaces nothing, so no agent got it, and an assistant that can
//! list and create reminders could not cancel one. This links it to every live agent
//! with an active link to an active `get_reminders` or `create_reminders`.
//!
//! - A link that does not exist is created; a soft-deleted one is revived. A link an
//!   admin switched off (`is_active = false`, not deleted) is left off: that was a
//!   decision, and this migration does not overrule it.
//! - Compare, then write: a second run finds nothing to do and changes nothing, not
//!   even `updated_at`.
//! - Every link `up` creates or revives is recorded in `link_delete_reminders_backup`
//!   (its id, whether `up` created it, and the revived row's former state). `down`
//!   puts revived rows back as they were, switches off and soft-deletes the rows `up`
//!   created (deletes are soft, even in a rollback) and drops the backup. Nothing else
//!   is touched.
//!
//! The names are frozen here, never read from the living seeds.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

type Now = chrono::DateTime<chrono::Utc>;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260410_000008_link_delete_reminders"
    }
}

/// The tool this migration links.
pub const TOOL: &str = "delete_reminders";
/// An agent with an active link to one of these gets [`TOOL`].
pub const SIBLINGS: [&str; 2] = ["get_reminders", "create_reminders"];
const BACKUP: &str = "link_delete_reminders_backup";

#[derive(DeriveIden)]
enum Tools {
    Table,
    Id,
    Name,
    IsActive,
    DeletedAt,
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
    DeletedAt,
}

#[derive(DeriveIden)]
enum AgentTools {
    Table,
    Id,
    AgentId,
    ToolId,
    IsActive,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum Backup {
    LinkId,
    Created,
    IsActive,
    UpdatedAt,
    DeletedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Alias::new(BACKUP))
                    .col(ColumnDef::new(Backup::LinkId).integer().not_null())
                    .col(ColumnDef::new(Backup::Created).boolean().not_null())
                    .col(ColumnDef::new(Backup::IsActive).boolean().null())
                    .col(
                        ColumnDef::new(Backup::UpdatedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(Backup::DeletedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        apply_data_steps(manager.get_connection(), chrono::Utc::now()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(&format!(
            "UPDATE agent_tools SET is_active = b.is_active, updated_at = b.updated_at, deleted_at = b.deleted_at \
             FROM {BACKUP} AS b WHERE agent_tools.id = b.link_id AND b.created = FALSE"
        ))
        .await?;
        let now = chrono::Utc::now();
        db.execute(
            Query::update()
                .table(AgentTools::Table)
                .value(AgentTools::IsActive, false)
                .value(AgentTools::DeletedAt, now)
                .value(AgentTools::UpdatedAt, now)
                .and_where(
                    Expr::col(AgentTools::Id).in_subquery(
                        Query::select()
                            .column(Backup::LinkId)
                            .from(Alias::new(BACKUP))
                            .and_where(Expr::col(Backup::Created).eq(true))
                            .take(),
                    ),
                ),
        )
        .await?;
        manager
            .drop_table(Table::drop().table(Alias::new(BACKUP)).to_owned())
            .await
    }
}

/// The data step: links [`TOOL`] where a sibling is active and records what it did in
/// the backup table (which must exist). Public so a test can run it a second time.
pub async fn apply_data_steps<C: ConnectionTrait>(db: &C, now: Now) -> Result<(), DbErr> {
    let Some(tool_id) = live_tool(db).await? else {
        // Migration 2 creates it; an admin may have deleted it since. Nothing to link.
        return Ok(());
    };
    for agent_id in agents_with_a_sibling(db).await? {
        let existing = db
            .query_one(
                Query::select()
                    .columns([AgentTools::Id, AgentTools::DeletedAt])
                    .from(AgentTools::Table)
                    .and_where(Expr::col(AgentTools::AgentId).eq(agent_id))
                    .and_where(Expr::col(AgentTools::ToolId).eq(tool_id)),
            )
            .await?;
        match existing {
            None => create_link(db, agent_id, tool_id, now).await?,
            Some(row) => {
                let deleted: Option<Now> = row.try_get("", "deleted_at")?;
                if deleted.is_some() {
                    revive_link(db, row.try_get("", "id")?, now).await?;
                }
                // Not deleted: active already, or switched off by an admin. Leave it.
            }
        }
    }
    Ok(())
}

async fn live_tool<C: ConnectionTrait>(db: &C) -> Result<Option<i32>, DbErr> {
    db.query_one(
        Query::select()
            .column(Tools::Id)
            .from(Tools::Table)
            .and_where(Expr::col(Tools::Name).eq(TOOL))
            .and_where(Expr::col(Tools::DeletedAt).is_null()),
    )
    .await?
    .map(|row| row.try_get("", "id"))
    .transpose()
}

/// Live agents with an active, undeleted link to an active, undeleted sibling; by id.
async fn agents_with_a_sibling<C: ConnectionTrait>(db: &C) -> Result<Vec<i32>, DbErr> {
    let rows = db
        .query_all(
            Query::select()
                .distinct()
                .column((AgentTools::Table, AgentTools::AgentId))
                .from(AgentTools::Table)
                .inner_join(
                    Tools::Table,
                    Expr::col((Tools::Table, Tools::Id))
                        .equals((AgentTools::Table, AgentTools::ToolId)),
                )
                .inner_join(
                    AgentConfigurations::Table,
                    Expr::col((AgentConfigurations::Table, AgentConfigurations::Id))
                        .equals((AgentTools::Table, AgentTools::AgentId)),
                )
                .and_where(Expr::col((Tools::Table, Tools::Name)).is_in(SIBLINGS))
                .and_where(Expr::col((Tools::Table, Tools::IsActive)).eq(true))
                .and_where(Expr::col((Tools::Table, Tools::DeletedAt)).is_null())
                .and_where(Expr::col((AgentTools::Table, AgentTools::IsActive)).eq(true))
                .and_where(Expr::col((AgentTools::Table, AgentTools::DeletedAt)).is_null())
                .and_where(
                    Expr::col((AgentConfigurations::Table, AgentConfigurations::DeletedAt))
                        .is_null(),
                )
                .order_by((AgentTools::Table, AgentTools::AgentId), Order::Asc),
        )
        .await?;
    rows.iter().map(|row| row.try_get("", "agent_id")).collect()
}

async fn create_link<C: ConnectionTrait>(
    db: &C,
    agent_id: i32,
    tool_id: i32,
    now: Now,
) -> Result<(), DbErr> {
    db.execute(
        Query::insert()
            .into_table(AgentTools::Table)
            .columns([
                AgentTools::AgentId,
                AgentTools::ToolId,
                AgentTools::IsActive,
                AgentTools::CreatedAt,
                AgentTools::UpdatedAt,
            ])
            .values([
                agent_id.into(),
                tool_id.into(),
                true.into(),
                now.into(),
                now.into(),
            ])
            .map_err(|e| DbErr::Custom(e.to_string()))?,
    )
    .await?;
    db.execute_unprepared(&format!(
        "INSERT INTO {BACKUP} (link_id, created) SELECT id, TRUE FROM agent_tools \
         WHERE agent_id = {agent_id} AND tool_id = {tool_id}"
    ))
    .await?;
    Ok(())
}

async fn revive_link<C: ConnectionTrait>(db: &C, link_id: i32, now: Now) -> Result<(), DbErr> {
    // The former state first, copied in SQL so its timestamps keep their exact text.
    db.execute_unprepared(&format!(
        "INSERT INTO {BACKUP} (link_id, created, is_active, updated_at, deleted_at) \
         SELECT id, FALSE, is_active, updated_at, deleted_at FROM agent_tools WHERE id = {link_id}"
    ))
    .await?;
    db.execute(
        Query::update()
            .table(AgentTools::Table)
            .value(AgentTools::IsActive, true)
            .value(AgentTools::DeletedAt, Option::<Now>::None)
            .value(AgentTools::UpdatedAt, now)
            .and_where(Expr::col(AgentTools::Id).eq(link_id)),
    )
    .await?;
    Ok(())
}
