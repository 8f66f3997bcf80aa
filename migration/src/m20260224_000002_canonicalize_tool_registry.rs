//! SPEC-019 FU-7: canonicalize the tool registry.
//!
//! 1. deactivate the ghost and digest tools and their agent links;
//! 2. deactivate every legacy name that a canonical tool replaces, and its links;
//! 3. upsert the 23 canonical tools;
//! 4. link each canonical tool to every agent that had (an active link to) any tool it replaces;
//! 5. rewrite the assistant's soul as behavioural philosophy only;
//! 6. add `agent_configurations.prompt_template`;
//! 7. seed the assistant's template.
//!
//! The data comes from `frozen.json` beside this file, never from the living
//! catalog in `seeds/`: this migration must do tomorrow exactly what it does today.
//! Every data step writes only when a row differs from its target, so a second run
//! changes nothing, timestamps included. `up` first copies every row it may touch
//! into `canonicalize_backup_*` tables; `down` restores those rows exactly,
//! soft-deletes the rows `up` created, and drops the column and the backups.

use std::collections::{BTreeMap, BTreeSet};

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};
use serde::Deserialize;

type Now = chrono::DateTime<chrono::Utc>;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260224_000002_canonicalize_tool_registry"
    }
}

const BACKUP_TOOLS: &str = "canonicalize_backup_tools";
const BACKUP_AGENT_TOOLS: &str = "canonicalize_backup_agent_tools";
const BACKUP_AGENTS: &str = "canonicalize_backup_agents";

/// The data this migration applies, as it was when the migration was written.
#[derive(Debug, Deserialize)]
pub struct Frozen {
    pub ghosts: Vec<String>,
    pub digests: Vec<String>,
    pub tools: Vec<FrozenTool>,
    pub assistant: FrozenAssistant,
}

#[derive(Debug, Deserialize)]
pub struct FrozenTool {
    pub name: String,
    #[serde(rename = "type")]
    pub tool_type: String,
    pub approval_tier: String,
    pub description: String,
    pub prompt_section: String,
    pub parameters: serde_json::Value,
    /// Legacy names this tool takes over from.
    pub replaces: Vec<String>,
}

#[derive(Debug, Deserialize)]
pub struct FrozenAssistant {
    pub name: String,
    pub soul: String,
    pub prompt_template: String,
}

/// Parses the frozen data; it is compiled in, so a failure is a build defect, reported rather than panicked on.
pub fn frozen() -> Result<Frozen, DbErr> {
    serde_json::from_str(include_str!(
        "m20260224_000002_canonicalize_tool_registry/frozen.json"
    ))
    .map_err(|e| {
        DbErr::Custom(format!(
            "canonicalize_tool_registry: frozen data is invalid: {e}"
        ))
    })
}

