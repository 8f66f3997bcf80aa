//! loadout as an MCP server, driven by rmcp's client over Streamable HTTP on
//! 127.0.0.1: instructions, tools with their hints, an `auto` call that runs, a
//! `requires_approval` call that becomes a proposal, prompts per channel,
//! `list_changed` after an admin edit, keys and origins refused, and scoped keys.

use std::time::Duration;

use crate::support::api::request_reply;
use crate::support::{TestApp, TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, Role};
use rmcp::ClientHandler;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The application served on 127.0.0.1 (rmcp's clients need a real socket), its
/// connectors allowed to reach 127.0.0.1.
struct Served {
    app: TestApp,
    base: String,
}

async fn serve(db: TestDb) -> Served {
    let app = TestApp::builder(db)
        .flag("--connector-allow=127.0.0.1")
        .build()
        .await;
    let base = format!("http://{}", app.listen().await);
    Served { app, base }
}

/// Counts `list_changed` notifications.
struct Listener(mpsc::UnboundedSender<&'static str>);

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.send("tools").ok();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.0.send("prompts").ok();
    }
}

type Session = RunningService<RoleClient, Listener>;

async fn connect(
    url: &str,
    key: &str,
) -> Result<(Session, mpsc::UnboundedReceiver<&'static str>), String> {
    let (tx, rx) = mpsc::unbounded_channel();
    Listener(tx)
        .serve(transport(url, key))
        .await
        .map(|s| (s, rx))
        .map_err(|e| e.to_string())
}

/// Streamable HTTP to `url` with `key`, over loadout's own outbound client
/// (rustls on ring, loopback allowed): rmcp's default client would need a
/// process-wide crypto provider.
fn transport(url: &str, key: &str) -> StreamableHttpClientTransport<reqwest::Client> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
    let client =
        loadout::connectors::client::Outbound::new(vec!["127.0.0.1".parse().expect("ip")], None)
            .expect("client")
            .client()
            .clone();
    StreamableHttpClientTransport::with_client(client, config)
}

