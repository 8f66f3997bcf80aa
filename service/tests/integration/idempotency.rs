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
        let other = keys::create_scoped(&db.conn, "other-admin", Role::Admin, Some("other"), None).await.expect("key");
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
