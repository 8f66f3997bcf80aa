//! Concurrent writes on both backends: the write guard takes turns, unique-key races
//! answer 409 in the error shape, and saves without a version each make their own.

use crate::support::api::call;
use crate::support::{TestApp, TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, KeyError, Role};
use serde_json::{Value, json};

/// The application, its connectors allowed to reach 127.0.0.1, and an approver key.
async fn app(db: TestDb) -> (TestApp, String) {
    let app = TestApp::builder(db)
        .flag("--connector-allow=127.0.0.1")
        .build()
        .await;
    let approver = app.key("approver", Role::Approver).await;
    (app, approver)
}

/// Requests the race tests make.
trait Racing {
    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value);
    async fn race(&self, n: usize, method: Method, path: &str, body: Value) -> Vec<(u16, String)>;
}

impl Racing for TestApp {
    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.call(method, path, &self.operator, body).await
    }

    /// Sends `n` copies of one request at once; every status with its error code.
    async fn race(&self, n: usize, method: Method, path: &str, body: Value) -> Vec<(u16, String)> {
        let mut out: Vec<(u16, String)> = all_at_once(self, method, path, vec![body; n])
            .await
            .into_iter()
            .map(|(status, body)| {
                let code = body["error"]["code"].as_str().unwrap_or("").to_owned();
                (status.as_u16(), code)
            })
            .collect();
        out.sort();
        out
    }
}

/// Sends `bodies.len()` admin requests to one route at once; each status and body.
async fn all_at_once(
    api: &TestApp,
    method: Method,
    path: &str,
    bodies: Vec<Value>,
) -> Vec<(StatusCode, Value)> {
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|body| {
            let (state, key, method, path) = (
                api.state.clone(),
                api.operator.clone(),
                method.clone(),
                path.to_owned(),
            );
            tokio::spawn(async move { call(&state, method, &path, &key, Some(body)).await })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        out.push(task.await.expect("join"));
    }
    out
}

/// One 201 (or 200) and the rest 409 `conflict`: never a 500.
fn one_winner(results: &[(u16, String)], created: u16) {
    let winners = results.iter().filter(|(s, _)| *s == created).count();
    let conflicts = results
        .iter()
        .filter(|(s, c)| *s == 409 && c == "conflict")
        .count();
    assert_eq!((winners, conflicts), (1, results.len() - 1), "{results:?}");
}

fn tool_body(name: &str) -> Value {
    json!({
        "name": name, "type": "api", "approval_tier": "auto",
        "description": "Reads widgets.",
        "parameters": {"type": "object", "additionalProperties": false, "properties": {}, "required": []}
    })
}

db_test! {
    async fn concurrent_creates_of_one_agent_answer_one_201_and_409s(db) {
        let (api, _) = app(db).await;
        let body = json!({"name": "twin", "identity": {"name": "Twin"}, "soul": "Be brief."});
        one_winner(&api.race(8, Method::POST, "/v1/agents", body).await, 201);
    }
}

db_test! {
    async fn concurrent_creates_of_one_tool_answer_one_201_and_409s(db) {
        let (api, _) = app(db).await;
        one_winner(&api.race(8, Method::POST, "/v1/tools", tool_body("get_widgets")).await, 201);
    }
}

db_test! {
    async fn concurrent_creates_of_one_connector_answer_one_201_and_409s(db) {
        let (api, _) = app(db).await;
        let body = json!({"name": "backend", "url": "http://127.0.0.1:9/x", "method": "POST", "timeout_ms": 1000});
        one_winner(&api.race(8, Method::POST, "/v1/connectors", body).await, 201);
    }
}

db_test! {
    async fn concurrent_creates_of_one_key_name_make_one_key(db) {
        let db = db.migrated().await;
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let conn = db.conn.clone();
                tokio::spawn(async move { keys::create(&conn, "twin", Role::Agent, chrono::Utc::now()).await })
            })
            .collect();
        let mut made = 0;
        for task in tasks {
            match task.await.expect("join") {
                Ok(_) => made += 1,
                Err(KeyError::NameTaken(name)) => assert_eq!(name, "twin"),
                Err(other) => panic!("a race must answer NameTaken, not {other}"),
            }
        }
        assert_eq!(made, 1);
    }
}

