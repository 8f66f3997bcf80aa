//! SPEC-019 FU-7 on the legacy fixture: AC-01..AC-12 as far as they concern data.

use crate::support::{TestDb, db_test, dump, legacy};
use migration::m20260224_000002_canonicalize_tool_registry::{apply_data_steps, frozen};
use migration::m20260410_000008_link_delete_reminders as link_delete_reminders;
use migration::{Migrator, MigratorTrait};
use serde_json::Value;

/// The legacy fixture on the base schema, then the canonicalization.
async fn legacy_then_canonicalized(db: &TestDb) -> Value {
    Migrator::up(&db.conn, Some(1))
        .await
        .expect("base migration");
    legacy::load(&db.conn).await;
    let before = dump::rows(db).await;
    // Up to the newest: the registry helpers read through today's entities.
    Migrator::up(&db.conn, None)
        .await
        .expect("canonicalization");
    before
}

fn names(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().expect("string").to_owned())
        .collect()
}

fn active_names(registry: &Value) -> Vec<String> {
    names(&registry["active_tools"])
        .into_iter()
        .map(|s| s.split(' ').next().unwrap_or_default().to_owned())
        .collect()
}

fn agent<'a>(registry: &'a Value, name: &str) -> &'a Value {
    registry["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["name"] == name)
        .expect("agent present")
}

db_test! {
    async fn the_legacy_registry_is_canonicalized(db) {
        legacy_then_canonicalized(&db).await;
        let registry = dump::registry(&db.conn).await;
        // One snapshot for both backends: they must agree byte for byte.
        insta::assert_json_snapshot!("legacy_registry_after_canonicalization", registry);
    }
}

db_test! {
    async fn exactly_the_canonical_tools_and_the_custom_tool_stay_active(db) {
        legacy_then_canonicalized(&db).await;
        let registry = dump::registry(&db.conn).await;
        let mut expected: Vec<String> = frozen().expect("frozen").tools.iter().map(|t| t.name.clone()).collect();
        expected.push("get_weather".into());
        expected.sort();
        assert_eq!(active_names(&registry), expected);
        let inactive = names(&registry["inactive_tools"]);
        for retired in ["delete_agent_long_term_memory", "fetch_agent_long_term_memory", "fetch_tasks", "save_memory",
            "read_memory", "email_digest", "gmail_digest", "get_task", "gmail_search", "recall", "search_memory",
            "list_entities", "get_context_info"] {
            assert!(inactive.contains(&retired.to_owned()), "{retired} should be inactive");
        }
    }
}

db_test! {
    async fn links_move_from_old_names_to_their_successors(db) {
        legacy_then_canonicalized(&db).await;
        let registry = dump::registry(&db.conn).await;
        let researcher = agent(&registry, "researcher");
        assert_eq!(
            names(&researcher["active_tools"]),
            ["get_context", "get_entities", "get_gmail", "get_tasks", "get_weather", "search_memories", "set_project"]
        );
        // An admin had switched store_memory off: that must not earn create_memories.
        assert!(!names(&researcher["active_tools"]).contains(&"create_memories".to_owned()));
        let assistant = agent(&registry, "assistant");
        let active = names(&assistant["active_tools"]);
        for expected in ["search_memories", "get_tasks", "create_tasks", "search_gmail", "get_weather", "update_instructions"] {
            assert!(active.contains(&expected.to_owned()), "assistant should have {expected}");
        }
        for gone in ["recall", "search_memory", "get_task", "read_memory", "email_digest", "gmail_digest"] {
            assert!(names(&assistant["inactive_tools"]).contains(&gone.to_owned()), "{gone} link should be off");
        }
    }
}

db_test! {
    async fn the_soul_is_rewritten_as_philosophy_and_the_template_is_seeded(db) {
        legacy_then_canonicalized(&db).await;
        let registry = dump::registry(&db.conn).await;
        let assistant = agent(&registry, "assistant");
        let soul = assistant["soul"].as_str().expect("soul");
        assert!(!soul.contains("##"));
        assert!(!soul.contains("read_memory"));
        assert_eq!(soul, frozen().expect("frozen").assistant.soul);
        assert_eq!(assistant["prompt_template"], true);
        // Only the assistant is rewritten.
        assert_eq!(agent(&registry, "researcher")["soul"], "You dig into questions carefully.");
        assert_eq!(agent(&registry, "researcher")["prompt_template"], false);
    }
}

