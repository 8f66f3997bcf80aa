//! Issue 23, items 4 and 5 and two of the LOW findings, on both backends: MCP
//! sessions bounded (per key, in all, closed ones freed at once, `initialize`
//! bounded), MCP errors in REST's public words and NUL refused; approvals, retries
//! and the sweeper re-check the tool, its link and the agent and run nothing when
//! they are gone; idempotency bound to the key and the agent; a conversation's
//! proposals in pages.

use std::time::Duration;

use crate::support::sea_orm::sea_query::Expr;
use crate::support::sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Statement};
use crate::support::{TestApp, TestDb, db_test};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use chrono::Utc;
use loadout::auth::keys::{self, Role};

use super::calls::Tenants;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// The application (connectors may reach 127.0.0.1, with `flags` besides), an
/// agent and an approver of tenant `acme`.
async fn api(db: TestDb, flags: &[&str]) -> Tenants {
    let mut all = vec!["--connector-allow=127.0.0.1"];
    all.extend_from_slice(flags);
    Tenants::new(db, &all).await
}

impl Tenants {
    async fn sql(&self, statement: &str) {
        let backend = self.db.conn.get_database_backend();
        self.db
            .conn
            .execute_raw(Statement::from_string(backend, statement.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }

    /// The assistant proposes `update_instructions` for user `u-1`; its id.
    async fn propose(&self, text: &str) -> i64 {
        let call = json!({"tool": "update_instructions", "arguments": {"instructions": text}, "conversation_id": "conv-1", "user_id": "u-1"});
        let (status, proposed) = self
            .call(
                Method::POST,
                "/v1/agents/assistant/tool-calls",
                &self.agent,
                Some(call),
            )
            .await;
        assert_eq!(
            (status, proposed["status"].as_str()),
            (StatusCode::OK, Some("proposed_for_approval")),
            "{proposed}"
        );
        proposed["proposal_id"].as_i64().expect("id")
    }

    /// Users' instructions stored in any tenant: what `update_instructions` writes.
    async fn instructions(&self) -> i64 {
        self.count("user_agent_prompt_customizations").await
    }

    async fn count(&self, table: &str) -> i64 {
        let backend = self.db.conn.get_database_backend();
        let row = self
            .db
            .conn
            .query_one_raw(Statement::from_string(
                backend,
                format!("SELECT COUNT(*) AS n FROM {table}"),
            ))
            .await
            .expect("count")
            .expect("a row");
        row.try_get::<i64>("", "n").expect("n")
    }

    async fn proposal(&self, id: i64) -> Value {
        let (status, proposal) = self
            .call(
                Method::GET,
                &format!("/v1/proposals/{id}"),
                &self.approver,
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{proposal}");
        proposal
    }
}

/// The proposal ended unrun by `actor`: failed, not retryable, the reason given,
/// no attempt made, the last event `from` → failed.
fn assert_ended_unrun(proposal: &Value, from: &str, actor: &str, reason: &str, attempts: i64) {
    assert_eq!(proposal["state"], "failed", "{proposal}");
    assert_eq!(proposal["attempts"], attempts, "nothing ran: {proposal}");
    let error = proposal["result"]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("not run: ") && error.contains(reason),
        "{proposal}"
    );
    assert_eq!(proposal["result"]["retryable"], false, "{proposal}");
    let events = proposal["events"].as_array().expect("events");
    let last = events.last().expect("an event");
    assert_eq!(
        (
            last["from"].as_str(),
            last["to"].as_str(),
            last["actor"].as_str()
        ),
        (Some(from), Some("failed"), Some(actor)),
        "{proposal}"
    );
    assert!(
        !events.iter().any(|e| e["to"] == "executing"),
        "never executing: {proposal}"
    );
}

db_test! {
    async fn an_approval_after_the_tool_was_switched_off_unlinked_or_the_agent_deleted_runs_nothing(db) {
        let api = api(db, &[]).await;
        let causes = [
            ("UPDATE tools SET is_active = false WHERE name = 'update_instructions'", "is switched off",
             "UPDATE tools SET is_active = true WHERE name = 'update_instructions'"),
            ("UPDATE agent_tools SET is_active = false WHERE tool_id = (SELECT id FROM tools WHERE name = 'update_instructions')",
             "is no longer linked to the agent assistant",
             "UPDATE agent_tools SET is_active = true WHERE tool_id = (SELECT id FROM tools WHERE name = 'update_instructions')"),
            ("UPDATE tools SET deleted_at = CURRENT_TIMESTAMP WHERE name = 'update_instructions'", "was deleted",
             "UPDATE tools SET deleted_at = NULL WHERE name = 'update_instructions'"),
            ("UPDATE agent_configurations SET deleted_at = CURRENT_TIMESTAMP WHERE name = 'assistant'", "its agent was deleted",
             "UPDATE agent_configurations SET deleted_at = NULL WHERE name = 'assistant'"),
        ];
        for (take_away, reason, give_back) in causes {
            let id = api.propose("Always answer in French.").await;
            api.sql(take_away).await;
            let (status, refused) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.approver, None).await;
            assert_eq!(status, StatusCode::CONFLICT, "{refused}");
            assert_eq!(refused["error"]["code"], "tool_unavailable", "{refused}");
            assert!(refused["error"]["details"]["reason"].as_str().unwrap_or_default().contains(reason), "{refused}");
            assert_eq!(refused["error"]["details"]["proposal"]["state"], "failed", "{refused}");
            assert_ended_unrun(&api.proposal(id).await, "proposed", "approver-a", reason, 0);
            let (status, again) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.approver, None).await;
            assert_eq!(status, StatusCode::CONFLICT, "an ended proposal stays ended: {again}");
            api.sql(give_back).await;
        }
        assert_eq!(api.instructions().await, 0, "update_instructions never ran");
    }
}

