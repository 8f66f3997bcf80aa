//! The HTTP connector against a real local HTTP server started by each test:
//! exactly-once delivery with an idempotency header, failures and retries,
//! timeouts, refused connections, concurrency, URL checks and write-only secrets.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{TestApp, TestDb, db_test};
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use serde_json::{Value, json};

/// What the target server received: (path, idempotency key, body).
pub(crate) type Received = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A real HTTP server on 127.0.0.1: `/ok` 200, `/boom` 500, `/nope` 400, `/slow` answers after 3 s.
pub(crate) async fn target() -> (String, Received) {
    let received: Received = Arc::default();
    let log = received.clone();
    let app = axum::Router::new().route(
        "/{kind}",
        axum::routing::post(
            move |axum::extract::Path(kind): axum::extract::Path<String>,
                  headers: HeaderMap,
                  body: axum::body::Bytes| {
                let log = log.clone();
                async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    log.lock().expect("log").push((kind.clone(), key, body));
                    match kind.as_str() {
                        "ok" => (StatusCode::OK, axum::Json(json!({"done": true}))),
                        "boom" => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            axum::Json(json!({"trace": "secret internals"})),
                        ),
                        "nope" => (StatusCode::BAD_REQUEST, axum::Json(json!({"why": "bad"}))),
                        _ => {
                            tokio::time::sleep(Duration::from_secs(3)).await;
                            (StatusCode::OK, axum::Json(json!({})))
                        }
                    }
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    (format!("http://{address}"), received)
}

/// The application, its connectors allowed to reach 127.0.0.1 when `allow`.
pub(crate) async fn app(db: TestDb, allow: bool) -> TestApp {
    app_with(db, allow, &[]).await
}

/// [`app`] with more of `serve`'s flags.
pub(crate) async fn app_with(db: TestDb, allow: bool, flags: &[&str]) -> TestApp {
    let mut builder = TestApp::builder(db);
    if allow {
        builder = builder.flag("--connector-allow=127.0.0.1");
    }
    for flag in flags {
        builder = builder.flag(*flag);
    }
    builder.build().await
}

/// The steps connector tests share.
pub(crate) trait Connecting {
    async fn connect(&self, name: &str, url: &str, timeout_ms: i32);
    async fn propose(&self) -> i64;
    async fn approve(&self, id: i64) -> Value;
}

impl Connecting for TestApp {
    /// Creates connector `name` at `url` and binds `delete_tasks` to it.
    async fn connect(&self, name: &str, url: &str, timeout_ms: i32) {
        let (status, body) = self.call(Method::POST, "/v1/connectors", &self.operator,
            Some(json!({"name": name, "url": url, "headers": {"authorization": "Bearer backend-secret"}, "timeout_ms": timeout_ms}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, body) = self
            .call(
                Method::PUT,
                "/v1/tools/delete_tasks/connector",
                &self.operator,
                Some(json!({"connector": name})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    async fn propose(&self) -> i64 {
        let (status, body) = self.call(Method::POST, "/v1/agents/assistant/tool-calls", &self.agent,
            Some(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1", "t2"]}, "conversation_id": "c"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["proposal_id"].as_i64().expect("id")
    }

    async fn approve(&self, id: i64) -> Value {
        let (status, body) = self
            .call(
                Method::POST,
                &format!("/v1/proposals/{id}/approve"),
                &self.operator,
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }
}

db_test! {
    async fn an_approved_call_reaches_the_server_exactly_once_with_its_idempotency_key(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/ok"), 5_000).await;
        let id = api.propose().await;
        let done = api.approve(id).await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(done["result"], json!({"done": true}));
        api.approve(id).await;
        let got = received.lock().expect("log").clone();
        assert_eq!(got, [("ok".to_owned(), format!("{id}:1"), json!({"ids": ["t1", "t2"]}))]);

        let (_, listed) = api.call(Method::GET, "/v1/connectors/backend", &api.operator, None).await;
        assert_eq!(listed["headers"], json!(["authorization"]), "header values are write-only");
        assert!(!listed.to_string().contains("backend-secret"));
        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.operator, None).await;
        assert_eq!(report["warnings"], 21, "delete_tasks is connected now: {report}");
    }
}

db_test! {
    async fn a_500_is_retryable_a_400_is_not_and_retry_runs_a_second_attempt(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/boom"), 5_000).await;
        let id = api.propose().await;
        let failed = api.approve(id).await;
        assert_eq!(failed["state"], "failed");
        assert_eq!(failed["result"], json!({"error": "the connector failed (HTTP 500)", "retryable": true}));
        let (status, retried) = api.call(Method::POST, &format!("/v1/proposals/{id}/retry"), &api.operator, None).await;
        assert_eq!((status, retried["attempts"].clone()), (StatusCode::OK, json!(2)), "{retried}");
        let keys: Vec<String> = received.lock().expect("log").iter().map(|(_, k, _)| k.clone()).collect();
        assert_eq!(keys, [format!("{id}:1"), format!("{id}:2")]);

        let (status, body) = api.call(Method::PATCH, "/v1/connectors/backend", &api.operator, Some(json!({"url": format!("{url}/nope")}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = api.propose().await;
        let refused = api.approve(id).await;
        assert_eq!(refused["result"], json!({"error": "the connector refused the call (HTTP 400)", "retryable": false}));
    }
}

db_test! {
    async fn timeouts_and_refused_connections_fail_retryably(db) {
        let (url, _) = target().await;
        let api = app(db, true).await;
        api.connect("slow", &format!("{url}/slow"), 200).await;
        let id = api.propose().await;
        let timed_out = api.approve(id).await;
        assert_eq!(timed_out["result"], json!({"error": "the connector timed out", "retryable": true}), "{timed_out}");

        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let dead = closed.local_addr().expect("address");
        drop(closed);
        let (status, body) = api.call(Method::PATCH, "/v1/connectors/slow", &api.operator, Some(json!({"url": format!("http://{dead}/ok")}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = api.propose().await;
        let refused = api.approve(id).await;
        assert_eq!(refused["result"], json!({"error": "the connector could not be reached", "retryable": true}));
    }
}

db_test! {
    async fn fifty_concurrent_approvals_reach_the_server_once(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/ok"), 5_000).await;
        let id = api.propose().await;
        let mut calls = Vec::new();
        for _ in 0..50 {
            let state = api.state.clone();
            let admin = api.operator.clone();
            calls.push(tokio::spawn(async move {
                let request = Request::builder().method(Method::POST).uri(format!("/v1/proposals/{id}/approve"))
                    .header(header::AUTHORIZATION, format!("Bearer {admin}")).body(Body::empty()).expect("request");
                crate::support::api::request_reply(&state, request).await.status
            }));
        }
        for call in calls {
            let status = call.await.expect("join");
            assert!(status == StatusCode::OK || status == StatusCode::CONFLICT, "{status}");
        }
        assert_eq!(received.lock().expect("log").len(), 1, "exactly one execution");
    }
}

db_test! {
    async fn private_addresses_are_refused_unless_allow_listed(db) {
        let api = app(db, false).await;
        for url in ["http://127.0.0.1:9/ok", "http://10.0.0.1/ok", "http://169.254.169.254/latest/meta-data", "https://example.com/"] {
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator, Some(json!({"name": "x", "url": url}))).await;
            assert_eq!((status, body["error"]["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("url_refused")), "{url}: {body}");
        }
        let (status, body) = api.call(Method::PUT, "/v1/tools/update_instructions/connector", &api.operator, Some(json!({"connector": null}))).await;
        assert_eq!((status, body["error"]["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("not_an_api_tool")));
    }
}

/// The proposal as the ledger holds it.
async fn stored(api: &TestApp, id: i64) -> entity::proposals::Model {
    let id = i32::try_from(id).expect("small id");
    loadout::actions::ledger::get(&api.state.db, "default", id)
        .await
        .expect("the proposal")
}

/// Sets a proposal's columns behind the API's back, as a crash or the clock would.
async fn force(api: &TestApp, id: i64, sql: &str) {
    use sea_orm::ConnectionTrait;
    let statement = format!("UPDATE proposals SET {sql} WHERE id = {id}");
    api.state
        .db
        .execute_unprepared(&statement)
        .await
        .expect("update");
}

db_test! {
    async fn a_client_that_disconnects_mid_approve_loses_no_outcome(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/slow"), 10_000).await;
        let id = api.propose().await;
        let (state, admin) = (api.state.clone(), api.operator.clone());
        let approving = tokio::spawn(async move {
            crate::support::api::call(&state, Method::POST, &format!("/v1/proposals/{id}/approve"), &admin, None).await
        });
        while received.lock().expect("log").is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        approving.abort(); // the client goes away while the connector is working
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while stored(&api, id).await.state != "succeeded" {
            assert!(std::time::Instant::now() < deadline, "the outcome was never recorded");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(received.lock().expect("log").len(), 1, "called once");
    }
}

db_test! {
    async fn a_proposal_a_crash_left_approved_runs_once_on_the_next_approve(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/ok"), 5_000).await;
        let id = api.propose().await;
        force(&api, id, "state = 'approved'").await; // approved, never claimed
        let first = api.approve(id).await;
        let second = api.approve(id).await;
        assert_eq!((first["state"].as_str(), second["state"].as_str()), (Some("succeeded"), Some("succeeded")));
        assert_eq!(received.lock().expect("log").len(), 1, "exactly one execution");
    }
}

db_test! {
    async fn an_approval_after_the_deadline_is_409_expired_and_runs_nothing(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/ok"), 5_000).await;
        let id = api.propose().await;
        force(&api, id, "expires_at = created_at").await;
        let (status, body) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.operator, None).await;
        assert_eq!((status, body["error"]["details"]["state"].as_str()), (StatusCode::CONFLICT, Some("expired")), "{body}");
        assert!(received.lock().expect("log").is_empty());
    }
}

db_test! {
    async fn twenty_concurrent_retries_of_a_retryable_failure_run_once(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/boom"), 5_000).await;
        let id = api.propose().await;
        assert_eq!(api.approve(id).await["state"], "failed");
        // The retry takes 3 s, so all twenty have read the failure before it ends.
        let (status, body) = api.call(Method::PATCH, "/v1/connectors/backend", &api.operator, Some(json!({"url": format!("{url}/slow")}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut retries = Vec::new();
        for _ in 0..20 {
            let (state, admin) = (api.state.clone(), api.operator.clone());
            retries.push(tokio::spawn(async move {
                crate::support::api::call(&state, Method::POST, &format!("/v1/proposals/{id}/retry"), &admin, None).await.0
            }));
        }
        let mut ok = 0;
        for retry in retries {
            match retry.await.expect("join") {
                StatusCode::OK => ok += 1,
                StatusCode::CONFLICT => {}
                other => panic!("a retry answered {other}"),
            }
        }
        assert_eq!((ok, received.lock().expect("log").len()), (1, 2), "one retry ran, after the first attempt");
    }
}

db_test! {
    async fn a_retry_of_a_refused_call_is_409_and_never_reaches_the_connector(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/nope"), 5_000).await;
        let id = api.propose().await;
        assert_eq!(api.approve(id).await["result"]["retryable"], false);
        let (status, body) = api.call(Method::POST, &format!("/v1/proposals/{id}/retry"), &api.operator, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert!(body["error"]["message"].as_str().expect("message").contains("a retry cannot fix"), "{body}");
        assert_eq!(received.lock().expect("log").len(), 1, "only the first attempt");
    }
}

db_test! {
    async fn a_retry_of_a_declined_unconnected_proposal_is_409_not_424(db) {
        let api = app(db, true).await;
        let id = api.propose().await; // delete_tasks has no connector yet
        let (status, _) = api.call(Method::POST, &format!("/v1/proposals/{id}/decline"), &api.operator, None).await;
        assert_eq!(status, StatusCode::OK);
        let (status, body) = api.call(Method::POST, &format!("/v1/proposals/{id}/retry"), &api.operator, None).await;
        assert_eq!((status, body["error"]["details"]["state"].as_str()), (StatusCode::CONFLICT, Some("declined")), "{body}");
    }
}

/// A real local server that keeps the headers of the last request it got.
async fn header_target() -> (String, Arc<Mutex<Option<HeaderMap>>>) {
    let seen: Arc<Mutex<Option<HeaderMap>>> = Arc::default();
    let keep = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap| {
            let keep = keep.clone();
            async move {
                *keep.lock().expect("headers") = Some(headers);
                axum::Json(json!({"ok": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    (format!("http://{address}/hook"), seen)
}

db_test! {
    async fn the_connector_receives_the_calls_context_in_headers(db) {
        let (url, seen) = header_target().await;
        let api = app(db, true).await;
        api.connect("backend", &url, 5_000).await;
        let call = json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "conv-7", "user_id": "zoë"});
        let (status, body) = api.call(Method::POST, "/v1/agents/assistant/tool-calls", &api.agent, Some(call)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = body["proposal_id"].as_i64().expect("id");
        api.approve(id).await;
        let headers = seen.lock().expect("headers").clone().expect("the connector was called");
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("<absent>").to_owned();
        let names = ["loadout-tool", "loadout-agent", "loadout-tenant", "loadout-user-id", "loadout-conversation-id", "loadout-proposal-id", "loadout-attempt", "idempotency-key"];
        let got: Vec<String> = names.iter().map(|n| header(n)).collect();
        let want = ["delete_tasks", "assistant", "default", "zo%C3%AB", "conv-7", &id.to_string(), "1", &format!("{id}:1")];
        assert_eq!(got, want);
    }
}

db_test! {
    async fn a_connector_may_not_set_a_reserved_or_context_header(db) {
        let api = app(db, true).await;
        for name in ["Host", "idempotency-key", "Content-Length", "loadout-tenant"] {
            let connector = json!({"name": "backend", "url": "http://127.0.0.1:9/x", "headers": {name: "forged"}});
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator, Some(connector)).await;
            assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("reserved_header")), "{name}");
        }
    }
}

db_test! {
    async fn an_mcp_connector_may_not_set_its_transports_headers_an_http_one_may(db) {
        let api = app(db, true).await;
        for name in ["Accept", "mcp-session-id", "MCP-Protocol-Version", "last-event-id"] {
            let connector = json!({"name": "remote", "kind": "mcp", "url": "http://127.0.0.1:9/mcp", "headers": {name: "forged"}});
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator, Some(connector)).await;
            assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("reserved_header")), "{name}");
        }
        let http = json!({"name": "backend", "url": "http://127.0.0.1:9/x", "headers": {"Accept": "application/json"}});
        let (status, _) = api.call(Method::POST, "/v1/connectors", &api.operator, Some(http)).await;
        assert_eq!(status, StatusCode::CREATED, "an http connector may set Accept");
        let mcp = json!({"name": "remote", "kind": "mcp", "url": "http://127.0.0.1:9/mcp", "headers": {"authorization": "Bearer t"}});
        let (status, _) = api.call(Method::POST, "/v1/connectors", &api.operator, Some(mcp)).await;
        assert_eq!(status, StatusCode::CREATED);
        let update = json!({"headers": {"authorization": "Bearer t", "Mcp-Session-Id": "forged"}});
        let (status, body) = api.call(Method::PATCH, "/v1/connectors/remote", &api.operator, Some(update)).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("reserved_header")));
        let (_, remote) = api.call(Method::GET, "/v1/connectors/remote", &api.operator, None).await;
        assert_eq!(remote["headers"], json!(["authorization"]), "the refused update changed nothing: {remote}");
    }
}

db_test! {
    async fn the_sweeper_runs_a_proposal_a_crash_left_approved_once(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/ok"), 5_000).await;
        let id = api.propose().await;
        // Approved long ago and never claimed: the process died between the two steps.
        force(&api, id, "state = 'approved', updated_at = '2020-01-01T00:00:00+00:00'").await;
        let sweeper = api.state.spawn_proposal_sweeper();
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while stored(&api, id).await.state != "succeeded" {
            assert!(std::time::Instant::now() < deadline, "the sweeper never ran it");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sweeper.abort();
        assert_eq!(received.lock().expect("log").len(), 1, "exactly one execution");
    }
}

db_test! {
    async fn a_connector_timeout_over_the_cap_is_refused_not_capped(db) {
        let api = app(db, true).await;
        let connector = json!({"name": "backend", "url": "http://127.0.0.1:9/x", "timeout_ms": 30_001});
        let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator, Some(connector)).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_timeout")), "{body}");
    }
}

/// `POST path` with `Idempotency-Key: key`: the status, whether it was replayed, the body.
async fn keyed(api: &TestApp, path: &str, key: &str) -> (StatusCode, bool, Value) {
    let request = Request::post(path)
        .header(header::AUTHORIZATION, format!("Bearer {}", api.operator))
        .header("idempotency-key", key)
        .body(Body::empty())
        .expect("request");
    let reply = api.request(request).await;
    let replayed = reply.headers.get("idempotent-replayed").is_some();
    (reply.status, replayed, reply.body)
}

db_test! {
    /// Approve, retry and decline sent twice with one `Idempotency-Key`: the
    /// second answers the first answer (`Idempotent-Replayed`), and the connector
    /// is reached once per decision, not once per request.
    async fn approve_retry_and_decline_replay_their_first_answer_and_act_once(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/boom"), 5_000).await;
        let id = api.propose().await;
        let approve = format!("/v1/proposals/{id}/approve");
        let (status, replayed, first) = keyed(&api, &approve, "approve-1").await;
        assert_eq!((status, replayed, first["state"].as_str()), (StatusCode::OK, false, Some("failed")), "{first}");
        let (status, replayed, again) = keyed(&api, &approve, "approve-1").await;
        assert_eq!((status, replayed), (StatusCode::OK, true), "{again}");
        assert_eq!(again, first);
        assert_eq!(received.lock().expect("log").len(), 1, "approved once");

        let retry = format!("/v1/proposals/{id}/retry");
        let (status, replayed, first) = keyed(&api, &retry, "retry-1").await;
        assert_eq!((status, replayed, first["attempts"].as_i64()), (StatusCode::OK, false, Some(2)), "{first}");
        let (status, replayed, again) = keyed(&api, &retry, "retry-1").await;
        assert_eq!((status, replayed), (StatusCode::OK, true), "{again}");
        assert_eq!(again, first);
        assert_eq!(received.lock().expect("log").len(), 2, "retried once");

        let other = api.propose().await;
        let decline = format!("/v1/proposals/{other}/decline");
        let (status, replayed, first) = keyed(&api, &decline, "decline-1").await;
        assert_eq!((status, replayed, first["state"].as_str()), (StatusCode::OK, false, Some("declined")), "{first}");
        let (status, replayed, again) = keyed(&api, &decline, "decline-1").await;
        assert_eq!((status, replayed), (StatusCode::OK, true), "a second decline would be 409: {again}");
        assert_eq!(again, first);
    }
}

db_test! {
    async fn a_retry_a_policy_now_denies_ends_the_proposal_and_never_reaches_the_connector(db) {
        let (url, received) = target().await;
        let api = app(db, true).await;
        api.connect("backend", &format!("{url}/boom"), 5_000).await;
        let id = api.propose().await;
        let failed = api.approve(id).await;
        assert_eq!(failed["result"]["retryable"], json!(true), "{failed}");
        let policy = "@id(\"no-deletes\") @reason(\"deletes are frozen\") forbid (principal, action == Action::\"delete_tasks\", resource) when { context.arguments.ids.contains(\"t1\") };";
        let (status, body) = api.call(Method::PUT, "/v1/agents/assistant/policy", &api.operator, Some(json!({"policy": policy}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, refused) = api.call(Method::POST, &format!("/v1/proposals/{id}/retry"), &api.operator, None).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("declined_by_policy")), "{refused}");
        let (_, now) = api.call(Method::GET, &format!("/v1/proposals/{id}"), &api.operator, None).await;
        assert_eq!((now["state"].as_str(), now["result"]["retryable"].as_bool()), (Some("failed"), Some(false)), "{now}");
        assert_eq!(received.lock().expect("log").len(), 1, "only the first attempt reached the backend");
    }
}