db_test! {
    async fn the_custom_tool_and_user_customizations_are_untouched(db) {
        let before = legacy_then_canonicalized(&db).await;
        let after = dump::rows(&db).await;
        // Columns later migrations add (tenant_id, connector_id, the sync columns) are not the canonicalization's business.
        let without_tenant: Vec<Value> = after["user_agent_prompt_customizations"].as_array().expect("rows").iter().map(|row| {
            let mut row = row.clone();
            row.as_object_mut().expect("row").remove("tenant_id");
            row
        }).collect();
        assert_eq!(before["user_agent_prompt_customizations"], Value::Array(without_tenant));
        let weather = |rows: &Value| {
            let mut row = rows["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "get_weather").cloned();
            if let Some(Value::Object(fields)) = row.as_mut() {
                for later in ["connector_id", "remote_name", "synced_description", "synced_tier", "remote_gone_at", "remote_schema", "strict", "pinned_fingerprint"] {
                    fields.remove(later);
                }
            }
            row
        };
        assert_eq!(weather(&before), weather(&after));
    }
}

db_test! {
    async fn running_the_data_steps_twice_changes_nothing(db) {
        legacy_then_canonicalized(&db).await;
        let once = dump::rows(&db).await;
        let later = chrono::Utc::now() + chrono::Duration::hours(1);
        apply_data_steps(&db.conn, &frozen().expect("frozen"), later).await.expect("second run");
        dump::assert_same(&dump::rows(&db).await, &once);
    }
}

db_test! {
    async fn down_restores_every_legacy_row(db) {
        let before = legacy_then_canonicalized(&db).await;
        crate::support::migrate_down_to(&db.conn, "m20260224_000001_create_base_schema").await;
        let after = dump::rows(&db).await;
        assert_eq!(after["agent_configurations"], before["agent_configurations"]);
        assert_eq!(after["user_agent_prompt_customizations"], before["user_agent_prompt_customizations"]);
        // Rows up created stay, soft-deleted; every row that existed before is back exactly.
        for table in ["tools", "agent_tools"] {
            let old = before[table].as_array().expect("rows");
            let new = after[table].as_array().expect("rows");
            assert_eq!(&new[..old.len()], &old[..], "{table}");
            for created in &new[old.len()..] {
                assert!(!created["deleted_at"].is_null(), "{table} row created by up is soft-deleted: {created}");
            }
        }
    }
}

db_test! {
    async fn up_down_up_leaves_the_state_of_up(db) {
        legacy_then_canonicalized(&db).await;
        let up = dump::registry(&db.conn).await;
        crate::support::migrate_down_to(&db.conn, "m20260224_000001_create_base_schema").await;
        Migrator::up(&db.conn, None).await.expect("up again");
        assert_eq!(dump::registry(&db.conn).await, up);
    }
}

db_test! {
    async fn a_canonicalization_that_fails_half_way_applies_nothing(db) {
        Migrator::up(&db.conn, Some(1)).await.expect("base migration");
        legacy::load(&db.conn).await;
        // A column in the way makes step 6 fail after the backup and before the data steps.
        use sea_orm::ConnectionTrait;
        db.conn.execute_unprepared("ALTER TABLE agent_configurations ADD COLUMN prompt_template TEXT").await.expect("plant");
        let before = dump::rows(&db).await;
        let err = loadout::db::migrate::up(&db.conn).await.expect_err("the migration must fail");
        assert!(format!("{err:#}").contains("rolled back"), "{err:#}");
        dump::assert_same(&dump::rows(&db).await, &before);
        let status = loadout::db::migrate::status(&db.conn).await.expect("status");
        assert!(!status[1].applied);
        let leftover = db.conn.execute_unprepared("SELECT 1 FROM canonicalize_backup_tools").await;
        assert!(leftover.is_err(), "the backup table must have been rolled back too");
    }
}

/// The 23 tool names of the living catalog, sorted.
fn catalog_names() -> Vec<String> {
    let seeds = loadout::registry::catalog::Seeds::embedded().expect("seeds");
    let mut names: Vec<String> = seeds.catalog.tools.iter().map(|t| t.name.clone()).collect();
    names.sort();
    names
}

db_test! {
    async fn delete_reminders_joins_every_agent_with_a_reminder_tool(db) {
        legacy_then_canonicalized(&db).await;
        let registry = dump::registry(&db.conn).await;
        assert!(names(&agent(&registry, "assistant")["active_tools"]).contains(&"delete_reminders".to_owned()));
        // The researcher had no reminder tool: it gets none.
        let researcher = agent(&registry, "researcher");
        assert!(!names(&researcher["active_tools"]).contains(&"delete_reminders".to_owned()));
        assert!(!names(&researcher["inactive_tools"]).contains(&"delete_reminders".to_owned()));
    }
}

db_test! {
    async fn an_assistant_that_used_every_legacy_tool_ends_with_exactly_the_23_canonical_tools(db) {
        Migrator::up(&db.conn, Some(1)).await.expect("base migration");
        legacy::load(&db.conn).await;
        legacy::link_assistant_to_every_predecessor(&db.conn).await;
        Migrator::up(&db.conn, None).await.expect("every migration");
        let registry = dump::registry(&db.conn).await;
        let catalog = catalog_names();
        assert_eq!(catalog.len(), 23);
        assert_eq!(names(&agent(&registry, "assistant")["active_tools"]), catalog);
    }
}

db_test! {
    async fn linking_delete_reminders_twice_changes_nothing(db) {
        legacy_then_canonicalized(&db).await;
        let once = dump::rows(&db).await;
        let later = chrono::Utc::now() + chrono::Duration::hours(1);
        link_delete_reminders::apply_data_steps(&db.conn, later).await.expect("second run");
        dump::assert_same(&dump::rows(&db).await, &once);
    }
}

db_test! {
    async fn linking_delete_reminders_leaves_a_link_an_admin_switched_off(db) {
        Migrator::up(&db.conn, Some(1)).await.expect("base migration");
        legacy::load(&db.conn).await;
        Migrator::up(&db.conn, Some(6)).await.expect("up to the tenant migration");
        use sea_orm::ConnectionTrait;
        db.conn.execute_unprepared(
            "INSERT INTO agent_tools (agent_id, tool_id, is_active, created_at, updated_at) \
             SELECT a.id, t.id, FALSE, '2026-03-01T00:00:00Z', '2026-03-01T00:00:00Z' FROM agent_configurations a, tools t \
             WHERE a.name = 'assistant' AND t.name = 'delete_reminders'",
        ).await.expect("an admin's switched-off link");
        let before = dump::rows(&db).await;
        Migrator::up(&db.conn, Some(1)).await.expect("link delete_reminders");
        dump::assert_same(&dump::rows(&db).await, &before);
    }
}

db_test! {
    async fn linking_delete_reminders_down_switches_off_only_what_up_linked(db) {
        Migrator::up(&db.conn, Some(1)).await.expect("base migration");
        legacy::load(&db.conn).await;
        Migrator::up(&db.conn, Some(6)).await.expect("up to the tenant migration");
        let before = dump::rows(&db).await;
        Migrator::up(&db.conn, Some(1)).await.expect("link delete_reminders");
        let up = dump::registry(&db.conn).await;

        Migrator::down(&db.conn, Some(1)).await.expect("down");
        let after = dump::rows(&db).await;
        let old = before["agent_tools"].as_array().expect("rows");
        let new = after["agent_tools"].as_array().expect("rows");
        assert_eq!(&new[..old.len()], &old[..], "every link that existed before is as it was");
        assert_eq!(new.len(), old.len() + 1, "one link created by up, for the assistant");
        assert!(!new[old.len()]["deleted_at"].is_null() && new[old.len()]["is_active"] != Value::Bool(true), "{}", new[old.len()]);

        Migrator::up(&db.conn, Some(1)).await.expect("up again");
        assert_eq!(dump::registry(&db.conn).await, up, "up, down, up equals up");
        Migrator::down(&db.conn, Some(1)).await.expect("down again");
        assert_eq!(dump::rows(&db).await["agent_tools"].as_array().expect("rows").len(), old.len() + 1, "no row is ever added twice");
    }
}
