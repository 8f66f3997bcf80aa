//! Users' instructions belong to a tenant (issue 11, item 1).
//!
//! Before, `user_agent_prompt_customizations` was unique on (user_id, agent_id): one
//! tenant's approved `update_instructions` for `alice` replaced what every other
//! tenant's agent showed `alice`. `up` adds `tenant_id` (existing rows get `default`,
//! the tenant of a key created without one) and makes (tenant_id, agent_id, user_id)
//! the unique key.
//!
//! The backends differ: Postgres alters the table in place (and drops the column's
//! default afterwards, so the application must always name the tenant); SQLite cannot
//! drop the unique constraint that was declared inside `CREATE TABLE`, so it rebuilds
//! the table (create, copy, drop, rename), keeping ids. The column stays last on both.
//!
//! `down` restores the old shape. If two tenants hold rows for one (user, agent) the
//! old unique key cannot hold them both: `down` refuses with an error naming the first
//! such pair rather than drop anyone's instructions. Otherwise each row keeps its text
//! and loses only its tenant (a row of a single non-default tenant becomes tenantless,
//! as every row was before `up`).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20260410_000007_tenant_user_instructions"
    }
}

/// The tenant existing rows are given: `auth::keys::DEFAULT_TENANT`, frozen here.
const DEFAULT_TENANT: &str = "default";

const OLD_KEY: &str = "user_agent_prompt_customizations_user_agent_key";
const NEW_KEY: &str = "user_agent_prompt_customizations_tenant_agent_user_key";

/// The SQLite table as migration 1 created it, under `name`.
fn sqlite_old_table(name: &str) -> String {
    format!(
        r#"CREATE TABLE "{name}" ( "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "user_id" varchar NOT NULL, "agent_id" integer NOT NULL, "instructions" text NOT NULL, "is_active" boolean NOT NULL DEFAULT TRUE, "created_at" timestamp_with_timezone_text NOT NULL, "updated_at" timestamp_with_timezone_text NOT NULL, "deleted_at" timestamp_with_timezone_text NULL, CONSTRAINT "{OLD_KEY}" UNIQUE ("user_id", "agent_id"), FOREIGN KEY ("agent_id") REFERENCES "agent_configurations" ("id") )"#
    )
}

/// The SQLite table with its tenant, under `name`.
fn sqlite_new_table(name: &str) -> String {
    format!(
        r#"CREATE TABLE "{name}" ( "id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "user_id" varchar NOT NULL, "agent_id" integer NOT NULL, "instructions" text NOT NULL, "is_active" boolean NOT NULL DEFAULT TRUE, "created_at" timestamp_with_timezone_text NOT NULL, "updated_at" timestamp_with_timezone_text NOT NULL, "deleted_at" timestamp_with_timezone_text NULL, "tenant_id" varchar NOT NULL DEFAULT '{DEFAULT_TENANT}', CONSTRAINT "{NEW_KEY}" UNIQUE ("tenant_id", "agent_id", "user_id"), FOREIGN KEY ("agent_id") REFERENCES "agent_configurations" ("id") )"#
    )
}

const COLUMNS: &str =
    "id, user_id, agent_id, instructions, is_active, created_at, updated_at, deleted_at";

async fn run(db: &SchemaManagerConnection<'_>, statements: &[String]) -> Result<(), DbErr> {
    for statement in statements {
        db.execute_unprepared(statement).await?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let statements = match manager.get_database_backend() {
            DbBackend::Postgres => vec![
                format!("ALTER TABLE user_agent_prompt_customizations ADD COLUMN tenant_id varchar NOT NULL DEFAULT '{DEFAULT_TENANT}'"),
                "ALTER TABLE user_agent_prompt_customizations ALTER COLUMN tenant_id DROP DEFAULT".to_owned(),
                format!("ALTER TABLE user_agent_prompt_customizations DROP CONSTRAINT {OLD_KEY}"),
                format!("ALTER TABLE user_agent_prompt_customizations ADD CONSTRAINT {NEW_KEY} UNIQUE (tenant_id, agent_id, user_id)"),
            ],
            // SQLite keeps the column's default: dropping it needs yet another rebuild,
            // and the application names the tenant on every insert anyway.
            _ => vec![
                sqlite_new_table("user_agent_prompt_customizations_new"),
                format!(
                    "INSERT INTO user_agent_prompt_customizations_new ({COLUMNS}, tenant_id) \
                     SELECT {COLUMNS}, '{DEFAULT_TENANT}' FROM user_agent_prompt_customizations"
                ),
                "DROP TABLE user_agent_prompt_customizations".to_owned(),
                "ALTER TABLE user_agent_prompt_customizations_new RENAME TO user_agent_prompt_customizations".to_owned(),
            ],
        };
        run(db, &statements).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let shared = db
            .query_one_raw(sea_orm_migration::sea_orm::Statement::from_string(
                manager.get_database_backend(),
                "SELECT user_id, agent_id, COUNT(*) AS tenants FROM user_agent_prompt_customizations \
                 GROUP BY user_id, agent_id HAVING COUNT(*) > 1 ORDER BY user_id, agent_id",
            ))
            .await?;
        if let Some(row) = shared {
            let user: String = row.try_get("", "user_id")?;
            let agent: i32 = row.try_get("", "agent_id")?;
            let tenants: i64 = row.try_get("", "tenants")?;
            return Err(DbErr::Migration(format!(
                "cannot roll back m20260410_000007_tenant_user_instructions: user {user:?} has \
                 instructions for agent {agent} in {tenants} tenants, and the old table holds one \
                 row per user and agent; remove all but one tenant's row first (nothing was changed)"
            )));
        }
        let statements = match manager.get_database_backend() {
            DbBackend::Postgres => vec![
                format!("ALTER TABLE user_agent_prompt_customizations DROP CONSTRAINT {NEW_KEY}"),
                format!("ALTER TABLE user_agent_prompt_customizations ADD CONSTRAINT {OLD_KEY} UNIQUE (user_id, agent_id)"),
                "ALTER TABLE user_agent_prompt_customizations DROP COLUMN tenant_id".to_owned(),
            ],
            _ => vec![
                sqlite_old_table("user_agent_prompt_customizations_old"),
                format!(
                    "INSERT INTO user_agent_prompt_customizations_old ({COLUMNS}) \
                     SELECT {COLUMNS} FROM user_agent_prompt_customizations"
                ),
                "DROP TABLE user_agent_prompt_customizations".to_owned(),
                "ALTER TABLE user_agent_prompt_customizations_old RENAME TO user_agent_prompt_customizations".to_owned(),
            ],
        };
        run(db, &statements).await
    }
}
