//! Tool contracts (issue 39): breaking changes named in the diff, the change
//! request and `loadout check`; recorded calls replayed against a candidate with
//! the refusals a real call gets; release checks that a protected label requires
//! before approval.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use chrono::Utc;
use entity::proposals;
use loadout::auth::keys::Role;
use sea_orm::{ActiveValue::Set, EntityTrait};
use serde_json::{Value, json};

const AGENT: &str = "/v1/agents/assistant";

async fn ok(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, &app.operator, body).await;
    assert!(status.is_success(), "{method} {path}: {status} {answer}");
    answer
}

fn chores_schema(due: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "chores": {"type": "array", "items": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "due": due},
                "required": ["title", "due"],
                "additionalProperties": false,
            }},
        },
        "required": ["chores"],
        "additionalProperties": false,
    })
}

/// `create_chores`, whose `due` is optional (nullable), linked to the assistant.
async fn chores_tool(app: &TestApp) {
    let body = json!({
        "name": "create_chores",
        "description": "Create chores.",
        "approval_tier": "requires_approval",
        "parameters": chores_schema(json!({"type": ["string", "null"]})),
    });
    let (status, answer) = app
        .call(Method::POST, "/v1/tools", &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    ok(
        app,
        Method::PUT,
        &format!("{AGENT}/links/create_chores"),
        None,
    )
    .await;
}

/// The candidate: `due` no longer nullable (listed in `required` both times, as
/// OpenAI's strict form lists every property): a call sending `null` is refused.
async fn require_due(app: &TestApp) {
    let body = json!({"parameters": chores_schema(json!({"type": "string"}))});
    ok(app, Method::PATCH, "/v1/tools/create_chores", Some(body)).await;
}

async fn labels(app: &TestApp) -> (i64, i64) {
    let found = ok(app, Method::GET, &format!("{AGENT}/labels"), None).await;
    let at = |name: &str| {
        found["labels"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["name"] == name)
            .and_then(|l| l["revision"].as_i64())
            .expect(name)
    };
    (at("production"), at("latest"))
}

db_test! {
    async fn a_nullable_argument_made_non_null_is_named_breaking_in_the_diff_the_change_request_and_check(db) {
        let app = TestApp::new(db).await;
        chores_tool(&app).await;
        ok(&app, Method::PATCH, AGENT, Some(json!({"release_mode": "gated"}))).await;
        require_due(&app).await;
        let (production, latest) = labels(&app).await;
        assert!(latest > production, "a gated save moves latest only");

        let diff = ok(&app, Method::GET, &format!("{AGENT}/revisions/{production}/diff/{latest}"), None).await;
        assert_eq!(diff["diff"]["breaking"], true, "{diff}");
        let changes = diff["diff"]["contract"].as_array().expect("contract");
        let narrowed = changes.iter().find(|c| c["path"] == "/chores/items/due").expect("a change at /chores/items/due");
        assert_eq!(narrowed["compat"], "breaking", "{narrowed}");
        assert_eq!(narrowed["kind"], "type_narrowed", "{narrowed}");

        let (status, request) = app.call(Method::PUT, &format!("{AGENT}/labels/production"), &app.operator, Some(json!({"revision": latest}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{request}");
        let breaking = request["checks"]["checks"].as_array().expect("checks").iter()
            .find(|c| c["name"] == "breaking").expect("a breaking check").clone();
        assert_eq!(breaking["status"], "warn", "{breaking}");
        assert!(breaking["summary"][0].as_str().unwrap_or("").contains("create_chores type_narrowed"), "{breaking}");

        let report = ok(&app, Method::GET, "/v1/registry/check", None).await;
        let warning = report["problems"].as_array().expect("problems").iter()
            .find(|p| p["code"] == "breaking_change").expect("a breaking_change warning").clone();
        assert_eq!(warning["severity"], "warning", "{warning}");
        assert_eq!(warning["subject"], "assistant/latest", "{warning}");
        assert!(warning["message"].as_str().unwrap_or("").contains("create_chores type_narrowed /chores/items/due"), "{warning}");
    }
}

/// Records `n` calls of `create_chores` for the default tenant, as the ledger
/// holds them; every `every`th has no due date.
async fn record_calls(app: &TestApp, n: usize, every: usize) {
    let agent = loadout::registry::links::agent(&app.db.conn, "assistant")
        .await
        .expect("agent");
    let tool = entity::tools::Entity::find()
        .all(&app.db.conn)
        .await
        .expect("tools")
        .into_iter()
        .find(|t| t.name == "create_chores")
        .expect("create_chores");
    let now = Utc::now();
    let rows: Vec<proposals::ActiveModel> = (0..n)
        .map(|i| {
            let due = match i % every == 0 {
                true => Value::Null,
                false => json!("2026-12-01"),
            };
            let arguments = json!({"chores": [{"title": format!("task {i}"), "due": due}]});
            proposals::ActiveModel {
                tenant_id: Set("default".to_owned()),
                agent_id: Set(agent.id),
                tool_id: Set(tool.id),
                tool_name: Set("create_chores".to_owned()),
                user_id: Set(Some(format!("user-{}", i % 7))),
                conversation_id: Set(format!("c-{i}")),
                message_id: Set(None),
                arguments_hash: Set(loadout::actions::ledger::arguments_hash(&arguments)),
                arguments: Set(arguments),
                description: Set("Create tasks".to_owned()),
                preview: Set(json!([])),
                state: Set("succeeded".to_owned()),
                attempts: Set(1),
                max_attempts: Set(3),
                result: Set(None),
                outcome_unknown: Set(false),
                idempotency_key: Set(None),
                request_hash: Set(None),
                expires_at: Set(now),
                lease_until: Set(None),
                created_at: Set(now),
                updated_at: Set(now),
                revision_id: Set(None),
                decided_by: Set(None),
                ..Default::default()
            }
        })
        .collect();
    for chunk in rows.chunks(200) {
        proposals::Entity::insert_many(chunk.to_vec())
            .exec(&app.db.conn)
            .await
            .expect("insert");
    }
}

db_test! {
    async fn a_replay_of_a_thousand_recorded_calls_reports_the_refusals_a_real_call_gets(db) {
        let app = TestApp::new(db).await;
        chores_tool(&app).await;
        // 1,027 recorded: the replay reads the newest 1,000, of which every 27th has no due date.
        record_calls(&app, 1027, 27).await;
        let (base, _) = labels(&app).await;
        require_due(&app).await;
        let (_, candidate) = labels(&app).await;

        let report = ok(&app, Method::GET, &format!("{AGENT}/replay?base={base}&candidate={candidate}"), None).await;
        let tool = report["tools"].as_array().expect("tools").iter()
            .find(|t| t["tool"] == "create_chores").expect("create_chores replayed").clone();
        assert_eq!(tool["recorded"], 1000, "{tool}");
        // Newest first: ids 1027..28 in the ledger are i = 1026..27; those with i % 27 == 0.
        let expected = (27..1027).filter(|i| i % 27 == 0).count();
        assert_eq!(tool["refused"], expected, "{tool}");
        assert_eq!(report["refused"], expected);
        assert_eq!(tool["refusals"].as_array().map(Vec::len), Some(20), "the first 20 are listed");
        let first = &tool["refusals"][0];
        assert_eq!(first["code"], "invalid_arguments", "{first}");
        let text = report.to_string();
        assert!(!text.contains("task 10"), "no argument leaves the server: {text}");

        // A real call with the same arguments gets word for word the same refusal.
        let (status, real) = app.call(Method::POST, &format!("{AGENT}/tool-calls"), &app.agent,
            Some(json!({"tool": "create_chores", "arguments": {"chores": [{"title": "x", "due": null}]}, "conversation_id": "c"}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{real}");
        assert_eq!(real["error"]["message"], first["message"], "{real} vs {first}");
        assert_eq!(real["error"]["code"], first["code"]);

        // Bounded: more than 1,000 per tool is refused.
        let (status, refused) = app.call(Method::GET, &format!("{AGENT}/replay?limit=1001"), &app.operator, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
        // Another tenant's admin replays its own (empty) ledger.
        let other = loadout::auth::keys::create_for_tenant(&app.db.conn, "admin-b", Role::Admin, Some("globex"), Utc::now())
            .await
            .expect("key");
        let (status, theirs) = app.call(Method::GET, &format!("{AGENT}/replay?base={base}&candidate={candidate}"), &other, None).await;
        assert_eq!(status, StatusCode::OK, "{theirs}");
        assert_eq!(theirs["tools"][0]["recorded"], 0, "{theirs}");
    }
}

db_test! {
    async fn a_label_that_requires_checks_refuses_approval_while_a_check_fails_and_accepts_it_once_fixed(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        ok(&app, Method::PATCH, AGENT, Some(json!({"release_mode": "gated"}))).await;
        let (production, _) = labels(&app).await;
        // The expected render of the web channel, and the label requiring checks.
        ok(&app, Method::PUT, &format!("{AGENT}/snapshots"), Some(json!({"channel": "web"}))).await;
        ok(&app, Method::PUT, &format!("{AGENT}/labels/production"), Some(json!({"revision": production, "require_checks": true}))).await;
        let (status, refused) = app.call(Method::PUT, &format!("{AGENT}/labels/production"), &app.operator, Some(json!({"revision": production, "require_checks": false}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a gated label keeps requiring checks: {refused}");

        // A new soul renders differently: the render check fails.
        let agent = ok(&app, Method::GET, AGENT, None).await;
        let soul = format!("{}\nAlways answer in haiku.", agent["soul"].as_str().unwrap_or(""));
        ok(&app, Method::PATCH, AGENT, Some(json!({"soul": soul}))).await;
        let (_, latest) = labels(&app).await;
        let (status, request) = app.call(Method::PUT, &format!("{AGENT}/labels/production"), &app.operator, Some(json!({"revision": latest}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{request}");
        assert_eq!(request["require_checks"], true, "{request}");
        assert_eq!(request["checks"]["passed"], false, "{request}");
        let render = request["checks"]["checks"].as_array().expect("checks").iter()
            .find(|c| c["name"] == "render").expect("render").clone();
        assert_eq!(render["status"], "fail", "{render}");
        let id = request["id"].as_i64().expect("id");

        let approve = format!("/v1/change-requests/{id}/approve");
        let (status, blocked) = app.call(Method::POST, &approve, &approver, Some(json!({}))).await;
        assert_eq!(status, StatusCode::CONFLICT, "{blocked}");
        assert_eq!(blocked["error"]["code"], "checks_failed", "{blocked}");
        assert!(blocked["error"]["message"].as_str().unwrap_or("").contains("render"), "{blocked}");

        // The diff is shown per tenant; accepting it records the candidate's render.
        let compared = ok(&app, Method::GET, &format!("{AGENT}/snapshots/compare?revision={latest}"), None).await;
        let lines = compared["renders"][0]["diff"]["hunks"].to_string();
        assert!(lines.contains("Always answer in haiku."), "{compared}");
        ok(&app, Method::PUT, &format!("{AGENT}/snapshots"), Some(json!({"channel": "web", "revision": latest}))).await;
        let (status, rerun) = app.call(Method::POST, &format!("/v1/change-requests/{id}/checks"), &approver, None).await;
        assert_eq!(status, StatusCode::OK, "{rerun}");
        assert_eq!(rerun["checks"]["passed"], true, "{rerun}");
        let (status, approved) = app.call(Method::POST, &approve, &approver, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        let (production, _) = labels(&app).await;
        assert_eq!(production, latest);
    }
}

db_test! {
    /// Issue 51's misses, each a pair whose new schema refuses an argument the old
    /// one took: the revision diff says breaking, `loadout check` warns, and the
    /// call path indeed refuses that argument now (the gate agrees with the call).
    async fn a_change_that_refuses_an_argument_valid_before_is_never_called_compatible(db) {
        let app = TestApp::new(db).await;
        let nullable = |beside: Value| {
            let mut s = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
            for (k, v) in beside.as_object().into_iter().flatten() {
                s[k] = v.clone();
            }
            s
        };
        let object = |properties: Value, required: &[&str]| json!({
            "type": "object", "properties": properties, "required": required, "additionalProperties": false,
        });
        let cases = [
            ("null dropped from an enum",
             object(json!({"s": {"type": ["string", "null"], "enum": ["a", "b", null]}}), &["s"]),
             object(json!({"s": {"type": ["string", "null"], "enum": ["a", "b"]}}), &["s"]),
             json!({"s": null})),
            ("maxLength tightened beside a nullable anyOf",
             object(json!({"s": nullable(json!({"maxLength": 20}))}), &["s"]),
             object(json!({"s": nullable(json!({"maxLength": 3}))}), &["s"]),
             json!({"s": "twelve chars"})),
            ("a pattern added beside a nullable anyOf",
             object(json!({"s": nullable(json!({}))}), &["s"]),
             object(json!({"s": nullable(json!({"pattern": "^[a-z]+$"}))}), &["s"]),
             json!({"s": "ABC"})),
            ("const beside an enum",
             object(json!({"s": {"type": "string", "enum": ["a", "b"]}}), &["s"]),
             object(json!({"s": {"type": "string", "enum": ["a", "b"], "const": "a"}}), &["s"]),
             json!({"s": "b"})),
            ("a strict-form optional property added",
             object(json!({"s": {"type": "string"}}), &["s"]),
             object(json!({"s": {"type": "string"}, "t": {"type": ["string", "null"]}}), &["s", "t"]),
             json!({"s": "a"})),
        ];
        // Every tool with its old schema in `production`; then gated, so `production`
        // stays there and `loadout check` compares `latest` against it.
        for (i, (what, before, _, argument)) in cases.iter().enumerate() {
            let tool = format!("get_case{i}");
            let body = json!({"name": tool, "description": "A case.", "approval_tier": "requires_approval", "parameters": before});
            let (status, answer) = app.call(Method::POST, "/v1/tools", &app.operator, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{what}: {answer}");
            ok(&app, Method::PUT, &format!("{AGENT}/links/{tool}"), None).await;
            let call = json!({"tool": tool, "arguments": argument, "conversation_id": format!("c-{i}")});
            let (status, answer) = app.call(Method::POST, &format!("{AGENT}/tool-calls"), &app.agent, Some(call)).await;
            assert!(status.is_success(), "{what}: the argument is valid before: {answer}");
        }
        ok(&app, Method::PATCH, AGENT, Some(json!({"release_mode": "gated"}))).await;
        for (i, (what, _, after, argument)) in cases.into_iter().enumerate() {
            let tool = format!("get_case{i}");
            let (_, before) = labels(&app).await;
            ok(&app, Method::PATCH, &format!("/v1/tools/{tool}"), Some(json!({"parameters": after}))).await;
            let (_, now) = labels(&app).await;
            let diff = ok(&app, Method::GET, &format!("{AGENT}/revisions/{before}/diff/{now}"), None).await;
            assert_eq!(diff["diff"]["breaking"], true, "{what}: {diff}");
            let report = ok(&app, Method::GET, "/v1/registry/check", None).await;
            let warned = report["problems"].as_array().into_iter().flatten().any(|p| {
                p["code"] == "breaking_change" && p["message"].as_str().is_some_and(|m| m.contains(&format!("{tool} ")))
            });
            assert!(warned, "{what}: loadout check names it: {report}");
            let call = json!({"tool": tool, "arguments": argument, "conversation_id": format!("c-{i}"), "revision": now});
            let (status, answer) = app.call(Method::POST, &format!("{AGENT}/tool-calls"), &app.agent, Some(call)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}: the call path refuses it now: {answer}");
        }
    }
}
