//! Promotion with sign-off, rollback and history (issue 25, items 3 to 5): in
//! `gated` mode a save moves `latest` only, a protected label moves by a change
//! request someone other than its author approves, a rollback is immediate, and
//! every move says who asked, who approved and why.

use std::collections::BTreeMap;

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, Role};
use serde_json::{Value, json};

const AGENT: &str = "/v1/agents/assistant";
const PRODUCTION: &str = "/v1/agents/assistant/labels/production";

async fn ok(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, &app.operator, body).await;
    assert_eq!(status, StatusCode::OK, "{method} {path}: {answer}");
    answer
}

/// Each label of the assistant with its revision number.
async fn labels(app: &TestApp) -> BTreeMap<String, i64> {
    let body = ok(app, Method::GET, &format!("{AGENT}/labels"), None).await;
    body["labels"]
        .as_array()
        .expect("labels")
        .iter()
        .map(|l| {
            let name = l["name"].as_str().expect("name").to_owned();
            (name, l["revision"].as_i64().expect("number"))
        })
        .collect()
}

async fn production(app: &TestApp) -> i64 {
    labels(app).await["production"]
}

/// The label's moves, newest first.
async fn history(app: &TestApp, label: &str) -> Vec<Value> {
    let path = format!("{AGENT}/labels/{label}/history");
    let body = ok(app, Method::GET, &path, None).await;
    body["moves"].as_array().expect("moves").clone()
}

async fn save_soul(app: &TestApp, soul: &str) {
    ok(app, Method::PATCH, AGENT, Some(json!({"soul": soul}))).await;
}

/// The assistant in `gated` mode with revision 2 saved: `latest` on 2,
/// `production` on 1.
async fn gated(app: &TestApp) {
    ok(
        app,
        Method::PATCH,
        AGENT,
        Some(json!({"release_mode": "gated"})),
    )
    .await;
    save_soul(app, "The next soul.").await;
}

/// Asks to move `production` to `revision`; the pending change request.
async fn request(app: &TestApp, revision: i64) -> Value {
    let body = json!({"revision": revision, "reason": "ready"});
    let (status, answer) = app
        .call(Method::PUT, PRODUCTION, &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    assert_eq!(answer["state"], "pending", "{answer}");
    answer
}

async fn decide(app: &TestApp, id: &Value, how: &str, key: &str) -> (StatusCode, Value) {
    let path = format!("/v1/change-requests/{id}/{how}");
    app.call(
        Method::POST,
        &path,
        key,
        Some(json!({"reason": "looked at it"})),
    )
    .await
}

db_test! {
    async fn in_gated_mode_a_save_moves_latest_and_not_production(db) {
        let app = TestApp::new(db).await;
        let agent = ok(&app, Method::PATCH, AGENT, Some(json!({"release_mode": "gated"}))).await;
        assert_eq!(agent["release_mode"], "gated");
        save_soul(&app, "The next soul.").await;
        assert_eq!(labels(&app).await, BTreeMap::from([("latest".into(), 2), ("production".into(), 1)]));
    }
}

db_test! {
    async fn a_promotion_waits_until_an_approver_other_than_the_author_approves_it(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        gated(&app).await;
        let asked = request(&app, 2).await;
        assert_eq!((asked["from_revision"].as_i64(), asked["to_revision"].as_i64()), (Some(1), Some(2)));
        assert_eq!(production(&app).await, 1, "nothing moves before the sign-off");
        let (status, listed) = app.call(Method::GET, "/v1/change-requests?state=pending", &approver, None).await;
        assert_eq!(status, StatusCode::OK, "{listed}");
        assert_eq!(listed["change_requests"][0]["id"], asked["id"], "the approver sees it waiting");

        let (status, approved) = decide(&app, &asked["id"], "approve", &approver).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        assert_eq!(approved["state"], "approved");
        assert_eq!(approved["decided_by"], "approver");
        assert_eq!(approved["events"].as_array().map(Vec::len), Some(2), "{approved}");
        assert_eq!(production(&app).await, 2);

        let moved = &history(&app, "production").await[0];
        assert_eq!(moved["kind"], "promote");
        assert_eq!((moved["from_revision"].as_i64(), moved["to_revision"].as_i64()), (Some(1), Some(2)));
        assert_eq!(moved["actor"], "operator", "who asked");
        assert_eq!(moved["approver"], "approver", "who signed off");
        assert_eq!(moved["reason"], "ready");
        assert_eq!(moved["change_request"], asked["id"]);
    }
}

db_test! {
    async fn another_operator_may_sign_off_a_promotion(db) {
        let app = TestApp::new(db).await;
        let colleague = app.key("colleague", Role::Operator).await;
        gated(&app).await;
        let asked = request(&app, 2).await;
        let (status, approved) = decide(&app, &asked["id"], "approve", &colleague).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        assert_eq!(production(&app).await, 2);
    }
}

db_test! {
    async fn the_author_cannot_approve_its_own_promotion(db) {
        let app = TestApp::new(db).await;
        gated(&app).await;
        let asked = request(&app, 2).await;
        let (status, refused) = decide(&app, &asked["id"], "approve", &app.operator).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("self_approval")), "{refused}");
        assert_eq!(production(&app).await, 1);
        let (_, still) = app.call(Method::GET, &format!("/v1/change-requests/{}", asked["id"]), &app.operator, None).await;
        assert_eq!(still["state"], "pending", "{still}");
    }
}