db_test! {
    async fn a_retry_after_the_tool_was_unlinked_ends_the_proposal_and_runs_nothing(db) {
        let api = api(db, &[]).await;
        let id = api.propose("Always answer in French.").await;
        // As an attempt that failed retryably leaves it.
        api.sql(&format!(r#"UPDATE proposals SET state = 'failed', attempts = 1, result = '{{"error": "upstream 503", "retryable": true}}' WHERE id = {id}"#)).await;
        api.sql("UPDATE agent_tools SET deleted_at = CURRENT_TIMESTAMP WHERE tool_id = (SELECT id FROM tools WHERE name = 'update_instructions')").await;
        let (status, refused) = api.call(Method::POST, &format!("/v1/proposals/{id}/retry"), &api.approver, None).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("tool_unavailable")), "{refused}");
        assert_ended_unrun(&api.proposal(id).await, "failed", "approver-a", "no longer linked", 1);
        let (status, again) = api.call(Method::POST, &format!("/v1/proposals/{id}/retry"), &api.approver, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "not retryable now: {again}");
        assert_eq!(api.instructions().await, 0, "update_instructions never ran");
    }
}

db_test! {
    async fn the_sweeper_ends_an_approved_proposal_whose_agent_was_deleted_and_runs_nothing(db) {
        let api = api(db, &[]).await;
        let id = api.propose("Always answer in French.").await;
        // A crash between approval and claim, an hour ago (past the 5-minute lease).
        let hour_ago = Utc::now() - chrono::TimeDelta::hours(1);
        entity::proposals::Entity::update_many()
            .col_expr(entity::proposals::Column::State, Expr::value("approved"))
            .col_expr(entity::proposals::Column::UpdatedAt, Expr::value(hour_ago))
            .filter(entity::proposals::Column::Id.eq(i32::try_from(id).expect("id")))
            .exec(&api.db.conn)
            .await
            .expect("approved, unclaimed");
        api.sql("UPDATE agent_configurations SET deleted_at = CURRENT_TIMESTAMP WHERE name = 'assistant'").await;
        let sweeper = api.state.spawn_proposal_sweeper();
        let mut proposal = api.proposal(id).await;
        for _ in 0..100 {
            if proposal["state"] != "approved" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            proposal = api.proposal(id).await;
        }
        sweeper.abort();
        assert_ended_unrun(&proposal, "approved", "sweeper", "its agent was deleted", 0);
        assert_eq!(api.instructions().await, 0, "update_instructions never ran");
    }
}

