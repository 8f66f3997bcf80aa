//! Releases, first slice (issue 25): every configuration write records what the
//! agents it changed now serve as a revision, stored once per content, and moves
//! `latest` (and `production`, in `direct` mode) to it; the history says so.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::support::{TestApp, TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::app::Settings;
use loadout::prompt::builder::FixedClock;
use serde_json::{Value, json};

/// The application at a fixed instant, so prompts are comparable byte for byte.
async fn app(db: TestDb) -> TestApp {
    TestApp::builder(db).clock(FixedClock(now())).build().await
}

fn now() -> chrono::DateTime<chrono::Utc> {
    "2026-11-25T12:00:00Z".parse().expect("instant")
}

async fn read(app: &TestApp, path: &str) -> Value {
    let (status, body) = app.call(Method::GET, path, &app.operator, None).await;
    assert_eq!(status, StatusCode::OK, "GET {path}: {body}");
    body
}

/// The agent's revision numbers, newest first.
async fn revisions(app: &TestApp, agent: &str) -> Vec<i64> {
    let body = read(app, &format!("/v1/agents/{agent}/revisions")).await;
    numbers(&body["revisions"], "number")
}

fn numbers(list: &Value, field: &str) -> Vec<i64> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|r| r[field].as_i64().expect("a number"))
        .collect()
}

/// Each label of the agent with its revision number.
async fn labels(app: &TestApp, agent: &str) -> BTreeMap<String, i64> {
    let body = read(app, &format!("/v1/agents/{agent}/labels")).await;
    body["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|l| {
            (
                l["name"].as_str().expect("name").to_owned(),
                l["revision"].as_i64().expect("number"),
            )
        })
        .collect()
}

fn on(revision: i64) -> BTreeMap<String, i64> {
    BTreeMap::from([
        ("latest".to_owned(), revision),
        ("production".to_owned(), revision),
    ])
}

/// A label's moves, newest first: (from, to, kind).
async fn history(app: &TestApp, agent: &str, label: &str) -> Vec<(Option<i64>, i64, String)> {
    let body = read(app, &format!("/v1/agents/{agent}/labels/{label}/history")).await;
    body["moves"]
        .as_array()
        .expect("moves")
        .iter()
        .map(|m| {
            (
                m["from_revision"].as_i64(),
                m["to_revision"].as_i64().expect("to"),
                m["kind"].as_str().expect("kind").to_owned(),
            )
        })
        .collect()
}

fn publish(from: Option<i64>, to: i64) -> (Option<i64>, i64, String) {
    (from, to, "publish".to_owned())
}

