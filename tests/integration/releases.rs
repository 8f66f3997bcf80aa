//! Releases, first slice (issue 25): every configuration write records what the
//! agents it changed now serve as a revision, stored once per content, and moves
//! `latest` (and `production`, in `direct` mode) to it; the history says so.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::{Method, StatusCode};
use loadout::app::Settings;
use loadout::prompt::builder::FixedClock;
use loadout_tests::{TestApp, TestDb, db_test};
use serde_json::{Value, json};

/// The application at a fixed instant, so prompts are comparable byte for byte.
async fn app(db: TestDb) -> TestApp {
    TestApp::builder(db).clock(FixedClock(now())).build().await
}

fn now() -> chrono::DateTime<chrono::Utc> {
    "2026-11-25T12:00:00Z".parse().expect("instant")
}

async fn read(app: &TestApp, path: &str) -> Value {
    let (status, body) = app.call(Method::GET, path, &app.operator, None).await;
    assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
    body
}

/// The agent's revision numbers, newest first.
async fn revisions(app: &TestApp, agent: &str) -> Vec<i64> {
    let body = read(app, &format!("/v1/agents/{agent}/revisions")).await;
    numbers(&body["revisions"], "number")
}

fn numbers(list: &Value, field: &str) -> Vec<i64> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|r| r[field].as_i64().expect("a number"))
        .collect()
}

/// Each label of the agent with its revision number.
async fn labels(app: &TestApp, agent: &str) -> BTreeMap<String, i64> {
    let body = read(app, &format!("/v1/agents/{agent}/labels")).await;
    body["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|l| {
            (
                l["name"].as_str().expect("name").to_owned(),
                l["revision"].as_i64().expect("number"),
            )
        })
        .collect()
}

fn on(revision: i64) -> BTreeMap<String, i64> {
    BTreeMap::from([
        ("latest".to_owned(), revision),
        ("production".to_owned(), revision),
    ])
}

/// A label's moves, newest first: (from, to, kind).
async fn history(app: &TestApp, agent: &str, label: &str) -> Vec<(Option<i64>, i64, String)> {
    let body = read(app, &format!("/v1/agents/{agent}/labels/{label}/history")).await;
    body["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .map(|m| {
            (
                m["from_revision"].as_i64(),
                m["to_revision"].as_i64().expect("to"),
                m["kind"].as_str().expect("kind").to_owned(),
            )
        })
        .collect()
}

fn publish(from: Option<i64>, to: i64) -> (Option<i64>, i64, String) {
    (from, to, "publish".to_owned())
}