/// A request with an `Idempotency-Key`: status, whether it was a replay, body.
async fn with_key(
    api: &Tenants,
    method: Method,
    path: &str,
    key: &str,
    idempotency: &str,
) -> (StatusCode, bool, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("idempotency-key", idempotency)
        .body(Body::empty())
        .expect("request");
    let reply = crate::support::api::request_reply(&api.state, request).await;
    (
        reply.status,
        reply.headers.contains_key("idempotent-replayed"),
        reply.body,
    )
}

db_test! {
    async fn a_stored_answer_is_replayed_to_the_key_that_wrote_it_and_no_other(db) {
        let api = api(db, &[]).await;
        let id = api.propose("Always answer in French.").await;
        let path = format!("/v1/proposals/{id}/decline");
        let (status, replayed, first) = with_key(&api, Method::POST, &path, &api.approver, "decline-once").await;
        assert_eq!((status, replayed), (StatusCode::OK, false), "{first}");
        let (status, replayed, again) = with_key(&api, Method::POST, &path, &api.approver, "decline-once").await;
        assert_eq!((status, replayed, &again), (StatusCode::OK, true, &first), "the same key is answered the first answer");

        // Another key of the tenant, scoped to another agent, replays it.
        researcher(&api).await;
        let other = keys::create_scoped(&api.db.conn, "agent-other", Role::Agent, Some("acme"), Some("researcher"), chrono::Utc::now()).await.expect("key");
        let (status, replayed, refused) = with_key(&api, Method::POST, &path, &other, "decline-once").await;
        assert_eq!((status, replayed), (StatusCode::UNPROCESSABLE_ENTITY, false), "never another key's answer: {refused}");
        assert_eq!(refused["error"]["code"], "idempotency_key_reused", "{refused}");
        assert!(refused.get("arguments").is_none() && !refused.to_string().contains("French"), "{refused}");
    }
}