async fn save_soul(app: &TestApp, soul: &str) {
    let (status, body) = app
        .call(
            Method::PATCH,
            "/v1/agents/assistant",
            &app.operator,
            Some(json!({"soul": soul})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

db_test! {
    async fn a_fresh_database_has_revision_1_of_the_seeded_agent_with_production_and_latest_on_it(db) {
        let app = app(db).await;
        assert_eq!(revisions(&app, "assistant").await, [1]);
        assert_eq!(labels(&app, "assistant").await, on(1));
        assert_eq!(history(&app, "assistant", "production").await, [publish(None, 1)]);

        // The revision holds what the agent serves.
        let revision = read(&app, "/v1/agents/assistant/revisions/1").await;
        let agent = read(&app, "/v1/agents/assistant").await;
        assert_eq!(revision["author"], "seed");
        assert_eq!(revision["content"]["soul"], agent["soul"]);
        assert_eq!(revision["content"]["template"], agent["prompt_template"]);
        let tools: Vec<&str> = revision["content"]["tools"].as_array().expect("tools").iter()
            .map(|t| t["name"].as_str().expect("name")).collect();
        let served = app.get("/v1/agents/assistant/tools").await.body;
        let served: Vec<&str> = served["tools"].as_array().expect("tools").iter()
            .map(|t| t["function"]["name"].as_str().expect("name")).collect();
        assert_eq!(tools, served);
        assert!(revision["content"]["channels"]["web"]["guidance"].is_string(), "{revision}");
    }
}

db_test! {
    async fn a_soul_save_makes_revision_2_and_moves_production_and_latest(db) {
        let app = app(db).await;
        save_soul(&app, "A new soul.").await;
        assert_eq!(revisions(&app, "assistant").await, [2, 1]);
        assert_eq!(labels(&app, "assistant").await, on(2));
        assert_eq!(history(&app, "assistant", "production").await, [publish(Some(1), 2), publish(None, 1)]);
        assert_eq!(history(&app, "assistant", "latest").await, [publish(Some(1), 2), publish(None, 1)]);
        let revision = read(&app, "/v1/agents/assistant/revisions/2").await;
        assert_eq!(revision["content"]["soul"], "A new soul.");
        assert_eq!(revision["author"], "operator", "the key that saved it");
    }
}

db_test! {
    async fn saving_the_same_soul_again_makes_no_revision_and_moves_nothing(db) {
        let app = app(db).await;
        save_soul(&app, "A new soul.").await;
        save_soul(&app, "A new soul.").await;
        assert_eq!(revisions(&app, "assistant").await, [2, 1]);
        assert_eq!(history(&app, "assistant", "production").await.len(), 2);
    }
}

db_test! {
    async fn restoring_the_old_soul_points_the_labels_back_at_revision_1(db) {
        let app = app(db).await;
        let old = read(&app, "/v1/agents/assistant").await["soul"].as_str().expect("soul").to_owned();
        save_soul(&app, "A new soul.").await;
        save_soul(&app, &old).await;
        assert_eq!(revisions(&app, "assistant").await, [2, 1], "content is stored once per agent");
        assert_eq!(labels(&app, "assistant").await, on(1));
        assert_eq!(history(&app, "assistant", "production").await,
            [publish(Some(2), 1), publish(Some(1), 2), publish(None, 1)]);
    }
}

db_test! {
    async fn a_tool_description_change_republishes_the_agents_that_have_the_tool(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::PATCH, "/v1/tools/get_tasks", &app.operator,
            Some(json!({"description": "Lists the user's tasks, newest first."}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(revisions(&app, "assistant").await, [2, 1]);
        assert_eq!(labels(&app, "assistant").await, on(2));
        let revision = read(&app, "/v1/agents/assistant/revisions/2").await;
        let tool = revision["content"]["tools"].as_array().expect("tools").iter()
            .find(|t| t["name"] == "get_tasks").expect("get_tasks").clone();
        assert_eq!(tool["description"], "Lists the user's tasks, newest first.");
        assert_eq!(tool["type"], "api");
    }
}

db_test! {
    async fn a_write_the_guard_refuses_adds_no_revision(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::PATCH, "/v1/agents/assistant", &app.operator,
            Some(json!({"soul": "Call read_memory first."}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(revisions(&app, "assistant").await, [1]);
        assert_eq!(history(&app, "assistant", "latest").await, [publish(None, 1)]);
    }
}

db_test! {
    async fn a_users_instructions_write_adds_no_revision(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::PUT, "/v1/agents/assistant/users/alice/instructions", &app.operator,
            Some(json!({"instructions": "Short answers."}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(revisions(&app, "assistant").await, [1]);
        assert_eq!(history(&app, "assistant", "latest").await, [publish(None, 1)]);
    }
}

db_test! {
    async fn unknown_agents_revisions_and_labels_are_404(db) {
        let app = app(db).await;
        for path in ["/v1/agents/nobody/revisions", "/v1/agents/assistant/revisions/9",
            "/v1/agents/nobody/labels", "/v1/agents/assistant/labels/staging/history"] {
            let (status, body) = app.call(Method::GET, path, &app.operator, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        }
    }
}

db_test! {
    async fn a_database_from_before_revisions_gets_revision_1_per_agent_and_serves_the_same_bytes(db) {
        // The configuration an operator had built before the upgrade: a second
        // agent and an edited soul.
        let app = app(db).await;
        let (status, body) = app.call(Method::POST, "/v1/agents", &app.operator, Some(json!({
            "name": "helper", "identity": {"display_name": "Helper", "role": "helps", "description": "d"},
            "soul": "Be brief."}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        save_soul(&app, "An edited soul.").await;
        let paths = ["/v1/agents/assistant/prompt?channel=web", "/v1/agents/assistant/tools",
            "/v1/agents/helper/prompt?channel=web", "/v1/agents/helper/tools"];
        let mut before = Vec::new();
        for path in paths {
            let reply = app.get(path).await;
            assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
            before.push((reply.etag, reply.body));
        }

        // Back to the schema before revisions, then serve's start-up on it.
        let TestApp { db, agent, operator, state, .. } = app;
        drop(state);
        crate::support::migrate_down_to(&db.conn, "m20261125_000015_key_names_per_tenant").await;
        let flags = [format!("--secrets-key={}", crate::support::SECRETS_KEY)];
        let settings = Settings::from_flags(&flags).expect("flags");
        let state = loadout::app::start::start(&db.url, settings, Arc::new(FixedClock(now())))
            .await.expect("start").state;

        for (path, (etag, body)) in paths.iter().zip(&before) {
            let reply = crate::support::api::send(&state, Method::GET, path, Some(&agent), None, None).await;
            // The upgrade numbers what it finds revision 1; all else is the same bytes.
            let mut expected = body.clone();
            for at in ["/provenance/revision", "/revision"] {
                if let Some(number) = expected.pointer_mut(at) {
                    *number = json!(1);
                }
            }
            assert_eq!(reply.body, expected, "{path} serves the same prompt and tools");
            if expected == *body {
                assert_eq!(&reply.etag, etag, "{path}: the ETag is the bytes' hash");
            }
        }
        for name in ["assistant", "helper"] {
            let (_, list) = crate::support::api::call(&state, Method::GET, &format!("/v1/agents/{name}/revisions"), &operator, None).await;
            assert_eq!(numbers(&list["revisions"], "number"), [1], "{name}: {list}");
            assert_eq!(list["revisions"][0]["author"], "migration");
            let (_, labels) = crate::support::api::call(&state, Method::GET, &format!("/v1/agents/{name}/labels"), &operator, None).await;
            assert_eq!(numbers(&labels["labels"], "revision"), [1, 1], "{name}: {labels}");
            let (_, moves) = crate::support::api::call(&state, Method::GET, &format!("/v1/agents/{name}/labels/production/history"), &operator, None).await;
            assert_eq!(moves["moves"].as_array().map(Vec::len), Some(1), "{name}: {moves}");
        }
        drop(state);
        drop(db);
    }
}

// Serving by label (issue 25, items 2 and 4): `?label=` on the fetch routes and the
// MCP endpoint, the revision named in every answer, tool calls against a revision.

/// Points the assistant's `label` at its revision `number`, as a promotion would,
/// and bumps the generation as every configuration write does.
async fn point(app: &TestApp, label: &str, number: i32) {
    use entity::{agent_configurations, agent_revisions};
    use loadout::releases::moves::{Move, move_label};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let db = &app.db.conn;
    let agent = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq("assistant"))
        .one(db)
        .await
        .expect("read")
        .expect("assistant");
    let revision = agent_revisions::Entity::find()
        .filter(agent_revisions::Column::AgentId.eq(agent.id))
        .filter(agent_revisions::Column::Number.eq(number))
        .one(db)
        .await
        .expect("read")
        .expect("revision");
    let mv = Move {
        agent_id: agent.id,
        to_revision_id: revision.id,
        kind: "move",
        actor: Some("test"),
        at: now(),
    };
    move_label(db, label, &mv).await.expect("move");
    let generation = loadout::db::generation::bump(db).await.expect("bump");
    app.state.generation.observe(generation);
}

fn revision_header(reply: &crate::support::api::Reply) -> Option<&str> {
    reply
        .headers
        .get("loadout-revision")
        .map(|v| v.to_str().expect("ascii"))
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

async fn patch_tool(app: &TestApp, tool: &str, edit: Value) {
    let (status, body) = app
        .call(
            Method::PATCH,
            &format!("/v1/tools/{tool}"),
            &app.operator,
            Some(edit),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

db_test! {
    async fn a_fetch_with_a_label_and_one_without_serve_different_revisions_each_named(db) {
        let app = app(db).await;
        save_soul(&app, "A new soul.").await;
        point(&app, "staging", 1).await;

        let production = app.get("/v1/agents/assistant/prompt?channel=web").await;
        let staging = app.get("/v1/agents/assistant/prompt?channel=web&label=staging").await;
        assert_eq!(production.status, StatusCode::OK, "{}", production.body);
        assert_eq!(staging.status, StatusCode::OK, "{}", staging.body);
        assert_eq!((production.body["provenance"]["revision"].clone(), production.body["provenance"]["label"].clone()), (json!(2), json!("production")));
        assert_eq!((staging.body["provenance"]["revision"].clone(), staging.body["provenance"]["label"].clone()), (json!(1), json!("staging")));
        assert_eq!((revision_header(&production), revision_header(&staging)), (Some("2"), Some("1")));
        let text = |reply: &crate::support::api::Reply| reply.body["text"].as_str().expect("text").to_owned();
        assert!(text(&production).contains("A new soul."));
        assert!(!text(&staging).contains("A new soul."), "staging serves revision 1's soul");
        assert_ne!(production.etag, staging.etag, "the ETag covers the revision");

        let tools = app.get("/v1/agents/assistant/tools?label=staging").await;
        assert_eq!((tools.body["revision"].clone(), tools.body["label"].clone(), revision_header(&tools)), (json!(1), json!("staging"), Some("1")));
        let tools = app.get("/v1/agents/assistant/tools").await;
        assert_eq!((tools.body["revision"].clone(), tools.body["label"].clone(), revision_header(&tools)), (json!(2), json!("production"), Some("2")));
        let loadout = app.get("/v1/agents/assistant/loadout?channel=web&label=staging").await;
        assert_eq!((loadout.body["prompt"]["provenance"]["revision"].clone(), revision_header(&loadout)), (json!(1), Some("1")));
        assert_eq!(loadout.body["prompt"]["text"].as_str(), Some(text(&staging).as_str()));
        let rendered = app.json(Method::POST, "/v1/agents/assistant/prompt/render?label=staging", Some(&app.agent), Some(json!({"channel": "web"}))).await;
        assert_eq!((rendered.body["provenance"]["revision"].clone(), revision_header(&rendered)), (json!(1), Some("1")), "{}", rendered.body);
    }
}

db_test! {
    async fn a_304_names_the_revision_and_an_etag_of_another_revision_is_not_current(db) {
        let app = app(db).await;
        save_soul(&app, "A new soul.").await;
        point(&app, "staging", 1).await;
        let path = "/v1/agents/assistant/prompt?channel=web&label=staging";
        let first = app.get(path).await;
        let etag = first.etag.clone().expect("an ETag");
        let again = app.send(Method::GET, path, Some(&app.agent), None, Some(&etag)).await;
        assert_eq!((again.status, revision_header(&again)), (StatusCode::NOT_MODIFIED, Some("1")));
        let production = app.get("/v1/agents/assistant/prompt?channel=web").await;
        let other = production.etag.expect("an ETag");
        let stale = app.send(Method::GET, path, Some(&app.agent), None, Some(&other)).await;
        assert_eq!(stale.status, StatusCode::OK, "production's ETag is not staging's");

        // Moving the label changes what it serves, and its ETag.
        point(&app, "staging", 2).await;
        let moved = app.send(Method::GET, path, Some(&app.agent), None, Some(&etag)).await;
        assert_eq!((moved.status, revision_header(&moved)), (StatusCode::OK, Some("2")));
        assert_ne!(moved.etag.as_deref(), Some(etag.as_str()));
    }
}

db_test! {
    async fn an_unknown_label_is_404_label_not_found_on_every_fetch_route(db) {
        let app = app(db).await;
        for path in ["/v1/agents/assistant/prompt?channel=web&label=nope", "/v1/agents/assistant/tools?label=nope",
            "/v1/agents/assistant/loadout?channel=web&label=nope"] {
            let reply = app.get(path).await;
            assert_eq!((reply.status, code(&reply.body)), (StatusCode::NOT_FOUND, "label_not_found"), "{path}: {}", reply.body);
        }
        let reply = app.json(Method::POST, "/v1/agents/assistant/prompt/render?label=nope", Some(&app.agent), Some(json!({"channel": "web"}))).await;
        assert_eq!((reply.status, code(&reply.body)), (StatusCode::NOT_FOUND, "label_not_found"), "{}", reply.body);
    }
}

db_test! {
    async fn a_tool_call_naming_an_older_revision_is_validated_by_that_revisions_schema(db) {
        let app = app(db).await;
        let schema = json!({"type": "object", "properties": {
            "ids": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "reason": {"type": "string"}}, "required": ["ids", "reason"], "additionalProperties": false});
        patch_tool(&app, "delete_tasks", json!({"parameters": schema})).await;
        let call = |revision: Option<i64>| {
            let mut body = json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"});
            if let Some(n) = revision {
                body["revision"] = json!(n);
            }
            body
        };
        let path = "/v1/agents/assistant/tool-calls";
        let (status, body) = app.call(Method::POST, path, &app.agent, Some(call(None))).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_arguments"), "production (2) requires a reason: {body}");
        let (status, body) = app.call(Method::POST, path, &app.agent, Some(call(Some(2)))).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_arguments"), "{body}");
        let (status, body) = app.call(Method::POST, path, &app.agent, Some(call(Some(1)))).await;
        assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("proposed_for_approval")), "revision 1 had no reason: {body}");
        let (status, body) = app.call(Method::POST, path, &app.agent, Some(call(Some(9)))).await;
        assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "revision_not_found"), "{body}");
    }
}

db_test! {
    async fn a_tier_raised_in_the_working_copy_applies_at_once_to_a_call_naming_the_old_revision(db) {
        let app = app(db).await;
        patch_tool(&app, "get_reminders", json!({"approval_tier": "requires_approval"})).await;
        let body = json!({"tool": "get_reminders", "arguments": {"id": null, "include_past": null},
            "conversation_id": "c", "revision": 1});
        let (status, body) = app.call(Method::POST, "/v1/agents/assistant/tool-calls", &app.agent, Some(body)).await;
        assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("proposed_for_approval")),
            "revision 1 says auto, the working copy requires approval: {body}");
    }
}

db_test! {
    async fn a_tool_switched_off_in_the_working_copy_is_refused_whatever_the_revision(db) {
        let app = app(db).await;
        let (status, body) = app.call(Method::DELETE, "/v1/agents/assistant/links/delete_tasks", &app.operator, None).await;
        assert!(status.is_success(), "{status}: {body}");
        let body = json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c", "revision": 1});
        let (status, body) = app.call(Method::POST, "/v1/agents/assistant/tool-calls", &app.agent, Some(body)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    }
}

db_test! {
    async fn the_mcp_endpoint_serves_its_labels_tools_and_names_the_revision_in_meta(db) {
        use rmcp::ServiceExt;
        use rmcp::model::{CallToolRequestParams, GetPromptRequestParams};
        let app = app(db).await;
        patch_tool(&app, "delete_tasks", json!({"description": "Deletes tasks for good."})).await;
        point(&app, "staging", 1).await;
        let base = format!("http://{}/mcp/agents/assistant", app.listen().await);
        let connect = |query: &str| {
            let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(format!("{base}{query}")).auth_header(app.agent.clone());
            let client = loadout::connectors::client::Outbound::new(vec!["127.0.0.1".parse().expect("ip")], None)
                .expect("client").client().clone();
            ().serve(rmcp::transport::StreamableHttpClientTransport::with_client(client, config))
        };
        let meta = |revision: i64, label: &str| Some(json!({"loadout/revision": revision, "loadout/label": label}));
        let as_json = |m: &Option<rmcp::model::MetaObject>| m.as_ref().map(|m| Value::Object(m.0.clone()));

        let staging = connect("?label=staging").await.expect("initialize");
        assert_eq!(as_json(&staging.peer_info().expect("info").meta), meta(1, "staging"));
        let listed = staging.list_tools(None).await.expect("tools/list");
        assert_eq!(as_json(&listed.meta), meta(1, "staging"));
        let delete = listed.tools.iter().find(|t| t.name == "delete_tasks").expect("delete_tasks");
        assert_ne!(delete.description.as_deref(), Some("Deletes tasks for good."), "revision 1's description");
        let prompt = staging.get_prompt(GetPromptRequestParams::new("web")).await.expect("prompts/get");
        assert_eq!(as_json(&prompt.meta), meta(1, "staging"));

        let production = connect("").await.expect("initialize");
        let listed = production.list_tools(None).await.expect("tools/list");
        assert_eq!(as_json(&listed.meta), meta(2, "production"));
        let delete = listed.tools.iter().find(|t| t.name == "delete_tasks").expect("delete_tasks");
        assert_eq!(delete.description.as_deref(), Some("Deletes tasks for good."));

        // A call names a revision in _meta; an unknown one is refused.
        let mut call = CallToolRequestParams::new("delete_tasks").with_arguments(json!({"ids": ["t1"]}).as_object().cloned().unwrap_or_default());
        call.meta = Some(json!({"loadout/revision": 9}).as_object().cloned().unwrap_or_default().into());
        let refused = production.call_tool(call).await.expect_err("revision 9 is unknown");
        assert!(refused.to_string().contains("no revision 9"), "{refused}");

        let unknown = connect("?label=nope").await.expect_err("an unknown label");
        assert!(unknown.to_string().contains("-32602") && unknown.to_string().contains("nope"), "{unknown}");
        staging.cancel().await.ok();
        production.cancel().await.ok();
    }
}
