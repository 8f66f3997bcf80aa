//! The typed API: what `/openapi.json` promises for every operation, and the one
//! error shape for requests that never reach a handler.

use crate::support::api::{Reply, send};
use crate::support::{TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::app::AppState;
use loadout::auth::keys::{self, Role};
use loadout::registry::catalog::Seeds;
use serde_json::{Value, json};

fn document() -> Value {
    serde_json::to_value(loadout::http::openapi()).expect("serialises")
}

/// Every `(METHOD, path, operation)` in the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete"] {
            if let Some(op) = item.get(method) {
                out.push((method.to_uppercase(), path.clone(), op.clone()));
            }
        }
    }
    out
}

#[test]
fn every_path_parameter_is_declared_with_its_operation() {
    for (method, path, op) in operations(&document()) {
        let declared: Vec<&str> = op["parameters"].as_array().map_or(Vec::new(), |ps| {
            ps.iter()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str())
                .collect()
        });
        let in_template: Vec<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        assert_eq!(declared, in_template, "{method} {path}");
    }
}

#[test]
fn exactly_the_operations_that_take_a_body_document_its_schema() {
    let mut with_body: Vec<String> = operations(&document())
        .into_iter()
        .filter(|(_, _, op)| op.get("requestBody").is_some())
        .map(|(method, path, op)| {
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            assert!(
                schema.is_object(),
                "{method} {path}: request body without a JSON schema"
            );
            format!("{method} {path}")
        })
        .collect();
    with_body.sort();
    let mut expected = vec![
        "PATCH /v1/agents/{agent}",
        "PATCH /v1/channels/{channel}",
        "PATCH /v1/connectors/{connector}",
        "PATCH /v1/tools/{tool}",
        "POST /v1/agents",
        "POST /v1/agents/{agent}/labels/{label}/rollback",
        "POST /v1/agents/{agent}/labels/{label}/rollout",
        "PATCH /v1/agents/{agent}/labels/{label}/rollout",
        "POST /v1/agents/{agent}/labels/{label}/rollout/abort",
        "POST /v1/agents/{agent}/labels/{label}/rollout/complete",
        "POST /v1/agents/{agent}/outcomes",
        "POST /v1/agents/{agent}/prompt/preview",
        "POST /v1/agents/{agent}/prompt/render",
        "POST /v1/agents/{agent}/tool-calls",
        "POST /v1/change-requests/{id}/approve",
        "POST /v1/change-requests/{id}/decline",
        "POST /v1/config/apply",
        "POST /v1/config/plan",
        "POST /v1/connectors",
        "POST /v1/connectors/{connector}/sync",
        "POST /v1/keys",
        "POST /v1/members/{member}/signer-grants",
        "POST /v1/tools",
        "PUT /v1/agents/{agent}/labels/{label}",
        "PUT /v1/agents/{agent}/prompt-template",
        "PUT /v1/agents/{agent}/policy",
        "POST /v1/agents/{agent}/policy/validate",
        "PUT /v1/agents/{agent}/model",
        "PUT /v1/agents/{agent}/snapshots",
        "POST /v1/groups",
        "PUT /v1/agents/{agent}/users/{user_id}/instructions",
        "PUT /v1/tools/{tool}/connector",
        "PUT /v1/users/{user_id}/tools/{tool}/preference",
        "PATCH /v1/webhooks/{id}",
        "POST /v1/webhooks",
        "POST /v1/webhooks/{id}/rotate-secret",
        "POST /v1/model-connections",
        "PATCH /v1/model-connections/{connection}",
        "PUT /v1/agents/{agent}/datasets/{dataset}",
        "POST /v1/agents/{agent}/eval-runs",
    ];
    expected.sort();
    assert_eq!(with_body, expected);
}

/// Operations with more than one success: a label's PUT moves it (200) or, for a
/// protected label of a gated agent, answers the change request it opened (202).
/// A rollout's start (201), completion (200) and change of share (200) likewise
/// (202: a share above the one signed off).
const SEVERAL_SUCCESSES: &[(&str, usize)] = &[
    ("PUT /v1/agents/{agent}/labels/{label}", 2),
    ("POST /v1/agents/{agent}/labels/{label}/rollout", 2),
    ("PATCH /v1/agents/{agent}/labels/{label}/rollout", 2),
    ("POST /v1/agents/{agent}/labels/{label}/rollout/complete", 2),
];

#[test]
fn every_operation_documents_a_success_with_a_schema() {
    for (method, path, op) in operations(&document()) {
        let operation = format!("{method} {path}");
        let expected = SEVERAL_SUCCESSES
            .iter()
            .find(|(o, _)| *o == operation)
            .map_or(1, |(_, n)| *n);
        let responses = op["responses"].as_object().expect("responses");
        let success: Vec<&Value> = responses
            .iter()
            .filter(|(status, _)| status.starts_with('2'))
            .map(|(_, r)| r)
            .collect();
        assert_eq!(success.len(), expected, "{operation}: success statuses");
        for response in success {
            let content = response["content"].as_object().expect("success content");
            assert!(
                content.values().all(|media| media["schema"].is_object()),
                "{operation}"
            );
        }
    }
}