/// A second agent, `researcher`, linked to `delete_tasks`, written as rows.
async fn researcher(api: &Tenants) {
    api.sql(r#"INSERT INTO agent_configurations (name, identity, soul, soul_version, template_version, created_at, updated_at)
        VALUES ('researcher', '{"name": "R"}', 'You dig.', 1, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"#).await;
    api.sql("INSERT INTO agent_tools (agent_id, tool_id, is_active, created_at, updated_at)
        SELECT a.id, t.id, true, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP FROM agent_configurations a, tools t
        WHERE a.name = 'researcher' AND t.name = 'delete_tasks'").await;
    api.publish().await;
}

db_test! {
    async fn a_tool_calls_idempotency_key_never_replays_another_agents_proposal(db) {
        let api = api(db, &[]).await;
        researcher(&api).await;
        let assistant = keys::create_scoped(&api.db.conn, "agent-assistant", Role::Agent, Some("acme"), Some("assistant"), chrono::Utc::now()).await.expect("key");
        let other = keys::create_scoped(&api.db.conn, "agent-researcher", Role::Agent, Some("acme"), Some("researcher"), chrono::Utc::now()).await.expect("key");
        let call = json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c", "idempotency_key": "k-1"});
        let (status, first) = api.call(Method::POST, "/v1/agents/assistant/tool-calls", &assistant, Some(call.clone())).await;
        assert_eq!(status, StatusCode::OK, "{first}");
        let (status, again) = api.call(Method::POST, "/v1/agents/assistant/tool-calls", &assistant, Some(call.clone())).await;
        assert_eq!((status, again["proposal_id"].clone()), (StatusCode::OK, first["proposal_id"].clone()), "a retry is answered the first answer");
        let (status, refused) = api.call(Method::POST, "/v1/agents/researcher/tool-calls", &other, Some(call)).await;
        assert_eq!(status, StatusCode::CONFLICT, "another agent's key never reads that proposal: {refused}");
        assert!(refused.get("proposal_id").is_none(), "{refused}");
    }
}

db_test! {
    async fn a_conversations_proposals_come_in_pages_with_a_next_cursor(db) {
        let api = api(db, &[]).await;
        let mut ids = Vec::new();
        for n in 0..5 {
            ids.push(api.propose(&format!("Instruction {n}.")).await);
        }
        let other = json!({"tool": "update_instructions", "arguments": {"instructions": "Elsewhere."}, "conversation_id": "conv-2", "user_id": "u-1"});
        let (status, _) = api.call(Method::POST, "/v1/agents/assistant/tool-calls", &api.agent, Some(other)).await;
        assert_eq!(status, StatusCode::OK);

        let page = |query: String| {
            let api = &api;
            async move {
                let (status, body) = api.call(Method::GET, &format!("/v1/conversations/conv-1/proposals{query}"), &api.approver, None).await;
                assert_eq!(status, StatusCode::OK, "{body}");
                let listed: Vec<i64> = body["proposals"].as_array().expect("proposals").iter().map(|p| p["id"].as_i64().expect("id")).collect();
                (listed, body["next"].as_i64())
            }
        };
        let (first, next) = page("?limit=2".to_owned()).await;
        assert_eq!((first.as_slice(), next), (&ids[0..2], Some(ids[1])));
        let (second, next) = page(format!("?limit=2&after={}", ids[1])).await;
        assert_eq!((second.as_slice(), next), (&ids[2..4], Some(ids[3])));
        let (last, next) = page(format!("?limit=2&after={}", ids[3])).await;
        assert_eq!((last.as_slice(), next), (&ids[4..5], None), "the last page has no next");
        let (all, next) = page(String::new()).await;
        assert_eq!((all.as_slice(), next), (ids.as_slice(), None), "without paging: every one (up to 50), as before");
        for bad in ["?limit=0", "?limit=201", "?after=x", "?page=2"] {
            let (status, body) = api.call(Method::GET, &format!("/v1/conversations/conv-1/proposals{bad}"), &api.approver, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        }
    }
}

// MCP.

/// Serves the router on 127.0.0.1 (rmcp's client needs a real socket); the base URL.
async fn serve(api: &TestApp) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let app = loadout::http::router(api.state.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    base
}

type Session = RunningService<RoleClient, ()>;

async fn connect(url: &str, key: &str) -> Session {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    let client =
        loadout::connectors::client::Outbound::new(vec!["127.0.0.1".parse().expect("ip")], None)
            .expect("client")
            .client()
            .clone();
    ().serve(StreamableHttpClientTransport::with_client(client, config))
        .await
        .expect("initialize")
}

fn initialize_body(client_name: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client_name, "version": "0"}}})
    .to_string()
}

/// An `initialize` through `app`: the status, the session id, the body when it is JSON.
async fn initialize(app: &TestApp, key: &str, body: String) -> (StatusCode, Option<String>, Value) {
    let request = Request::post("/mcp/agents/assistant")
        .header("host", "127.0.0.1")
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(body))
        .expect("request");
    let reply = app.request(request).await;
    let session = reply
        .headers
        .get("mcp-session-id")
        .map(|v| v.to_str().expect("ascii").to_owned());
    let json = reply
        .headers
        .get("content-type")
        .is_some_and(|t| t == "application/json");
    let body = match json {
        true => reply.body,
        false => Value::Null,
    };
    (reply.status, session, body)
}

async fn close(app: &TestApp, key: &str, session: &str) -> StatusCode {
    let request = Request::delete("/mcp/agents/assistant")
        .header("host", "127.0.0.1")
        .header("authorization", format!("Bearer {key}"))
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(Body::empty())
        .expect("request");
    app.request(request).await.status
}

