//! Sign-off that no key can fake (issue 34): every key belongs to a member,
//! sign-off compares members and needs power another signer granted, a signed-off
//! share is a ceiling, and the one who asks cannot approve over the API, the CLI
//! or the console with any key it made or holds.

use crate::support::{TestApp, db_test};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::auth::keys::{self, Role};
use loadout::auth::members;
use serde_json::{Value, json};

const AGENT: &str = "/v1/agents/assistant";
const PRODUCTION: &str = "/v1/agents/assistant/labels/production";

async fn ok(app: &TestApp, method: Method, path: &str, key: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, key, body).await;
    assert!(status.is_success(), "{method} {path}: {status} {answer}");
    answer
}

/// The assistant gated, with revision 2 saved: `production` on 1.
async fn gated(app: &TestApp) {
    let mode = json!({"release_mode": "gated"});
    ok(app, Method::PATCH, AGENT, &app.operator, Some(mode)).await;
    let soul = json!({"soul": "The next soul."});
    ok(app, Method::PATCH, AGENT, &app.operator, Some(soul)).await;
}

async fn production(app: &TestApp) -> i64 {
    let body = ok(
        app,
        Method::GET,
        &format!("{AGENT}/labels"),
        &app.operator,
        None,
    )
    .await;
    let labels = body["labels"].as_array().expect("labels");
    let production = labels.iter().find(|l| l["name"] == "production");
    production
        .and_then(|l| l["revision"].as_i64())
        .expect("production")
}

/// `key` asks to move `production` to revision 2: the pending request's id.
async fn ask(app: &TestApp, key: &str) -> i64 {
    let body = json!({"revision": 2, "reason": "ready"});
    let (status, asked) = app.call(Method::PUT, PRODUCTION, key, Some(body)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
    asked["id"].as_i64().expect("id")
}

async fn approve(app: &TestApp, id: i64, key: &str) -> (StatusCode, Value) {
    let path = format!("/v1/change-requests/{id}/approve");
    app.call(Method::POST, &path, key, Some(json!({}))).await
}

/// A key `maker` makes over the API.
async fn made_by(
    app: &TestApp,
    maker: &str,
    name: &str,
    role: &str,
    tenant: Option<&str>,
) -> String {
    let mut body = json!({"name": name, "role": role});
    if let Some(tenant) = tenant {
        body["tenant"] = json!(tenant);
    }
    let made = ok(app, Method::POST, "/v1/keys", maker, Some(body)).await;
    made["key"].as_str().expect("key").to_owned()
}

db_test! {
    async fn whoever_asks_cannot_approve_with_any_key_it_made_or_holds(db) {
        let app = TestApp::new(db).await;
        gated(&app).await;
        let id = ask(&app, &app.operator).await;
        let second_approver = made_by(&app, &app.operator, "alice-2", "approver", None).await;
        let second_operator = made_by(&app, &app.operator, "alice-3", "operator", None).await;
        let second_admin = made_by(&app, &app.operator, "alice-4", "admin", None).await;
        for (key, what) in [
            (&app.operator, "the key that asked"),
            (&second_approver, "an approver key it made"),
            (&second_operator, "an operator key it made"),
        ] {
            let (status, refused) = approve(&app, id, key).await;
            assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("self_approval")), "{what}: {refused}");
        }
        let (status, refused) = approve(&app, id, &second_admin).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an admin key signs off nothing: {refused}");
        // A key of another tenant made by the same person is a new member, not a signer.
        let elsewhere = made_by(&app, &app.operator, "alice-tb", "approver", Some("tb")).await;
        let (status, refused) = approve(&app, id, &elsewhere).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        assert_eq!(production(&app).await, 1, "nothing moved");

        // The members: one person (operator) holding four keys, one in tb.
        let listed = members::list(&app.db.conn, None, Default::default()).await.expect("members").members;
        let operator = listed.iter().find(|m| m.name == "operator").expect("operator");
        assert_eq!(operator.keys, ["operator", "alice-2", "alice-3", "alice-4"], "{listed:?}");
        assert!(listed.iter().any(|m| m.name == "alice-tb" && m.tenant == "tb" && !m.signer));

        // Another person, granted on the database, signs off; the history names members.
        let bob = app.key("bob", Role::Approver).await;
        let (status, approved) = approve(&app, id, &bob).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        assert_eq!((approved["requested_by"].as_str(), approved["decided_by"].as_str()), (Some("operator"), Some("bob")));
        assert_eq!(production(&app).await, 2);
    }
}