db_test! {
    async fn a_decline_leaves_production_where_it_was(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        gated(&app).await;
        let asked = request(&app, 2).await;
        let (status, declined) = decide(&app, &asked["id"], "decline", &approver).await;
        assert_eq!(status, StatusCode::OK, "{declined}");
        assert_eq!((declined["state"].as_str(), declined["decision_reason"].as_str()), (Some("declined"), Some("looked at it")));
        assert_eq!(production(&app).await, 1);
        assert_eq!(history(&app, "production").await.len(), 1, "no move recorded");
        let (status, again) = decide(&app, &asked["id"], "approve", &approver).await;
        assert_eq!((status, again["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("conflict")), "{again}");
        assert_eq!(production(&app).await, 1);
    }
}

/// Sends each `(path, key, body)` at once; each status with its error code, sorted.
async fn all_at_once(
    app: &TestApp,
    method: Method,
    requests: Vec<(String, String, Value)>,
) -> Vec<(u16, String)> {
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|(path, key, body)| {
            let (state, method) = (app.state.clone(), method.clone());
            tokio::spawn(async move {
                crate::support::api::call(&state, method, &path, &key, Some(body)).await
            })
        })
        .collect();
    let mut out = Vec::new();
    for task in tasks {
        let (status, body) = task.await.expect("join");
        out.push((
            status.as_u16(),
            body["error"]["code"].as_str().unwrap_or("").to_owned(),
        ));
    }
    out.sort();
    out
}

db_test! {
    async fn two_racing_promotions_of_the_same_label_end_with_one_winner_and_one_409(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        let colleague = app.key("colleague", Role::Operator).await;
        gated(&app).await;
        save_soul(&app, "A third soul.").await;
        let asks = [2, 3].map(|n| (PRODUCTION.to_owned(), app.operator.clone(), json!({"revision": n})));
        let results = all_at_once(&app, Method::PUT, asks.to_vec()).await;
        assert_eq!(results, [(202, String::new()), (409, "conflict".to_owned())], "one request waits, the other is refused");

        // Two signers approving the one request at once: one moves the label.
        let (_, listed) = app.call(Method::GET, "/v1/change-requests?state=pending", &approver, None).await;
        let id = &listed["change_requests"][0]["id"];
        let path = format!("/v1/change-requests/{id}/approve");
        let signers = [approver, colleague].map(|key| (path.clone(), key, json!({})));
        let results = all_at_once(&app, Method::POST, signers.to_vec()).await;
        assert_eq!(results, [(200, String::new()), (409, "conflict".to_owned())]);
        let promoted: Vec<Value> = history(&app, "production").await.into_iter().filter(|m| m["kind"] == "promote").collect();
        assert_eq!(promoted.len(), 1, "{promoted:?}");
    }
}

db_test! {
    async fn a_rollback_is_immediate_and_in_the_history(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        gated(&app).await;
        let asked = request(&app, 2).await;
        decide(&app, &asked["id"], "approve", &approver).await;
        assert_eq!(production(&app).await, 2);

        let back = ok(&app, Method::POST, &format!("{PRODUCTION}/rollback"), Some(json!({"reason": "answers got worse"}))).await;
        assert_eq!((back["revision"].as_i64(), back["kind"].as_str()), (Some(1), Some("rollback")), "{back}");
        assert_eq!(production(&app).await, 1, "no sign-off needed");
        let moved = &history(&app, "production").await[0];
        assert_eq!((moved["from_revision"].as_i64(), moved["to_revision"].as_i64()), (Some(2), Some(1)));
        assert_eq!((moved["kind"].as_str(), moved["actor"].as_str()), (Some("rollback"), Some("operator")));
        assert_eq!(moved["reason"], "answers got worse");
        assert!(moved["approver"].is_null(), "{moved}");

        // A PUT naming the revision the label held just before is a rollback too.
        let again = ok(&app, Method::PUT, PRODUCTION, Some(json!({"revision": 2}))).await;
        assert_eq!(again["kind"], "rollback", "{again}");
        assert_eq!(production(&app).await, 2);
    }
}

db_test! {
    async fn a_request_whose_label_moved_since_cannot_be_approved(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        gated(&app).await;
        save_soul(&app, "A third soul.").await;
        let first = request(&app, 2).await;
        decide(&app, &first["id"], "approve", &approver).await;
        let second = request(&app, 3).await;
        ok(&app, Method::POST, &format!("{PRODUCTION}/rollback"), Some(json!({}))).await;

        let (status, refused) = decide(&app, &second["id"], "approve", &approver).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("conflict")), "{refused}");
        assert_eq!(production(&app).await, 1);
        let (_, seen) = app.call(Method::GET, &format!("/v1/change-requests/{}", second["id"]), &approver, None).await;
        assert_eq!(seen["state"], "superseded", "{seen}");
    }
}