db_test! {
    async fn mcp_sessions_are_capped_per_key_and_in_all_and_a_closed_one_frees_its_slot_at_once(db) {
        let api = api(db, &["--mcp-max-sessions-per-key=2", "--mcp-max-sessions=3"]).await;
        let other = keys::create_for_tenant(&api.db.conn, "agent-b", Role::Agent, Some("acme"), chrono::Utc::now()).await.expect("key");
        let app = &api.app;
        let mut open = Vec::new();
        for _ in 0..2 {
            let (status, session, body) = initialize(app, &api.agent, initialize_body("a")).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            open.push(session.expect("a session"));
        }
        let (status, session, body) = initialize(app, &api.agent, initialize_body("a")).await;
        assert_eq!((status, session.is_none()), (StatusCode::TOO_MANY_REQUESTS, true), "a third for one key: {body}");
        assert_eq!(body["error"]["code"], "too_many_sessions", "{body}");

        let (status, _, body) = initialize(app, &other, initialize_body("b")).await;
        assert_eq!(status, StatusCode::OK, "another key has its own: {body}");
        let (status, _, body) = initialize(app, &other, initialize_body("b")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "the process holds three: {body}");
        assert_eq!(body["error"]["code"], "mcp_sessions_full", "{body}");

        assert_eq!(close(app, &api.agent, &open[0]).await, StatusCode::NO_CONTENT);
        let (status, session, body) = initialize(app, &api.agent, initialize_body("a")).await;
        assert_eq!((status, session.is_some()), (StatusCode::OK, true), "the closed session's slot is free at once: {body}");
    }
}

db_test! {
    async fn one_tenants_mcp_sessions_leave_another_tenant_able_to_initialize(db) {
        let api = api(db, &["--mcp-max-sessions-per-key=16", "--mcp-max-sessions-per-tenant=4", "--mcp-max-sessions=8"]).await;
        let app = &api.app;
        let mut opened = 0;
        for i in 0..3 {
            let key = keys::create_for_tenant(&api.db.conn, &format!("tb-agent-{i}"), Role::Agent, Some("tb"), chrono::Utc::now()).await.expect("key");
            for _ in 0..3 {
                let (status, _, body) = initialize(app, &key, initialize_body("tb")).await;
                match status {
                    StatusCode::OK => opened += 1,
                    _ => {
                        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
                        assert_eq!(body["error"]["code"], "too_many_sessions", "{body}");
                        assert!(body["error"]["message"].as_str().unwrap_or_default().contains("tenant"), "{body}");
                    }
                }
            }
        }
        assert_eq!(opened, 4, "tb holds its share and no more");
        let (status, session, body) = initialize(app, &api.agent, initialize_body("a")).await;
        assert_eq!((status, session.is_some()), (StatusCode::OK, true), "the default tenant still initializes: {body}");
    }
}

