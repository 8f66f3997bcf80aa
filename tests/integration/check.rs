//! `loadout check` against real databases with one problem planted at a time.
//! Each test snapshots the exact report lines the problem produces (the 22
//! "not connected" warnings of a fresh database are left out: they are always there).

use chrono::Utc;
use entity::{agent_configurations, agent_tools, tools};
use loadout::actions::executors::Executors;
use loadout::registry::catalog::Seeds;
use loadout::registry::check;
use loadout_tests::{TestDb, db_test};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};
use serde_json::{Value, json};

async fn seeded(db: TestDb) -> TestDb {
    let db = db.migrated().await;
    loadout::registry::seed::run(&db.conn, &Seeds::embedded().expect("seeds"))
        .await
        .expect("seed");
    db
}

async fn report(db: &TestDb) -> check::Report {
    let catalog = Seeds::embedded().expect("seeds").catalog;
    check::run(&db.conn, &catalog, &Executors::compiled_in())
        .await
        .expect("check")
}

/// The report's lines, without the catalog tools' standing "not connected" warnings.
async fn lines(db: &TestDb) -> String {
    let catalog = Seeds::embedded().expect("seeds").catalog;
    let report = report(db).await;
    report
        .problems
        .iter()
        .filter(|p| {
            !(p.code == check::ProblemCode::NotConnected
                && catalog.tools.iter().any(|t| t.name == p.subject))
        })
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

async fn tool(db: &TestDb, name: &str) -> tools::ActiveModel {
    tools::Entity::find()
        .filter(tools::Column::Name.eq(name))
        .one(&db.conn)
        .await
        .expect("query")
        .unwrap_or_else(|| panic!("no tool {name}"))
        .into_active_model()
}

async fn assistant(db: &TestDb) -> agent_configurations::ActiveModel {
    agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq("assistant"))
        .one(&db.conn)
        .await
        .expect("query")
        .expect("assistant")
        .into_active_model()
}

const STRICT: &str = r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}"#;

async fn insert_tool(db: &TestDb, name: &str, tool_type: &str, tier: &str, schema: &str) {
    let now = Utc::now();
    tools::ActiveModel {
        name: Set(name.into()),
        tool_type: Set(tool_type.into()),
        description: Set("Planted.".into()),
        approval_tier: Set(tier.into()),
        parameters: Set(serde_json::from_str::<Value>(schema).expect("schema")),
        prompt_section: Set(None),
        is_active: Set(true),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&db.conn)
    .await
    .expect("insert tool");
}

db_test! {
    async fn a_fresh_database_passes_and_says_what_it_checked(db) {
        let db = seeded(db).await;
        let report = report(&db).await;
        assert!(report.ok);
        assert_eq!((report.errors, report.warnings), (0, 22));
        assert_eq!(report.checked, check::Counts { catalog_tools: 23, tools: 23, active_tools: 23, agents: 1, active_links: 23 });
        assert_eq!(lines(&db).await, "");
        assert!(report.text().ends_with("checked 23 catalog tools, 23 tools (23 active), 1 agents, 23 active links: 0 errors, 22 warnings\n"));
    }
}

db_test! {
    async fn a_catalog_tool_soft_deleted_or_inactive_is_an_error(db) {
        let db = seeded(db).await;
        let mut gone = tool(&db, "get_gmail").await;
        gone.deleted_at = Set(Some(Utc::now()));
        gone.update(&db.conn).await.expect("soft delete");
        let mut off = tool(&db, "get_context").await;
        off.is_active = Set(false);
        off.update(&db.conn).await.expect("deactivate");
        insta::assert_snapshot!("catalog_tool_gone_or_inactive", lines(&db).await);
    }
}

db_test! {
    async fn an_unknown_active_tool_and_a_builtin_without_executor_are_errors(db) {
        let db = seeded(db).await;
        insert_tool(&db, "get_weather", "api", "auto", STRICT).await;
        insert_tool(&db, "set_theme", "builtin", "auto", STRICT).await;
        insta::assert_snapshot!("unknown_tool_and_no_executor", lines(&db).await);
    }
}

db_test! {
    async fn a_missing_tier_and_a_name_outside_the_vocabulary_are_errors(db) {
        let db = seeded(db).await;
        let mut no_tier = tool(&db, "get_tasks").await;
        no_tier.approval_tier = Set(String::new());
        no_tier.update(&db.conn).await.expect("update");
        insert_tool(&db, "fetch_weather", "api", "auto", STRICT).await;
        insta::assert_snapshot!("missing_tier_and_vocabulary", lines(&db).await);
    }
}