async fn save_soul(app: &TestApp, soul: &str) {
    let (status, body) = app
        .call(
            Method::PATCH,
            "/v1/agents/assistant",
            &app.operator,
            Some(json!({"soul": soul})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

db_test! {
    async fn a_fresh_database_has_revision_1_of_the_seeded_agent_with_production_and_latest_on_it(db) {
        let app = app(db).await;
        assert_eq!(revisions(&app, "assistant").await, [1]);
        assert_eq!(labels(&app, "assistant").await, on(1));
        assert_eq!(history(&app, "assistant", "production").await, [publish(None, 1)]);

        // The revision holds what the agent serves.
        let revision = read(&app, "/v1/agents/assistant/revisions/1").await;
        let agent = read(&app, "/v1/agents/assistant").await;
        assert_eq!(revision["author"], "seed");
        assert_eq!(revision["content"]["soul"], agent["soul"]);
        assert_eq!(revision["content"]["template"], agent["prompt_template"]);
        let tools: Vec<&str> = revision["content"]["tools"].as_array().expect("tools").iter()
            .map(|t| t["name"].as_str().expect("name")).collect();
        let served = app.get("/v1/agents/assistant/tools").await.body;
        let served: Vec<&str> = served["tools"].as_array().expect("tools").iter()
            .map(|t| t["function"]["name"].as_str().expect("name")).collect();
        assert_eq!(tools, served);
        assert!(revision["content"]["channels"]["web"]["guidance"].is_string(), "{revision}");
    }
}

db_test! {
    async fn a_soul_save_makes_revision_2_and_moves_production_and_latest(db) {
        let app = app(db).await;
        save_soul(&app, "A new soul.").await;
        assert_eq!(revisions(&app, "assistant").await, [2, 1]);
        assert_eq!(labels(&app, "assistant").await, on(2));
        assert_eq!(history(&app, "assistant", "production").await, [publish(Some(1), 2), publish(None, 1)]);
        assert_eq!(history(&app, "assistant", "latest").await, [publish(Some(1), 2), publish(None, 1)]);
        let revision = read(&app, "/v1/agents/assistant/revisions/2").await;
        assert_eq!(revision["content"]["soul"], "A new soul.");
        assert_eq!(revision["author"], "operator", "the key that saved it");
    }
}

db_test! {
    async fn saving_the_same_soul_again_makes_no_revision_and_moves_nothing(db) {
        let app = app(db).await;
        save_soul(&app, "A new soul.").await;
        save_soul(&app, "A new soul.").await;
        assert_eq!(revisions(&app, "assistant").await, [2, 1]);
        assert_eq!(history(&app, "assistant", "production").await.len(), 2);
    }
}

db_test! {
    async fn restoring_the_old_soul_points_the_labels_back_at_revision_1(db) {
        let app = app(db).await;
        let old = read(&app, "/v1/agents/assistant").await["soul"].as_str().expect("soul").to_owned();
        save_soul(&app, "A new soul.").await;
        save_soul(&app, &old).await;
        assert_eq!(revisions(&app, "assistant").await, [2, 1], "content is stored once per agent");
        assert_eq!(labels(&app, "assistant").await, on(1));
        assert_eq!(history(&app, "assistant", "production").await,
            [publish(Some(2), 1), publish(Some(1), 2), publish(None, 1)]);
    }
}

db_test! {
    async fn a_tool_description_change_republishes_the_agents_that_have_the_tool(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::PATCH, "/v1/tools/get_tasks", &app.operator,
            Some(json!({"description": "Lists the user's tasks, newest first."}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(revisions(&app, "assistant").await, [2, 1]);
        assert_eq!(labels(&app, "assistant").await, on(2));
        let revision = read(&app, "/v1/agents/assistant/revisions/2").await;
        let tool = revision["content"]["tools"].as_array().expect("tools").iter()
            .find(|t| t["name"] == "get_tasks").expect("get_tasks").clone();
        assert_eq!(tool["description"], "Lists the user's tasks, newest first.");
        assert_eq!(tool["type"], "api");
    }
}

db_test! {
    async fn a_write_the_guard_refuses_adds_no_revision(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::PATCH, "/v1/agents/assistant", &app.operator,
            Some(json!({"soul": "Call read_memory first."}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(revisions(&app, "assistant").await, [1]);
        assert_eq!(history(&app, "assistant", "latest").await, [publish(None, 1)]);
    }
}

db_test! {
    async fn a_users_instructions_write_adds_no_revision(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::PUT, "/v1/agents/assistant/users/alice/instructions", &app.operator,
            Some(json!({"instructions": "Short answers."}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(revisions(&app, "assistant").await, [1]);
        assert_eq!(history(&app, "assistant", "latest").await, [publish(None, 1)]);
    }
}

db_test! {
    async fn unknown_agents_revisions_and_labels_are_404(db) {
        let app = app(db).await;
        for path in ["/v1/agents/nobody/revisions", "/v1/agents/assistant/revisions/9",
            "/v1/agents/nobody/labels", "/v1/agents/assistant/labels/staging/history"] {
            let (status, body) = app.call(Method::GET, path, &app.operator, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        }
    }
}

db_test! {
    async fn a_database_from_before_revisions_gets_revision_1_per_agent_and_serves_the_same_bytes(db) {
        // The configuration an operator had built before the upgrade: a second
        // agent and an edited soul.
        let app = app(db).await;
        let (status, body) = app.call(Method::POST, "/v1/agents", &app.operator, Some(json!({
            "name": "helper", "identity": {"display_name": "Helper", "role": "helps", "description": "d"},
            "soul": "Be brief."}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        save_soul(&app, "An edited soul.").await;
        let paths = ["/v1/agents/assistant/prompt?channel=web", "/v1/agents/assistant/tools",
            "/v1/agents/helper/prompt?channel=web", "/v1/agents/helper/tools"];
        let mut before = Vec::new();
        for path in paths {
            let reply = app.get(path).await;
            assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
            before.push((reply.etag, reply.body));
        }

        // Back to the schema before revisions, then serve's start-up on it.
        let TestApp { db, agent, operator, state, .. } = app;
        drop(state);
        loadout_tests::migrate_down_to(&db.conn, "m20261125_000015_key_names_per_tenant").await;
        let flags = [format!("--secrets-key={}", loadout_tests::SECRETS_KEY)];
        let settings = Settings::from_flags(&flags).expect("flags");
        let state = loadout::app::start::start(&db.url, settings, Arc::new(FixedClock(now())))
            .await.expect("start").state;

        for (path, (etag, body)) in paths.iter().zip(&before) {
            let reply = loadout_tests::api::send(&state, Method::GET, path, Some(&agent), None, None).await;
            assert_eq!((&reply.etag, &reply.body), (etag, body), "{path} serves the same bytes (the ETag is their hash)");
        }
        for name in ["assistant", "helper"] {
            let (_, list) = loadout_tests::api::call(&state, Method::GET, &format!("/v1/agents/{name}/revisions"), &operator, None).await;
            assert_eq!(numbers(&list["revisions"], "number"), [1], "{name}: {list}");
            assert_eq!(list["revisions"][0]["author"], "migration");
            let (_, labels) = loadout_tests::api::call(&state, Method::GET, &format!("/v1/agents/{name}/labels"), &operator, None).await;
            assert_eq!(numbers(&labels["labels"], "revision"), [1, 1], "{name}: {labels}");
            let (_, moves) = loadout_tests::api::call(&state, Method::GET, &format!("/v1/agents/{name}/labels/production/history"), &operator, None).await;
            assert_eq!(moves["moves"].as_array().map(Vec::len), Some(1), "{name}: {moves}");
        }
        drop(state);
        drop(db);
    }
}