db_test! {
    async fn a_session_is_its_openers_and_another_key_holding_its_id_can_neither_use_nor_close_it(db) {
        let api = api(db, &[]).await;
        let other = keys::create_for_tenant(&api.db.conn, "agent-b", Role::Agent, Some("acme"), chrono::Utc::now()).await.expect("key");
        let app = &api.app;
        let (status, session, body) = initialize(app, &api.agent, initialize_body("a")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let session = session.expect("a session");
        let list = |key: &str| {
            Request::post("/mcp/agents/assistant?channel=web")
                .header("host", "127.0.0.1")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", session.as_str())
                .header("mcp-protocol-version", "2025-11-25")
                .body(Body::from(r#"{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}"#))
                .expect("request")
        };
        let theirs = app.request(list(&other)).await;
        assert_eq!(theirs.status, StatusCode::NOT_FOUND, "another key's use of the session");
        assert_eq!(theirs.body["error"]["code"], "session_not_found", "{}", theirs.body);
        assert_eq!(close(app, &other, &session).await, StatusCode::NOT_FOUND, "another key's DELETE");
        let ours = app.request(list(&api.agent)).await;
        assert_ne!(ours.status, StatusCode::NOT_FOUND, "the opener's session lives on");
        assert_eq!(close(app, &api.agent, &session).await, StatusCode::NO_CONTENT);
    }
}

db_test! {
    async fn a_session_that_ends_by_itself_gives_its_slot_back(db) {
        let api = api(db, &["--mcp-max-sessions-per-key=1"]).await;
        let app = &api.app;
        // An unknown channel fails the handshake: rmcp's worker for it ends at once.
        let request = Request::post("/mcp/agents/assistant?channel=nope")
            .header("host", "127.0.0.1")
            .header("authorization", format!("Bearer {}", api.agent))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(initialize_body("a")))
            .expect("request");
        let failed = app.request(request).await;
        assert!(failed.body.to_string().contains("-32602"), "{}", failed.body);
        let mut opened = initialize(app, &api.agent, initialize_body("a")).await;
        for _ in 0..50 {
            if opened.0 == StatusCode::OK {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            opened = initialize(app, &api.agent, initialize_body("a")).await;
        }
        assert_eq!(opened.0, StatusCode::OK, "the ended session's slot is free: {}", opened.2);
    }
}

db_test! {
    async fn an_initialize_larger_than_8_kib_is_refused_before_a_session_opens(db) {
        let api = api(db, &[]).await;
        let app = &api.app;
        let (status, session, body) = initialize(app, &api.agent, initialize_body(&"x".repeat(9 * 1024))).await;
        assert_eq!((status, session), (StatusCode::PAYLOAD_TOO_LARGE, None), "{body}");
        assert_eq!(body["error"]["code"], "initialize_too_large", "{body}");
        let (status, session, _) = initialize(app, &api.agent, initialize_body("a client")).await;
        assert_eq!((status, session.is_some()), (StatusCode::OK, true));
    }
}

db_test! {
    async fn an_internal_error_reaches_an_mcp_client_as_rest_words_it(db) {
        let api = api(db, &[]).await;
        let base = serve(&api).await;
        let client = connect(&format!("{base}/mcp/agents/assistant"), &api.agent).await;
        // The ledger's table is gone: recording the proposal fails inside the database.
        api.sql("ALTER TABLE proposal_events RENAME TO proposal_events_gone").await;
        let arguments = json!({"ids": ["t1"]}).as_object().cloned().unwrap_or_default();
        let result = client.call_tool(CallToolRequestParams::new("delete_tasks").with_arguments(arguments)).await.expect("tools/call");
        assert_eq!(result.is_error, Some(true), "{result:?}");
        let said = serde_json::to_string(&result).expect("json");
        let error = &result.structured_content.clone().unwrap_or_default()["error"];
        assert_eq!((error["code"].as_str(), error["message"].as_str()), (Some("internal"), Some("internal error; see the server log")), "{said}");
        for internal in ["proposal_events", "relation", "no such table", "SQL"] {
            assert!(!said.contains(internal), "no internal text ({internal}): {said}");
        }
        client.cancel().await.ok();
    }
}

db_test! {
    async fn a_nul_in_mcp_tool_arguments_is_invalid_params_as_rest_refuses_it(db) {
        let api = api(db, &[]).await;
        let (status, body) = api.call(Method::POST, "/v1/agents/assistant/tool-calls", &api.agent,
            Some(json!({"tool": "delete_tasks", "arguments": {"ids": ["a\u{0}b"]}, "conversation_id": "c"}))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "REST: {body}");
        let base = serve(&api).await;
        let client = connect(&format!("{base}/mcp/agents/assistant"), &api.agent).await;
        for arguments in [json!({"ids": ["a\u{0}b"]}), json!({"ids": ["t1"], "a\u{0}": 1})] {
            let arguments = arguments.as_object().cloned().unwrap_or_default();
            let refused = client.call_tool(CallToolRequestParams::new("delete_tasks").with_arguments(arguments)).await;
            let error = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(error.contains("-32602") && error.contains("NUL"), "{error}");
        }
        assert_eq!(api.count("proposals").await, 0, "nothing was proposed");
        client.cancel().await.ok();
    }
}