#[derive(DeriveIden)]
enum Tools {
    Table,
    Id,
    Name,
    Type,
    Description,
    ApprovalTier,
    Parameters,
    PromptSection,
    IsActive,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
    Name,
    Soul,
    PromptTemplate,
    UpdatedAt,
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

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let frozen = frozen()?;
        let db = manager.get_connection();
        backup(db, &frozen).await?;
        manager
            .alter_table(
                Table::alter()
                    .table(AgentConfigurations::Table)
                    .add_column(
                        ColumnDef::new(AgentConfigurations::PromptTemplate)
                            .text()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        apply_data_steps(db, &frozen, chrono::Utc::now()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let frozen = frozen()?;
        let db = manager.get_connection();
        restore(db, &frozen, chrono::Utc::now()).await?;
        for table in [BACKUP_TOOLS, BACKUP_AGENT_TOOLS, BACKUP_AGENTS] {
            manager
                .drop_table(Table::drop().table(Alias::new(table)).to_owned())
                .await?;
        }
        // sea-query refuses DROP COLUMN for SQLite, which has supported it since 3.35.
        db.execute_unprepared("ALTER TABLE agent_configurations DROP COLUMN prompt_template")
            .await?;
        Ok(())
    }
}

impl Frozen {
    /// Ghost and digest tools: retired with no successor.
    fn retired(&self) -> impl Iterator<Item = &str> {
        self.ghosts.iter().chain(&self.digests).map(String::as_str)
    }

    /// Legacy names that a canonical tool replaces.
    fn replaced(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .flat_map(|t| t.replaces.iter().map(String::as_str))
    }

    fn canonical(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.name.as_str())
    }

    /// Every tool name this migration reads or writes.
    fn affected(&self) -> Vec<&str> {
        let all: BTreeSet<&str> = self
            .retired()
            .chain(self.replaced())
            .chain(self.canonical())
            .collect();
        all.into_iter().collect()
    }
}

/// Runs data steps 1–5 and 7. Public so tests can prove a second run changes nothing.
pub async fn apply_data_steps<C: ConnectionTrait>(
    db: &C,
    frozen: &Frozen,
    now: Now,
) -> Result<(), DbErr> {
    // Step 4 needs the links as they were before steps 1–2 switch them off.
    let relinks = plan_relinks(db, frozen).await?;

    deactivate(db, frozen.retired(), now).await?;
    deactivate(db, frozen.replaced(), now).await?;

    for tool in &frozen.tools {
        let tool_id = upsert_tool(db, tool, now).await?;
        for &agent_id in relinks.get(tool.name.as_str()).into_iter().flatten() {
            ensure_link(db, agent_id, tool_id, now).await?;
        }
    }

    let assistant = Expr::col(AgentConfigurations::Name).eq(frozen.assistant.name.as_str());
    db.execute(
        Query::update()
            .table(AgentConfigurations::Table)
            .value(AgentConfigurations::Soul, frozen.assistant.soul.as_str())
            .value(AgentConfigurations::UpdatedAt, now)
            .and_where(assistant.clone())
            .and_where(Expr::col(AgentConfigurations::Soul).ne(frozen.assistant.soul.as_str())),
    )
    .await?;
    db.execute(
        Query::update()
            .table(AgentConfigurations::Table)
            .value(
                AgentConfigurations::PromptTemplate,
                frozen.assistant.prompt_template.as_str(),
            )
            .value(AgentConfigurations::UpdatedAt, now)
            .and_where(assistant)
            .and_where(Expr::col(AgentConfigurations::PromptTemplate).is_null()),
    )
    .await?;
    Ok(())
}

/// For each canonical tool, the agents holding an active link to the tool itself or to a name it replaces.
async fn plan_relinks<C: ConnectionTrait>(
    db: &C,
    frozen: &Frozen,
) -> Result<BTreeMap<String, BTreeSet<i32>>, DbErr> {
    let rows = db
        .query_all(
            Query::select()
                .column((AgentTools::Table, AgentTools::AgentId))
                .column((Tools::Table, Tools::Name))
                .from(AgentTools::Table)
                .inner_join(
                    Tools::Table,
                    Expr::col((Tools::Table, Tools::Id))
                        .equals((AgentTools::Table, AgentTools::ToolId)),
                )
                .and_where(Expr::col((AgentTools::Table, AgentTools::IsActive)).eq(true))
                .and_where(Expr::col((AgentTools::Table, AgentTools::DeletedAt)).is_null()),
        )
        .await?;
    let mut successor: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for tool in &frozen.tools {
        successor
            .entry(tool.name.as_str())
            .or_default()
            .push(tool.name.as_str());
        for old in &tool.replaces {
            successor
                .entry(old.as_str())
                .or_default()
                .push(tool.name.as_str());
        }
    }
    let mut plan: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for row in rows {
        let agent_id: i32 = row.try_get("", "agent_id")?;
        let name: String = row.try_get("", "name")?;
        for new in successor.get(name.as_str()).into_iter().flatten() {
            plan.entry((*new).to_owned()).or_default().insert(agent_id);
        }
    }
    Ok(plan)
}

/// Switches the named tools and every link to them off; rows already off are left alone.
async fn deactivate<'a, C: ConnectionTrait>(
    db: &C,
    names: impl Iterator<Item = &'a str>,
    now: Now,
) -> Result<(), DbErr> {
    let names: Vec<&str> = names.collect();
    db.execute(
        Query::update()
            .table(AgentTools::Table)
            .value(AgentTools::IsActive, false)
            .value(AgentTools::UpdatedAt, now)
            .and_where(Expr::col(AgentTools::IsActive).eq(true))
            .and_where(
                Expr::col(AgentTools::ToolId).in_subquery(
                    Query::select()
                        .column(Tools::Id)
                        .from(Tools::Table)
                        .and_where(Expr::col(Tools::Name).is_in(names.iter().copied()))
                        .take(),
                ),
            ),
    )
    .await?;
    db.execute(
        Query::update()
            .table(Tools::Table)
            .value(Tools::IsActive, false)
            .value(Tools::UpdatedAt, now)
            .and_where(Expr::col(Tools::IsActive).eq(true))
            .and_where(Expr::col(Tools::Name).is_in(names)),
    )
    .await?;
    Ok(())
}

