//! Tool calls through the HTTP API: proposals, approval, the builtin executor,
//! preferences, validation, idempotency and tenant isolation, on both backends.

use crate::support::{TestApp, TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, Role};
use serde_json::{Value, json};

/// The application with an agent and an approver in each of two tenants.
pub(crate) struct Tenants {
    pub(crate) app: TestApp,
    pub(crate) agent: String,
    pub(crate) approver: String,
    pub(crate) other_agent: String,
    pub(crate) other_approver: String,
}

impl std::ops::Deref for Tenants {
    type Target = TestApp;

    fn deref(&self) -> &TestApp {
        &self.app
    }
}

impl Tenants {
    /// `flags` are `serve`'s.
    pub(crate) async fn new(db: TestDb, flags: &[&str]) -> Tenants {
        let mut app = TestApp::builder(db);
        for flag in flags {
            app = app.flag(*flag);
        }
        let app = app.build().await;
        let key = async |name, role, tenant| {
            keys::create_for_tenant(&app.db.conn, name, role, Some(tenant), chrono::Utc::now())
                .await
                .expect("key")
        };
        Tenants {
            agent: key("agent-a", Role::Agent, "acme").await,
            approver: key("approver-a", Role::Approver, "acme").await,
            other_agent: key("agent-b", Role::Agent, "globex").await,
            other_approver: key("approver-b", Role::Approver, "globex").await,
            app,
        }
    }

    async fn tool_call(&self, body: Value) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            "/v1/agents/assistant/tool-calls",
            &self.agent,
            Some(body),
        )
        .await
    }
}

/// Creates `get_weather` (requires approval, so a valid call is proposed and nothing
/// runs) with `parameters`, and attaches it to the assistant.
async fn weather_tool(api: &Tenants, parameters: Value) {
    let tool = json!({"name": "get_weather", "description": "Weather.", "approval_tier": "requires_approval", "parameters": parameters});
    let (status, body) = api
        .call(Method::POST, "/v1/tools", &api.operator, Some(tool))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = api
        .call(
            Method::PUT,
            "/v1/agents/assistant/links/get_weather",
            &api.operator,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn weather_call(arguments: Value) -> Value {
    json!({"tool": "get_weather", "arguments": arguments, "conversation_id": "c"})
}

/// Writes a tool's parameters straight to the database, as a drifted database holds them
/// (the admin API refuses a schema the check would report), then publishes them, as
/// the next configuration write or a restart would.
async fn drift_parameters(app: &TestApp, tool: &str, parameters: Value) {
    let db = &app.db;
    use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
    let row = entity::tools::Entity::find()
        .filter(entity::tools::Column::Name.eq(tool))
        .one(&db.conn)
        .await
        .expect("read")
        .expect("tool");
    let mut row: entity::tools::ActiveModel = row.into();
    row.parameters = Set(parameters);
    row.update(&db.conn).await.expect("update");
    app.publish().await;
}

fn instructions_call(text: &str) -> Value {
    json!({"tool": "update_instructions", "arguments": {"instructions": text}, "conversation_id": "conv-1", "user_id": "u-1"})
}

db_test! {
    async fn an_approved_update_instructions_reaches_the_next_prompt(db) {
        let api = Tenants::new(db, &[]).await;
        let (status, proposed) = api.tool_call(instructions_call("Always answer in French.")).await;
        assert_eq!(status, StatusCode::OK, "{proposed}");
        assert_eq!(proposed["status"], "proposed_for_approval");
        assert_eq!(proposed["description"], "Update instructions: Always answer in French.");
        let id = proposed["proposal_id"].as_i64().expect("id");

        let (_, listed) = api.call(Method::GET, "/v1/conversations/conv-1/proposals", &api.approver, None).await;
        assert_eq!(listed["proposals"][0]["state"], "proposed");

        let (status, approved) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.approver, None).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        assert_eq!((approved["state"].clone(), approved["attempts"].clone()), (json!("succeeded"), json!(1)));
        let (_, again) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.approver, None).await;
        assert_eq!(again["attempts"], 1, "a second approval runs nothing");

        let (_, prompt) = api.call(Method::GET, "/v1/agents/assistant/prompt?channel=web&user_id=u-1", &api.agent, None).await;
        assert!(prompt["text"].as_str().expect("text").contains("## User instructions\nAlways answer in French.\n"), "{prompt}");

        let (_, detail) = api.call(Method::GET, &format!("/v1/proposals/{id}"), &api.approver, None).await;
        let moves: Vec<(Value, Value)> = detail["events"].as_array().expect("events").iter().map(|e| (e["from"].clone(), e["to"].clone())).collect();
        assert_eq!(moves, [
            (Value::Null, json!("proposed")),
            (json!("proposed"), json!("approved")),
            (json!("approved"), json!("executing")),
            (json!("executing"), json!("succeeded")),
        ]);
    }
}

