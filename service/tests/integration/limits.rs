//! Limits that keep one bad input from hurting everyone: the rendered-prompt cap,
//! the lint's problem cap, SQLite's connection settings, and `/ready`'s words.

use crate::support::sea_orm::{ConnectionTrait, Statement};
use crate::support::{TestApp, TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::Role;
use serde_json::{Value, json};

/// The application with `--max-prompt-bytes` given (or not).
async fn app(db: TestDb, max_prompt_bytes: Option<usize>) -> TestApp {
    let app = TestApp::builder(db);
    match max_prompt_bytes {
        Some(bytes) => app.flag(format!("--max-prompt-bytes={bytes}")),
        None => app,
    }
    .build()
    .await
}

/// A JSON request with the operator key.
trait AsOperator {
    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value);
}

impl AsOperator for TestApp {
    async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        self.call(method, path, &self.operator, body).await
    }
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

db_test! {
    async fn a_template_repeating_a_large_soul_is_refused_naming_the_placeholder(db) {
        let api = app(db, None).await;
        let soul = "s".repeat(100_000);
        let (status, body) = api.admin(Method::PATCH, "/v1/agents/assistant", Some(json!({"soul": soul}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let template = "$soul\n".repeat(1000);
        for (method, path) in [
            (Method::PUT, "/v1/agents/assistant/prompt-template"),
            (Method::POST, "/v1/agents/assistant/prompt/preview"),
        ] {
            let (status, body) = api.admin(method, path, Some(json!({"template": template}))).await;
            assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "prompt_too_large"), "{path}: {body}");
            assert_eq!(body["error"]["details"]["placeholder"], "soul", "{body}");
            assert!(body["error"]["message"].as_str().expect("message").contains("$soul"), "{body}");
        }
        // Once is fine.
        let (status, body) = api.admin(Method::PUT, "/v1/agents/assistant/prompt-template", Some(json!({"template": "$soul"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

db_test! {
    async fn a_soul_that_would_push_the_saved_template_past_the_cap_is_refused(db) {
        let api = app(db, Some(1_000_000)).await;
        let (status, body) = api.admin(Method::PUT, "/v1/agents/assistant/prompt-template",
            Some(json!({"template": "$soul ".repeat(30)}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = api.admin(Method::PATCH, "/v1/agents/assistant",
            Some(json!({"soul": "s".repeat(50_000)}))).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "prompt_too_large"), "{body}");
        assert_eq!(body["error"]["details"]["placeholder"], "soul");
        let (_, agent) = api.admin(Method::GET, "/v1/agents/assistant", None).await;
        assert_eq!(agent["soul_version"], 1, "nothing was written");
    }
}

db_test! {
    /// A template written behind the API's back (no worst-case check) still cannot
    /// make a render allocate past the cap: the fetch answers 422 and the server serves on.
    async fn a_render_that_would_pass_the_cap_stops_with_422(db) {
        let api = app(db, Some(100_000)).await;
        let backend = api.db.conn.get_database_backend();
        let template = "$soul\n".repeat(8_000);
        api.db.conn.execute_raw(Statement::from_sql_and_values(
            backend,
            match backend {
                crate::support::sea_orm::DbBackend::Postgres => "UPDATE agent_configurations SET prompt_template = $1, soul = $2",
                _ => "UPDATE agent_configurations SET prompt_template = ?, soul = ?",
            },
            [template.into(), "s".repeat(60_000).into()],
        )).await.expect("update");
        api.publish().await;
        let agent = api.db.key("agent", Role::Agent).await;
        let (status, body) = api.call(Method::GET, "/v1/agents/assistant/prompt?channel=web", &agent, None).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "prompt_too_large"), "{body}");
        assert_eq!(body["error"]["details"]["placeholder"], "soul");
        assert_eq!(body["error"]["details"]["limit"], 100_000);
        let (status, _) = api.call(Method::GET, "/v1/agents/assistant/tools", &agent, None).await;
        assert_eq!(status, StatusCode::OK);
    }
}

db_test! {
    async fn a_template_with_a_hundred_thousand_problems_reports_a_hundred_and_counts_the_rest(db) {
        let api = app(db, None).await;
        let (status, body) = api.admin(Method::PUT, "/v1/agents/assistant/prompt-template",
            Some(json!({"template": "${".repeat(100_000)}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let warnings = body["warnings"].as_array().expect("warnings");
        assert_eq!(warnings.len(), 101);
        assert_eq!(warnings[100]["code"], "more_problems");
        assert!(warnings[100]["message"].as_str().expect("message").starts_with("99900 more problems"));
        assert_eq!((&warnings[99]["line"], &warnings[99]["column"]), (&json!(1), &json!(199)));
        let (status, report) = api.admin(Method::GET, "/v1/registry/check", None).await;
        assert_eq!(status, StatusCode::OK, "{report}");
    }
}

db_test! {
    async fn ready_says_in_words_that_a_newer_loadout_migrated_the_database(db) {
        let api = app(db, None).await;
        let reply = api.send(Method::GET, "/ready", None, None, None).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        api.db.conn.execute_unprepared(
            "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000001_from_the_future', 0)",
        ).await.expect("insert");
        let reply = api.send(Method::GET, "/ready", None, None, None).await;
        assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);
        let message = reply.body["error"]["message"].as_str().expect("message");
        assert_eq!(
            message,
            "the database was migrated by a newer loadout (m20991231_000001_from_the_future); upgrade this one"
        );
    }
}

#[tokio::test]
async fn sqlite_connections_use_wal_normal_sync_a_busy_timeout_and_foreign_keys() {
    let db = TestDb::sqlite().await;
    let pragma = |name: &'static str| {
        let conn = db.conn.clone();
        async move {
            let row = conn
                .query_one_raw(Statement::from_string(
                    crate::support::sea_orm::DbBackend::Sqlite,
                    format!("PRAGMA {name}"),
                ))
                .await
                .expect("pragma")
                .expect("row");
            let value: Result<i64, _> = row.try_get_by_index(0);
            match value {
                Ok(n) => n.to_string(),
                Err(_) => row.try_get_by_index::<String>(0).expect("text"),
            }
        }
    };
    assert_eq!(pragma("journal_mode").await, "wal");
    assert_eq!(pragma("synchronous").await, "1", "NORMAL");
    assert_eq!(pragma("busy_timeout").await, "5000");
    assert_eq!(pragma("foreign_keys").await, "1");
}
