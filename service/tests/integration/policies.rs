//! Policies as data (issue 38): an agent's Cedar policy decides calls by their
//! arguments and principal, travels with the revision (gated promotion,
//! rollouts), is decided again before an approved proposal runs, hides tools a
//! forbid denies outright, and is checked by `loadout check` and the write guard.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use entity::proposals;
use loadout::auth::keys::Role;
use sea_orm::{EntityTrait, PaginatorTrait};
use serde_json::{Value, json};

const AGENT: &str = "/v1/agents/assistant";
const POLICY: &str = "/v1/agents/assistant/policy";
const CALLS: &str = "/v1/agents/assistant/tool-calls";

async fn ok(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, &app.operator, body).await;
    assert!(status.is_success(), "{method} {path}: {status} {answer}");
    answer
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// `create_refunds` (`user_configurable`; a list of `{amount, reason}` with a
/// nullable amount), linked to the assistant.
async fn refunds(app: &TestApp) {
    let item = json!({
        "type": "object",
        "properties": {
            "amount": {"type": ["integer", "null"]},
            "reason": {"type": "string"},
        },
        "required": ["amount", "reason"],
        "additionalProperties": false,
    });
    let body = json!({
        "name": "create_refunds",
        "description": "Refund one or more orders.",
        "approval_tier": "user_configurable",
        "parameters": {
            "type": "object",
            "properties": {"refunds": {"type": "array", "items": item}},
            "required": ["refunds"],
            "additionalProperties": false,
        },
    });
    let (status, answer) = app
        .call(Method::POST, "/v1/tools", &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    ok(
        app,
        Method::PUT,
        &format!("{AGENT}/links/create_refunds"),
        None,
    )
    .await;
}

/// Refunds of at most 100 run at once; over 100 (or of no amount) wait.
const AMOUNTS: &str = r#"
@id("small-refunds")
permit (principal, action == Action::"create_refunds", resource)
when { context.item has amount && context.item.amount <= 100 };

@id("big-refunds")
@requireApproval
@reason("refunds over 100 need a second person")
permit (principal, action == Action::"create_refunds", resource)
unless { context.item has amount && context.item.amount <= 100 };
"#;

async fn save(app: &TestApp, policy: &str) -> Value {
    ok(app, Method::PUT, POLICY, Some(json!({"policy": policy}))).await
}

fn refund(amount: Value) -> Value {
    json!({"refunds": [{"amount": 5, "reason": "late"}, {"amount": amount, "reason": "broken"}]})
}

/// A dry run of `tool` with `arguments` for `user`.
async fn dry(app: &TestApp, tool: &str, arguments: Value, user: &str) -> Value {
    let body = json!({"tool": tool, "arguments": arguments, "conversation_id": "c1",
                      "user_id": user, "dry_run": true});
    let (status, answer) = app.call(Method::POST, CALLS, &app.agent, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["status"], "dry_run", "{answer}");
    answer
}

async fn call(app: &TestApp, tool: &str, arguments: Value, user: &str) -> (StatusCode, Value) {
    let body =
        json!({"tool": tool, "arguments": arguments, "conversation_id": "c1", "user_id": user});
    app.call(Method::POST, CALLS, &app.agent, Some(body)).await
}

async fn proposal_count(app: &TestApp) -> u64 {
    proposals::Entity::find()
        .count(&app.db.conn)
        .await
        .expect("count")
}

db_test! {
    async fn amount_100_is_auto_and_101_needs_approval_and_a_missing_amount_never_runs(db) {
        let app = TestApp::new(db).await;
        refunds(&app).await;
        save(&app, AMOUNTS).await;
        let at_100 = dry(&app, "create_refunds", refund(json!(100)), "u1").await;
        assert_eq!(at_100["decision"], "auto", "{at_100}");
        assert_eq!(at_100["decided_by"]["policy"], "small-refunds");
        let at_101 = dry(&app, "create_refunds", refund(json!(101)), "u1").await;
        assert_eq!(at_101["decision"], "approval", "{at_101}");
        assert_eq!(at_101["decided_by"]["policy"], "big-refunds");
        assert_eq!(at_101["decided_by"]["reason"], "refunds over 100 need a second person");
        let missing = dry(&app, "create_refunds", refund(Value::Null), "u1").await;
        assert_eq!(missing["decision"], "approval", "{missing}");
        // Malformed arguments are refused before any policy: never auto.
        let (status, refused) = call(&app, "create_refunds", refund(json!("lots")), "u1").await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_arguments"), "{refused}");
        let (status, refused) = call(&app, "create_refunds", refund(json!(100.5)), "u1").await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        // A real call over 100 is proposed, and says what decided it.
        let (status, proposed) = call(&app, "create_refunds", refund(json!(101)), "u1").await;
        assert_eq!(status, StatusCode::OK, "{proposed}");
        assert_eq!(proposed["status"], "proposed_for_approval", "{proposed}");
        let revision = proposed["decided_by"]["revision"].as_i64().expect("a revision");
        assert_eq!(proposed["decided_by"]["policy"], "big-refunds");
        let id = &proposed["proposal_id"];
        let (_, stored) = app.call(Method::GET, &format!("/v1/proposals/{id}"), &app.operator, None).await;
        assert_eq!(stored["decided_by"], json!({"revision": revision, "policy": "big-refunds", "reason": "refunds over 100 need a second person"}));
        let (_, labels) = app.call(Method::GET, &format!("{AGENT}/labels"), &app.operator, None).await;
        assert!(labels.to_string().contains(&format!("\"revision\":{revision}")), "the revision production serves: {labels}");
    }
}

db_test! {
    async fn a_dry_run_writes_nothing(db) {
        let app = TestApp::new(db).await;
        refunds(&app).await;
        save(&app, AMOUNTS).await;
        let before = proposal_count(&app).await;
        dry(&app, "create_refunds", refund(json!(101)), "u1").await;
        dry(&app, "update_instructions", json!({"instructions": "be brief"}), "u1").await;
        assert_eq!(proposal_count(&app).await, before);
        let (_, instructions) = app.call(Method::GET, "/v1/agents/assistant/users/u1/instructions", &app.operator, None).await;
        assert_ne!(instructions["instructions"], "be brief", "{instructions}");
    }
}

db_test! {
    async fn a_groups_member_runs_at_once_where_others_wait(db) {
        let app = TestApp::new(db).await;
        let admin = app.key("admin", Role::Admin).await;
        let (status, group) = app.call(Method::POST, "/v1/groups", &admin, Some(json!({"name": "ops", "members": ["u-ops"]}))).await;
        assert_eq!(status, StatusCode::OK, "{group}");
        save(&app, r#"@id("ops-instructions")
            permit (principal in Group::"ops", action == Action::"update_instructions", resource);"#).await;
        let args = json!({"instructions": "Answer in French."});
        let (_, ran) = call(&app, "update_instructions", args.clone(), "u-ops").await;
        assert_eq!(ran["status"], "succeeded", "{ran}");
        assert_eq!(ran["decided_by"]["policy"], "ops-instructions");
        let (_, waits) = call(&app, "update_instructions", args.clone(), "u-other").await;
        assert_eq!(waits["status"], "proposed_for_approval", "{waits}");
        assert!(waits.get("decided_by").is_none(), "the tier decided: {waits}");
        // Out of the group, the next call waits too.
        let (status, _) = app.call(Method::DELETE, "/v1/groups/ops/members/u-ops", &admin, None).await;
        assert_eq!(status, StatusCode::OK);
        let (_, now) = call(&app, "update_instructions", args, "u-ops").await;
        assert_eq!(now["status"], "proposed_for_approval", "{now}");
    }
}

db_test! {
    async fn a_forbidden_tool_is_absent_from_that_users_lists_and_refused_as_unknown(db) {
        let app = TestApp::new(db).await;
        save(&app, r#"@id("no-gmail-for-guests") @reason("guests do not read mail")
            forbid (principal == User::"u-guest", action == Action::"get_gmail", resource);"#).await;
        let tools = |user: &'static str| {
            let app = &app;
            async move {
                let (status, body) = app.call(Method::GET, &format!("{AGENT}/tools?format=mcp&user_id={user}"), &app.agent, None).await;
                assert_eq!(status, StatusCode::OK, "{body}");
                body["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().unwrap_or("").to_owned()).collect::<Vec<_>>()
            }
        };
        assert!(!tools("u-guest").await.contains(&"get_gmail".to_owned()));
        assert!(tools("u-other").await.contains(&"get_gmail".to_owned()));
        // The loadout route hides it too.
        let (_, loadout) = app.call(Method::GET, &format!("{AGENT}/loadout?channel=web&user_id=u-guest&format=mcp"), &app.agent, None).await;
        assert!(!loadout.to_string().contains("\"get_gmail\""), "{loadout}");
        let (status, hidden) = call(&app, "get_gmail", json!({"id": "m1"}), "u-guest").await;
        let (status2, unknown) = call(&app, "get_nothing", json!({}), "u-guest").await;
        assert_eq!((status, status2), (StatusCode::NOT_FOUND, StatusCode::NOT_FOUND));
        assert_eq!(code(&hidden), code(&unknown));
        assert_eq!(hidden["error"]["message"], json!("agent \"assistant\" has no active tool \"get_gmail\""));
    }
}

db_test! {
    async fn a_policy_on_a_gated_agent_changes_no_production_decision_until_signed_off(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        ok(&app, Method::PATCH, AGENT, Some(json!({"release_mode": "gated"}))).await;
        save(&app, r#"@id("no-instructions") forbid (principal, action == Action::"update_instructions", resource)
            when { context.arguments.instructions like "*" };"#).await;
        let args = json!({"instructions": "Answer in French."});
        let before = dry(&app, "update_instructions", args.clone(), "u1").await;
        assert_eq!(before["decision"], "approval", "production still decides by the tier: {before}");
        let (status, asked) = app.call(Method::PUT, &format!("{AGENT}/labels/production"), &app.operator, Some(json!({"revision": 2, "reason": "stricter"}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
        let still = dry(&app, "update_instructions", args.clone(), "u1").await;
        assert_eq!(still["decision"], "approval", "{still}");
        let (status, approved) = app.call(Method::POST, &format!("/v1/change-requests/{}/approve", asked["id"]), &approver, Some(json!({"reason": "ok"}))).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        let after = dry(&app, "update_instructions", args, "u1").await;
        assert_eq!(after["decision"], "deny", "{after}");
        assert_eq!(after["decided_by"]["policy"], "no-instructions");
        assert_eq!(after["decided_by"]["revision"], 2);
    }
}

db_test! {
    async fn a_rollouts_candidate_policy_applies_to_candidate_users_only(db) {
        let app = TestApp::new(db).await;
        save(&app, r#"@id("no-instructions") forbid (principal, action == Action::"update_instructions", resource)
            when { context.arguments.instructions like "*" };"#).await;
        ok(&app, Method::PUT, &format!("{AGENT}/labels/production"), Some(json!({"revision": 1}))).await;
        let (status, started) = app.call(Method::POST, &format!("{AGENT}/labels/production/rollout"), &app.operator,
            Some(json!({"candidate": 2, "percent": 50.0, "reason": "try the stricter rules"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{started}");
        let args = json!({"instructions": "x"});
        let prompts = app.state.prompts();
        let (mut candidates, mut bases) = (0, 0);
        for i in 0..40 {
            let user = format!("user-{i:03}");
            let side = loadout::fetch::pick(&prompts, "assistant", "production", Some(&user)).await.expect("pick").served.number;
            let decided = dry(&app, "update_instructions", args.clone(), &user).await;
            match side {
                2 => { candidates += 1; assert_eq!(decided["decision"], "deny", "{user}: {decided}"); }
                _ => { bases += 1; assert_eq!(decided["decision"], "approval", "{user}: {decided}"); }
            }
        }
        assert!(candidates > 0 && bases > 0, "{candidates} on the candidate, {bases} on the base");
    }
}

db_test! {
    async fn a_tightened_policy_declines_an_approved_proposal_at_execution(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        let (_, proposed) = call(&app, "update_instructions", json!({"instructions": "Answer in French."}), "u1").await;
        assert_eq!(proposed["status"], "proposed_for_approval", "{proposed}");
        save(&app, r#"@id("frozen") @reason("instructions are frozen this week")
            forbid (principal, action == Action::"update_instructions", resource) when { context.arguments.instructions like "*" };"#).await;
        let id = &proposed["proposal_id"];
        let (status, refused) = app.call(Method::POST, &format!("/v1/proposals/{id}/approve"), &approver, None).await;
        assert_eq!((status, code(&refused)), (StatusCode::CONFLICT, "declined_by_policy"), "{refused}");
        assert_eq!(refused["error"]["details"]["state"], "declined");
        let (_, stored) = app.call(Method::GET, &format!("/v1/proposals/{id}"), &approver, None).await;
        assert_eq!(stored["state"], "declined");
        assert!(stored["result"]["error"].as_str().unwrap_or("").contains("instructions are frozen"), "{stored}");
        let (_, instructions) = app.call(Method::GET, "/v1/agents/assistant/users/u1/instructions", &app.operator, None).await;
        assert_ne!(instructions["instructions"], "Answer in French.", "it never ran");
    }
}

db_test! {
    async fn a_policy_that_does_not_compile_is_refused_with_its_line_and_column(db) {
        let app = TestApp::new(db).await;
        let text = "permit (principal, action == Action::\"create_tasks\", resource)\nwhen { context.item.amount > 100 };";
        let (status, refused) = app.call(Method::PUT, POLICY, &app.operator, Some(json!({"policy": text}))).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_policy"), "{refused}");
        let first = &refused["error"]["details"]["problems"][0];
        assert_eq!(first["line"], 2, "{refused}");
        assert!(first["message"].as_str().unwrap_or("").contains("amount"), "{refused}");
        // A failing test blocks the save too.
        let tests = json!([{"tool": "update_instructions", "arguments": {"instructions": "x"}, "user": "u1", "expect": "auto"}]);
        let (status, refused) = app.call(Method::PUT, POLICY, &app.operator, Some(json!({"policy": "forbid (principal, action, resource);", "tests": tests}))).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_test_failed"), "{refused}");
        let (_, kept) = app.call(Method::GET, POLICY, &app.operator, None).await;
        assert_eq!(kept["policy"], Value::Null, "nothing saved: {kept}");
    }
}

db_test! {
    async fn the_check_fails_on_an_unknown_argument_and_a_failing_test_and_the_guard_refuses_a_breaking_schema(db) {
        use sea_orm::{ActiveModelTrait, ActiveValue::Set, ColumnTrait, QueryFilter};
        let app = TestApp::new(db).await;
        refunds(&app).await;
        save(&app, r#"@id("no-fraud") forbid (principal, action == Action::"create_refunds", resource)
            when { context.item.reason == "fraud" };"#).await;
        // A schema change that removes `reason`, which the policy reads, breaks it: refused.
        let narrowed = json!({"parameters": {"type": "object", "properties": {"refunds": {"type": "array", "items": {
            "type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"], "additionalProperties": false}}},
            "required": ["refunds"], "additionalProperties": false}});
        let (status, refused) = app.call(Method::PATCH, "/v1/tools/create_refunds", &app.operator, Some(narrowed)).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "registry_check_failed"), "{refused}");
        assert!(refused.to_string().contains("policy_invalid"), "{refused}");
        // Written behind the API's back, the check reports both rules.
        let agent = entity::agent_configurations::Entity::find()
            .filter(entity::agent_configurations::Column::Name.eq("assistant"))
            .one(&app.db.conn).await.expect("read").expect("the assistant");
        let mut bad: entity::agent_configurations::ActiveModel = agent.into();
        bad.policy = Set(Some("permit (principal, action == Action::\"create_refunds\", resource) when { context.item.total > 1 };".to_owned()));
        bad.update(&app.db.conn).await.expect("write");
        let (_, report) = app.call(Method::GET, "/v1/registry/check", &app.operator, None).await;
        assert!(report.to_string().contains("policy_invalid"), "{report}");
        let agent = entity::agent_configurations::Entity::find()
            .filter(entity::agent_configurations::Column::Name.eq("assistant"))
            .one(&app.db.conn).await.expect("read").expect("the assistant");
        let mut failing: entity::agent_configurations::ActiveModel = agent.into();
        failing.policy = Set(Some(AMOUNTS.to_owned()));
        failing.policy_tests = Set(Some(json!([{"name": "big", "tool": "create_refunds", "arguments": refund(json!(101)), "expect": "auto"}]).to_string()));
        failing.update(&app.db.conn).await.expect("write");
        let (_, report) = app.call(Method::GET, "/v1/registry/check", &app.operator, None).await;
        let text = report.to_string();
        assert!(text.contains("policy_test_failed") && text.contains("big: expected auto, got approval by big-refunds"), "{report}");
    }
}

db_test! {
    async fn groups_are_per_tenant_and_soft_deleted(db) {
        let app = TestApp::new(db).await;
        let admin = app.key("admin", Role::Admin).await;
        let other = loadout::auth::keys::create_for_tenant(&app.db.conn, "other-admin", Role::Admin, Some("acme"), chrono::Utc::now()).await.expect("key");
        let (status, _) = app.call(Method::POST, "/v1/groups", &admin, Some(json!({"name": "ops", "members": ["a", "b", "a"]}))).await;
        assert_eq!(status, StatusCode::OK);
        let (status, again) = app.call(Method::POST, "/v1/groups", &admin, Some(json!({"name": "ops"}))).await;
        assert_eq!(status, StatusCode::CONFLICT, "{again}");
        let (_, seen) = app.call(Method::GET, "/v1/groups/ops", &admin, None).await;
        assert_eq!(seen["members"], json!(["a", "b"]));
        let (status, _) = app.call(Method::GET, "/v1/groups/ops", &other, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "another tenant's group is not found");
        let (_, listed) = app.call(Method::GET, "/v1/groups", &other, None).await;
        assert_eq!(listed["groups"], json!([]));
        let (status, _) = app.call(Method::DELETE, "/v1/groups/ops", &admin, None).await;
        assert_eq!(status, StatusCode::OK);
        let (status, _) = app.call(Method::GET, "/v1/groups/ops", &admin, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let rows = entity::user_groups::Entity::find().count(&app.db.conn).await.expect("count");
        assert_eq!(rows, 1, "soft-deleted, not removed");
        let (status, _) = app.call(Method::POST, "/v1/groups", &admin, Some(json!({"name": "ops"}))).await;
        assert_eq!(status, StatusCode::OK, "the name is free again");
    }
}