db_test! {
    async fn schemas_must_be_valid_strict_and_list_shaped(db) {
        let db = seeded(db).await;
        let single = json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": false});
        let mut create = tool(&db, "create_tasks").await;
        create.parameters = Set(single.clone());
        create.update(&db.conn).await.expect("update");
        let mut delete = tool(&db, "delete_tasks").await;
        delete.parameters = Set(json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false}));
        delete.update(&db.conn).await.expect("update");
        let mut loose = tool(&db, "get_tasks").await;
        loose.parameters = Set(json!({"type": "object", "properties": {"id": {"type": "string"}}}));
        loose.update(&db.conn).await.expect("update");
        let mut invalid = tool(&db, "get_context").await;
        invalid.parameters = Set(json!({"type": "object", "properties": {"x": {"type": "text"}}}));
        invalid.update(&db.conn).await.expect("update");
        insta::assert_snapshot!("schemas", lines(&db).await);
    }
}

db_test! {
    async fn prompts_naming_inactive_or_retired_tools_and_template_lint_errors_are_errors(db) {
        let db = seeded(db).await;
        let mut agent = assistant(&db).await;
        agent.soul = Set("Always call read_memory first.".into());
        agent.prompt_template = Set(Some("$sou1\nUse store_memory.".into()));
        agent.update(&db.conn).await.expect("update");
        let mut section = tool(&db, "get_tasks").await;
        section.prompt_section = Set(Some("Prefer fetch_tasks for lists.".into()));
        section.update(&db.conn).await.expect("update");
        insta::assert_snapshot!("prompts_naming_inactive_tools", lines(&db).await);
    }
}

db_test! {
    async fn links_to_inactive_tools_and_agents_without_tools_are_warnings(db) {
        let db = seeded(db).await;
        let mut off = tool(&db, "get_gmail").await;
        off.is_active = Set(false);
        off.update(&db.conn).await.expect("deactivate");
        let now = Utc::now();
        agent_configurations::ActiveModel {
            name: Set("idle".into()),
            identity: Set(json!({})),
            soul: Set("Idle.".into()),
            prompt_template: Set(None),
            operating_model: Set(None),
            interaction_learning: Set(None),
            soul_version: Set(1),
            template_version: Set(1),
            created_at: Set(now),
            updated_at: Set(now),
            deleted_at: Set(None),
            ..Default::default()
        }
        .insert(&db.conn)
        .await
        .expect("insert agent");
        insta::assert_snapshot!("links_and_idle_agents", lines(&db).await);
        let report = report(&db).await;
        assert!(!report.ok, "the inactive catalog tool is still an error");
        let links = agent_tools::Entity::find()
            .filter(agent_tools::Column::IsActive.eq(true))
            .all(&db.conn).await.expect("links");
        assert_eq!(links.len(), 23, "the check reads, it never writes");
    }
}

db_test! {
    async fn names_that_differ_only_in_case_or_word_order_are_errors(db) {
        let db = seeded(db).await;
        insert_tool(&db, "gmail_search", "api", "auto", STRICT).await;
        insta::assert_snapshot!("duplicate_names", lines(&db).await);
    }
}

db_test! {
    async fn the_legacy_registry_before_canonicalization_fails_with_every_problem(db) {
        use migration::{Migrator, MigratorTrait};
        Migrator::up(&db.conn, Some(1)).await.expect("base");
        loadout_tests::legacy::load(&db.conn).await;
        // The checker reads today's columns; bring the schema (not the data) up to date.
        for sql in [
            "ALTER TABLE agent_configurations ADD COLUMN prompt_template TEXT",
            "ALTER TABLE agent_configurations ADD COLUMN operating_model TEXT",
            "ALTER TABLE agent_configurations ADD COLUMN interaction_learning TEXT",
            "ALTER TABLE agent_configurations ADD COLUMN soul_version INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE agent_configurations ADD COLUMN template_version INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE tools ADD COLUMN connector_id INTEGER",
        ] {
            sea_orm::ConnectionTrait::execute_unprepared(&db.conn, sql).await.expect("alter");
        }
        // A fresh connection: pooled statements prepared before the ALTERs would misread rows.
        let conn = db.reconnect().await;
        let catalog = Seeds::embedded().expect("seeds").catalog;
        let tools = tools::Entity::find().all(&conn).await.expect("tools");
        let agents = agent_configurations::Entity::find().all(&conn).await.expect("agents");
        let links = agent_tools::Entity::find().all(&conn).await.expect("links");
        let report = check::check(&catalog, &Executors::compiled_in(), &tools, &agents, &links, &Default::default());
        assert!(!report.ok);
        insta::assert_snapshot!("legacy_registry", report.text());
    }
}