db_test! {
    async fn a_users_preference_lets_a_user_configurable_tool_run_at_once(db) {
        let api = Tenants::new(db, &[]).await;
        let (status, _) = api.call(Method::PUT, "/v1/users/u-1/tools/update_instructions/preference", &api.approver, Some(json!({"auto_approve": true}))).await;
        assert_eq!(status, StatusCode::OK);
        let (status, ran) = api.tool_call(instructions_call("Be brief.")).await;
        assert_eq!(status, StatusCode::OK, "{ran}");
        assert_eq!(ran["status"], "succeeded");
        assert_eq!(ran["result"], json!({"updated": true}));
        let (status, refused) = api.call(Method::PUT, "/v1/users/u-1/tools/get_tasks/preference", &api.approver, Some(json!({"auto_approve": true}))).await;
        assert_eq!((status, refused["error"]["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("not_user_configurable")));
    }
}

db_test! {
    async fn tools_without_a_connector_are_424_and_their_proposals_wait(db) {
        let api = Tenants::new(db, &[]).await;
        let (status, refused) = api.tool_call(json!({"tool": "get_tasks", "arguments": {"id": null, "status": null, "priority": null, "due_before": null, "limit": null}, "conversation_id": "c"})).await;
        assert_eq!((status, refused["error"]["code"].clone()), (StatusCode::FAILED_DEPENDENCY, json!("not_connected")), "{refused}");
        let (status, proposed) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"})).await;
        assert_eq!(status, StatusCode::OK, "{proposed}");
        let id = proposed["proposal_id"].as_i64().expect("id");
        let (status, body) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.approver, None).await;
        assert_eq!((status, body["error"]["code"].clone()), (StatusCode::FAILED_DEPENDENCY, json!("not_connected")));
        let (_, still) = api.call(Method::GET, &format!("/v1/proposals/{id}"), &api.approver, None).await;
        assert_eq!(still["state"], "proposed");
        let (status, declined) = api.call(Method::POST, &format!("/v1/proposals/{id}/decline"), &api.approver, None).await;
        assert_eq!((status, declined["state"].clone()), (StatusCode::OK, json!("declined")));
        let (status, conflict) = api.call(Method::POST, &format!("/v1/proposals/{id}/decline"), &api.approver, None).await;
        assert_eq!((status, conflict["error"]["details"]["state"].clone()), (StatusCode::CONFLICT, json!("declined")));
    }
}

db_test! {
    async fn arguments_are_validated_and_idempotency_keys_are_honoured(db) {
        let api = Tenants::new(db, &[]).await;
        let (status, bad) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"], "force": true}, "conversation_id": "c"})).await;
        assert_eq!((status, bad["error"]["details"]["path"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("")), "an unknown property is the object's error: {bad}");
        assert!(bad["error"]["message"].as_str().expect("message").contains("'force' was unexpected"), "{bad}");
        let (status, bad) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": [7]}, "conversation_id": "c"})).await;
        assert_eq!((status, bad["error"]["details"]["path"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("/ids/0")));
        let (status, _) = api.tool_call(json!({"tool": "get_weather", "arguments": {}, "conversation_id": "c"})).await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        let mut call = json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c", "idempotency_key": "k-1"});
        let (_, first) = api.tool_call(call.clone()).await;
        let (_, second) = api.tool_call(call.clone()).await;
        assert_eq!(first, second);
        call["arguments"] = json!({"ids": ["t2"]});
        let (status, _) = api.tool_call(call).await;
        assert_eq!(status, StatusCode::CONFLICT);
    }
}

db_test! {
    async fn tenants_and_roles_are_kept_apart(db) {
        let api = Tenants::new(db, &[]).await;
        let (_, proposed) = api.tool_call(instructions_call("x")).await;
        let id = proposed["proposal_id"].as_i64().expect("id");
        for (method, path) in [
            (Method::GET, format!("/v1/proposals/{id}")),
            (Method::POST, format!("/v1/proposals/{id}/approve")),
            (Method::POST, format!("/v1/proposals/{id}/decline")),
            (Method::POST, format!("/v1/proposals/{id}/retry")),
        ] {
            let (status, _) = api.call(method.clone(), &path, &api.other_approver, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path} across tenants");
        }
        let (_, other_list) = api.call(Method::GET, "/v1/conversations/conv-1/proposals", &api.other_approver, None).await;
        assert_eq!(other_list["proposals"], json!([]));
        let (status, _) = api.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &api.agent, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an agent key cannot approve");
        let (status, _) = api.call(Method::GET, "/v1/agents/assistant/prompt?channel=web", &api.approver, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an approver key reads proposals only");
        let (status, body) = api.call(Method::GET, "/v1/proposals/not-a-number", &api.approver, None).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::BAD_REQUEST, Some("bad_request")));
    }
}

/// Proposes `update_instructions` for `user` with `agent`'s key and approves it with `approver`'s.
async fn approved_instructions(api: &Tenants, agent: &str, approver: &str, user: &str, text: &str) {
    let mut body = instructions_call(text);
    body["user_id"] = json!(user);
    let (status, proposed) = api
        .call(
            Method::POST,
            "/v1/agents/assistant/tool-calls",
            agent,
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{proposed}");
    let id = proposed["proposal_id"].as_i64().expect("id");
    let (_, approved) = api
        .call(
            Method::POST,
            &format!("/v1/proposals/{id}/approve"),
            approver,
            None,
        )
        .await;
    assert_eq!(approved["state"], "succeeded", "{approved}");
}

async fn prompt_for(api: &Tenants, key: &str, user: &str) -> String {
    let (status, prompt) = api
        .call(
            Method::GET,
            &format!("/v1/agents/assistant/prompt?channel=web&user_id={user}"),
            key,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{prompt}");
    prompt["text"].as_str().expect("text").to_owned()
}

db_test! {
    async fn another_tenants_approved_instructions_never_reach_this_tenants_prompt(db) {
        let api = Tenants::new(db, &[]).await;
        approved_instructions(&api, &api.agent, &api.approver, "alice", "Acme: answer in French.").await;
        approved_instructions(&api, &api.other_agent, &api.other_approver, "alice", "Globex: answer in German.").await;

        let acme = prompt_for(&api, &api.agent, "alice").await;
        assert!(acme.contains("## User instructions\nAcme: answer in French.\n"), "{acme}");
        assert!(!acme.contains("Globex"), "{acme}");
        let globex = prompt_for(&api, &api.other_agent, "alice").await;
        assert!(globex.contains("## User instructions\nGlobex: answer in German.\n"), "{globex}");
        assert!(!globex.contains("Acme"), "{globex}");
        let (_, loadout) = api.call(Method::GET, "/v1/agents/assistant/loadout?channel=web&user_id=alice", &api.agent, None).await;
        let text = loadout["prompt"]["text"].as_str().expect("text");
        assert!(text.contains("Acme: answer in French.") && !text.contains("Globex"), "{text}");
    }
}

db_test! {
    async fn a_cached_prompt_of_one_tenant_is_never_served_to_another(db) {
        let api = Tenants::new(db, &[]).await;
        approved_instructions(&api, &api.agent, &api.approver, "alice", "Acme only.").await;
        // The same query, first as acme (filling the caches), then as globex.
        for path in ["/v1/agents/assistant/prompt?channel=web&user_id=alice", "/v1/agents/assistant/loadout?channel=web&user_id=alice"] {
            let (_, first) = api.call(Method::GET, path, &api.agent, None).await;
            assert!(first.to_string().contains("Acme only."), "{first}");
            let (status, second) = api.call(Method::GET, path, &api.other_agent, None).await;
            assert_eq!(status, StatusCode::OK);
            assert!(!second.to_string().contains("Acme only."), "{path} leaked across tenants: {second}");
        }
        let (_, rendered) = api.call(Method::POST, "/v1/agents/assistant/prompt/render", &api.other_agent, Some(json!({"channel": "web", "user_id": "alice"}))).await;
        assert!(!rendered["text"].as_str().expect("text").contains("Acme only."));
    }
}

db_test! {
    async fn an_admin_reads_and_sets_instructions_in_its_own_tenant_only(db) {
        let api = Tenants::new(db, &[]).await;
        let db = &api.db;
        let acme_admin = keys::create_for_tenant(&db.conn, "admin-a", Role::Admin, Some("acme"), chrono::Utc::now()).await.expect("key");
        let globex_admin = keys::create_for_tenant(&db.conn, "admin-b", Role::Admin, Some("globex"), chrono::Utc::now()).await.expect("key");
        let path = "/v1/agents/assistant/users/alice/instructions";
        let (status, put) = api.call(Method::PUT, path, &acme_admin, Some(json!({"instructions": "Set by acme."}))).await;
        assert_eq!(status, StatusCode::OK, "{put}");

        assert!(prompt_for(&api, &api.agent, "alice").await.contains("Set by acme."));
        assert!(!prompt_for(&api, &api.other_agent, "alice").await.contains("Set by acme."));
        let (_, theirs) = api.call(Method::GET, path, &globex_admin, None).await;
        assert_eq!(theirs["instructions"], Value::Null);
        let (_, ours) = api.call(Method::GET, path, &acme_admin, None).await;
        assert_eq!(ours["instructions"], "Set by acme.");
        let (_, preview) = api.call(Method::POST, "/v1/agents/assistant/prompt/preview", &globex_admin,
            Some(json!({"template": null, "channel": "web", "user_id": "alice"}))).await;
        assert!(!preview["renders"][0]["text"].as_str().expect("text").contains("Set by acme."), "{preview}");
    }
}

db_test! {
    async fn proposals_expire_after_their_tiers_ttl(db) {
        let api = Tenants::new(db, &["--proposal-ttl=requires_approval=3600"]).await;
        let (_, short) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"})).await;
        let (_, long) = api.tool_call(instructions_call("x")).await;
        async fn lifetime(api: &Tenants, body: &Value) -> chrono::TimeDelta {
            let id = body["proposal_id"].as_i64().expect("id");
            let (_, p) = api.call(Method::GET, &format!("/v1/proposals/{id}"), &api.approver, None).await;
            let at = |k: &str| chrono::DateTime::parse_from_rfc3339(p[k].as_str().expect(k)).expect("time");
            at("expires_at") - at("created_at")
        }
        assert_eq!(lifetime(&api, &short).await, chrono::TimeDelta::hours(1));
        assert_eq!(lifetime(&api, &long).await, chrono::TimeDelta::hours(24));
    }
}

db_test! {
    async fn update_instructions_without_a_user_is_refused_when_called(db) {
        let api = Tenants::new(db, &[]).await;
        let call = json!({"tool": "update_instructions", "arguments": {"instructions": "x"}, "conversation_id": "conv-1"});
        let (status, body) = api.tool_call(call).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("missing_context")), "{body}");
    }
}

db_test! {
    async fn a_422_lists_every_invalid_argument_with_its_path_and_keyword(db) {
        let api = Tenants::new(db, &[]).await;
        let (status, bad) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": [7, "t2", false], "force": true}, "conversation_id": "c"})).await;
        assert_eq!((status, bad["error"]["code"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("invalid_arguments")), "{bad}");
        let mut found: Vec<(Value, Value)> = bad["error"]["details"]["errors"].as_array().expect("errors").iter()
            .map(|e| (e["path"].clone(), e["keyword"].clone())).collect();
        found.sort_by_key(|(path, _)| path.to_string());
        assert_eq!(found, [
            (json!(""), json!("additionalProperties")),
            (json!("/ids/0"), json!("type")),
            (json!("/ids/2"), json!("type")),
        ]);
        let first = &bad["error"]["details"]["errors"][0];
        assert_eq!(bad["error"]["details"]["path"], first["path"], "details.path is the first error's path");
        let message = bad["error"]["message"].as_str().expect("message");
        assert!(message.contains(first["message"].as_str().expect("first message")), "{message}");
        assert!(message.contains("3 errors"), "{message}");
    }
}

db_test! {
    async fn instructions_over_the_admin_limit_are_refused_when_called(db) {
        let api = Tenants::new(db, &[]).await;
        let (status, body) = api.tool_call(instructions_call(&"x".repeat(256 * 1024 + 1))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("payload_too_large")));
    }
}

db_test! {
    async fn arguments_are_validated_by_the_whole_of_json_schema_through_the_api(db) {
        let api = Tenants::new(db, &[]).await;
        weather_tool(&api, json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "minLength": 2, "pattern": "^[A-Z]"},
                "at": {"type": "string", "format": "date-time"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "notify": {"anyOf": [{"type": "string", "format": "email"}, {"type": "null"}]}
            },
            "required": ["city", "at", "days", "notify"],
            "additionalProperties": false
        })).await;
        let (status, ok) = api.tool_call(weather_call(json!({"city": "Berlin", "at": "2026-11-21T08:30:00Z", "days": 3.0, "notify": null}))).await;
        assert_eq!(status, StatusCode::OK, "{ok}");
        let (status, bad) = api.tool_call(weather_call(json!({"city": "b", "at": "soon", "days": 8, "notify": "nobody"}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        let mut found: Vec<(String, String)> = bad["error"]["details"]["errors"].as_array().expect("errors").iter()
            .map(|e| (e["path"].as_str().expect("path").to_owned(), e["keyword"].as_str().expect("keyword").to_owned())).collect();
        found.sort();
        let expected: Vec<(String, String)> = [("/at", "format"), ("/city", "minLength"), ("/city", "pattern"), ("/days", "maximum"), ("/notify", "anyOf")]
            .into_iter().map(|(p, k)| (p.to_owned(), k.to_owned())).collect();
        assert_eq!(found, expected);
    }
}

db_test! {
    async fn an_edited_schema_takes_effect_on_the_next_call(db) {
        let api = Tenants::new(db, &[]).await;
        let schema = |city: Value| json!({"type": "object", "properties": {"city": city}, "required": ["city"], "additionalProperties": false});
        weather_tool(&api, schema(json!({"type": "string"}))).await;
        let (status, body) = api.tool_call(weather_call(json!({"city": "Berlin"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");

        let edit = json!({"parameters": schema(json!({"enum": ["Paris"]}))});
        let (status, body) = api.call(Method::PATCH, "/v1/tools/get_weather", &api.operator, Some(edit)).await;
        assert_eq!(status, StatusCode::OK, "{body}");

        let (status, bad) = api.tool_call(weather_call(json!({"city": "Berlin"}))).await;
        assert_eq!((status, bad["error"]["details"]["errors"][0]["keyword"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("enum")), "{bad}");
    }
}

db_test! {
    async fn arguments_are_validated_against_the_stored_schema_not_the_strict_export(db) {
        let api = Tenants::new(db, &[]).await;
        // Not strict: `note` is optional and may not be null. The strict export would make
        // it required and nullable; the call must follow the schema as stored.
        let stored = json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}, "note": {"type": "string"}}, "required": ["ids"], "additionalProperties": false});
        drift_parameters(&api, "delete_tasks", stored).await;
        let (status, body) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"})).await;
        assert_eq!(status, StatusCode::OK, "an optional property may be left out: {body}");
        let (status, bad) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"], "note": null}, "conversation_id": "c"})).await;
        assert_eq!((status, bad["error"]["details"]["path"].clone()), (StatusCode::UNPROCESSABLE_ENTITY, json!("/note")), "{bad}");
    }
}

db_test! {
    async fn a_stored_schema_that_does_not_compile_is_a_422_naming_the_tool(db) {
        let api = Tenants::new(db, &[]).await;
        drift_parameters(&api, "delete_tasks", json!({"type": "object", "properties": {"ids": {"type": "array", "minItems": "one"}}})).await;
        let (status, bad) = api.tool_call(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"})).await;
        assert_eq!((status, bad["error"]["code"].clone(), bad["error"]["details"]["tool"].clone()),
            (StatusCode::UNPROCESSABLE_ENTITY, json!("invalid_arguments"), json!("delete_tasks")), "{bad}");
        let message = bad["error"]["message"].as_str().expect("message");
        assert!(message.contains("not valid JSON Schema") && message.contains("/properties/ids/minItems"), "{message}");
    }
}
