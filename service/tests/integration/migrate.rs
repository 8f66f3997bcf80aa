//! `loadout migrate` on both backends.

use crate::support::db_test;
use loadout::db::migrate::{self, MigrateCommand};
use sea_orm::ConnectionTrait;

db_test! {
    async fn migrate_up_applies_every_migration(db) {
        let states = migrate::run(&db.conn, MigrateCommand::Up { n: None }).await.expect("up");
        let applied: Vec<(&str, bool)> = states.iter().map(|s| (s.name.as_str(), s.applied)).collect();
        assert_eq!(applied, [
            ("m20260224_000001_create_base_schema", true),
            ("m20260224_000002_canonicalize_tool_registry", true),
            ("m20260301_000003_channels_and_prompt_sections", true),
            ("m20260310_000004_keys_versions_generation", true),
            ("m20260320_000005_proposal_ledger", true),
            ("m20260401_000006_connectors", true),
            ("m20260410_000007_tenant_user_instructions", true),
            ("m20260410_000008_link_delete_reminders", true),
            ("m20261124_000009_console_sessions", true),
            ("m20261124_000010_mcp_connectors", true),
            ("m20261124_000011_agent_scoped_keys", true),
            ("m20261125_000012_synced_tool_schemas", true),
            ("m20261125_000013_idempotency_records", true),
            ("m20261125_000014_operator_role", true),
            ("m20261125_000015_key_names_per_tenant", true),
            ("m20261125_000016_agent_revisions", true),
            ("m20261125_000017_label_promotion", true),
            ("m20261126_000018_rollouts", true),
            ("m20261126_000019_outcomes", true),
            ("m20261126_000020_webhooks", true),
            ("m20261127_000021_members", true),
            ("m20261127_000022_tenant_bounds", true),
            ("m20261128_000023_policies", true),
            ("m20261128_000024_tool_contracts", true),
            ("m20261207_000025_guard_holds", true),
            ("m20261207_000026_evaluations", true),
        ]);
    }
}

db_test! {
    async fn up_with_a_step_count_applies_only_that_many(db) {
        let states = migrate::run(&db.conn, MigrateCommand::Up { n: Some(1) }).await.expect("up -n 1");
        assert_eq!(states.iter().filter(|s| s.applied).count(), 1);
        let states = migrate::run(&db.conn, MigrateCommand::Down { n: 1 }).await.expect("down");
        assert_eq!(states.iter().filter(|s| s.applied).count(), 0);
    }
}

db_test! {
    async fn refresh_and_reset_round_trip(db) {
        let db = db.migrated().await;
        let states = migrate::run(&db.conn, MigrateCommand::Refresh).await.expect("refresh");
        assert!(states.iter().all(|s| s.applied));
        let states = migrate::run(&db.conn, MigrateCommand::Reset).await.expect("reset");
        assert!(states.iter().all(|s| !s.applied));
        let states = migrate::run(&db.conn, MigrateCommand::Fresh).await.expect("fresh");
        assert!(states.iter().all(|s| s.applied));
    }
}

db_test! {
    async fn a_database_newer_than_the_binary_is_refused(db) {
        let db = db.migrated().await;
        db.conn
            .execute_unprepared("INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000001_from_the_future', 0)")
            .await
            .expect("plant a future migration");
        let err = migrate::run(&db.conn, MigrateCommand::Down { n: 1 }).await.expect_err("refused");
        let message = format!("{err:#}");
        assert!(message.contains("m20991231_000001_from_the_future") && message.contains("newer"), "{message}");
        // Nothing was rolled back.
        let states = migrate::status(&db.conn).await;
        assert!(states.is_err() || states.expect("status").iter().all(|s| s.applied));
    }
}

db_test! {
    async fn channels_migration_fills_only_the_assistant_and_down_removes_what_up_added(db) {
        use migration::m20260301_000003_channels_and_prompt_sections::{apply_data_steps, frozen};
        use migration::{Migrator, MigratorTrait};
        Migrator::up(&db.conn, Some(1)).await.expect("base");
        crate::support::legacy::load(&db.conn).await;
        Migrator::up(&db.conn, Some(1)).await.expect("canonicalize");
        let before = crate::support::dump::rows(&db).await;
        Migrator::up(&db.conn, Some(1)).await.expect("channels");

        let after = crate::support::dump::rows(&db).await;
        let channels: Vec<&str> = after["channels"].as_array().expect("channels").iter()
            .map(|c| c["name"].as_str().expect("name")).collect();
        assert_eq!(channels, ["web", "telegram", "scheduled", "heartbeat", "session_open"]);
        let agents = after["agent_configurations"].as_array().expect("agents");
        let by_name = |name: &str| agents.iter().find(|a| a["name"] == name).expect("agent").clone();
        let frozen = frozen().expect("frozen");
        assert_eq!(by_name("assistant")["operating_model"], frozen.assistant.operating_model.as_str());
        assert!(by_name("researcher")["operating_model"].is_null());
        assert_eq!(by_name("researcher")["soul_version"], 1);
        assert_eq!(by_name("researcher")["updated_at"], before["agent_configurations"][1]["updated_at"]);

        let later = chrono::Utc::now() + chrono::Duration::hours(1);
        apply_data_steps(&db.conn, &frozen, later).await.expect("second run");
        crate::support::dump::assert_same(&crate::support::dump::rows(&db).await, &after);

        Migrator::down(&db.conn, Some(1)).await.expect("down");
        let rolled_back = crate::support::dump::rows(&db).await;
        assert!(rolled_back.get("channels").is_none(), "channels table dropped");
        let keys = |v: &serde_json::Value| v["agent_configurations"][0].as_object().expect("row").keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&rolled_back), keys(&before));
    }
}