#[test]
fn every_error_status_answers_the_error_schema() {
    for (method, path, op) in operations(&document()) {
        for (status, response) in op["responses"].as_object().expect("responses") {
            if status.starts_with('4') || status.starts_with('5') {
                let schema = &response["content"]["application/json"]["schema"];
                assert_eq!(
                    schema["$ref"], "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
        }
    }
}

#[test]
fn every_operation_behind_a_key_documents_401_and_403() {
    for (method, path, op) in operations(&document()) {
        let open = op["security"]
            .as_array()
            .is_some_and(|s| s.iter().all(|r| r == &json!({})));
        let responses = &op["responses"];
        let has = |status: &str| responses.get(status).is_some();
        assert_eq!((has("401"), has("403")), (!open, !open), "{method} {path}");
    }
}

#[test]
fn every_body_taking_operation_documents_400_and_413() {
    for (method, path, op) in operations(&document()) {
        if op.get("requestBody").is_some() {
            let responses = &op["responses"];
            assert!(
                responses.get("400").is_some() && responses.get("413").is_some(),
                "{method} {path}"
            );
        }
    }
}

/// A migrated, seeded database, an admin key and an agent key.
struct Served {
    _db: TestDb,
    state: AppState,
    admin: String,
    agent: String,
}

impl Served {
    async fn new(db: TestDb) -> Served {
        let db = db.migrated().await;
        loadout::registry::seed::run(
            &db.conn,
            &Seeds::embedded().expect("seeds"),
            chrono::Utc::now(),
        )
        .await
        .expect("seed");
        let admin = keys::create(&db.conn, "admin", Role::Operator, chrono::Utc::now())
            .await
            .expect("admin key");
        let agent = keys::create(&db.conn, "agent", Role::Agent, chrono::Utc::now())
            .await
            .expect("agent key");
        let state = crate::support::app::state(&db, &[]).await;
        Served {
            _db: db,
            state,
            admin,
            agent,
        }
    }

    async fn send(&self, method: Method, path: &str, key: &str) -> Reply {
        send(&self.state, method, path, Some(key), None, None).await
    }
}

fn error(reply: &Reply) -> (StatusCode, &str) {
    (
        reply.status,
        reply.body["error"]["code"]
            .as_str()
            .unwrap_or("<no error code>"),
    )
}

db_test! {
    async fn a_method_a_route_does_not_take_is_405_in_the_error_shape(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::DELETE, "/v1/tools", &api.admin).await;
        assert_eq!(error(&reply), (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"));
    }
}

db_test! {
    async fn a_path_parameter_that_is_not_utf8_is_400_in_the_error_shape(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::GET, "/v1/agents/%ff%fe/prompt?channel=web", &api.agent).await;
        assert_eq!(error(&reply), (StatusCode::BAD_REQUEST, "bad_request"));
    }
}

db_test! {
    async fn a_version_that_is_not_a_number_is_400_in_the_error_shape(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::GET, "/v1/agents/assistant/prompt-template/versions/abc", &api.admin).await;
        assert_eq!(error(&reply), (StatusCode::BAD_REQUEST, "bad_request"));
    }
}

db_test! {
    async fn an_unknown_query_parameter_is_400(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::GET, "/v1/agents/assistant/tools?formt=openai", &api.agent).await;
        assert_eq!(error(&reply), (StatusCode::BAD_REQUEST, "bad_request"));
    }
}

db_test! {
    async fn a_missing_channel_is_400_and_lists_the_known_channels(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::GET, "/v1/agents/assistant/prompt", &api.agent).await;
        assert_eq!(error(&reply), (StatusCode::BAD_REQUEST, "bad_request"));
        assert_eq!(
            reply.body["error"]["details"]["known_channels"],
            json!(["heartbeat", "scheduled", "session_open", "telegram", "web"])
        );
    }
}

db_test! {
    async fn a_403_names_the_role_that_is_needed(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::GET, "/v1/tools", &api.agent).await;
        assert_eq!(error(&reply), (StatusCode::FORBIDDEN, "forbidden"));
        let message = reply.body["error"]["message"].as_str().expect("message");
        assert!(message.ends_with("it needs an admin or operator key"), "{message}");
    }
}

db_test! {
    async fn an_unknown_route_is_404_in_the_error_shape(db) {
        let api = Served::new(db).await;
        let reply = api.send(Method::GET, "/v1/nothing-here", &api.admin).await;
        assert_eq!(error(&reply), (StatusCode::NOT_FOUND, "not_found"));
    }
}

db_test! {
    async fn a_nul_in_any_json_string_is_400_on_both_backends(db) {
        let api = Served::new(db).await;
        let body = br#"{"soul": "before\u0000after"}"#.to_vec();
        let reply = send(&api.state, Method::PATCH, "/v1/agents/assistant", Some(&api.admin), Some(body), None).await;
        assert_eq!(error(&reply), (StatusCode::BAD_REQUEST, "bad_request"));
        let soul = send(&api.state, Method::GET, "/v1/agents/assistant", Some(&api.admin), None, None).await;
        assert!(!soul.body["soul"].as_str().expect("soul").contains("after"), "nothing was written");
    }
}
