//! Policies that hold (issue 50): no policy text crashes the server, the bounds
//! are refused with their limit, a call's decision is bounded, `action in
//! Action::"call"` means what Cedar says, and a tool switched off never makes
//! another tool's call wait.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::Role;
use serde_json::{Value, json};

const AGENT: &str = "/v1/agents/assistant";
const POLICY: &str = "/v1/agents/assistant/policy";
const VALIDATE: &str = "/v1/agents/assistant/policy/validate";
const CALLS: &str = "/v1/agents/assistant/tool-calls";

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

fn when(expr: &str) -> String {
    format!("permit (principal, action, resource) when {{ {expr} }};")
}

async fn validate(app: &TestApp, policy: &str, tests: Value) -> (StatusCode, Value) {
    let body = json!({"policy": policy, "tests": tests});
    app.call(Method::POST, VALIDATE, &app.operator, Some(body))
        .await
}

async fn save(app: &TestApp, policy: &str) {
    let (status, answer) = app
        .call(
            Method::PUT,
            POLICY,
            &app.operator,
            Some(json!({"policy": policy})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

async fn dry(app: &TestApp, tool: &str, arguments: Value, user: &str) -> (StatusCode, Value) {
    let body = json!({"tool": tool, "arguments": arguments, "conversation_id": "c1",
                      "user_id": user, "dry_run": true});
    app.call(Method::POST, CALLS, &app.agent, Some(body)).await
}

/// `create_refunds`: a list of `{amount, reason}`, linked to the assistant.
async fn refunds(app: &TestApp) {
    let item = json!({"type": "object", "additionalProperties": false, "required": ["amount", "reason"],
        "properties": {"amount": {"type": "integer"}, "reason": {"type": "string"}}});
    let body = json!({"name": "create_refunds", "description": "Refund orders.",
        "approval_tier": "user_configurable",
        "parameters": {"type": "object", "additionalProperties": false, "required": ["refunds"],
            "properties": {"refunds": {"type": "array", "items": item}}}});
    let (status, answer) = app
        .call(Method::POST, "/v1/tools", &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    let (status, answer) = app
        .call(
            Method::PUT,
            &format!("{AGENT}/links/create_refunds"),
            &app.operator,
            None,
        )
        .await;
    assert!(status.is_success(), "{answer}");
}

fn items(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"amount": i % 300, "reason": "late"}))
        .collect();
    json!({ "refunds": items })
}

/// `n` rules on `create_refunds` that each read the item.
fn item_rules(n: usize) -> String {
    (0..n)
        .map(|i| format!("@id(\"big-{i}\") @requireApproval permit (principal, action == Action::\"create_refunds\", resource) when {{ context.item.amount > {} }};\n", 1000 + i))
        .collect()
}

db_test! {
    async fn no_policy_text_crashes_the_server_and_past_the_bounds_each_is_refused_naming_its_limit(db) {
        let app = TestApp::new(db).await;
        // The 351-byte text that aborted the process: it compiles now.
        let parens = when(&format!("{}true{}", "(".repeat(150), ")".repeat(150)));
        let (status, checked) = validate(&app, &parens, json!([])).await;
        assert_eq!(status, StatusCode::OK, "{checked}");
        assert_eq!(checked["problems"], json!([]), "{checked}");
        // Each construct that overflowed, far past the bound: 422 before parsing.
        let deep = [
            when(&format!("{}true", "!".repeat(3000))),
            when(&format!("{}1 == 1", "-".repeat(3000))),
            when(&format!("1{} == 1", " + 1".repeat(2000))),
            when(&format!("{}true{}", "if true then ".repeat(2000), " else true".repeat(2000))),
            when(&format!("{}1{} == [1]", "[".repeat(2000), "]".repeat(2000))),
            when(&format!("{}1{} == {{a: 1}}", "{a: ".repeat(2000), "}".repeat(2000))),
            when(&format!("context{} == 1", ".a".repeat(2000))),
        ];
        for text in &deep {
            let (status, refused) = validate(&app, text, json!([])).await;
            assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_too_deep"), "{refused}");
            assert!(refused["error"]["message"].as_str().unwrap_or("").contains(&loadout::policies::MAX_NESTING.to_string()), "{refused}");
            let (status, refused) = app.call(Method::PUT, POLICY, &app.operator, Some(json!({"policy": text}))).await;
            assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_too_deep"), "{refused}");
        }
        // Within the estimate but deeper than a parsed expression may be: refused once parsed.
        let n = loadout::policies::MAX_EXPRESSION_DEPTH + 20;
        let ifs = when(&format!("{}true{}", "if true then ".repeat(n), " else true".repeat(n)));
        let (status, refused) = validate(&app, &ifs, json!([])).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_too_deep"), "{refused}");
        // Too many policies, too many bytes.
        let many = "permit (principal, action, resource);\n".repeat(loadout::policies::MAX_RULES + 1);
        let (status, refused) = validate(&app, &many, json!([])).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_too_large"), "{refused}");
        let big = format!("// {}\n{}", "x".repeat(loadout::policies::MAX_POLICY_BYTES), when("true"));
        let (status, refused) = validate(&app, &big, json!([])).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_too_large"), "{refused}");
        // Nothing was saved, and the server still answers.
        let (_, kept) = app.call(Method::GET, POLICY, &app.operator, None).await;
        assert_eq!(kept["policy"], Value::Null, "{kept}");
        let (status, _) = app.call(Method::GET, &format!("{AGENT}/prompt?channel=web"), &app.agent, None).await;
        assert_eq!(status, StatusCode::OK);
    }
}

db_test! {
    async fn tests_and_calls_past_their_bound_of_work_are_refused_and_within_it_decided(db) {
        let app = TestApp::new(db).await;
        refunds(&app).await;
        let rules = item_rules(201);
        // 201 rules read each of 1,000 items: 201,000 evaluations, past a call's bound.
        let tests: Vec<Value> = (0..5)
            .map(|_| json!({"tool": "create_refunds", "arguments": items(1000), "expect": "auto"}))
            .collect();
        let (status, refused) = validate(&app, &rules, json!(tests)).await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_too_large"), "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap_or("").contains("1000000"), "{refused}");
        save(&app, &rules).await;
        let (status, refused) = dry(&app, "create_refunds", items(1000), "u1").await;
        assert_eq!((status, code(&refused)), (StatusCode::UNPROCESSABLE_ENTITY, "policy_work_exceeded"), "{refused}");
        // 100 items: decided item by item, off the async workers (20,100 evaluations).
        let (status, small) = dry(&app, "create_refunds", items(100), "u1").await;
        assert_eq!(status, StatusCode::OK, "{small}");
        assert_eq!(small["decision"], "approval", "{small}");
        let (status, fine) = dry(&app, "create_refunds", json!({"refunds": [{"amount": 5, "reason": "x"}]}), "u1").await;
        assert_eq!(status, StatusCode::OK, "{fine}");
        assert_eq!(fine["decision"], "approval", "the tier decides a user_configurable tool: {fine}");
        assert!(fine.get("decided_by").is_none(), "{fine}");
    }
}