db_test! {
    async fn a_default_tenant_admin_cannot_produce_a_key_that_signs_off(db) {
        let app = TestApp::new(db).await;
        let admin = keys::create(&app.db.conn, "admin", Role::Admin, chrono::Utc::now()).await.expect("admin");
        gated(&app).await;
        let id = ask(&app, &app.operator).await;
        let minted = made_by(&app, &admin, "minted-approver", "approver", None).await;
        let (status, refused) = approve(&app, id, &minted).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("forbidden")), "{refused}");
        let (status, _) = app.call(Method::POST, "/v1/members/admin/signer-grants", &admin, Some(json!({}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an admin cannot even ask for the power");
        assert_eq!(production(&app).await, 1);
    }
}

db_test! {
    async fn sign_off_power_granted_over_the_api_needs_another_signer(db) {
        let app = TestApp::new(db).await;
        let carol = keys::create(&app.db.conn, "carol", Role::Approver, chrono::Utc::now()).await.expect("carol");
        let dave = app.key("dave", Role::Operator).await;
        let path = "/v1/members/carol/signer-grants";
        let (status, grant) = app.call(Method::POST, path, &app.operator, Some(json!({"reason": "carol reviews releases"}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{grant}");
        assert_eq!(grant["state"], "pending");
        let decide = format!("/v1/signer-grants/{}/approve", grant["id"]);
        let (status, refused) = app.call(Method::POST, &decide, &app.operator, None).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("self_approval")), "its requester: {refused}");
        let (status, _) = app.call(Method::POST, &decide, &carol, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "the member it grants");
        let (status, approved) = app.call(Method::POST, &decide, &dave, None).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        assert_eq!((approved["state"].as_str(), approved["decided_by"].as_str()), (Some("approved"), Some("dave")));

        gated(&app).await;
        let id = ask(&app, &app.operator).await;
        let (status, approved) = approve(&app, id, &carol).await;
        assert_eq!(status, StatusCode::OK, "carol signs off now: {approved}");
        let (_, history) = app.call(Method::GET, "/v1/signer-grants?member=carol", &app.operator, None).await;
        let grants = history["grants"].as_array().expect("grants");
        assert_eq!(grants.len(), 1, "{history}");
        assert_eq!((grants[0]["requested_by"].as_str(), grants[0]["decided_by"].as_str()), (Some("operator"), Some("dave")));
    }
}

db_test! {
    async fn members_are_merged_and_granted_on_the_database(db) {
        let app = TestApp::new(db).await;
        let two = keys::create(&app.db.conn, "operator-laptop", Role::Operator, chrono::Utc::now()).await.expect("key");
        gated(&app).await;
        let id = ask(&app, &app.operator).await;
        let (status, _) = approve(&app, id, &two).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "a member of its own, and no signer");
        loadout::auth::signers::merge(&app.db.conn, "default", "operator", "operator-laptop", chrono::Utc::now()).await.expect("merge");
        app.publish().await;
        let (status, refused) = approve(&app, id, &two).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::FORBIDDEN, Some("self_approval")), "merged: the same person now {refused}");
        assert_eq!(production(&app).await, 1);
    }
}

/// The body of a console page, as text.
fn text(body: &Value) -> String {
    body.as_str()
        .map_or_else(|| body.to_string(), str::to_owned)
}

db_test! {
    async fn the_console_compares_members_too(db) {
        let app = TestApp::new(db).await;
        gated(&app).await;
        let id = ask(&app, &app.operator).await;
        let second = made_by(&app, &app.operator, "alice-2", "approver", None).await;
        let sign_in = Request::post("/console/sign-in")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("key={second}")))
            .expect("request");
        let signed = app.request(sign_in).await;
        let cookie = signed.headers.get_all(header::SET_COOKIE).iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("loadout_session=").map(|v| v.split(';').next().unwrap_or("").to_owned()))
            .expect("a session cookie");
        let page = Request::get("/console/proposals")
            .header(header::COOKIE, format!("loadout_session={cookie}"))
            .body(Body::empty())
            .expect("request");
        let page = text(&app.request(page).await.body);
        let csrf = page.split("name=\"csrf\" value=\"").nth(1).and_then(|s| s.split('"').next()).expect("a csrf token");
        let decide = Request::post(format!("/console/change-requests/{id}/approve"))
            .header(header::COOKIE, format!("loadout_session={cookie}"))
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("csrf={csrf}")))
            .expect("request");
        let answer = app.request(decide).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", text(&answer.body));
        assert_eq!(production(&app).await, 1);
    }
}