/// Inserts the tool, or rewrites its row if any field differs from the frozen one; returns its id.
async fn upsert_tool<C: ConnectionTrait>(
    db: &C,
    tool: &FrozenTool,
    now: Now,
) -> Result<i32, DbErr> {
    let existing = db
        .query_one(
            Query::select()
                .columns([
                    Tools::Id,
                    Tools::Type,
                    Tools::Description,
                    Tools::ApprovalTier,
                    Tools::Parameters,
                    Tools::PromptSection,
                    Tools::IsActive,
                    Tools::DeletedAt,
                ])
                .from(Tools::Table)
                .and_where(Expr::col(Tools::Name).eq(tool.name.as_str())),
        )
        .await?;
    let Some(row) = existing else {
        db.execute(
            Query::insert()
                .into_table(Tools::Table)
                .columns([
                    Tools::Name,
                    Tools::Type,
                    Tools::Description,
                    Tools::ApprovalTier,
                    Tools::Parameters,
                    Tools::PromptSection,
                    Tools::IsActive,
                    Tools::CreatedAt,
                    Tools::UpdatedAt,
                ])
                .values([
                    tool.name.as_str().into(),
                    tool.tool_type.as_str().into(),
                    tool.description.as_str().into(),
                    tool.approval_tier.as_str().into(),
                    tool.parameters.clone().into(),
                    tool.prompt_section.as_str().into(),
                    true.into(),
                    now.into(),
                    now.into(),
                ])
                .map_err(|e| DbErr::Custom(e.to_string()))?,
        )
        .await?;
        return tool_id(db, &tool.name).await;
    };

    let id: i32 = row.try_get("", "id")?;
    let current = (
        row.try_get::<String>("", "type")?,
        row.try_get::<String>("", "description")?,
        row.try_get::<String>("", "approval_tier")?,
        row.try_get::<serde_json::Value>("", "parameters")?,
        row.try_get::<Option<String>>("", "prompt_section")?,
        row.try_get::<bool>("", "is_active")?,
        row.try_get::<Option<Now>>("", "deleted_at")?,
    );
    let target = (
        tool.tool_type.clone(),
        tool.description.clone(),
        tool.approval_tier.clone(),
        tool.parameters.clone(),
        Some(tool.prompt_section.clone()),
        true,
        None,
    );
    if current != target {
        db.execute(
            Query::update()
                .table(Tools::Table)
                .value(Tools::Type, tool.tool_type.as_str())
                .value(Tools::Description, tool.description.as_str())
                .value(Tools::ApprovalTier, tool.approval_tier.as_str())
                .value(Tools::Parameters, tool.parameters.clone())
                .value(Tools::PromptSection, tool.prompt_section.as_str())
                .value(Tools::IsActive, true)
                .value(Tools::DeletedAt, Option::<Now>::None)
                .value(Tools::UpdatedAt, now)
                .and_where(Expr::col(Tools::Id).eq(id)),
        )
        .await?;
    }
    Ok(id)
}

async fn tool_id<C: ConnectionTrait>(db: &C, name: &str) -> Result<i32, DbErr> {
    let row = db
        .query_one(
            Query::select()
                .column(Tools::Id)
                .from(Tools::Table)
                .and_where(Expr::col(Tools::Name).eq(name)),
        )
        .await?
        .ok_or_else(|| DbErr::RecordNotFound(format!("tool {name}")))?;
    row.try_get("", "id")
}

/// Makes the (agent, tool) link exist and be active, touching it only if it is not.
async fn ensure_link<C: ConnectionTrait>(
    db: &C,
    agent_id: i32,
    tool_id: i32,
    now: Now,
) -> Result<(), DbErr> {
    let existing = db
        .query_one(
            Query::select()
                .columns([AgentTools::Id, AgentTools::IsActive, AgentTools::DeletedAt])
                .from(AgentTools::Table)
                .and_where(Expr::col(AgentTools::AgentId).eq(agent_id))
                .and_where(Expr::col(AgentTools::ToolId).eq(tool_id)),
        )
        .await?;
    match existing {
        None => {
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
        }
        Some(row) => {
            let active: bool = row.try_get("", "is_active")?;
            let deleted: Option<Now> = row.try_get("", "deleted_at")?;
            if !active || deleted.is_some() {
                let id: i32 = row.try_get("", "id")?;
                db.execute(
                    Query::update()
                        .table(AgentTools::Table)
                        .value(AgentTools::IsActive, true)
                        .value(AgentTools::DeletedAt, Option::<Now>::None)
                        .value(AgentTools::UpdatedAt, now)
                        .and_where(Expr::col(AgentTools::Id).eq(id)),
                )
                .await?;
            }
        }
    }
    Ok(())
}

