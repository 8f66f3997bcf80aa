//! `loadout check` against real databases with one problem planted at a time.
//! Each test snapshots the exact report lines the problem produces (the 22
//! "not connected" warnings of a fresh database are left out: they are always there).

use crate::support::{TestDb, db_test, dump};
use chrono::Utc;
use entity::{agent_configurations, agent_tools, tools};
use loadout::execute::executors::Executors;
use loadout::registry::catalog::Seeds;
use loadout::registry::check;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};
use serde_json::{Value, json};

async fn seeded(db: TestDb) -> TestDb {
    let db = db.migrated().await;
    loadout::registry::seed::run(
        &db.conn,
        &Seeds::embedded().expect("seeds"),
        chrono::Utc::now(),
    )
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

async fn insert_tool(
    db: &TestDb,
    name: &str,
    tool_type: &str,
    tier: &str,
    schema: &str,
) -> tools::Model {
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
    .expect("insert tool")
}

async fn insert_agent(db: &TestDb, name: &str) -> agent_configurations::Model {
    let now = Utc::now();
    agent_configurations::ActiveModel {
        name: Set(name.into()),
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
    .expect("insert agent")
}

async fn link(db: &TestDb, agent_id: i32, tool_id: i32) {
    let now = Utc::now();
    agent_tools::ActiveModel {
        agent_id: Set(agent_id),
        tool_id: Set(tool_id),
        is_active: Set(true),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&db.conn)
    .await
    .expect("insert link");
}

async fn deactivate(db: &TestDb, name: &str) {
    let mut off = tool(db, name).await;
    off.is_active = Set(false);
    off.update(&db.conn).await.expect("deactivate");
}

async fn set_parameters(db: &TestDb, name: &str, parameters: Value) {
    let mut row = tool(db, name).await;
    row.parameters = Set(parameters);
    row.update(&db.conn).await.expect("update");
}

async fn set_soul(db: &TestDb, soul: &str) {
    let mut agent = assistant(db).await;
    agent.soul = Set(soul.into());
    agent.update(&db.conn).await.expect("update");
}

async fn set_template(db: &TestDb, template: &str) {
    let mut agent = assistant(db).await;
    agent.prompt_template = Set(Some(template.into()));
    agent.update(&db.conn).await.expect("update");
}

db_test! {
    async fn a_fresh_database_passes(db) {
        let db = seeded(db).await;
        let report = report(&db).await;
        assert!(report.ok);
        assert_eq!((report.errors, report.warnings), (0, 22));
        assert_eq!(lines(&db).await, "");
    }
}

db_test! {
    async fn the_report_says_what_it_checked(db) {
        let db = seeded(db).await;
        let report = report(&db).await;
        assert_eq!(report.checked, check::Counts { catalog_tools: 23, tools: 23, active_tools: 23, agents: 1, active_links: 23 });
        assert!(report.text().ends_with("checked 23 catalog tools, 23 tools (23 active), 1 agents, 23 active links: 0 errors, 22 warnings\n"));
    }
}

db_test! {
    async fn a_catalog_tool_soft_deleted_in_the_database_is_an_error(db) {
        let db = seeded(db).await;
        let mut gone = tool(&db, "get_gmail").await;
        gone.deleted_at = Set(Some(Utc::now()));
        gone.update(&db.conn).await.expect("soft delete");
        insta::assert_snapshot!("catalog_tool_deleted", lines(&db).await);
    }
}

db_test! {
    async fn a_catalog_tool_inactive_in_the_database_is_an_error(db) {
        let db = seeded(db).await;
        deactivate(&db, "get_context").await;
        insta::assert_snapshot!("catalog_tool_inactive", lines(&db).await);
        assert!(!report(&db).await.ok);
    }
}

db_test! {
    async fn an_active_tool_outside_the_catalog_is_a_warning(db) {
        let db = seeded(db).await;
        insert_tool(&db, "get_weather", "api", "auto", STRICT).await;
        insta::assert_snapshot!("not_in_catalog", lines(&db).await);
        assert!(report(&db).await.ok);
    }
}

db_test! {
    async fn a_builtin_tool_without_an_executor_is_an_error(db) {
        let db = seeded(db).await;
        insert_tool(&db, "set_theme", "builtin", "auto", STRICT).await;
        insta::assert_snapshot!("no_executor", lines(&db).await);
    }
}

db_test! {
    async fn a_tool_without_an_approval_tier_is_an_error(db) {
        let db = seeded(db).await;
        let mut no_tier = tool(&db, "get_tasks").await;
        no_tier.approval_tier = Set(String::new());
        no_tier.update(&db.conn).await.expect("update");
        insta::assert_snapshot!("missing_tier", lines(&db).await);
    }
}

db_test! {
    async fn a_name_outside_the_vocabulary_is_an_error(db) {
        let db = seeded(db).await;
        insert_tool(&db, "fetch_weather", "api", "auto", STRICT).await;
        insta::assert_snapshot!("name_outside_vocabulary", lines(&db).await);
    }
}

db_test! {
    async fn a_create_tool_that_takes_one_item_is_an_error(db) {
        let db = seeded(db).await;
        set_parameters(&db, "create_tasks", json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"], "additionalProperties": false})).await;
        insta::assert_snapshot!("create_not_a_list", lines(&db).await);
    }
}

db_test! {
    async fn a_delete_tool_that_takes_one_id_is_an_error(db) {
        let db = seeded(db).await;
        set_parameters(&db, "delete_tasks", json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false})).await;
        insta::assert_snapshot!("delete_not_a_list", lines(&db).await);
    }
}

db_test! {
    async fn a_schema_that_is_not_strict_is_an_error(db) {
        let db = seeded(db).await;
        set_parameters(&db, "get_tasks", json!({"type": "object", "properties": {"id": {"type": "string"}}})).await;
        insta::assert_snapshot!("schema_not_strict", lines(&db).await);
    }
}

db_test! {
    async fn a_schema_that_is_not_json_schema_is_an_error(db) {
        let db = seeded(db).await;
        set_parameters(&db, "get_context", json!({"type": "object", "properties": {"x": {"type": "text"}}})).await;
        insta::assert_snapshot!("invalid_schema", lines(&db).await);
    }
}

db_test! {
    async fn a_soul_naming_a_retired_tool_is_an_error(db) {
        let db = seeded(db).await;
        set_soul(&db, "Always call read_memory first.").await;
        insta::assert_snapshot!("soul_names_retired_tool", lines(&db).await);
    }
}

db_test! {
    async fn a_soul_naming_an_inactive_tool_is_an_error(db) {
        let db = seeded(db).await;
        deactivate(&db, "get_gmail").await;
        set_soul(&db, "Check get_gmail every morning.").await;
        insta::assert_snapshot!("soul_names_inactive_tool", lines(&db).await);
    }
}

db_test! {
    async fn a_template_naming_a_retired_tool_is_an_error(db) {
        let db = seeded(db).await;
        set_template(&db, "$soul\nUse store_memory.").await;
        insta::assert_snapshot!("template_names_retired_tool", lines(&db).await);
    }
}

db_test! {
    async fn a_template_with_a_lint_error_is_an_error(db) {
        let db = seeded(db).await;
        set_template(&db, "$sou1").await;
        insta::assert_snapshot!("template_lint_error", lines(&db).await);
    }
}

db_test! {
    async fn a_tool_prompt_section_naming_a_retired_tool_is_an_error(db) {
        let db = seeded(db).await;
        let mut section = tool(&db, "get_tasks").await;
        section.prompt_section = Set(Some("Prefer fetch_tasks for lists.".into()));
        section.update(&db.conn).await.expect("update");
        insta::assert_snapshot!("prompt_section_names_retired_tool", lines(&db).await);
    }
}

db_test! {
    async fn a_link_to_an_inactive_tool_is_a_warning(db) {
        let db = seeded(db).await;
        let weather = insert_tool(&db, "get_weather", "api", "auto", STRICT).await;
        let agent = assistant(&db).await;
        link(&db, *agent.id.as_ref(), weather.id).await;
        deactivate(&db, "get_weather").await;
        insta::assert_snapshot!("link_to_inactive_tool", lines(&db).await);
        assert!(report(&db).await.ok);
    }
}

db_test! {
    async fn an_agent_without_tools_is_a_warning(db) {
        let db = seeded(db).await;
        insert_agent(&db, "idle").await;
        insta::assert_snapshot!("agent_without_tools", lines(&db).await);
        assert!(report(&db).await.ok);
    }
}

db_test! {
    async fn the_check_reads_and_never_writes(db) {
        let db = seeded(db).await;
        deactivate(&db, "get_gmail").await;
        insert_agent(&db, "idle").await;
        let before = dump::rows(&db).await;
        report(&db).await;
        dump::assert_same(&dump::rows(&db).await, &before);
        let links = agent_tools::Entity::find()
            .filter(agent_tools::Column::IsActive.eq(true))
            .all(&db.conn).await.expect("links");
        assert_eq!(links.len(), 23, "the link to the inactive tool stays active");
    }
}

db_test! {
    async fn names_that_differ_only_in_word_order_are_errors(db) {
        let db = seeded(db).await;
        insert_tool(&db, "gmail_search", "api", "auto", STRICT).await;
        insta::assert_snapshot!("duplicate_names", lines(&db).await);
    }
}

db_test! {
    async fn names_that_differ_only_in_case_are_errors(db) {
        let db = seeded(db).await;
        insert_tool(&db, "Get_Tasks", "api", "auto", STRICT).await;
        insta::assert_snapshot!("duplicate_names_in_case", lines(&db).await);
    }
}

db_test! {
    async fn the_legacy_registry_before_canonicalization_fails_with_every_problem(db) {
        // Today's schema, built by the real migrator; on an empty database the only rows
        // it writes to the registry are the canonical tools, which the legacy world
        // replaces, as if the canonicalization had never run.
        let db = db.migrated().await;
        let agents = agent_configurations::Entity::find().all(&db.conn).await.expect("agents");
        assert!(agents.is_empty(), "the migrations create no agent");
        tools::Entity::delete_many().exec(&db.conn).await.expect("clear tools");
        crate::support::legacy::load(&db.conn).await;
        let report = report(&db).await;
        assert!(!report.ok);
        insta::assert_snapshot!("legacy_registry", report.text());
    }
}

/// `get_weather` (an api tool, not connected) attached to the assistant and published,
/// so `production` and `latest` serve it; then the assistant is gated, so `production`
/// stays there while later publishes move `latest`.
async fn production_serving_weather(db: &TestDb) -> tools::Model {
    let weather = insert_tool(db, "get_weather", "api", "auto", STRICT).await;
    let agent = assistant(db).await;
    let agent_id = *agent.id.as_ref();
    link(db, agent_id, weather.id).await;
    let published = loadout::releases::publish(&db.conn, agent_id, None, chrono::Utc::now())
        .await
        .expect("publish");
    assert_eq!((published.number, published.moved.len()), (2, 2));
    let mut gated = assistant(db).await;
    gated.release_mode = Set("gated".into());
    gated.update(&db.conn).await.expect("gate");
    weather
}

/// The problems of `code`, as lines.
async fn problems_of(db: &TestDb, code: check::ProblemCode) -> Vec<String> {
    report(db)
        .await
        .problems
        .iter()
        .filter(|p| p.code == code)
        .map(ToString::to_string)
        .collect()
}

db_test! {
    async fn a_label_serving_a_tool_since_switched_off_is_a_warning(db) {
        let db = seeded(db).await;
        production_serving_weather(&db).await;
        deactivate(&db, "get_weather").await;
        let agent_id = *assistant(&db).await.id.as_ref();
        let published = loadout::releases::publish(&db.conn, agent_id, None, chrono::Utc::now()).await.expect("publish");
        // Without get_weather the assistant serves what it served first: revision 1 again.
        assert_eq!((published.number, published.moved), (1, vec!["latest"]));

        assert_eq!(problems_of(&db, check::ProblemCode::LabelToolsMissing).await, [
            "warning: label assistant/production: serves revision 2, whose tools get_weather are deleted, switched off or detached; calls of them are refused [label_tools_missing] (fix: move the label to a revision without them (`loadout revisions assistant`), or switch them back on)",
        ]);
        assert!(report(&db).await.ok);
    }
}

db_test! {
    async fn a_label_serving_a_deleted_tool_is_a_warning_once_latest_has_moved_on(db) {
        let db = seeded(db).await;
        let weather = production_serving_weather(&db).await;
        let mut gone = weather.into_active_model();
        gone.deleted_at = Set(Some(Utc::now()));
        gone.update(&db.conn).await.expect("soft delete");
        // Not published: `latest` is on the same revision, whose tools the working copy's rules report.
        assert_eq!(problems_of(&db, check::ProblemCode::LabelToolsMissing).await, Vec::<String>::new());

        let agent_id = *assistant(&db).await.id.as_ref();
        loadout::releases::publish(&db.conn, agent_id, None, chrono::Utc::now()).await.expect("publish");
        let subjects: Vec<String> = report(&db).await.problems.iter()
            .filter(|p| p.code == check::ProblemCode::LabelToolsMissing)
            .map(|p| p.subject.clone()).collect();
        assert_eq!(subjects, ["assistant/production"]);
    }
}

db_test! {
    async fn a_label_serving_a_tool_since_detached_from_its_agent_is_a_warning(db) {
        let db = seeded(db).await;
        let weather = production_serving_weather(&db).await;
        let detached = agent_tools::Entity::find()
            .filter(agent_tools::Column::ToolId.eq(weather.id))
            .one(&db.conn).await.expect("query").expect("the link");
        let mut detached = detached.into_active_model();
        detached.is_active = Set(false);
        detached.update(&db.conn).await.expect("detach");
        let agent_id = *assistant(&db).await.id.as_ref();
        loadout::releases::publish(&db.conn, agent_id, None, chrono::Utc::now()).await.expect("publish");

        let missing = problems_of(&db, check::ProblemCode::LabelToolsMissing).await;
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(missing[0].starts_with("warning: label assistant/production: serves revision 2, whose tools get_weather are"), "{missing:?}");
    }
}

db_test! {
    async fn a_label_held_back_from_latest_serving_unconnected_tools_is_a_warning(db) {
        let db = seeded(db).await;
        production_serving_weather(&db).await;
        set_soul(&db, "Another soul.").await;
        let agent_id = *assistant(&db).await.id.as_ref();
        let published = loadout::releases::publish(&db.conn, agent_id, None, chrono::Utc::now()).await.expect("publish");
        assert_eq!((published.number, published.moved), (3, vec!["latest"]));

        let report = report(&db).await;
        let unconnected: Vec<&check::Problem> = report.problems.iter()
            .filter(|p| p.code == check::ProblemCode::LabelToolsUnconnected).collect();
        assert_eq!(unconnected.len(), 1, "{unconnected:?}");
        assert_eq!((unconnected[0].subject.as_str(), unconnected[0].severity), ("assistant/production", check::Severity::Warning));
        assert!(unconnected[0].message.starts_with("serves revision 2, whose tools "), "{}", unconnected[0].message);
        assert!(unconnected[0].message.contains("get_weather"), "{}", unconnected[0].message);
        assert!(report.ok);
    }
}

db_test! {
    async fn switching_off_a_tool_a_gated_production_serves_is_allowed_and_reported(db) {
        // An error would make the write guard refuse the switch-off until a promotion
        // was signed off; a warning lets it through at once and says what production serves.
        let app = crate::support::TestApp::new(db).await;
        let tool = json!({"name": "get_weather", "description": "Weather.", "approval_tier": "auto",
            "parameters": serde_json::from_str::<Value>(STRICT).expect("schema")});
        let (status, body) = app.call(axum::http::Method::POST, "/v1/tools", &app.operator, Some(tool)).await;
        assert_eq!(status, axum::http::StatusCode::CREATED, "{body}");
        let (status, body) = app.call(axum::http::Method::PUT, "/v1/agents/assistant/links/get_weather", &app.operator, None).await;
        assert_eq!(status, axum::http::StatusCode::OK, "{body}");
        let mut gated = assistant(&app.db).await;
        gated.release_mode = Set("gated".into());
        gated.update(&app.db.conn).await.expect("gate");

        let (status, body) = app.call(axum::http::Method::PATCH, "/v1/tools/get_weather", &app.operator,
            Some(json!({"is_active": false}))).await;
        assert_eq!(status, axum::http::StatusCode::OK, "{body}");
        let (_, check) = app.call(axum::http::Method::GET, "/v1/registry/check", &app.operator, None).await;
        let labels: Vec<&Value> = check["problems"].as_array().expect("problems").iter()
            .filter(|p| p["code"] == "label_tools_missing").collect();
        assert_eq!(labels.len(), 1, "{check}");
        assert_eq!((&labels[0]["subject"], &labels[0]["severity"]), (&json!("assistant/production"), &json!("warning")));
    }
}