/// Inserts one row of user instructions for the first agent; `tenant` None leaves the column out.
async fn insert_instructions(
    db: &crate::support::TestDb,
    tenant: Option<&str>,
    user: &str,
    text: &str,
) -> Result<(), sea_orm::DbErr> {
    let (column, value) = match tenant {
        Some(tenant) => ("tenant_id, ", format!("'{tenant}', ")),
        None => ("", String::new()),
    };
    db.conn
        .execute_unprepared(&format!(
            "INSERT INTO user_agent_prompt_customizations ({column}user_id, agent_id, instructions, is_active, created_at, updated_at) \
             SELECT {value}'{user}', id, '{text}', TRUE, '2026-01-15T09:30:00Z', '2026-01-15T09:30:00Z' FROM agent_configurations WHERE name = 'assistant'"
        ))
        .await
        .map(|_| ())
}

fn instruction_rows(rows: &serde_json::Value) -> Vec<serde_json::Value> {
    rows["user_agent_prompt_customizations"]
        .as_array()
        .expect("rows")
        .clone()
}

db_test! {
    async fn tenant_migration_gives_existing_instructions_the_default_tenant_and_down_restores_them(db) {
        use migration::{Migrator, MigratorTrait};
        Migrator::up(&db.conn, Some(1)).await.expect("base");
        crate::support::legacy::load(&db.conn).await;
        Migrator::up(&db.conn, Some(5)).await.expect("up to connectors");
        let before = crate::support::dump::rows(&db).await;
        Migrator::up(&db.conn, Some(1)).await.expect("tenant migration");

        let after = instruction_rows(&crate::support::dump::rows(&db).await);
        assert_eq!(after.len(), 3);
        for (old, new) in instruction_rows(&before).iter().zip(&after) {
            let mut new = new.clone();
            assert_eq!(new.as_object_mut().expect("row").remove("tenant_id"), Some(serde_json::json!("default")));
            assert_eq!(&new, old, "everything else is as it was");
        }
        // The unique key is now (tenant, agent, user): another tenant may hold user-1 too, the same tenant may not.
        insert_instructions(&db, Some("acme"), "user-1", "Acme user-1.").await.expect("another tenant's user-1");
        assert!(insert_instructions(&db, Some("acme"), "user-1", "Twice.").await.is_err(), "one row per tenant, agent and user");
        db.conn.execute_unprepared("DELETE FROM user_agent_prompt_customizations WHERE tenant_id = 'acme'")
            .await.expect("back to one tenant per user");
        insert_instructions(&db, Some("acme"), "user-3", "Acme user-3.").await.expect("a user only acme has");

        Migrator::down(&db.conn, Some(1)).await.expect("down with only one tenant per user");
        // Every row is kept, text and all; only the tenant is gone.
        let rolled_back = instruction_rows(&crate::support::dump::rows(&db).await);
        assert_eq!(rolled_back[..3], instruction_rows(&before)[..]);
        assert_eq!(rolled_back.len(), 4);
        assert_eq!(rolled_back[3]["instructions"], "Acme user-3.");
        assert!(rolled_back[3].get("tenant_id").is_none());
        // The old unique key is back.
        assert!(insert_instructions(&db, None, "user-3", "Twice.").await.is_err());
    }
}

db_test! {
    async fn tenant_migration_down_refuses_when_two_tenants_hold_one_users_instructions(db) {
        use migration::{Migrator, MigratorTrait};
        Migrator::up(&db.conn, Some(1)).await.expect("base");
        crate::support::legacy::load(&db.conn).await;
        Migrator::up(&db.conn, Some(6)).await.expect("up to the tenant migration");
        insert_instructions(&db, Some("acme"), "user-1", "Acme user-1.").await.expect("insert");
        let before = crate::support::dump::rows(&db).await;

        let err = Migrator::down(&db.conn, Some(1)).await.expect_err("refused");
        let message = err.to_string();
        assert!(message.contains("\"user-1\"") && message.contains("2 tenants"), "{message}");
        crate::support::dump::assert_same(&crate::support::dump::rows(&db).await, &before);
    }
}