fn render<S: QueryStatementWriter>(backend: DbBackend, stmt: &S) -> String {
    match backend {
        DbBackend::Postgres => stmt.to_string(PostgresQueryBuilder),
        DbBackend::MySql => stmt.to_string(MysqlQueryBuilder),
        _ => stmt.to_string(SqliteQueryBuilder),
    }
}

/// Copies every row `up` may change, once: a rerun keeps the first, pre-migration copy.
async fn backup<C: ConnectionTrait>(db: &C, frozen: &Frozen) -> Result<(), DbErr> {
    let backend = db.get_database_backend();
    let affected_ids = Query::select()
        .column(Tools::Id)
        .from(Tools::Table)
        .and_where(Expr::col(Tools::Name).is_in(frozen.affected()))
        .take();
    let tools = Query::select()
        .expr(Expr::col(Asterisk))
        .from(Tools::Table)
        .and_where(Expr::col(Tools::Name).is_in(frozen.affected()))
        .take();
    let links = Query::select()
        .expr(Expr::col(Asterisk))
        .from(AgentTools::Table)
        .and_where(Expr::col(AgentTools::ToolId).in_subquery(affected_ids))
        .take();
    let agents = Query::select()
        .columns([
            AgentConfigurations::Id,
            AgentConfigurations::Soul,
            AgentConfigurations::UpdatedAt,
        ])
        .from(AgentConfigurations::Table)
        .take();
    for (table, select) in [
        (BACKUP_TOOLS, tools),
        (BACKUP_AGENT_TOOLS, links),
        (BACKUP_AGENTS, agents),
    ] {
        db.execute_unprepared(&format!(
            "CREATE TABLE IF NOT EXISTS {table} AS {}",
            render(backend, &select)
        ))
        .await?;
    }
    Ok(())
}

/// `down`: puts back every backed-up row and soft-deletes what `up` created.
async fn restore<C: ConnectionTrait>(db: &C, frozen: &Frozen, now: Now) -> Result<(), DbErr> {
    for sql in [
        format!(
            "UPDATE tools SET \"type\" = b.\"type\", description = b.description, approval_tier = b.approval_tier, \
             parameters = b.parameters, prompt_section = b.prompt_section, is_active = b.is_active, \
             updated_at = b.updated_at, deleted_at = b.deleted_at FROM {BACKUP_TOOLS} AS b WHERE tools.id = b.id"
        ),
        format!(
            "UPDATE agent_tools SET is_active = b.is_active, updated_at = b.updated_at, deleted_at = b.deleted_at \
             FROM {BACKUP_AGENT_TOOLS} AS b WHERE agent_tools.id = b.id"
        ),
        format!(
            "UPDATE agent_configurations SET soul = b.soul, updated_at = b.updated_at \
             FROM {BACKUP_AGENTS} AS b WHERE agent_configurations.id = b.id"
        ),
    ] {
        db.execute_unprepared(&sql).await?;
    }

    let canonical: Vec<&str> = frozen.canonical().collect();
    let created_tools = Query::update()
        .table(Tools::Table)
        .value(Tools::IsActive, false)
        .value(Tools::DeletedAt, now)
        .value(Tools::UpdatedAt, now)
        .and_where(Expr::col(Tools::Name).is_in(canonical.iter().copied()))
        .and_where(
            Expr::col(Tools::Id).not_in_subquery(
                Query::select()
                    .column(Tools::Id)
                    .from(Alias::new(BACKUP_TOOLS))
                    .take(),
            ),
        )
        .take();
    let created_links = Query::update()
        .table(AgentTools::Table)
        .value(AgentTools::IsActive, false)
        .value(AgentTools::DeletedAt, now)
        .value(AgentTools::UpdatedAt, now)
        .and_where(
            Expr::col(AgentTools::ToolId).in_subquery(
                Query::select()
                    .column(Tools::Id)
                    .from(Tools::Table)
                    .and_where(Expr::col(Tools::Name).is_in(canonical))
                    .take(),
            ),
        )
        .and_where(
            Expr::col(AgentTools::Id).not_in_subquery(
                Query::select()
                    .column(AgentTools::Id)
                    .from(Alias::new(BACKUP_AGENT_TOOLS))
                    .take(),
            ),
        )
        .take();
    // Links first: the tool subquery above must still see the canonical names.
    db.execute(&created_links).await?;
    db.execute(&created_tools).await?;
    Ok(())
}
