//! `mcp` connectors against a real MCP server started by each test on 127.0.0.1
//! over Streamable HTTP (rmcp's server, in its own runtime so the test can make it
//! vanish): sync with its dry run, re-sync, refusals and renames, admins' edits
//! surviving, gone tools switched off, and approved calls that run once with the
//! idempotency key in `_meta`, `isError`, and a server that dies mid-call. Servers
//! as they are (issue 21): FastMCP-style schemas normalized and their nulls dropped
//! before the call, open maps refused unless taken loose, tiers a server cannot
//! lower, and the bounds on tools, pages, schemas and answers (SSE and JSON).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::db_test;
use axum::http::{Method, StatusCode};
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

use super::connectors::{Connecting, app};
use crate::support::TestApp;

/// What the server received: (tool, arguments, `_meta`).
type Calls = Arc<Mutex<Vec<(String, Value, Value)>>>;

#[derive(Clone)]
struct Weather {
    tools: Arc<Mutex<Vec<Tool>>>,
    calls: Calls,
    /// Tools per `tools/list` page; every tool on one page when `None`.
    page_size: Arc<Mutex<Option<usize>>>,
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
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self.tools.lock().expect("tools").clone();
        let Some(size) = *self.page_size.lock().expect("page size") else {
            return Ok(ListToolsResult::with_all_items(tools));
        };
        let from: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let to = (from + size).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[from..to].to_vec());
        page.next_cursor = (to < tools.len()).then(|| to.to_string());
        Ok(page)
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
            "get_huge" => CallToolResult::success(vec![ContentBlock::text("x".repeat(HUGE))]),
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
        McpServer::start_with(StreamableHttpServerConfig::default())
    }

    /// A server answering each request with JSON instead of an SSE stream.
    fn start_json() -> McpServer {
        let mut config = StreamableHttpServerConfig::default();
        config.legacy_session_mode = false;
        config.json_response = true;
        McpServer::start_with(config)
    }

    fn start_with(config: StreamableHttpServerConfig) -> McpServer {
        let weather = Weather {
            tools: Arc::new(Mutex::new(weather_tools())),
            calls: Arc::default(),
            page_size: Arc::default(),
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
                config,
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

async fn connect_weather(api: &TestApp, server: &McpServer) {
    let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
        Some(json!({"name": "weather", "kind": "mcp", "url": server.url, "headers": {"authorization": "Bearer mcp-secret"}, "timeout_ms": 5000, "trusted": true}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "mcp", "{body}");
}

async fn sync(api: &TestApp, request: Value) -> Value {
    let (status, body) = api
        .call(
            Method::POST,
            "/v1/connectors/weather/sync",
            &api.operator,
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
        let api = app(db, true).await;
        connect_weather(&api, &server).await;

        let plan = sync(&api, json!({"dry_run": true})).await;
        assert_eq!(plan["dry_run"], true);
        assert_eq!(names(&plan, "added"), ["get_forecast→get_weather_forecast", "remove_alerts→delete_weather_alerts",
            "remove_explosions→delete_weather_explosions", "remove_slowly→delete_weather_slowly",
            "find_cities→search_weather_cities"], "{plan}");
        let refused = names(&plan, "refused");
        assert_eq!(refused, ["frobnicate→-"], "{plan}");
        let reasons = plan["refused"].to_string();
        assert!(reasons.contains("rename"), "{reasons}");
        let (status, _) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.operator, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "a dry run wrote a tool");

        let done = sync(&api, json!({"agent": "assistant", "rename": {"frobnicate": RENAME}})).await;
        assert_eq!(names(&done, "added").len(), 6, "{done}");
        assert_eq!(names(&done, "refused"), Vec::<String>::new(), "{done}");
        let (_, forecast) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.operator, None).await;
        assert_eq!((forecast["type"].as_str(), forecast["approval_tier"].as_str()), (Some("mcp"), Some("auto")), "{forecast}");
        assert_eq!(forecast["description"], "The forecast for a city.");
        let (_, alerts) = api.call(Method::GET, "/v1/tools/delete_weather_alerts", &api.operator, None).await;
        assert_eq!(alerts["approval_tier"], "requires_approval", "destructive → approval: {alerts}");
        let (_, slowly) = api.call(Method::GET, "/v1/tools/delete_weather_slowly", &api.operator, None).await;
        assert_eq!(slowly["approval_tier"], "requires_approval", "no hint → approval: {slowly}");
        let (_, links) = api.call(Method::GET, "/v1/agents/assistant/links", &api.operator, None).await;
        let linked = |tool: &str| links["links"].as_array().into_iter().flatten().any(|l| l["tool"] == tool && l["active"] == true);
        assert!(linked("get_weather_forecast") && linked(RENAME), "{links}");
        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.operator, None).await;
        assert_eq!(report["errors"], 0, "{report}");

        let again = sync(&api, json!({"agent": "assistant", "rename": {"frobnicate": RENAME}})).await;
        assert_eq!((names(&again, "added").len(), names(&again, "updated").len(), names(&again, "unchanged").len()), (0, 0, 6), "{again}");
    }
}