db_test! {
    async fn a_direct_agents_label_moves_at_once(db) {
        let app = TestApp::new(db).await;
        save_soul(&app, "Two.").await;
        save_soul(&app, "Three.").await;
        assert_eq!(production(&app).await, 3);
        let moved = ok(&app, Method::PUT, PRODUCTION, Some(json!({"revision": 1, "reason": "pin"}))).await;
        assert_eq!((moved["revision"].as_i64(), moved["kind"].as_str()), (Some(1), Some("move")), "{moved}");
        assert_eq!(production(&app).await, 1);
        let (status, _) = app.call(Method::GET, "/v1/change-requests", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK);

        let staging = ok(&app, Method::PUT, &format!("{AGENT}/labels/staging"), Some(json!({"revision": 2}))).await;
        assert_eq!((staging["revision"].as_i64(), staging["protected"].as_bool()), (Some(2), Some(false)));
        assert_eq!(history(&app, "staging").await[0]["kind"], "move");
    }
}

db_test! {
    async fn in_gated_mode_an_unprotected_label_moves_at_once_and_a_protected_one_waits(db) {
        let app = TestApp::new(db).await;
        gated(&app).await;
        let staging = format!("{AGENT}/labels/staging");
        ok(&app, Method::PUT, &staging, Some(json!({"revision": 1}))).await;
        let moved = ok(&app, Method::PUT, &staging, Some(json!({"revision": 2}))).await;
        assert_eq!(moved["kind"], "move", "{moved}");
        ok(&app, Method::PUT, &staging, Some(json!({"revision": 2, "protected": true}))).await;
        let (status, answer) = app.call(Method::PUT, &staging, &app.operator, Some(json!({"revision": 1, "reason": "x"}))).await;
        assert_eq!(status, StatusCode::OK, "back to where it was just before is a rollback: {answer}");
        let (status, answer) = app.call(Method::PUT, &staging, &app.operator, Some(json!({"revision": 2, "protected": false}))).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("label_protected")), "{answer}");
        save_soul(&app, "A third soul.").await;
        let (status, answer) = app.call(Method::PUT, &staging, &app.operator, Some(json!({"revision": 3}))).await;
        assert_eq!((status, answer["state"].as_str()), (StatusCode::ACCEPTED, Some("pending")), "{answer}");
        assert_eq!(labels(&app).await["staging"], 1);
    }
}