db_test! {
    async fn a_signed_off_share_is_a_ceiling(db) {
        let app = TestApp::new(db).await;
        let bob = app.key("bob", Role::Approver).await;
        gated(&app).await;
        let rollout = format!("{PRODUCTION}/rollout");
        let start = json!({"candidate": 2, "percent": 1.0});
        let (status, asked) = app.call(Method::POST, &rollout, &app.operator, Some(start)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{asked}");
        let (status, _) = approve(&app, asked["id"].as_i64().expect("id"), &bob).await;
        assert_eq!(status, StatusCode::OK);

        let (status, raised) = app.call(Method::PATCH, &rollout, &app.operator, Some(json!({"percent": 100.0}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "raising above 1 % is a change request: {raised}");
        assert_eq!((raised["kind"].as_str(), raised["percent"].as_f64()), (Some("rollout_share"), Some(100.0)));
        let (_, now) = app.call(Method::GET, &rollout, &app.operator, None).await;
        assert_eq!(now["current"]["percent"], 1.0, "{now}");
        let (status, refused) = approve(&app, raised["id"].as_i64().expect("id"), &app.operator).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");

        let (status, _) = app.call(Method::POST, &format!("/v1/change-requests/{}/decline", raised["id"]), &app.operator, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "the author withdraws it");
        let (status, lowered) = app.call(Method::PATCH, &rollout, &app.operator, Some(json!({"percent": 0.5}))).await;
        assert_eq!((status, lowered["percent"].as_f64()), (StatusCode::OK, Some(0.5)), "lowering needs no sign-off: {lowered}");
        let (status, back) = app.call(Method::PATCH, &rollout, &app.operator, Some(json!({"percent": 1.0}))).await;
        assert_eq!(status, StatusCode::OK, "back up to what was signed off: {back}");

        let (status, raised) = app.call(Method::PATCH, &rollout, &app.operator, Some(json!({"percent": 50.0}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{raised}");
        let (status, approved) = approve(&app, raised["id"].as_i64().expect("id"), &bob).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        let (_, now) = app.call(Method::GET, &rollout, &app.operator, None).await;
        assert_eq!(now["current"]["percent"], 50.0, "{now}");
    }
}

db_test! {
    /// An existing database (the legacy fixture on the base schema) migrated by
    /// `migrate up` alone serves revisions at once: revision 1, `production` and
    /// `latest`, with no `serve`, `seed` or write in between.
    async fn migrate_up_alone_publishes_revision_one(db) {
        use migration::{Migrator, MigratorTrait};
        Migrator::up(&db.conn, Some(1)).await.expect("base migration");
        crate::support::legacy::load(&db.conn).await;
        loadout::cli::migrate::run(&db.conn, loadout::db::migrate::MigrateCommand::Up { n: None }).await.expect("up");
        let labels = entity::agent_labels::Entity::find().all(&db.conn).await.expect("labels");
        let mut names: Vec<&str> = labels.iter().map(|l| l.name.as_str()).collect();
        names.sort_unstable();
        assert!(!names.is_empty() && names.len().is_multiple_of(2), "{names:?}");
        assert!(names.contains(&"production") && names.contains(&"latest"), "{names:?}");
        let revisions = entity::agent_revisions::Entity::find().all(&db.conn).await.expect("revisions");
        assert!(revisions.iter().all(|r| r.number == 1), "{revisions:?}");
    }
}

db_test! {
    async fn the_sweeper_expires_change_requests_nobody_read(db) {
        let app = TestApp::new(db).await;
        gated(&app).await;
        let id = ask(&app, &app.operator).await;
        let later = chrono::Utc::now() + chrono::Duration::days(30);
        let expired = loadout::promotion::change_requests::expire_due(&app.db.conn, later).await.expect("sweep");
        assert_eq!(expired, 1);
        let row = entity::change_requests::Entity::find_by_id(i32::try_from(id).expect("id")).one(&app.db.conn).await.expect("read").expect("row");
        assert_eq!(row.state, "expired");
        assert_eq!(loadout::promotion::change_requests::expire_due(&app.db.conn, later).await.expect("sweep"), 0);
    }
}

/// Every page of the list at `path` (`cursor` names the next page's parameter and
/// its answer field, `items` the list): the items' `field`s in order.
async fn every_page(
    app: &TestApp,
    key: &str,
    path: &str,
    cursor: (&str, &str),
    items: &str,
    field: &str,
) -> Vec<String> {
    let (parameter, next) = cursor;
    let mut seen = Vec::new();
    let mut at: Option<i64> = None;
    loop {
        let separator = if path.contains('?') { '&' } else { '?' };
        let url = match at {
            Some(at) => format!("{path}{separator}limit=2&{parameter}={at}"),
            None => format!("{path}{separator}limit=2"),
        };
        let page = ok(app, Method::GET, &url, key, None).await;
        let listed = page[items].as_array().expect("a list");
        assert!(listed.len() <= 2, "{url}: {page}");
        seen.extend(
            listed
                .iter()
                .filter_map(|i| i[field].as_str().map(str::to_owned)),
        );
        match page[next].as_i64() {
            Some(n) => at = Some(n),
            None => return seen,
        }
    }
}

db_test! {
    async fn the_members_of_revoked_keys_do_not_pile_up(db) {
        let app = TestApp::builder(db).flag("--max-keys-per-tenant=3").build().await;
        let admin = made_by(&app, &app.operator, "tb-admin", "admin", Some("tb")).await;
        // An admin of tb makes and revokes agent keys, always under the bound of live keys.
        for i in 0..12 {
            made_by(&app, &admin, &format!("tb-bot-{i}"), "agent", None).await;
            ok(&app, Method::DELETE, &format!("/v1/keys/tb-bot-{i}"), &admin, None).await;
        }
        made_by(&app, &admin, "tb-bot-live", "agent", None).await;
        let listed = ok(&app, Method::GET, "/v1/members", &admin, None).await;
        let names: Vec<&str> = listed["members"].as_array().expect("members").iter().filter_map(|m| m["name"].as_str()).collect();
        assert_eq!(names, ["tb-admin", "tb-bot-live"], "one member per live key: {listed}");

        // What keeps a member without a live key: sign-off power (or a sign-in).
        app.key("bob", Role::Approver).await;
        keys::revoke_now(&app.db.conn, "default", "bob", chrono::Utc::now()).await.expect("revoke");
        let kept = ok(&app, Method::GET, "/v1/members", &app.operator, None).await;
        let bob = kept["members"].as_array().expect("members").iter().find(|m| m["name"] == "bob").cloned();
        assert_eq!(bob.map(|b| b["signer"].clone()), Some(json!(true)), "bob, a signer, is kept: {kept}");
    }
}

db_test! {
    async fn the_lists_of_members_and_of_grants_come_a_page_at_a_time(db) {
        let app = TestApp::new(db).await;
        for name in ["ann", "ben", "cy", "dot", "eve"] {
            keys::create(&app.db.conn, name, Role::Admin, chrono::Utc::now()).await.expect("key");
        }
        let all = ok(&app, Method::GET, "/v1/members", &app.operator, None).await;
        let everyone: Vec<String> = all["members"].as_array().expect("members").iter().filter_map(|m| m["name"].as_str().map(str::to_owned)).collect();
        assert!(everyone.len() > 4, "{everyone:?}");
        let paged = every_page(&app, &app.operator, "/v1/members", ("after", "next_after"), "members", "name").await;
        assert_eq!(paged, everyone);

        for name in ["ann", "ben", "cy"] {
            let path = format!("/v1/members/{name}/signer-grants");
            let (status, grant) = app.call(Method::POST, &path, &app.operator, Some(json!({}))).await;
            assert_eq!(status, StatusCode::ACCEPTED, "{grant}");
        }
        let grants = every_page(&app, &app.operator, "/v1/signer-grants", ("before", "next_before"), "grants", "member").await;
        // The first operator's was granted at start-up.
        assert_eq!(grants, ["cy", "ben", "ann", "operator"], "newest first");
        let bens = every_page(&app, &app.operator, "/v1/signer-grants?member=ben", ("before", "next_before"), "grants", "member").await;
        assert_eq!(bens, ["ben"]);
    }
}

use crate::support::sea_orm::EntityTrait;