/// A real HTTP backend that answers every call with `{"tasks": []}`.
async fn backend() -> String {
    let app = axum::Router::new().route(
        "/tasks",
        axum::routing::post(|| async { axum::Json(json!({"tasks": []})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/tasks", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    url
}

db_test! {
    async fn an_mcp_client_gets_the_prompt_tools_calls_and_prompts_of_its_agent(db) {
        let served = serve(db).await;
        let url = backend().await;
        let (status, body) = served.app.call(Method::POST, "/v1/connectors", &served.app.operator, Some(json!({"name": "tasks", "url": url}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, body) = served.app.call(Method::PUT, "/v1/tools/get_tasks/connector", &served.app.operator, Some(json!({"connector": "tasks"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");

        let endpoint = format!("{}/mcp/agents/assistant?channel=web&tz=Europe/Berlin", served.base);
        let (client, _) = connect(&endpoint, &served.app.agent).await.expect("initialize");
        let info = client.peer_info().expect("server info");
        let instructions = info.instructions.clone().unwrap_or_default();
        let (_, rest) = served.app.call(Method::GET, "/v1/agents/assistant/prompt?channel=web&tz=Europe/Berlin", &served.app.agent, None).await;
        let first_line = rest["text"].as_str().unwrap_or_default().lines().next().unwrap_or_default().to_owned();
        assert!(!first_line.is_empty() && instructions.starts_with(&first_line), "instructions: {instructions:.200}");
        assert!(instructions.contains("Europe/Berlin"), "the tz reaches the prompt");

        let tools = client.list_all_tools().await.expect("tools/list");
        let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        let (_, rest_tools) = served.app.call(Method::GET, "/v1/agents/assistant/tools", &served.app.agent, None).await;
        let rest_names: Vec<String> = rest_tools["tools"].as_array().into_iter().flatten()
            .map(|t| t["function"]["name"].as_str().unwrap_or_default().to_owned()).collect();
        assert_eq!(names, rest_names, "the same tools, in the same order");
        let get_tasks = tools.iter().find(|t| t.name == "get_tasks").expect("get_tasks");
        let hints = get_tasks.annotations.clone().expect("annotations");
        assert_eq!((hints.read_only_hint, hints.destructive_hint), (Some(true), Some(false)));
        let delete_tasks = tools.iter().find(|t| t.name == "delete_tasks").expect("delete_tasks");
        assert_eq!(delete_tasks.annotations.clone().and_then(|a| a.destructive_hint), Some(true));
        let tier = delete_tasks.meta.as_ref().and_then(|m| m.get("io.loadout/approval-tier").cloned());
        assert_eq!(tier, Some(json!("requires_approval")));

        let args = |v: Value| v.as_object().cloned().unwrap_or_default();
        let ran = client.call_tool(CallToolRequestParams::new("get_tasks").with_arguments(args(json!({
            "id": null, "status": null, "priority": null, "due_before": null, "limit": null})))).await.expect("call get_tasks");
        assert_eq!(ran.is_error, Some(false), "{ran:?}");
        assert_eq!(ran.structured_content, Some(json!({"tasks": []})), "{ran:?}");

        let proposed = client.call_tool(CallToolRequestParams::new("delete_tasks").with_arguments(args(json!({"ids": ["t1"]}))))
            .await.expect("call delete_tasks");
        let structured = proposed.structured_content.clone().unwrap_or_default();
        assert_eq!(structured["status"], "proposed_for_approval", "{proposed:?}");
        let id = structured["proposal_id"].as_i64().expect("a proposal id");
        let (status, proposal) = served.app.call(Method::GET, &format!("/v1/proposals/{id}"), &served.app.operator, None).await;
        assert_eq!((status, proposal["state"].as_str()), (StatusCode::OK, Some("proposed")), "{proposal}");

        let invalid = client.call_tool(CallToolRequestParams::new("delete_tasks").with_arguments(args(json!({"ids": "t1"}))))
            .await.expect("an invalid call is a result");
        assert_eq!(invalid.is_error, Some(true), "{invalid:?}");
        assert!(format!("{invalid:?}").contains("ids"), "names the JSON path: {invalid:?}");

        let prompts = client.list_all_prompts().await.expect("prompts/list");
        let channels: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
        assert!(channels.contains(&"web") && channels.len() >= 2, "{channels:?}");
        for channel in ["web", channels.iter().find(|c| **c != "web").copied().unwrap_or("web")] {
            let mut request = GetPromptRequestParams::new(channel);
            request.arguments = Some(args(json!({"tz": "Asia/Tokyo", "memory_notes": "Likes tea"})));
            let prompt = client.get_prompt(request).await.expect("prompts/get");
            let text = format!("{:?}", prompt.messages);
            assert!(text.contains("Asia/Tokyo"), "{channel}: {text:.300}");
        }
        client.cancel().await.ok();
    }
}

db_test! {
    async fn prompts_get_carries_the_channels_model_settings_in_meta(db) {
        let served = serve(db).await;
        let settings = json!({"model": "gpt-4.1", "parameters": {"temperature": 0.1},
            "channels": {"web": {"model": "gpt-4.1-mini"}}});
        let (status, saved) = served.app.call(Method::PUT, "/v1/agents/assistant/model", &served.app.operator, Some(settings)).await;
        assert_eq!(status, StatusCode::OK, "{saved}");
        let endpoint = format!("{}/mcp/agents/assistant", served.base);
        let (client, _) = connect(&endpoint, &served.app.agent).await.expect("initialize");
        let meta = |prompt: &rmcp::model::GetPromptResult| {
            serde_json::to_value(&prompt.meta).unwrap_or(Value::Null)["loadout/model"].clone()
        };
        let web = client.get_prompt(GetPromptRequestParams::new("web")).await.expect("prompts/get web");
        assert_eq!(meta(&web), json!({"model": "gpt-4.1-mini", "parameters": {"temperature": 0.1}}));
        let other = client.get_prompt(GetPromptRequestParams::new("telegram")).await.expect("prompts/get telegram");
        assert_eq!(meta(&other), json!({"model": "gpt-4.1", "parameters": {"temperature": 0.1}}));
        client.cancel().await.ok();
    }
}

db_test! {
    async fn a_calls_conversation_and_user_come_from_meta_else_the_session_and_the_query(db) {
        let served = serve(db).await;
        let endpoint = format!("{}/mcp/agents/assistant?user_id=query-user", served.base);
        let (client, _) = connect(&endpoint, &served.app.agent).await.expect("initialize");
        let object = |v: Value| v.as_object().cloned().unwrap_or_default();
        let mut with_meta = CallToolRequestParams::new("delete_tasks").with_arguments(object(json!({"ids": ["t1"]})));
        with_meta.meta = Some(object(json!({"conversation_id": "conv-9", "user_id": "meta-user"})).into());
        let without_meta = CallToolRequestParams::new("delete_tasks").with_arguments(object(json!({"ids": ["t2"]})));
        let mut proposals = Vec::new();
        for request in [with_meta, without_meta] {
            let result = client.call_tool(request).await.expect("tools/call");
            let structured = result.structured_content.clone().unwrap_or_default();
            let id = structured["proposal_id"].as_i64().unwrap_or_else(|| panic!("a proposal: {result:?}"));
            let (status, proposal) = served.app.call(Method::GET, &format!("/v1/proposals/{id}"), &served.app.operator, None).await;
            assert_eq!(status, StatusCode::OK, "{proposal}");
            proposals.push(proposal);
        }
        assert_eq!((proposals[0]["conversation_id"].as_str(), proposals[0]["user_id"].as_str()), (Some("conv-9"), Some("meta-user")), "from _meta");
        let conversation = proposals[1]["conversation_id"].as_str().unwrap_or_default();
        assert!(conversation.starts_with("mcp-") && conversation.len() > 4, "the session's id: {conversation}");
        assert_eq!(proposals[1]["user_id"].as_str(), Some("query-user"), "the endpoint's ?user_id");
        client.cancel().await.ok();
    }
}

db_test! {
    async fn an_admin_edit_reaches_open_sessions_as_list_changed(db) {
        let served = serve(db).await;
        let endpoint = format!("{}/mcp/agents/assistant", served.base);
        let (client, mut changes) = connect(&endpoint, &served.app.agent).await.expect("initialize");
        client.list_all_tools().await.expect("tools/list");
        let (status, body) = served.app.call(Method::PUT, "/v1/agents/assistant/prompt-template", &served.app.operator,
            Some(json!({"template": "Changed. $soul"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(5), changes.recv()).await {
                Ok(Some(kind)) => seen.push(kind),
                _ => break,
            }
        }
        seen.sort();
        assert_eq!(seen, ["prompts", "tools"], "both list_changed notifications arrive");
        client.cancel().await.ok();
    }
}

db_test! {
    async fn keys_origins_and_scopes_are_enforced_on_mcp(db) {
        let served = serve(db).await;
        let endpoint = format!("{}/mcp/agents/assistant", served.base);
        assert!(connect(&endpoint, "lo_000000000000_nope").await.is_err(), "a bad key is refused");
        let approver = keys::create(&served.app.db.conn, "approver", Role::Approver, chrono::Utc::now()).await.expect("key");
        assert!(connect(&endpoint, &approver).await.is_err(), "an approver key is refused");
        assert!(connect(&format!("{}/mcp", served.base), &served.app.agent).await.is_err(), "an unscoped key names its agent");

        let scoped = keys::create_scoped(&served.app.db.conn, "scoped", Role::Agent, None, Some("assistant"), chrono::Utc::now()).await.expect("key");
        let (client, _) = connect(&format!("{}/mcp", served.base), &scoped).await.expect("a scoped key on /mcp");
        assert!(!client.list_all_tools().await.expect("tools").is_empty());
        client.cancel().await.ok();
        let (status, body) = served.app.call(Method::POST, "/v1/agents", &served.app.operator,
            Some(json!({"name": "researcher", "identity": {"name": "R"}, "soul": "You dig."}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert!(connect(&format!("{}/mcp/agents/researcher", served.base), &scoped).await.is_err(), "another agent is out of reach");

        // Raw requests: the gate answers before MCP does, in the API's error shape.
        let post = |origin: Option<&str>, key: &str| {
            let mut request = axum::http::Request::post("/mcp/agents/researcher")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream");
            if let Some(origin) = origin {
                request = request.header("origin", origin);
            }
            request.body(axum::body::Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)).expect("request")
        };
        let refused = request_reply(&served.app.state, post(Some("https://evil.example"), &served.app.agent)).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "a browser origin is refused");
        let missing = request_reply(&served.app.state, post(None, &scoped)).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "a scoped key gets 404 for another agent");
        let none = request_reply(&served.app.state, post(None, "")).await;
        assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    }
}

/// A client that speaks 2026-07-28: `server/discover`, no session, metadata on
/// every request.
async fn discover(
    url: &str,
    key: &str,
) -> Result<(Session, mpsc::UnboundedReceiver<&'static str>), String> {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let (tx, rx) = mpsc::unbounded_channel();
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Listener(tx)
        .serve_with_lifecycle(transport(url, key), lifecycle)
        .await
        .map(|s| (s, rx))
        .map_err(|e| e.to_string())
}

db_test! {
    async fn a_2026_client_gets_the_instructions_tools_and_list_changed_through_listen(db) {
        use rmcp::model::{CacheScope, SubscriptionFilter};
        let served = serve(db).await;
        let endpoint = format!("{}/mcp/agents/assistant?channel=telegram&tz=Asia/Tokyo&user_id=u7", served.base);
        let (client, _) = discover(&endpoint, &served.app.agent).await.expect("server/discover");
        let info = client.peer_info().expect("server info");
        assert_eq!(info.protocol_version.as_str(), "2026-07-28");
        let (_, rest) = served.app.call(Method::GET, "/v1/agents/assistant/prompt?channel=telegram&tz=Asia/Tokyo&user_id=u7", &served.app.agent, None).await;
        let first_line = rest["text"].as_str().unwrap_or_default().lines().next().unwrap_or_default().to_owned();
        let instructions = info.instructions.clone().unwrap_or_default();
        assert!(!first_line.is_empty() && instructions.starts_with(&first_line), "instructions: {instructions:.200}");
        assert!(instructions.contains("Asia/Tokyo"));

        let listed = client.list_tools(None).await.expect("tools/list");
        assert_eq!((listed.ttl_ms, listed.cache_scope), (Some(0), Some(CacheScope::Private)));
        let (_, rest_tools) = served.app.call(Method::GET, "/v1/agents/assistant/tools?format=mcp", &served.app.agent, None).await;
        let over_mcp = serde_json::to_value(&listed.tools).expect("tools");
        assert_eq!(over_mcp, rest_tools["tools"], "one MCP shape for tools/list and the REST export");
        let delete = listed.tools.iter().find(|t| t.name == "delete_tasks").expect("delete_tasks");
        let hints = delete.annotations.clone().expect("hints");
        assert_eq!((hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint),
            (Some(false), Some(true), Some(true), Some(false)), "all four hints, explicit");
        assert_eq!(delete.title.as_deref(), Some("Delete tasks"));

        let object = |v: Value| v.as_object().cloned().unwrap_or_default();
        let mut call = CallToolRequestParams::new("delete_tasks").with_arguments(object(json!({"ids": ["t1"]})));
        call.meta = Some(object(json!({"conversation_id": "conv-26", "user_id": "meta-26"})).into());
        let result = client.call_tool(call).await.expect("tools/call");
        let id = result.structured_content.clone().unwrap_or_default()["proposal_id"].as_i64().expect("a proposal");
        let (_, proposal) = served.app.call(Method::GET, &format!("/v1/proposals/{id}"), &served.app.operator, None).await;
        assert_eq!((proposal["conversation_id"].as_str(), proposal["user_id"].as_str()), (Some("conv-26"), Some("meta-26")));
        let plain = CallToolRequestParams::new("delete_tasks").with_arguments(object(json!({"ids": ["t2"]})));
        let result = client.call_tool(plain).await.expect("tools/call");
        let id = result.structured_content.clone().unwrap_or_default()["proposal_id"].as_i64().expect("a proposal");
        let (_, proposal) = served.app.call(Method::GET, &format!("/v1/proposals/{id}"), &served.app.operator, None).await;
        assert_eq!(proposal["user_id"].as_str(), Some("u7"), "the endpoint's ?user_id without _meta");

        let filter = SubscriptionFilter::builder().tools_list_changed().prompts_list_changed().build();
        let mut subscription = client.peer().listen(filter.clone()).await.expect("subscriptions/listen");
        assert_eq!(subscription.acknowledged(), &filter);
        let (status, body) = served.app.call(Method::PUT, "/v1/agents/assistant/prompt-template", &served.app.operator,
            Some(json!({"template": "Changed. $soul"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let mut seen = Vec::new();
        while seen.len() < 2 {
            match tokio::time::timeout(Duration::from_secs(5), subscription.next()).await {
                Ok(Ok(Some(notification))) => seen.push(format!("{notification:?}")),
                _ => break,
            }
        }
        assert!(seen.iter().any(|n| n.contains("ToolListChanged")) && seen.iter().any(|n| n.contains("PromptListChanged")), "{seen:?}");
        client.cancel().await.ok();
    }
}

db_test! {
    async fn an_unknown_channel_is_invalid_params_on_both_revisions(db) {
        let served = serve(db).await;
        let endpoint = format!("{}/mcp/agents/assistant?channel=nope", served.base);
        let legacy = connect(&endpoint, &served.app.agent).await.err().expect("initialize refuses it");
        let modern = discover(&endpoint, &served.app.agent).await.err().expect("server/discover refuses it");
        for error in [legacy, modern] {
            assert!(error.contains("-32602") && error.contains("nope") && error.contains("web"), "{error}");
        }
    }
}

db_test! {
    async fn mcp_answers_what_clients_expect_at_the_http_level(db) {
        let served = serve(db).await;
        let post = |path: &str, key: &str| {
            axum::http::Request::post(path)
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(axum::body::Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)).expect("request")
        };
        let unknown = request_reply(&served.app.state, post("/mcp/agents/assistant", "lo_000000000000_nope")).await;
        assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
        assert_eq!(unknown.headers["www-authenticate"], r#"Bearer realm="loadout""#);
        let unscoped = request_reply(&served.app.state, post("/mcp", &served.app.agent)).await;
        assert_eq!(unscoped.status, StatusCode::FORBIDDEN);
        let challenge = unscoped.headers["www-authenticate"].to_str().expect("ascii").to_owned();
        assert!(challenge.contains("insufficient_scope") && challenge.contains("/mcp/agents/"), "{challenge}");
        assert_eq!(unscoped.body["error"]["code"], "agent_required", "{}", unscoped.body);

        assert_eq!(closing_delete(&served.base, &served.app.agent).await, 204, "a session's closing DELETE");

        // A session this process does not know (another replica's, or closed) is 404
        // in the API's shape, so clients initialize again.
        let mut unknown = post("/mcp/agents/assistant", &served.app.agent);
        unknown.headers_mut().insert("mcp-session-id", "not-a-session".parse().expect("value"));
        unknown.headers_mut().insert("mcp-protocol-version", "2025-11-25".parse().expect("value"));
        unknown.headers_mut().insert("host", "127.0.0.1".parse().expect("value"));
        let unknown = request_reply(&served.app.state, unknown).await;
        assert_eq!(unknown.status, StatusCode::NOT_FOUND);
        assert_eq!(unknown.body["error"]["code"], "session_not_found", "{}", unknown.body);
    }
}

/// Opens a session with raw HTTP and closes it, returning the DELETE's status.
async fn closing_delete(base: &str, key: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://");
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let exchange = |request: String| async move {
        let mut stream = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        // Read the head (and whatever came with it); SSE bodies stay open, so stop at the head.
        loop {
            let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
                .await
                .expect("in time")
                .expect("read");
            answer.extend_from_slice(&buffer[..n]);
            if n == 0 || answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    };
    let head = exchange(format!(
        "POST /mcp/agents/assistant HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{initialize}",
        initialize.len()
    )).await;
    let session = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| l[15..].trim().to_owned())
        })
        .unwrap_or_else(|| panic!("a session id: {head}"));
    let head = exchange(format!(
        "DELETE /mcp/agents/assistant HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\nConnection: close\r\n\r\n"
    )).await;
    head.split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("a status: {head}"))
}

/// A client that declares the tasks extension (SEP-2663).
struct TasksClient;

impl ClientHandler for TasksClient {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::builder()
                .enable_tasks()
                .build(),
            rmcp::model::Implementation::new("tasks-client", "0"),
        )
    }
}

db_test! {
    async fn a_tasks_client_gets_a_working_task_then_the_result_once_an_approver_approves(db) {
        use rmcp::model::{CallToolResponse, GetTaskParams, TaskPayload, TaskStatus};
        let served = serve(db).await;
        let approver = served.app.key("approver", loadout::auth::keys::Role::Approver).await;
        let endpoint = format!("{}/mcp/agents/assistant?channel=web&user_id=alice", served.base);
        let client = TasksClient.serve(transport(&endpoint, &served.app.agent)).await.expect("initialize");
        let args = json!({"instructions": "Answer in French."}).as_object().cloned().unwrap_or_default();
        let response = client.call_tool_once(CallToolRequestParams::new("update_instructions").with_arguments(args.clone()))
            .await.expect("tools/call");
        let CallToolResponse::Task(created) = response else { panic!("a task, not {response:?}") };
        assert_eq!(created.task.status, TaskStatus::Working);
        let id = created.task.task_id.clone();
        let polled = client.get_task(GetTaskParams::new(&id)).await.expect("tasks/get");
        assert_eq!(polled.task.status(), TaskStatus::Working, "still waiting for a person");

        let proposal: i64 = id.trim_start_matches("proposal-").parse().expect("a proposal id");
        let (status, body) = served.app.call(Method::POST, &format!("/v1/proposals/{proposal}/approve"), &approver, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let done = client.get_task(GetTaskParams::new(&id)).await.expect("tasks/get");
        let TaskPayload::Completed { result } = &done.task.payload else { panic!("completed, not {:?}", done.task) };
        assert_eq!(result.get("isError"), Some(&json!(false)), "{result:?}");
        let (_, instructions) = served.app.call(Method::GET, "/v1/agents/assistant/users/alice/instructions", &served.app.operator, None).await;
        assert_eq!(instructions["instructions"], "Answer in French.", "it ran once approved");

        // Declined: the task fails with the decline.
        let response = client.call_tool_once(CallToolRequestParams::new("update_instructions").with_arguments(args))
            .await.expect("tools/call");
        let CallToolResponse::Task(created) = response else { panic!("a task, not {response:?}") };
        let proposal: i64 = created.task.task_id.trim_start_matches("proposal-").parse().expect("id");
        let (status, _) = served.app.call(Method::POST, &format!("/v1/proposals/{proposal}/decline"), &approver, None).await;
        assert_eq!(status, StatusCode::OK);
        let failed = client.get_task(GetTaskParams::new(&created.task.task_id)).await.expect("tasks/get");
        assert_eq!(failed.task.status(), TaskStatus::Failed, "{failed:?}");
        // Another tenant's task is not found.
        let other = loadout::auth::keys::create_scoped(&served.app.db.conn, "other-agent", loadout::auth::keys::Role::Agent, Some("acme"), Some("assistant"), chrono::Utc::now()).await.expect("key");
        let stranger = TasksClient.serve(transport(&endpoint, &other)).await.expect("initialize");
        assert!(stranger.get_task(GetTaskParams::new(&id)).await.is_err(), "another tenant's task");
        client.cancel().await.ok();
        stranger.cancel().await.ok();
    }
}

db_test! {
    async fn a_client_without_tasks_keeps_the_structured_proposal(db) {
        let served = serve(db).await;
        let endpoint = format!("{}/mcp/agents/assistant?channel=web&user_id=alice", served.base);
        let (client, _) = connect(&endpoint, &served.app.agent).await.expect("initialize");
        let args = json!({"instructions": "x"}).as_object().cloned().unwrap_or_default();
        let result = client.call_tool(CallToolRequestParams::new("update_instructions").with_arguments(args)).await.expect("tools/call");
        assert_eq!(result.structured_content.as_ref().and_then(|s| s.get("status")).cloned(), Some(json!("proposed_for_approval")), "{result:?}");
        client.cancel().await.ok();
    }
}

db_test! {
    async fn a_tool_a_policy_forbids_is_absent_from_tools_list_and_a_meta_key_dedupes_retries(db) {
        let served = serve(db).await;
        let policy = "@id(\"no-mail-for-alice\") forbid (principal == User::\"alice\", action == Action::\"get_gmail\", resource);";
        let (status, body) = served.app.call(Method::PUT, "/v1/agents/assistant/policy", &served.app.operator, Some(json!({"policy": policy}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let names = |tools: Vec<rmcp::model::Tool>| tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
        let alice = format!("{}/mcp/agents/assistant?channel=web&user_id=alice", served.base);
        let (client, _) = connect(&alice, &served.app.agent).await.expect("initialize");
        let listed = names(client.list_all_tools().await.expect("tools/list"));
        assert!(!listed.contains(&"get_gmail".to_owned()) && listed.contains(&"get_tasks".to_owned()), "{listed:?}");
        let args = json!({"id": "m1"}).as_object().cloned().unwrap_or_default();
        let refused = client.call_tool(CallToolRequestParams::new("get_gmail").with_arguments(args)).await;
        assert!(refused.is_err(), "a hidden tool is unknown: {refused:?}");
        let bob = format!("{}/mcp/agents/assistant?channel=web&user_id=bob", served.base);
        let (other, _) = connect(&bob, &served.app.agent).await.expect("initialize");
        assert!(names(other.list_all_tools().await.expect("tools/list")).contains(&"get_gmail".to_owned()));

        // The same call twice with one `_meta` idempotency key: one proposal.
        let call = || {
            let mut params = CallToolRequestParams::new("delete_tasks")
                .with_arguments(json!({"ids": ["t1"]}).as_object().cloned().unwrap_or_default());
            let meta = json!({"idempotency_key": "retry-1"}).as_object().cloned().unwrap_or_default();
            params.meta = Some(meta.into());
            params
        };
        let first = client.call_tool(call()).await.expect("first");
        let second = client.call_tool(call()).await.expect("retry");
        let id = |r: &rmcp::model::CallToolResult| r.structured_content.as_ref().and_then(|s| s.get("proposal_id")).cloned();
        assert!(id(&first).is_some(), "{first:?}");
        assert_eq!(id(&first), id(&second), "a retry answers the first call");
        client.cancel().await.ok();
        other.cancel().await.ok();
    }
}

db_test! {
    async fn what_a_policy_hides_from_a_user_is_in_no_tool_list_and_no_prompt_and_meta_names_the_user(db) {
        let served = serve(db).await;
        let policy = "@id(\"no-tasks-for-alice\") forbid (principal == User::\"alice\", action == Action::\"get_tasks\", resource);";
        let (status, body) = served.app.call(Method::PUT, "/v1/agents/assistant/policy", &served.app.operator, Some(json!({"policy": policy}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let section = "Use get_tasks to see what is open";
        // REST and the loadout route: alice's prompt lacks the hidden tool's section, bob's has it.
        for (user, shown) in [("alice", false), ("bob", true)] {
            let (_, prompt) = served.app.call(Method::GET, &format!("/v1/agents/assistant/prompt?channel=web&user_id={user}"), &served.app.agent, None).await;
            assert_eq!(prompt["text"].as_str().unwrap_or("").contains(section), shown, "{user}: {prompt}");
            let (_, loadout) = served.app.call(Method::GET, &format!("/v1/agents/assistant/loadout?channel=web&user_id={user}"), &served.app.agent, None).await;
            assert_eq!(loadout["prompt"]["text"].as_str().unwrap_or("").contains(section), shown, "{user}: {loadout}");
        }
        // MCP: the endpoint is bob's, `_meta` names alice; tools/list and prompts/get decide for her.
        let bob = format!("{}/mcp/agents/assistant?channel=web&user_id=bob", served.base);
        let (client, _) = connect(&bob, &served.app.agent).await.expect("initialize");
        let meta = || Some(json!({"user_id": "alice"}).as_object().cloned().unwrap_or_default().into());
        let names = |tools: &[rmcp::model::Tool]| tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
        let mut params = rmcp::model::PaginatedRequestParams::default();
        params.meta = meta();
        let for_alice = client.list_tools(Some(params)).await.expect("tools/list");
        assert!(!names(&for_alice.tools).contains(&"get_tasks".to_owned()), "{:?}", names(&for_alice.tools));
        let for_bob = client.list_tools(None).await.expect("tools/list");
        assert!(names(&for_bob.tools).contains(&"get_tasks".to_owned()));
        let mut request = GetPromptRequestParams::new("web");
        request.meta = meta();
        let hers = client.get_prompt(request).await.expect("prompts/get");
        let his = client.get_prompt(GetPromptRequestParams::new("web")).await.expect("prompts/get");
        let text = |r: &rmcp::model::GetPromptResult| serde_json::to_string(&r.messages).unwrap_or_default();
        assert!(!text(&hers).contains(section), "{}", text(&hers));
        assert!(text(&his).contains(section), "{}", text(&his));
        client.cancel().await.ok();
    }
}
