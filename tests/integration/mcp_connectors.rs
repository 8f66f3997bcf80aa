//! `mcp` connectors against a real MCP server started by each test on 127.0.0.1
//! over Streamable HTTP (rmcp's server, in its own runtime so the test can make it
//! vanish): sync with its dry run, re-sync, refusals and renames, admins' edits
//! surviving, gone tools switched off, and approved calls that run once with the
//! idempotency key in `_meta`, `isError`, and a server that dies mid-call.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use loadout_tests::db_test;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};

use super::connectors::Api;

/// What the server received: (tool, arguments, `_meta`).
type Calls = Arc<Mutex<Vec<(String, Value, Value)>>>;

#[derive(Clone)]
struct Weather {
    tools: Arc<Mutex<Vec<Tool>>>,
    calls: Calls,
}

fn schema(value: Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(value.as_object().cloned().unwrap_or_default())
}

fn strict(properties: Value, required: &[&str]) -> Arc<serde_json::Map<String, Value>> {
    schema(
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
    )
}

fn weather_tools() -> Vec<Tool> {
    let ids = || {
        strict(
            json!({"ids": {"type": "array", "items": {"type": "string"}}}),
            &["ids"],
        )
    };
    vec![
        Tool::new(
            "get_forecast",
            "The forecast for a city.",
            strict(json!({"city": {"type": "string"}}), &["city"]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new("remove_alerts", "Removes weather alerts.", ids())
            .with_annotations(ToolAnnotations::new().destructive(true)),
        Tool::new("remove_explosions", "Always fails.", ids())
            .with_annotations(ToolAnnotations::new().destructive(true)),
        Tool::new("remove_slowly", "Takes its time.", ids()),
        Tool::new(
            "frobnicate",
            "Does something unnamed.",
            strict(
                json!({"ids": {"type": "array", "items": {"type": "string"}}}),
                &["ids"],
            ),
        ),
        Tool::new(
            "find_cities",
            "A loose schema.",
            schema(json!({"type": "object", "properties": {"q": {"type": "string"}}})),
        ),
    ]
}

impl ServerHandler for Weather {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            self.tools.lock().expect("tools").clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let meta = serde_json::to_value(&context.meta).unwrap_or(Value::Null);
        self.calls
            .lock()
            .expect("calls")
            .push((request.name.to_string(), arguments, meta));
        let result = match request.name.as_ref() {
            "remove_explosions" => {
                CallToolResult::error(vec![ContentBlock::text("the station exploded")])
            }
            "remove_slowly" => {
                tokio::time::sleep(Duration::from_secs(30)).await;
                CallToolResult::success(vec![ContentBlock::text("late")])
            }
            _ => {
                let mut done = CallToolResult::structured(json!({"removed": 2}));
                done.content = vec![ContentBlock::text("removed 2 alerts")];
                done
            }
        };
        Ok(result.into())
    }
}

/// The server, running in a runtime of its own on a thread of its own.
pub(crate) struct McpServer {
    pub(crate) url: String,
    weather: Weather,
    runtime: Option<tokio::runtime::Runtime>,
}

impl McpServer {
    pub(crate) fn start() -> McpServer {
        let weather = Weather {
            tools: Arc::new(Mutex::new(weather_tools())),
            calls: Arc::default(),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let served = weather.clone();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        runtime.spawn(async move {
            let service = StreamableHttpService::new(
                move || Ok(served.clone()),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let app = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.ok();
        });
        McpServer {
            url,
            weather,
            runtime: Some(runtime),
        }
    }

    fn calls(&self) -> Vec<(String, Value, Value)> {
        self.weather.calls.lock().expect("calls").clone()
    }

    /// The server process dies: every task and connection of its runtime is dropped.
    fn vanish(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.vanish();
    }
}

async fn connect_weather(api: &Api, server: &McpServer) {
    let (status, body) = api.call(Method::POST, "/v1/connectors", &api.admin,
        Some(json!({"name": "weather", "kind": "mcp", "url": server.url, "headers": {"authorization": "Bearer mcp-secret"}, "timeout_ms": 5000}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "mcp", "{body}");
}

async fn sync(api: &Api, request: Value) -> Value {
    let (status, body) = api
        .call(
            Method::POST,
            "/v1/connectors/weather/sync",
            &api.admin,
            Some(request),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

fn names(report: &Value, list: &str) -> Vec<String> {
    report[list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            format!(
                "{}→{}",
                e["remote"].as_str().unwrap_or("?"),
                e["name"].as_str().unwrap_or("-")
            )
        })
        .collect()
}

const RENAME: &str = "set_weather_frobs";

db_test! {
    async fn a_sync_maps_names_and_tiers_refuses_with_reasons_and_a_resync_changes_nothing(db) {
        let server = McpServer::start();
        let api = Api::new(db, true).await;
        connect_weather(&api, &server).await;

        let plan = sync(&api, json!({"dry_run": true})).await;
        assert_eq!(plan["dry_run"], true);
        assert_eq!(names(&plan, "added"), ["get_forecast→get_weather_forecast", "remove_alerts→delete_weather_alerts",
            "remove_explosions→delete_weather_explosions", "remove_slowly→delete_weather_slowly"], "{plan}");
        let refused = names(&plan, "refused");
        assert_eq!(refused, ["frobnicate→-", "find_cities→search_weather_cities"], "{plan}");
        let reasons = plan["refused"].to_string();
        assert!(reasons.contains("rename") && reasons.contains("not strict"), "{reasons}");
        let (status, _) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.admin, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "a dry run wrote a tool");

        let done = sync(&api, json!({"agent": "assistant", "rename": {"frobnicate": RENAME}})).await;
        assert_eq!(names(&done, "added").len(), 5, "{done}");
        assert_eq!(names(&done, "refused"), ["find_cities→search_weather_cities"], "{done}");
        let (_, forecast) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.admin, None).await;
        assert_eq!((forecast["type"].as_str(), forecast["approval_tier"].as_str()), (Some("mcp"), Some("auto")), "{forecast}");
        assert_eq!(forecast["description"], "The forecast for a city.");
        let (_, alerts) = api.call(Method::GET, "/v1/tools/delete_weather_alerts", &api.admin, None).await;
        assert_eq!(alerts["approval_tier"], "requires_approval", "destructive → approval: {alerts}");
        let (_, slowly) = api.call(Method::GET, "/v1/tools/delete_weather_slowly", &api.admin, None).await;
        assert_eq!(slowly["approval_tier"], "requires_approval", "no hint → approval: {slowly}");
        let (_, links) = api.call(Method::GET, "/v1/agents/assistant/links", &api.admin, None).await;
        let linked = |tool: &str| links["links"].as_array().into_iter().flatten().any(|l| l["tool"] == tool && l["active"] == true);
        assert!(linked("get_weather_forecast") && linked(RENAME), "{links}");
        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.admin, None).await;
        assert_eq!(report["errors"], 0, "{report}");

        let again = sync(&api, json!({"agent": "assistant", "rename": {"frobnicate": RENAME}})).await;
        assert_eq!((names(&again, "added").len(), names(&again, "updated").len(), names(&again, "unchanged").len()), (0, 0, 5), "{again}");
    }
}

db_test! {
    async fn an_admins_edit_survives_a_resync_unless_overwritten_and_a_gone_tool_is_switched_off(db) {
        let server = McpServer::start();
        let api = Api::new(db, true).await;
        connect_weather(&api, &server).await;
        sync(&api, json!({})).await;
        let (status, body) = api.call(Method::PATCH, "/v1/tools/get_weather_forecast", &api.admin,
            Some(json!({"description": "Our own words.", "approval_tier": "requires_approval"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let kept = sync(&api, json!({})).await;
        assert!(names(&kept, "unchanged").contains(&"get_forecast→get_weather_forecast".to_owned()), "{kept}");
        let (_, forecast) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.admin, None).await;
        assert_eq!((forecast["description"].as_str(), forecast["approval_tier"].as_str()), (Some("Our own words."), Some("requires_approval")));

        let overwritten = sync(&api, json!({"overwrite": true})).await;
        assert_eq!(names(&overwritten, "updated"), ["get_forecast→get_weather_forecast"], "{overwritten}");
        let (_, forecast) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.admin, None).await;
        assert_eq!((forecast["description"].as_str(), forecast["approval_tier"].as_str()), (Some("The forecast for a city."), Some("auto")));

        server.weather.tools.lock().expect("tools").retain(|t| t.name != "remove_alerts");
        let gone = sync(&api, json!({})).await;
        assert_eq!(names(&gone, "disabled"), ["remove_alerts→delete_weather_alerts"], "{gone}");
        let (status, alerts) = api.call(Method::GET, "/v1/tools/delete_weather_alerts", &api.admin, None).await;
        assert_eq!((status, alerts["is_active"].clone(), alerts["deleted_at"].clone()), (StatusCode::OK, json!(false), Value::Null), "disabled, never deleted: {alerts}");
        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.admin, None).await;
        assert!(report.to_string().contains("remove_alerts"), "the check reports the gone remote tool: {report}");
        let quiet = sync(&api, json!({})).await;
        assert!(names(&quiet, "disabled").is_empty(), "a re-sync disables nothing twice: {quiet}");
    }
}

async fn propose(api: &Api, tool: &str) -> i64 {
    let (status, body) = api
        .call(
            Method::POST,
            "/v1/agents/assistant/tool-calls",
            &api.agent,
            Some(json!({"tool": tool, "arguments": {"ids": ["a1", "a2"]}, "conversation_id": "c"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["proposal_id"].as_i64().expect("a proposal")
}

db_test! {
    async fn an_approved_mcp_call_runs_once_with_the_key_in_meta_and_is_error_is_final(db) {
        let server = McpServer::start();
        let api = Api::new(db, true).await;
        connect_weather(&api, &server).await;
        sync(&api, json!({"agent": "assistant"})).await;

        let id = propose(&api, "delete_weather_alerts").await;
        let done = api.approve(id).await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(done["result"]["structuredContent"], json!({"removed": 2}), "{done}");
        assert_eq!(done["result"]["content"][0]["text"], "removed 2 alerts", "{done}");
        api.approve(id).await;
        let calls = server.calls();
        assert_eq!(calls.len(), 1, "exactly once: {calls:?}");
        let (tool, arguments, meta) = &calls[0];
        assert_eq!((tool.as_str(), arguments), ("remove_alerts", &json!({"ids": ["a1", "a2"]})));
        assert_eq!(meta["io.loadout/idempotency-key"], format!("{id}:1"), "{meta}");
        assert_eq!(meta["io.loadout/agent"], "assistant", "{meta}");

        let failing = propose(&api, "delete_weather_explosions").await;
        let failed = api.approve(failing).await;
        assert_eq!(failed["state"], "failed", "{failed}");
        assert_eq!((failed["result"]["isError"].clone(), failed["result"]["retryable"].clone()), (json!(true), json!(false)), "{failed}");
        let (status, body) = api.call(Method::POST, &format!("/v1/proposals/{failing}/retry"), &api.admin, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "isError is not retryable: {body}");
    }
}

db_test! {
    async fn a_server_that_dies_mid_call_fails_the_call_retryably(db) {
        let mut server = McpServer::start();
        let api = Api::new(db, true).await;
        connect_weather(&api, &server).await;
        sync(&api, json!({"agent": "assistant"})).await;
        let id = propose(&api, "delete_weather_slowly").await;
        let calls = server.weather.calls.clone();
        let approving = {
            let state_api = &api;
            async move { state_api.approve(id).await }
        };
        let killer = async {
            for _ in 0..200 {
                if !calls.lock().expect("calls").is_empty() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            server.vanish();
        };
        let (failed, ()) = tokio::join!(approving, killer);
        assert_eq!(failed["state"], "failed", "{failed}");
        assert_eq!(failed["result"]["retryable"], true, "{failed}");
        assert_eq!(failed["result"]["error"], "the MCP server could not be reached", "{failed}");
    }
}

db_test! {
    async fn an_mcp_connector_is_refused_a_disguised_private_address(db) {
        let api = Api::new(db, false).await;
        for url in ["http://127.0.0.1:9/mcp", "http://[::ffff:127.0.0.1]:9/mcp", "http://[64:ff9b::7f00:1]/mcp"] {
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.admin,
                Some(json!({"name": "inside", "kind": "mcp", "url": url}))).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {body}");
        }
        let (status, body) = api.call(Method::POST, "/v1/connectors", &api.admin,
            Some(json!({"name": "odd", "kind": "smtp", "url": "https://example.invalid/"}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_kind")), "{body}");
    }
}

db_test! {
    async fn loadout_connectors_sync_runs_the_same_sync_from_the_command_line(db) {
        use loadout::cli::connectors::{ConnectorsCommand, run};
        let server = McpServer::start();
        let api = Api::new(db, true).await;
        connect_weather(&api, &server).await;
        let sync = |dry_run: bool| ConnectorsCommand::Sync {
            name: "weather".into(),
            dry_run,
            overwrite: false,
            agent: Some("assistant".into()),
            renames: vec![("frobnicate".into(), RENAME.into())],
            connector_allow: vec!["127.0.0.1".parse().expect("ip")],
            connector_ca: None,
        };
        run(&api.db.conn, sync(true)).await.expect("dry run");
        let (status, _) = api.call(Method::GET, &format!("/v1/tools/{RENAME}"), &api.admin, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "--dry-run wrote a tool");
        run(&api.db.conn, sync(false)).await.expect("sync");
        let (status, tool) = api.call(Method::GET, &format!("/v1/tools/{RENAME}"), &api.admin, None).await;
        assert_eq!((status, tool["type"].as_str()), (StatusCode::OK, Some("mcp")), "{tool}");
        let refused = run(&api.db.conn, ConnectorsCommand::Sync {
            name: "weather".into(), dry_run: false, overwrite: false, agent: None, renames: vec![],
            connector_allow: vec![], connector_ca: None,
        }).await.expect_err("loopback is refused without --connector-allow");
        assert!(refused.to_string().contains("not publicly routable"), "{refused}");
    }
}

db_test! {
    async fn migration_ten_down_refuses_while_an_mcp_connector_exists_and_restores_the_old_kind(db) {
        use migration::{Migrator, MigratorTrait};
        use sea_orm::ConnectionTrait;
        let api = Api::new(db, true).await;
        for (name, kind) in [("inside", "mcp"), ("plain", "http")] {
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.admin,
                Some(json!({"name": name, "kind": kind, "url": "http://127.0.0.1:9/x"}))).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        Migrator::down(&api.db.conn, Some(1)).await.expect("migration 11 down first");
        let err = Migrator::down(&api.db.conn, Some(1)).await.expect_err("refused");
        assert!(err.to_string().contains("1 mcp connector"), "{err}");
        let conn = api.db.reconnect().await;
        conn.execute_unprepared("DELETE FROM connectors WHERE kind = 'mcp'").await.expect("remove it");
        Migrator::down(&conn, Some(1)).await.expect("down");
        let rows = loadout_tests::dump::rows(&api.db).await;
        assert!(rows["tools"][0].get("remote_name").is_none(), "the columns are gone");
        let kinds = conn.query_all_raw(sea_orm::Statement::from_string(conn.get_database_backend(), "SELECT kind FROM connectors")).await.expect("kinds");
        let kinds: Vec<String> = kinds.iter().map(|r| r.try_get::<String>("", "kind").expect("kind")).collect();
        assert_eq!(kinds, ["api"], "http is api again");
    }
}