db_test! {
    async fn action_in_the_call_group_applies_to_every_tool_as_cedar_says(db) {
        let app = TestApp::new(db).await;
        let admin = app.key("admin", Role::Admin).await;
        for (name, member) in [("guests", "u-guest"), ("ops", "u-ops")] {
            let (status, answer) = app.call(Method::POST, "/v1/groups", &admin, Some(json!({"name": name, "members": [member]}))).await;
            assert_eq!(status, StatusCode::OK, "{answer}");
        }
        save(&app, r#"@id("no-guests") forbid (principal in Group::"guests", action in Action::"call", resource);
            @id("ops-all") @skipApproval permit (principal in Group::"ops", action in Action::"call", resource);"#).await;
        // A guest's auto tool is hidden; another user's runs by its tier.
        let (status, hidden) = dry(&app, "get_gmail", json!({"message_id": "m1"}), "u-guest").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{hidden}");
        let (status, shown) = dry(&app, "get_gmail", json!({"message_id": "m1"}), "u-other").await;
        assert_eq!((status, shown["decision"].as_str()), (StatusCode::OK, Some("auto")), "{shown}");
        // `@skipApproval … action in Action::"call"` relaxes a requires_approval tool.
        let (_, ops) = dry(&app, "delete_tasks", json!({"ids": ["t1"]}), "u-ops").await;
        assert_eq!(ops["decision"], "auto", "{ops}");
        assert_eq!(ops["decided_by"]["policy"], "ops-all", "{ops}");
        let (_, other) = dry(&app, "delete_tasks", json!({"ids": ["t1"]}), "u-other").await;
        assert_eq!(other["decision"], "approval", "{other}");
    }
}

db_test! {
    async fn a_tool_switched_off_never_makes_another_tools_call_wait(db) {
        let app = TestApp::new(db).await;
        refunds(&app).await;
        let policy = r#"@id("ops-deletes") @skipApproval permit (principal == User::"u-ops", action == Action::"delete_tasks", resource);
            @id("no-refunds") forbid (principal == User::"u-guest", action == Action::"create_refunds", resource);"#;
        save(&app, policy).await;
        let (status, off) = app.call(Method::PATCH, "/v1/tools/create_refunds", &app.operator, Some(json!({"is_active": false}))).await;
        assert_eq!(status, StatusCode::OK, "{off}");
        let (_, decided) = dry(&app, "delete_tasks", json!({"ids": ["t1"]}), "u-ops").await;
        assert_eq!(decided["decision"], "auto", "{decided}");
        assert_eq!(decided["decided_by"]["policy"], "ops-deletes", "{decided}");
        // The same policy saves again while the tool it names is off, and still decides.
        save(&app, policy).await;
        let (_, again) = dry(&app, "delete_tasks", json!({"ids": ["t1"]}), "u-ops").await;
        assert_eq!(again["decision"], "auto", "{again}");
        // Switched on and unlinked: the guard refuses an unlink a policy names
        // (docs/policies.md), and if it ever let one through, the others still decide.
        let (status, _) = app.call(Method::PATCH, "/v1/tools/create_refunds", &app.operator, Some(json!({"is_active": true}))).await;
        assert_eq!(status, StatusCode::OK);
        let (status, unlink) = app.call(Method::DELETE, &format!("{AGENT}/links/create_refunds"), &app.operator, None).await;
        assert!(status.is_success() || code(&unlink) == "registry_check_failed", "{unlink}");
        let (_, unlinked) = dry(&app, "delete_tasks", json!({"ids": ["t1"]}), "u-ops").await;
        assert_eq!(unlinked["decision"], "auto", "{unlinked}");
    }
}

/// A dry run by the agent key `key` for `user`.
async fn dry_as(app: &TestApp, key: &str, tool: &str, arguments: Value, user: &str) -> Value {
    let body = json!({"tool": tool, "arguments": arguments, "conversation_id": "c1",
                      "user_id": user, "dry_run": true});
    let (status, answer) = app.call(Method::POST, CALLS, key, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

/// Asks for `production` to serve `revision` and has the approver sign it off.
async fn promote(app: &TestApp, approver: &str, revision: i64) {
    let (status, asked) = app
        .call(
            Method::PUT,
            &format!("{AGENT}/labels/production"),
            &app.operator,
            Some(json!({"revision": revision, "reason": "promote"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
    let (status, approved) = app
        .call(
            Method::POST,
            &format!("/v1/change-requests/{}/approve", asked["id"]),
            approver,
            Some(json!({"reason": "ok"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{approved}");
}

async fn latest(app: &TestApp) -> i64 {
    let (_, revisions) = app
        .call(
            Method::GET,
            &format!("{AGENT}/revisions"),
            &app.operator,
            None,
        )
        .await;
    revisions["revisions"]
        .as_array()
        .and_then(|r| r.iter().filter_map(|r| r["number"].as_i64()).max())
        .expect("revisions")
}

db_test! {
    async fn no_admin_alone_widens_a_signed_off_policy_through_a_group_in_any_tenant(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        let admin = app.key("admin", Role::Admin).await;
        let now = chrono::Utc::now();
        let tb_admin = loadout::auth::keys::create_for_tenant(&app.db.conn, "tb-admin", Role::Admin, Some("tb"), now).await.expect("key");
        let tb_agent = loadout::auth::keys::create_for_tenant(&app.db.conn, "tb-agent", Role::Agent, Some("tb"), now).await.expect("key");
        let (status, made) = app.call(Method::POST, "/v1/groups", &admin, Some(json!({"name": "ops", "members": ["alice"]}))).await;
        assert_eq!(status, StatusCode::OK, "{made}");
        let (status, _) = app.call(Method::PATCH, AGENT, &app.operator, Some(json!({"release_mode": "gated"}))).await;
        assert_eq!(status, StatusCode::OK);
        save(&app, r#"@id("ops-deletes") @skipApproval permit (principal in Group::"ops", action == Action::"delete_tasks", resource);"#).await;
        let signed = latest(&app).await;
        promote(&app, &approver, signed).await;
        let delete = json!({"ids": ["t1"]});
        let alice = dry_as(&app, &app.agent, "delete_tasks", delete.clone(), "alice").await;
        assert_eq!(alice["decision"], "auto", "signed off for alice: {alice}");
        // The default tenant's admin adds mallory to ops, alone: her delete still waits.
        let (status, added) = app.call(Method::PUT, "/v1/groups/ops/members/mallory", &admin, None).await;
        assert_eq!(status, StatusCode::OK, "{added}");
        let mallory = dry_as(&app, &app.agent, "delete_tasks", delete.clone(), "mallory").await;
        assert_eq!(mallory["decision"], "approval", "{mallory}");
        // Tenant tb's admin makes its own ops with mallory: nothing for tb's calls either.
        let (status, made) = app.call(Method::POST, "/v1/groups", &tb_admin, Some(json!({"name": "ops", "members": ["mallory"]}))).await;
        assert_eq!(status, StatusCode::OK, "{made}");
        let in_tb = dry_as(&app, &tb_agent, "delete_tasks", delete.clone(), "mallory").await;
        assert_eq!(in_tb["decision"], "approval", "{in_tb}");
        // The group changes wait in the latest revision, shown to whoever signs it off.
        let number = latest(&app).await;
        let (_, diff) = app.call(Method::GET, &format!("{AGENT}/revisions/{signed}/diff/{number}"), &app.operator, None).await;
        let changed = diff.to_string();
        assert!(changed.contains("default/ops") && changed.contains("tb/ops") && changed.contains("mallory"), "{diff}");
        // A second person signs it off: then, and only then, both calls run.
        promote(&app, &approver, number).await;
        let mallory = dry_as(&app, &app.agent, "delete_tasks", delete.clone(), "mallory").await;
        assert_eq!(mallory["decision"], "auto", "{mallory}");
        let in_tb = dry_as(&app, &tb_agent, "delete_tasks", delete, "mallory").await;
        assert_eq!(in_tb["decision"], "auto", "{in_tb}");
    }
}

db_test! {
    async fn a_member_condition_compares_identities_so_a_key_named_alike_elsewhere_grants_nothing(db) {
        let app = TestApp::new(db).await;
        let now = chrono::Utc::now();
        let bot = loadout::auth::keys::create_for_tenant(&app.db.conn, "bot", Role::Agent, None, now).await.expect("key");
        let tb_bot = loadout::auth::keys::create_for_tenant(&app.db.conn, "bot", Role::Agent, Some("tb"), now).await.expect("key");
        save(&app, r#"@id("bot-deletes") @skipApproval permit (principal, action == Action::"delete_tasks", resource) when { context.member == "bot" };
            @id("tb-bot-waits") @requireApproval permit (principal, action == Action::"delete_tasks", resource) when { context.member == "tb/bot" };"#).await;
        let delete = json!({"ids": ["t1"]});
        let ours = dry_as(&app, &bot, "delete_tasks", delete.clone(), "u1").await;
        assert_eq!((ours["decision"].as_str(), ours["decided_by"]["policy"].as_str()), (Some("auto"), Some("bot-deletes")), "{ours}");
        let theirs = dry_as(&app, &tb_bot, "delete_tasks", delete, "u1").await;
        assert_eq!((theirs["decision"].as_str(), theirs["decided_by"]["policy"].as_str()), (Some("approval"), Some("tb-bot-waits")), "{theirs}");
    }
}