db_test! {
    async fn an_admins_edit_survives_a_resync_unless_overwritten_and_a_gone_tool_is_switched_off(db) {
        let server = McpServer::start();
        let api = app(db, true).await;
        connect_weather(&api, &server).await;
        sync(&api, json!({})).await;
        let (status, body) = api.call(Method::PATCH, "/v1/tools/get_weather_forecast", &api.operator,
            Some(json!({"description": "Our own words.", "approval_tier": "requires_approval"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let kept = sync(&api, json!({})).await;
        assert!(names(&kept, "unchanged").contains(&"get_forecast→get_weather_forecast".to_owned()), "{kept}");
        let (_, forecast) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.operator, None).await;
        assert_eq!((forecast["description"].as_str(), forecast["approval_tier"].as_str()), (Some("Our own words."), Some("requires_approval")));

        let overwritten = sync(&api, json!({"overwrite": true})).await;
        assert_eq!(names(&overwritten, "updated"), ["get_forecast→get_weather_forecast"], "{overwritten}");
        let (_, forecast) = api.call(Method::GET, "/v1/tools/get_weather_forecast", &api.operator, None).await;
        assert_eq!((forecast["description"].as_str(), forecast["approval_tier"].as_str()), (Some("The forecast for a city."), Some("auto")));

        server.weather.tools.lock().expect("tools").retain(|t| t.name != "remove_alerts");
        let gone = sync(&api, json!({})).await;
        assert_eq!(names(&gone, "disabled"), ["remove_alerts→delete_weather_alerts"], "{gone}");
        let (status, alerts) = api.call(Method::GET, "/v1/tools/delete_weather_alerts", &api.operator, None).await;
        assert_eq!((status, alerts["is_active"].clone(), alerts["deleted_at"].clone()), (StatusCode::OK, json!(false), Value::Null), "disabled, never deleted: {alerts}");
        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.operator, None).await;
        assert!(report.to_string().contains("remove_alerts"), "the check reports the gone remote tool: {report}");
        let quiet = sync(&api, json!({})).await;
        assert!(names(&quiet, "disabled").is_empty(), "a re-sync disables nothing twice: {quiet}");
    }
}

async fn propose(api: &TestApp, tool: &str) -> i64 {
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
        let api = app(db, true).await;
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
        let (status, body) = api.call(Method::POST, &format!("/v1/proposals/{failing}/retry"), &api.operator, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "isError is not retryable: {body}");
    }
}

db_test! {
    async fn a_server_that_dies_mid_call_fails_the_call_retryably(db) {
        let mut server = McpServer::start();
        let api = app(db, true).await;
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
        let api = app(db, false).await;
        for url in ["http://127.0.0.1:9/mcp", "http://[::ffff:127.0.0.1]:9/mcp", "http://[64:ff9b::7f00:1]/mcp"] {
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
                Some(json!({"name": "inside", "kind": "mcp", "url": url}))).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {body}");
        }
        let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
            Some(json!({"name": "odd", "kind": "smtp", "url": "https://example.invalid/"}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_kind")), "{body}");
    }
}

db_test! {
    async fn loadout_connectors_sync_runs_the_same_sync_from_the_command_line(db) {
        use loadout::cli::connectors::run;
        let server = McpServer::start();
        let api = app(db, true).await;
        connect_weather(&api, &server).await;
        let rename = format!("--rename=frobnicate={RENAME}");
        let key = format!("--secrets-key={}", crate::support::SECRETS_KEY);
        let sync = |dry_run: bool| {
            let mut args = vec!["weather", "--agent=assistant", &rename, "--connector-allow=127.0.0.1", &key];
            if dry_run {
                args.push("--dry-run");
            }
            sync_command(&args)
        };
        run(&api.db.conn, &api.db.url, sync(true)).await.expect("dry run");
        let (status, _) = api.call(Method::GET, &format!("/v1/tools/{RENAME}"), &api.operator, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "--dry-run wrote a tool");
        run(&api.db.conn, &api.db.url, sync(false)).await.expect("sync");
        let (status, tool) = api.call(Method::GET, &format!("/v1/tools/{RENAME}"), &api.operator, None).await;
        assert_eq!((status, tool["type"].as_str()), (StatusCode::OK, Some("mcp")), "{tool}");
        let refused = run(&api.db.conn, &api.db.url, sync_command(&["weather", &key])).await.expect_err("loopback is refused without --connector-allow");
        assert!(refused.to_string().contains("not publicly routable"), "{refused}");
    }
}

db_test! {
    async fn migration_ten_down_refuses_while_an_mcp_connector_exists_and_restores_the_old_kind(db) {
        use migration::{Migrator, MigratorTrait};
        use sea_orm::ConnectionTrait;
        let api = app(db, true).await;
        for (name, kind) in [("inside", "mcp"), ("plain", "http")] {
            let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
                Some(json!({"name": name, "kind": kind, "url": "http://127.0.0.1:9/x"}))).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        crate::support::migrate_down_to(&api.db.conn, "m20261124_000010_mcp_connectors").await;
        let err = Migrator::down(&api.db.conn, Some(1)).await.expect_err("refused");
        assert!(err.to_string().contains("1 mcp connector"), "{err}");
        let conn = api.db.reconnect().await;
        conn.execute_unprepared("DELETE FROM connectors WHERE kind = 'mcp'").await.expect("remove it");
        Migrator::down(&conn, Some(1)).await.expect("down");
        let rows = crate::support::dump::rows(&api.db).await;
        assert!(rows["tools"][0].get("remote_name").is_none(), "the columns are gone");
        let kinds = conn.query_all_raw(sea_orm::Statement::from_string(conn.get_database_backend(), "SELECT kind FROM connectors")).await.expect("kinds");
        let kinds: Vec<String> = kinds.iter().map(|r| r.try_get::<String>("", "kind").expect("kind")).collect();
        assert_eq!(kinds, ["api"], "http is api again");
    }
}

/// The size of `get_huge`'s answer: past the 1 MiB connector cap, far below rmcp's 16 MiB.
const HUGE: usize = 1_500_000;

/// `loadout connectors sync ARGS…` as the command line parses it.
fn sync_command(args: &[&str]) -> loadout::cli::connectors::ConnectorsCommand {
    use clap::Parser;
    let argv = ["loadout", "connectors", "sync"].iter().chain(args);
    let cli = loadout::cli::Cli::try_parse_from(argv).expect("the command line");
    let loadout::cli::Command::Connectors { command } = cli.command else {
        panic!("not connectors")
    };
    command
}

/// What FastMCP (pydantic) publishes for
/// `def search_places(query: str, limit: int = 10, tag: str | None = None, near: Place | None = None)`.
fn fastmcp_search() -> Tool {
    Tool::new(
        "search_places",
        "Places matching a query.",
        schema(json!({
            "type": "object",
            "title": "search_placesArguments",
            "properties": {
                "query": {"type": "string", "title": "Query"},
                "limit": {"type": "integer", "title": "Limit", "default": 10},
                "tag": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Tag"},
                "near": {"anyOf": [{"$ref": "#/$defs/Place"}, {"type": "null"}], "default": null}
            },
            "required": ["query"],
            "$defs": {"Place": {
                "type": "object",
                "title": "Place",
                "properties": {
                    "city": {"type": "string"},
                    "radius_km": {"type": "number", "default": 5}
                },
                "required": ["city"]
            }}
        })),
    )
    .with_annotations(ToolAnnotations::new().read_only(true))
}

async fn call_tool(api: &TestApp, tool: &str, arguments: Value) -> Value {
    let (status, body) = api
        .call(
            Method::POST,
            "/v1/agents/assistant/tool-calls",
            &api.agent,
            Some(json!({"tool": tool, "arguments": arguments, "conversation_id": "c"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn tool_row(api: &TestApp, name: &str) -> Value {
    let (status, body) = api
        .call(
            Method::GET,
            &format!("/v1/tools/{name}"),
            &api.operator,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

db_test! {
    async fn a_fastmcp_schema_syncs_normalized_and_a_call_sends_no_nulls_for_what_was_optional(db) {
        let server = McpServer::start();
        server.weather.tools.lock().expect("tools").push(fastmcp_search());
        let api = app(db, true).await;
        connect_weather(&api, &server).await;

        let done = sync(&api, json!({"agent": "assistant"})).await;
        assert!(names(&done, "added").contains(&"search_places→search_weather_places".to_owned()), "{done}");
        let parameters = tool_row(&api, "search_weather_places").await["parameters"].clone();
        assert_eq!(parameters["additionalProperties"], false, "{parameters}");
        assert_eq!(parameters["required"], json!(["query", "limit", "near", "tag"]), "{parameters}");
        assert_eq!(parameters["properties"]["limit"], json!({"type": ["integer", "null"], "title": "Limit", "default": 10}));
        assert_eq!(parameters["properties"]["tag"], json!({"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Tag"}));
        assert_eq!(parameters["$defs"]["Place"]["required"], json!(["city", "radius_km"]), "{parameters}");
        assert_eq!(parameters["$defs"]["Place"]["additionalProperties"], false, "{parameters}");
        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.operator, None).await;
        assert_eq!(report["errors"], 0, "{report}");

        let ran = call_tool(&api, "search_weather_places", json!({
            "query": "rain", "limit": null, "tag": null, "near": {"city": "Berlin", "radius_km": null}
        })).await;
        assert_eq!(ran["status"], "succeeded", "read-only search → auto: {ran}");
        let calls = server.calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!((calls[0].0.as_str(), &calls[0].1), ("search_places", &json!({"query": "rain", "near": {"city": "Berlin"}})),
            "the nulls of optional properties never reach the server");

        call_tool(&api, "search_weather_places", json!({"query": "sun", "limit": 3, "tag": "beach", "near": null})).await;
        assert_eq!(server.calls()[1].1, json!({"query": "sun", "limit": 3, "tag": "beach"}));
    }
}

fn open_map_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "get_labels",
            "Labels as a map.",
            schema(json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        Tool::new(
            "find_codes",
            "Codes by pattern.",
            schema(json!({"type": "object", "properties": {"filter": {"type": "object", "properties": {}, "patternProperties": {"^x-": {"type": "string"}}}}})),
        ),
    ]
}

db_test! {
    async fn open_maps_and_pattern_properties_are_refused_with_the_reason_unless_taken_loose(db) {
        let server = McpServer::start();
        server.weather.tools.lock().expect("tools").extend(open_map_tools());
        let api = app(db, true).await;
        connect_weather(&api, &server).await;

        let refused = sync(&api, json!({"agent": "assistant"})).await;
        let reasons: Vec<String> = refused["refused"].as_array().into_iter().flatten()
            .filter(|e| e["remote"] == "get_labels" || e["remote"] == "find_codes")
            .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(reasons.len(), 2, "{refused}");
        assert!(reasons[0].contains("open map") && reasons[0].contains("allow_loose"), "{reasons:?}");
        assert!(reasons[1].contains("\"patternProperties\"") && reasons[1].contains("allow_loose"), "{reasons:?}");

        let taken = sync(&api, json!({"agent": "assistant", "allow_loose": ["get_labels", "find_codes"]})).await;
        let added: Vec<&Value> = taken["added"].as_array().into_iter().flatten()
            .filter(|e| e["name"] == "get_weather_labels" || e["name"] == "search_weather_codes").collect();
        assert_eq!(added.len(), 2, "{taken}");
        assert!(added.iter().all(|e| e["reason"].as_str().is_some_and(|r| r.starts_with("taken loose"))), "{taken}");

        let (status, tools) = api.call(Method::GET, "/v1/agents/assistant/tools?format=openai", &api.agent, None).await;
        assert_eq!(status, StatusCode::OK, "{tools}");
        let function = |name: &str| tools["tools"].as_array().into_iter().flatten()
            .find(|t| t["function"]["name"] == name).map(|t| t["function"].clone()).unwrap_or(Value::Null);
        let labels = function("get_weather_labels");
        assert_eq!(labels["strict"], false, "{labels}");
        assert_eq!(labels["parameters"], Value::Object((*open_map_tools()[0].input_schema).clone()), "as the server sent it");
        assert_eq!(function("get_weather_forecast")["strict"], true, "{tools}");

        let (_, report) = api.call(Method::GET, "/v1/registry/check", &api.operator, None).await;
        assert_eq!(report["errors"], 0, "{report}");
        let warned: Vec<&str> = report["problems"].as_array().into_iter().flatten()
            .filter(|p| p["code"] == "loose_schema" && p["severity"] == "warning")
            .filter_map(|p| p["subject"].as_str()).collect();
        assert_eq!(warned, ["get_weather_labels", "search_weather_codes"], "{report}");

        use migration::{Migrator, MigratorTrait};
        crate::support::migrate_down_to(&api.db.conn, "m20261125_000012_synced_tool_schemas").await;
        let err = Migrator::down(&api.db.conn, Some(1)).await.expect_err("refused while a loose tool lives");
        assert!(err.to_string().contains("loose"), "{err}");
    }
}

db_test! {
    async fn a_read_only_hint_makes_only_get_and_search_tools_auto(db) {
        let server = McpServer::start();
        {
            let mut tools = server.weather.tools.lock().expect("tools");
            let read_only = || ToolAnnotations::new().read_only(true);
            let ids = || schema(json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ids"]}));
            tools.push(Tool::new("delete_stations", "Deletes stations, it says harmlessly.", ids()).with_annotations(read_only()));
            tools.push(Tool::new("set_units", "Sets the units.", schema(json!({"type": "object", "properties": {"unit": {"type": "string"}}}))).with_annotations(read_only()));
            tools.push(Tool::new("find_towns", "Finds towns.", schema(json!({"type": "object", "properties": {"q": {"type": "string"}}}))).with_annotations(read_only()));
        }
        let api = app(db, true).await;
        connect_weather(&api, &server).await;
        sync(&api, json!({})).await;
        for (tool, tier) in [
            ("delete_weather_stations", "requires_approval"),
            ("set_weather_units", "requires_approval"),
            ("search_weather_towns", "auto"),
            ("get_weather_forecast", "auto"),
        ] {
            assert_eq!(tool_row(&api, tool).await["approval_tier"], tier, "{tool}");
        }
    }
}

fn set_forecast_read_only(server: &McpServer, read_only: bool) {
    let mut tools = server.weather.tools.lock().expect("tools");
    if let Some(forecast) = tools.iter_mut().find(|t| t.name == "get_forecast") {
        forecast.annotations = Some(ToolAnnotations::new().read_only(read_only));
    }
}

/// The server rewrites `get_forecast`'s description (a "rug pull").
pub(crate) fn rewrite_forecast(server: &McpServer, description: &str) {
    let mut tools = server.weather.tools.lock().expect("tools");
    if let Some(forecast) = tools.iter_mut().find(|t| t.name == "get_forecast") {
        forecast.description = Some(description.to_owned().into());
    }
}

/// The server gives `get_forecast` another input schema, as a server answering
/// differently at call time than at sync would.
fn reshape_forecast(server: &McpServer) {
    let mut tools = server.weather.tools.lock().expect("tools");
    if let Some(forecast) = tools.iter_mut().find(|t| t.name == "get_forecast") {
        forecast.input_schema = strict(
            json!({"city": {"type": "string"}, "days": {"type": "integer"}}),
            &["city", "days"],
        );
    }
}

db_test! {
    async fn an_untrusted_connectors_call_is_not_sent_once_the_server_changes_the_accepted_input_schema(db) {
        let server = McpServer::start();
        let api = app(db, true).await;
        let (status, body) = api.call(Method::POST, "/v1/connectors", &api.operator,
            Some(json!({"name": "weather", "kind": "mcp", "url": server.url, "timeout_ms": 5000}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let first = sync(&api, json!({"agent": "assistant"})).await;
        assert!(names(&first, "held").contains(&"get_forecast→get_weather_forecast".to_owned()), "{first}");
        let (_, held) = api.call(Method::GET, "/v1/tool-changes", &api.operator, None).await;
        let change = held["changes"].as_array().expect("changes").iter()
            .find(|c| c["tool"] == "get_weather_forecast").expect("held").clone();
        let (status, accepted) = api.call(Method::POST, &format!("/v1/tool-changes/{}/accept", change["id"]), &api.operator, None).await;
        assert_eq!((status, &accepted["state"]), (StatusCode::OK, &json!("accepted")), "{accepted}");
        let accepted_call = call_tool(&api, "get_weather_forecast", json!({"city": "Oslo"})).await;
        assert_eq!(accepted_call["status"], "succeeded", "{accepted_call}");
        let sent = server.calls().len();

        // The server now asks for another argument: the call is not sent.
        reshape_forecast(&server);
        let refused = call_tool(&api, "get_weather_forecast", json!({"city": "Oslo"})).await;
        assert_eq!(refused["status"], "failed", "{refused}");
        assert!(refused.to_string().contains("not the one accepted"), "{refused}");
        assert_eq!(server.calls().len(), sent, "no tools/call reached the server");
    }
}

db_test! {
    async fn a_resync_raises_a_tier_but_never_lowers_one_and_an_admins_tier_still_wins(db) {
        let server = McpServer::start();
        let api = app(db, true).await;
        connect_weather(&api, &server).await;
        sync(&api, json!({})).await;
        assert_eq!(tool_row(&api, "get_weather_forecast").await["approval_tier"], "auto");

        set_forecast_read_only(&server, false);
        let raised = sync(&api, json!({})).await;
        assert_eq!(names(&raised, "updated"), ["get_forecast→get_weather_forecast"], "{raised}");
        assert_eq!(tool_row(&api, "get_weather_forecast").await["approval_tier"], "requires_approval");

        set_forecast_read_only(&server, true);
        let kept = sync(&api, json!({})).await;
        assert!(names(&kept, "unchanged").contains(&"get_forecast→get_weather_forecast".to_owned()), "{kept}");
        assert_eq!(tool_row(&api, "get_weather_forecast").await["approval_tier"], "requires_approval",
            "the server cannot lower its tool's tier");

        let (status, body) = api.call(Method::PATCH, "/v1/tools/get_weather_forecast", &api.operator,
            Some(json!({"approval_tier": "auto"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        sync(&api, json!({})).await;
        assert_eq!(tool_row(&api, "get_weather_forecast").await["approval_tier"], "auto", "the admin lowered it");
    }
}

db_test! {
    async fn a_server_past_the_tool_or_page_bound_fails_the_sync_and_paging_within_them_works(db) {
        use loadout::cli::connectors::run;
        let server = McpServer::start();
        *server.weather.page_size.lock().expect("page size") = Some(2);
        let api = app(db, true).await;
        connect_weather(&api, &server).await;
        let key = format!("--secrets-key={}", crate::support::SECRETS_KEY);
        let sync_with = |max_tools: usize, max_pages: usize| {
            let (tools, pages) = (format!("--connector-max-tools={max_tools}"), format!("--connector-max-pages={max_pages}"));
            sync_command(&["weather", "--dry-run", "--connector-allow=127.0.0.1", &key, &tools, &pages])
        };
        // Six tools, two a page: three pages.
        run(&api.db.conn, &api.db.url, sync_with(6, 3)).await.expect("within both bounds");
        let pages = run(&api.db.conn, &api.db.url, sync_with(6, 2)).await.expect_err("past the page bound");
        assert!(pages.to_string().contains("past 2 pages (--connector-max-pages)"), "{pages}");
        let tools = run(&api.db.conn, &api.db.url, sync_with(5, 3)).await.expect_err("past the tool bound");
        assert!(tools.to_string().contains("more than 5 tools (--connector-max-tools)"), "{tools}");

        *server.weather.page_size.lock().expect("page size") = Some(1);
        let report = sync(&api, json!({"dry_run": true})).await;
        assert_eq!(names(&report, "added").len(), 5, "six pages are within the default twenty: {report}");
    }
}

db_test! {
    async fn a_schema_over_the_size_cap_is_refused_and_the_others_still_sync(db) {
        let server = McpServer::start();
        server.weather.tools.lock().expect("tools").push(Tool::new(
            "get_everything",
            "A schema of 70 KB.",
            schema(json!({"type": "object", "properties": {"q": {"type": "string", "description": "x".repeat(70_000)}}})),
        ));
        let api = app(db, true).await;
        connect_weather(&api, &server).await;
        let report = sync(&api, json!({})).await;
        let refused = report["refused"].as_array().into_iter().flatten()
            .find(|e| e["remote"] == "get_everything").cloned().unwrap_or(Value::Null);
        assert!(refused["reason"].as_str().is_some_and(|r| r.contains("the cap is 64 KiB")), "{report}");
        assert_eq!(names(&report, "added").len(), 5, "{report}");
    }
}

async fn a_huge_answer_fails_cleanly(api: &TestApp, server: &McpServer) {
    server.weather.tools.lock().expect("tools").push(
        Tool::new(
            "get_huge",
            "An answer of 1.5 MB.",
            schema(json!({"type": "object"})),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
    );
    connect_weather(api, server).await;
    sync(api, json!({"agent": "assistant"})).await;
    let started = std::time::Instant::now();
    let ran = call_tool(api, "get_weather_huge", json!({})).await;
    assert_eq!(ran["status"], "failed", "{ran}");
    assert_eq!(
        ran["result"],
        json!({
            "error": "the MCP server sent too much: an answer over the connector cap of 1024 KiB",
            "retryable": false
        }),
        "{ran}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "it fails at the cap, not at the timeout"
    );
    assert_eq!(server.calls().len(), 1);
}

db_test! {
    async fn an_sse_answer_over_the_connector_cap_fails_the_call_cleanly(db) {
        let server = McpServer::start();
        let api = app(db, true).await;
        a_huge_answer_fails_cleanly(&api, &server).await;
    }
}

db_test! {
    async fn a_json_answer_over_the_connector_cap_fails_the_call_cleanly(db) {
        let server = McpServer::start_json();
        let api = app(db, true).await;
        a_huge_answer_fails_cleanly(&api, &server).await;
    }
}