db_test! {
    async fn concurrent_preference_puts_all_succeed_and_one_row_holds_the_last(db) {
        let (api, approver) = app(db).await;
        let (status, body) = api.admin(Method::POST, "/v1/tools", Some(json!({
            "name": "set_reminders", "type": "api", "approval_tier": "user_configurable",
            "description": "Sets reminders.",
            "parameters": {"type": "object", "additionalProperties": false, "properties": {}, "required": []}
        }))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let (state, key) = (api.state.clone(), approver.clone());
                tokio::spawn(async move {
                    call(&state, Method::PUT, "/v1/users/alice/tools/set_reminders/preference", &key,
                        Some(json!({"auto_approve": i % 2 == 0}))).await
                })
            })
            .collect();
        for task in tasks {
            let (status, body) = task.await.expect("join");
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        use crate::support::sea_orm::{EntityTrait, PaginatorTrait};
        let rows = entity::user_tool_preferences::Entity::find().count(&api.state.db).await.expect("count");
        assert_eq!(rows, 1);
    }
}

db_test! {
    async fn concurrent_soul_saves_without_a_version_each_make_their_own_version(db) {
        let (api, _) = app(db).await;
        let souls = (0..10).map(|i| json!({"soul": format!("Soul number {i}.")})).collect();
        for (status, body) in all_at_once(&api, Method::PATCH, "/v1/agents/assistant", souls).await {
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        let (_, agent) = api.admin(Method::GET, "/v1/agents/assistant", None).await;
        assert_eq!(agent["soul_version"], 11, "{agent}");
    }
}

db_test! {
    async fn twenty_concurrent_template_puts_without_a_version_all_win_in_turn(db) {
        let (api, _) = app(db).await;
        let templates = (0..20).map(|i| json!({"template": format!("Template {i}. $soul")})).collect();
        let mut versions = Vec::new();
        for (status, body) in all_at_once(&api, Method::PUT, "/v1/agents/assistant/prompt-template", templates).await {
            assert_eq!(status, StatusCode::OK, "{body}");
            versions.push(body["version"].as_i64().expect("version"));
        }
        versions.sort();
        assert_eq!(versions, (2..=21).collect::<Vec<i64>>());
        let (_, history) = api.admin(Method::GET, "/v1/agents/assistant/prompt-template/versions", None).await;
        assert_eq!(history["versions"].as_array().expect("versions").len(), 21);
    }
}

db_test! {
    /// Each write passes the check alone; together (the tool switched off while a soul
    /// that names it is saved) they would fail it. The guard makes them take turns, so
    /// the second sees the first and is refused: the check never ends with an error.
    async fn a_tool_switched_off_while_a_soul_naming_it_is_saved_never_commits_drift(db) {
        let (api, _) = app(db).await;
        let (status, body) = api.admin(Method::POST, "/v1/tools", Some(tool_body("get_widgets"))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let mut outcomes = std::collections::BTreeMap::<(u16, u16), usize>::new();
        for round in 0..100 {
            // Reset: the tool active, the soul silent about it.
            let (status, body) = api.admin(Method::PATCH, "/v1/agents/assistant", Some(json!({"soul": format!("Round {round}.")}))).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let (status, body) = api.admin(Method::PATCH, "/v1/tools/get_widgets", Some(json!({"is_active": true}))).await;
            assert_eq!(status, StatusCode::OK, "{body}");

            let (state, key) = (api.state.clone(), api.operator.clone());
            let off = tokio::spawn(async move {
                call(&state, Method::PATCH, "/v1/tools/get_widgets", &key, Some(json!({"is_active": false}))).await
            });
            let (state, key) = (api.state.clone(), api.operator.clone());
            let soul = tokio::spawn(async move {
                call(&state, Method::PATCH, "/v1/agents/assistant", &key,
                    Some(json!({"soul": format!("Round {round}: call get_widgets first.")}))).await
            });
            let (off, soul) = (off.await.expect("join"), soul.await.expect("join"));
            let statuses = (off.0.as_u16(), soul.0.as_u16());
            // Exactly one wins; the other is refused by the check (422), never a 500.
            assert!(matches!(statuses, (200, 422) | (422, 200)), "round {round}: {statuses:?} {} {}", off.1, soul.1);
            *outcomes.entry(statuses).or_default() += 1;

            let (status, report) = api.admin(Method::GET, "/v1/registry/check", None).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(report["errors"], 0, "round {round}: {report}");
        }
        eprintln!("outcomes (tool off, soul save): {outcomes:?}");
    }
}
