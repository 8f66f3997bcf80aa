//! `Idempotency-Key` on the API's writes: a retry answers the first answer and
//! writes nothing; another request under the key is refused; a refused write
//! records nothing; a write whose answer was lost is never applied twice; keys
//! are per tenant.

use crate::support::sea_orm::{ConnectionTrait, Statement};
use crate::support::{TestDb, db_test};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use loadout::app::AppState;
use loadout::auth::keys::{self, Role};
use serde_json::Value;

const PATH: &str = "/v1/agents/assistant/prompt-template";

struct Answer {
    status: StatusCode,
    replayed: bool,
    body: Value,
}

async fn put(state: &AppState, admin: &str, key: &str, body: &str) -> Answer {
    let request = Request::put(PATH)
        .header("authorization", format!("Bearer {admin}"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(Body::from(body.to_owned()))
        .expect("request");
    let reply = crate::support::api::request_reply(state, request).await;
    Answer {
        status: reply.status,
        replayed: reply.headers.contains_key("idempotent-replayed"),
        body: reply.body,
    }
}

async fn versions(db: &TestDb) -> i64 {
    let row = db
        .conn
        .query_one_raw(Statement::from_string(
            db.conn.get_database_backend(),
            "SELECT COUNT(*) AS n FROM prompt_versions WHERE kind = 'template'",
        ))
        .await
        .expect("count")
        .expect("a row");
    row.try_get::<i64>("", "n").expect("n")
}

db_test! {
    async fn an_idempotency_key_makes_an_admin_write_safe_to_retry(db) {
        let db = db.seeded().await;
        let admin = db.key("admin", Role::Operator).await;
        let other = keys::create_scoped(&db.conn, "other-admin", Role::Admin, Some("other"), None, chrono::Utc::now()).await.expect("key");
        let state = crate::support::app::state(&db, &[]).await;
        let body = r#"{"template": "Retried. $soul"}"#;
        let before = versions(&db).await;

        let first = put(&state, &admin, "save-1", body).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.body);
        assert!(!first.replayed);
        let again = put(&state, &admin, "save-1", body).await;
        assert_eq!((again.status, again.replayed), (StatusCode::OK, true), "{}", again.body);
        assert_eq!(again.body, first.body, "the first answer, version included");
        assert_eq!(versions(&db).await, before + 1, "written once");

        let reused = put(&state, &admin, "save-1", r#"{"template": "Something else. $soul"}"#).await;
        assert_eq!((reused.status, reused.body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("idempotency_key_reused")));

        // Keys are per tenant: the same key on a user's instructions, first in the
        // default tenant, then by another tenant's admin, writes both times.
        let instructions = |key: &str| {
            Request::put("/v1/agents/assistant/users/alice/instructions")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .header("idempotency-key", "inst-1")
                .body(Body::from(r#"{"instructions": "Short answers."}"#))
                .expect("request")
        };
        for key in [&admin, &other] {
            let reply = crate::support::api::request_reply(&state, instructions(key)).await;
            assert_eq!((reply.status, reply.headers.contains_key("idempotent-replayed")), (StatusCode::OK, false), "{}", reply.body);
        }
        assert_eq!(versions(&db).await, before + 1);

        // A refused write records nothing: the same key then carries a good request.
        let refused = put(&state, &admin, "save-2", r#"{"template": "$nope"}"#).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.body);
        let fixed = put(&state, &admin, "save-2", r#"{"template": "Fixed. $soul"}"#).await;
        assert_eq!((fixed.status, fixed.replayed), (StatusCode::OK, false), "{}", fixed.body);

        // A write committed whose answer was never stored (the process stopped in
        // between): the retry is not applied twice.
        let lost = r#"{"template": "Lost answer. $soul"}"#;
        // Bound to the key that sent it: its name and agent scope (none: "*").
        let fingerprint = loadout::digest::sha256_hex(format!("\"admin\" \"*\"\nPUT {PATH}\n{lost}").as_bytes());
        db.conn.execute_raw(Statement::from_sql_and_values(
            db.conn.get_database_backend(),
            match db.backend {
                crate::support::Backend::Postgres => "INSERT INTO idempotency_records (tenant_id, key, fingerprint, created_at) VALUES ($1, $2, $3, now())",
                crate::support::Backend::Sqlite => "INSERT INTO idempotency_records (tenant_id, key, fingerprint, created_at) VALUES ($1, $2, $3, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            },
            ["default".into(), "save-3".into(), fingerprint.into()],
        )).await.expect("a record without its answer");
        let count = versions(&db).await;
        let pending = put(&state, &admin, "save-3", lost).await;
        assert_eq!((pending.status, pending.body["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("idempotent_request_pending")), "{}", pending.body);
        assert_eq!(versions(&db).await, count, "not applied again");

        // Creating a key ignores the header: its answer holds the new key's secret,
        // which must never be stored.
        let request = Request::post("/v1/keys")
            .header("authorization", format!("Bearer {admin}"))
            .header("content-type", "application/json")
            .header("idempotency-key", "key-1")
            .body(Body::from(r#"{"name": "made-once", "role": "agent"}"#))
            .expect("request");
        let made = crate::support::api::request_reply(&state, request).await;
        assert_eq!(made.status, StatusCode::CREATED, "{}", made.body);
        let stored = db.conn.query_one_raw(Statement::from_string(
            db.conn.get_database_backend(),
            "SELECT COUNT(*) AS n FROM idempotency_records WHERE key = 'key-1'",
        )).await.expect("count").expect("a row");
        assert_eq!(stored.try_get::<i64>("", "n").expect("n"), 0, "no answer of /v1/keys is stored");

        let malformed = put(&state, &admin, "has space", body).await;
        assert_eq!(malformed.status, StatusCode::BAD_REQUEST, "{}", malformed.body);
    }
}

/// Sends `body` to `path` twice under one new `Idempotency-Key`: the first answer
/// must succeed, and the second must be its replay. The replay exists only if the
/// write recorded the key in its own transaction, so every write the handler hands
/// the key to is checked. Returns the first answer's body.
async fn twice(
    app: &crate::support::app::TestApp,
    who: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Value {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let key = format!("idem-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let send = || {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("authorization", format!("Bearer {who}"))
            .header("content-type", "application/json")
            .header("idempotency-key", &key)
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
            .expect("request");
        app.request(request)
    };
    let first = send().await;
    assert!(
        first.status.is_success(),
        "{method} {path}: {} {}",
        first.status,
        first.body
    );
    assert!(
        !first.headers.contains_key("idempotent-replayed"),
        "{method} {path}: the first is no replay"
    );
    let again = send().await;
    assert!(
        again.headers.contains_key("idempotent-replayed"),
        "{method} {path}: the key was not recorded with the write, so the retry ran again: {} {}",
        again.status,
        again.body
    );
    assert_eq!(
        (again.status, &again.body),
        (first.status, &first.body),
        "{method} {path}"
    );
    first.body
}

db_test! {
    /// The key reaches each write as an explicit input (no task-local): every kind
    /// of configuration, release, approval and tenant write, as the API's routes
    /// take them, records it and replays its answer.
    async fn every_kind_of_api_write_records_its_idempotency_key(db) {
        let app = crate::support::app::TestApp::builder(db).flag("--connector-allow=127.0.0.1").build().await;
        let op = app.operator.clone();
        let approver = app.key("idem-approver", Role::Approver).await;
        let agent = app.agent.clone();

        // Agents, templates, instructions.
        twice(&app, &op, "POST", "/v1/agents", Some(r#"{"name": "idem-agent", "identity": {}, "soul": "Idem."}"#)).await;
        twice(&app, &op, "PATCH", "/v1/agents/idem-agent", Some(r#"{"soul": "Idem, again."}"#)).await;
        twice(&app, &op, "PUT", "/v1/agents/idem-agent/prompt-template", Some(r#"{"template": "One. $soul"}"#)).await;
        twice(&app, &op, "PUT", "/v1/agents/idem-agent/prompt-template", Some(r#"{"template": "Two. $soul"}"#)).await;
        twice(&app, &op, "POST", "/v1/agents/idem-agent/prompt-template/versions/1/restore", None).await;
        twice(&app, &op, "DELETE", "/v1/agents/idem-agent/prompt-template", None).await;
        twice(&app, &op, "DELETE", "/v1/agents/idem-agent", None).await;
        twice(&app, &op, "PUT", "/v1/agents/assistant/users/bob/instructions", Some(r#"{"instructions": "Brief."}"#)).await;
        twice(&app, &approver, "PUT", "/v1/users/bob/tools/update_instructions/preference", Some(r#"{"auto_approve": true}"#)).await;

        // The registry and connectors.
        let tool = r#"{"name": "create_idems", "type": "api", "approval_tier": "requires_approval", "description": "Save idems.",
            "parameters": {"type": "object", "additionalProperties": false, "required": ["items"], "properties": {"items": {"type": "array",
            "items": {"type": "object", "additionalProperties": false, "required": ["text"], "properties": {"text": {"type": "string"}}}}}}}"#;
        twice(&app, &op, "POST", "/v1/tools", Some(tool)).await;
        twice(&app, &op, "PATCH", "/v1/tools/create_idems", Some(r#"{"description": "Save idems for the user."}"#)).await;
        twice(&app, &op, "PUT", "/v1/agents/assistant/links/create_idems", None).await;
        twice(&app, &op, "DELETE", "/v1/agents/assistant/links/create_idems", None).await;
        twice(&app, &op, "PATCH", "/v1/channels/web", Some(r#"{"guidance": "Answer on the web."}"#)).await;
        twice(&app, &op, "POST", "/v1/connectors", Some(r#"{"name": "idem-backend", "url": "http://127.0.0.1:9/loadout"}"#)).await;
        twice(&app, &op, "PATCH", "/v1/connectors/idem-backend", Some(r#"{"timeout_ms": 5000}"#)).await;
        twice(&app, &op, "PUT", "/v1/tools/create_idems/connector", Some(r#"{"connector": "idem-backend"}"#)).await;
        twice(&app, &op, "PUT", "/v1/tools/create_idems/connector", Some(r#"{"connector": null}"#)).await;
        twice(&app, &op, "DELETE", "/v1/connectors/idem-backend", None).await;
        twice(&app, &op, "DELETE", "/v1/tools/create_idems", None).await;

        // Releases: labels, rollouts, change requests, outcomes.
        let revisions = app.call(axum::http::Method::GET, "/v1/agents/assistant/revisions", &op, None).await.1;
        let latest = revisions["revisions"][0]["number"].as_i64().expect("a revision");
        assert!(latest >= 2, "the writes above made revisions");
        twice(&app, &op, "PUT", "/v1/agents/assistant/labels/staging", Some(r#"{"revision": 1}"#)).await;
        twice(&app, &op, "PUT", "/v1/agents/assistant/labels/staging", Some(&format!(r#"{{"revision": {latest}}}"#))).await;
        twice(&app, &op, "POST", "/v1/agents/assistant/labels/staging/rollback", Some("{}")).await;
        let rollout = "/v1/agents/assistant/labels/staging/rollout";
        let start = format!(r#"{{"candidate": {latest}, "percent": 10}}"#);
        twice(&app, &op, "POST", rollout, Some(&start)).await;
        twice(&app, &op, "PATCH", rollout, Some(r#"{"percent": 20}"#)).await;
        twice(&app, &op, "POST", &format!("{rollout}/abort"), Some("{}")).await;
        twice(&app, &op, "POST", rollout, Some(&start)).await;
        twice(&app, &op, "POST", &format!("{rollout}/complete"), Some("{}")).await;
        twice(&app, &op, "PATCH", "/v1/agents/assistant", Some(r#"{"release_mode": "gated"}"#)).await;
        // A save moves only `latest` now; asking production to follow opens a change request.
        for (soul, decision) in [("Gated, first.", "approve"), ("Gated, second.", "decline")] {
            let saved = twice(&app, &op, "PATCH", "/v1/agents/assistant", Some(&format!(r#"{{"soul": "{soul}"}}"#))).await;
            let revisions = app.call(axum::http::Method::GET, "/v1/agents/assistant/revisions", &op, None).await.1;
            let newest = revisions["revisions"][0]["number"].as_i64().expect("a revision");
            let asked = twice(&app, &op, "PUT", "/v1/agents/assistant/labels/production", Some(&format!(r#"{{"revision": {newest}}}"#))).await;
            let id = asked["id"].as_i64().unwrap_or_else(|| panic!("a change request: {asked} after {saved}"));
            twice(&app, &approver, "POST", &format!("/v1/change-requests/{id}/{decision}"), Some("{}")).await;
        }
        let outcome = r#"{"revision": 1, "conversation_id": "idem-c", "outcome": "success"}"#;
        twice(&app, &agent, "POST", "/v1/agents/assistant/outcomes", Some(outcome)).await;

        // Webhooks (made without a key: the answer holds the secret) and sign-off power.
        let made = app.call(axum::http::Method::POST, "/v1/webhooks", &op, Some(serde_json::json!({"url": "http://127.0.0.1:9/hook"}))).await;
        assert_eq!(made.0, axum::http::StatusCode::CREATED, "{}", made.1);
        let hook = format!("/v1/webhooks/{}", made.1["subscription"]["id"].as_i64().expect("an id"));
        twice(&app, &op, "PATCH", &hook, Some(r#"{"description": "Idem hook."}"#)).await;
        twice(&app, &op, "DELETE", &hook, None).await;
        app.key("idem-dave", Role::Admin).await;
        let grant = twice(&app, &op, "POST", "/v1/members/idem-dave/signer-grants", Some(r#"{"reason": "on call"}"#)).await;
        let grant = grant["id"].as_i64().expect("a grant");
        twice(&app, &approver, "POST", &format!("/v1/signer-grants/{grant}/approve"), Some("{}")).await;

        // Configuration as code: the instance's own document, one guidance changed.
        let mut config = app.call(axum::http::Method::GET, "/v1/config", &op, None).await.1;
        config["channels"][0]["guidance"] = "Changed as code.".into();
        let apply = serde_json::to_string(&serde_json::json!({"configuration": config})).expect("json");
        twice(&app, &op, "POST", "/v1/config/apply", Some(&apply)).await;
    }
}