db_test! {
    async fn latest_cannot_be_moved_by_hand(db) {
        let app = TestApp::new(db).await;
        let path = format!("{AGENT}/labels/latest");
        let (status, answer) = app.call(Method::PUT, &path, &app.operator, Some(json!({"revision": 1}))).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("label_automatic")), "{answer}");
        let (status, _) = app.call(Method::POST, &format!("{path}/rollback"), &app.operator, Some(json!({}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    }
}

db_test! {
    async fn a_pending_request_expires_and_then_cannot_be_approved(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        gated(&app).await;
        let asked = request(&app, 2).await;
        crate::support::sea_orm::ConnectionTrait::execute_unprepared(&app.db.conn,
            "UPDATE change_requests SET expires_at = created_at").await.expect("age it");
        let (_, pending) = app.call(Method::GET, "/v1/change-requests?state=pending", &approver, None).await;
        assert_eq!(pending["change_requests"].as_array().map(Vec::len), Some(0), "{pending}");
        let (status, refused) = decide(&app, &asked["id"], "approve", &approver).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("expired")), "{refused}");
        assert_eq!(production(&app).await, 1);
        let (_, expired) = app.call(Method::GET, "/v1/change-requests?state=expired", &approver, None).await;
        assert_eq!(expired["change_requests"][0]["state"], "expired", "{expired}");
        request(&app, 2).await;
    }
}

db_test! {
    async fn a_tenant_admin_cannot_move_labels_or_sign_off(db) {
        let app = TestApp::new(db).await;
        let tenant_admin = keys::create_for_tenant(&app.db.conn, "b-admin", Role::Admin, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        let tenant_approver = keys::create_for_tenant(&app.db.conn, "b-approver", Role::Approver, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        gated(&app).await;
        let (status, _) = app.call(Method::PUT, PRODUCTION, &tenant_admin, Some(json!({"revision": 2}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let (status, _) = app.call(Method::POST, &format!("{PRODUCTION}/rollback"), &tenant_admin, Some(json!({}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let asked = request(&app, 2).await;
        for key in [&tenant_admin, &tenant_approver] {
            for how in ["approve", "decline"] {
                let (status, answer) = decide(&app, &asked["id"], how, key).await;
                assert_eq!(status, StatusCode::FORBIDDEN, "{how}: {answer}");
            }
        }
        let (status, seen) = app.call(Method::GET, &format!("/v1/change-requests/{}", asked["id"]), &tenant_admin, None).await;
        assert_eq!((status, seen["state"].as_str()), (StatusCode::OK, Some("pending")), "an admin reads it: {seen}");
        assert_eq!(production(&app).await, 1);
    }
}

db_test! {
    async fn an_api_key_cannot_take_a_gated_agent_back_to_direct_and_the_command_line_can(db) {
        let app = TestApp::new(db).await;
        gated(&app).await;
        let (status, body) = app.call(Method::PATCH, AGENT, &app.operator,
            Some(json!({"release_mode": "direct"}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("release_mode_gated")), "{body}");
        // Still gated: the next save leaves production where it was.
        save_soul(&app, "Saved after the refusal.").await;
        assert_eq!(production(&app).await, 1, "production moved without a sign-off");

        use clap::Parser;
        let cli = loadout::cli::Cli::try_parse_from(["loadout", "release-mode", "assistant", "direct"]).expect("the command line");
        let loadout::cli::Command::ReleaseMode(args) = cli.command else { panic!("not release-mode") };
        let printed = loadout::cli::promote::release_mode(&app.db.conn, args).await.expect("release-mode");
        assert_eq!(printed, "assistant: release mode direct\n");
        let agent = ok(&app, Method::GET, AGENT, None).await;
        assert_eq!(agent["release_mode"], "direct", "{agent}");
        save_soul(&app, "Direct again.").await;
        assert_eq!(production(&app).await, labels(&app).await["latest"], "a direct save moves production");
    }
}
