//! Signed webhooks (issue 26, item 4) against a real local receiver on loopback:
//! every delivery carries a valid Standard Webhooks signature; a receiver
//! answering 500 gets retries with the same `webhook-id`; a change committed
//! before the process went away is delivered by the next one; a run of failures
//! switches the subscription off; the address rules, redirects and timeouts hold;
//! tenants see only their own subscriptions and proposal events.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{TestApp, TestDb, db_test};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use loadout::auth::keys::{self, Role};
use loadout::webhooks::sign;
use serde_json::{Value, json};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub(crate) struct Got {
    id: String,
    timestamp: String,
    signature: String,
    pub(crate) body: String,
}

impl Got {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }

    fn kind(&self) -> String {
        self.json()["type"].as_str().unwrap_or_default().to_owned()
    }

    /// Whether the signature is the one `secret` makes over id, timestamp and body.
    pub(crate) fn signed_by(&self, secret: &str) -> bool {
        let key = sign::key(secret).expect("a whsec_ secret");
        let timestamp: i64 = self.timestamp.parse().expect("a Unix timestamp");
        self.signature == sign::signature(&key, &self.id, timestamp, &self.body)
    }
}

/// A receiver on 127.0.0.1: `/hook` records and answers `status` after `delay_ms`;
/// `/redirect` answers 307 to `/hook`.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    got: Arc<Mutex<Vec<Got>>>,
    status: Arc<AtomicU16>,
    delay_ms: Arc<AtomicU64>,
}

impl Receiver {
    pub(crate) async fn start() -> (Receiver, SocketAddr) {
        let receiver = Receiver::default();
        receiver.status.store(200, Ordering::SeqCst);
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .route(
                "/redirect",
                axum::routing::post(|| async {
                    (StatusCode::TEMPORARY_REDIRECT, [("location", "/hook")])
                }),
            )
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        (receiver, address)
    }

    pub(crate) fn got(&self) -> Vec<Got> {
        self.got.lock().expect("lock").clone()
    }

    /// Waits (at most 15 s) until `enough` holds of what was received.
    pub(crate) async fn wait_for(&self, what: &str, enough: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        for _ in 0..300 {
            let got = self.got();
            if enough(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: the receiver got {:#?}", self.got());
    }
}

async fn hook(State(receiver): State<Receiver>, headers: HeaderMap, body: String) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    receiver.got.lock().expect("lock").push(Got {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body,
    });
    let delay = receiver.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    StatusCode::from_u16(receiver.status.load(Ordering::SeqCst)).expect("status")
}

/// A started app delivering webhooks, allowed to reach loopback, with `flags`.
pub(crate) async fn app(db: TestDb, flags: &[&str]) -> TestApp {
    let mut builder = TestApp::builder(db)
        .flag("--connector-allow=127.0.0.1")
        .jobs();
    for flag in flags {
        builder = builder.flag(*flag);
    }
    builder.build().await
}

/// Subscribes `url` to `events` with `key`; the answer (subscription and secret).
pub(crate) async fn subscribe(app: &TestApp, key: &str, url: &str, events: &[&str]) -> Value {
    let body = json!({"url": url, "events": events});
    let (status, answer) = app
        .call(Method::POST, "/v1/webhooks", key, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    answer
}

fn secret(created: &Value) -> String {
    created["secret"].as_str().expect("secret").to_owned()
}

pub(crate) async fn save_soul(app: &TestApp, soul: &str) {
    let body = json!({"soul": soul});
    let (status, answer) = app
        .call(
            Method::PATCH,
            "/v1/agents/assistant",
            &app.operator,
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

async fn subscription(app: &TestApp, id: &Value) -> Value {
    let (status, answer) = app
        .call(
            Method::GET,
            &format!("/v1/webhooks/{id}"),
            &app.operator,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

async fn log(app: &TestApp, id: &Value) -> Vec<Value> {
    let path = format!("/v1/webhooks/{id}/deliveries");
    let (status, answer) = app.call(Method::GET, &path, &app.operator, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["attempts"].as_array().expect("attempts").clone()
}

db_test! {
    async fn a_change_is_delivered_signed_with_the_subscriptions_secret(db) {
        let (receiver, address) = Receiver::start().await;
        let app = app(db, &[]).await;
        let created = subscribe(&app, &app.operator, &format!("http://{address}/hook"), &["*"]).await;
        let secret = secret(&created);
        assert!(secret.starts_with("whsec_"), "{created}");

        save_soul(&app, "A soul that webhooks tell of.").await;

        let got = receiver.wait_for("published and both labels", |g| g.len() >= 3).await;
        let mut kinds: Vec<String> = got.iter().map(Got::kind).collect();
        kinds.sort();
        assert_eq!(kinds, ["label.moved", "label.moved", "revision.published"]);
        for delivery in &got {
            assert!(delivery.signed_by(&secret), "{delivery:?}");
            assert!(delivery.id.starts_with("msg_"), "{delivery:?}");
            assert!(delivery.signature.starts_with("v1,"), "{delivery:?}");
            assert!(delivery.json()["timestamp"].is_string());
        }
        let moved: Vec<Value> = got.iter().filter(|g| g.kind() == "label.moved").map(Got::json).collect();
        let production = moved.iter().find(|m| m["data"]["label"] == "production").expect("production moved");
        assert_eq!(production["data"]["agent"], "assistant");
        assert_eq!(production["data"]["from"], 1);
        assert_eq!(production["data"]["to"], 2);
        assert_eq!(production["data"]["kind"], "publish");
        // The secret is answered once: never by a read.
        let shown = subscription(&app, &created["subscription"]["id"]).await;
        assert!(!shown.to_string().contains(&secret[6..]), "{shown}");
        assert!(shown.get("secret").is_none());
    }
}

db_test! {
    async fn a_receiver_answering_500_gets_retries_with_the_same_id(db) {
        let (receiver, address) = Receiver::start().await;
        receiver.status.store(500, Ordering::SeqCst);
        let app = app(db, &["--webhook-retry-base-ms=50"]).await;
        let created = subscribe(&app, &app.operator, &format!("http://{address}/hook"), &["revision.published"]).await;

        save_soul(&app, "Retried.").await;

        let got = receiver.wait_for("three attempts", |g| g.len() >= 3).await;
        assert!(got.iter().all(|g| g.id == got[0].id), "one webhook-id across retries: {got:#?}");
        receiver.status.store(204, Ordering::SeqCst);
        let id = &created["subscription"]["id"];
        let mut delivered = false;
        for _ in 0..200 {
            let attempts = log(&app, id).await;
            if attempts.first().is_some_and(|a| a["status"] == 204) {
                assert_eq!(attempts[0]["delivery_state"], "delivered");
                assert!(attempts.iter().skip(1).all(|a| a["status"] == 500), "{attempts:#?}");
                assert!(attempts.iter().all(|a| a["message_id"] == got[0].id.as_str()));
                delivered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(delivered, "delivered once the receiver took it: {:#?}", log(&app, id).await);
        assert_eq!(subscription(&app, id).await["failures"], 0);
    }
}

db_test! {
    async fn a_subscription_is_switched_off_after_the_stated_run_of_failures(db) {
        let (receiver, address) = Receiver::start().await;
        receiver.status.store(500, Ordering::SeqCst);
        let app = app(db, &["--webhook-retry-base-ms=20", "--webhook-disable-after=3"]).await;
        let created = subscribe(&app, &app.operator, &format!("http://{address}/hook"), &["revision.published"]).await;
        let id = created["subscription"]["id"].clone();

        save_soul(&app, "Failing.").await;

        receiver.wait_for("three attempts", |g| g.len() >= 3).await;
        let mut shown = subscription(&app, &id).await;
        for _ in 0..100 {
            if shown["state"] == "disabled" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            shown = subscription(&app, &id).await;
        }
        assert_eq!(shown["state"], "disabled", "{shown}");
        let reason = shown["disabled_reason"].as_str().expect("reason");
        assert!(reason.contains("3 failed attempts in a row") && reason.contains("500"), "{reason}");
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(receiver.got().len(), 3, "nothing is sent to a switched-off subscription");

        // Enabled again, its pending delivery resumes.
        receiver.status.store(200, Ordering::SeqCst);
        let path = format!("/v1/webhooks/{id}");
        let (status, answer) = app.call(Method::PATCH, &path, &app.operator, Some(json!({"enabled": true}))).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["state"], "active");
        receiver.wait_for("the fourth attempt", |g| g.len() >= 4).await;
    }
}

db_test! {
    async fn a_change_committed_before_the_process_went_away_is_delivered_by_the_next(db) {
        let (receiver, address) = Receiver::start().await;
        // The first process delivers nothing: it stands for one killed right after
        // the change committed.
        let app = TestApp::builder(db).flag("--connector-allow=127.0.0.1").flag("--no-webhook-delivery").jobs().build().await;
        let created = subscribe(&app, &app.operator, &format!("http://{address}/hook"), &["revision.published"]).await;
        save_soul(&app, "Committed, then the process went away.").await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(receiver.got().is_empty());

        let next = app.replica(&["--connector-allow=127.0.0.1"]).await;
        let _jobs = next.spawn_jobs();

        let got = receiver.wait_for("the event", |g| !g.is_empty()).await;
        assert_eq!(got[0].kind(), "revision.published");
        assert!(got[0].signed_by(&secret(&created)));
    }
}

db_test! {
    async fn a_url_to_a_non_global_address_is_refused_unless_allowed(db) {
        let app = TestApp::builder(db).flag("--connector-allow=127.0.0.2").build().await;
        for url in ["https://127.0.0.1/hook", "https://10.1.2.3/hook", "https://[::1]/hook", "https://169.254.169.254/latest"] {
            let body = json!({"url": url});
            let (status, answer) = app.call(Method::POST, "/v1/webhooks", &app.operator, Some(body)).await;
            assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{url}: {answer}");
            assert_eq!(answer["error"]["code"], "url_refused", "{url}: {answer}");
        }
        // Allowed: the allow-listed address, over http too.
        for url in ["https://127.0.0.2/hook", "http://127.0.0.2:9/hook"] {
            let body = json!({"url": url});
            let (status, answer) = app.call(Method::POST, "/v1/webhooks", &app.operator, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{url}: {answer}");
        }
        // http:// to an address that is not allow-listed is refused even when global.
        let body = json!({"url": "http://8.8.8.8/hook"});
        let (status, answer) = app.call(Method::POST, "/v1/webhooks", &app.operator, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap_or("").contains("https://"), "{answer}");
        let body = json!({"url": "https://example.test/hook", "events": ["no.such"]});
        let (status, answer) = app.call(Method::POST, "/v1/webhooks", &app.operator, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    }
}

db_test! {
    async fn a_redirect_is_not_followed_and_a_slow_receiver_times_out(db) {
        let (receiver, address) = Receiver::start().await;
        receiver.delay_ms.store(3_000, Ordering::SeqCst);
        let app = app(db, &["--webhook-timeout-ms=300", "--webhook-attempts=1"]).await;
        let redirected = subscribe(&app, &app.operator, &format!("http://{address}/redirect"), &["revision.published"]).await;
        let slow = subscribe(&app, &app.operator, &format!("http://{address}/hook"), &["revision.published"]).await;

        save_soul(&app, "Redirected and slow.").await;

        let mut found = (Vec::new(), Vec::new());
        for _ in 0..200 {
            found = (log(&app, &redirected["subscription"]["id"]).await, log(&app, &slow["subscription"]["id"]).await);
            if !found.0.is_empty() && !found.1.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (redirect, slow) = found;
        assert_eq!(redirect[0]["status"], 307, "{redirect:#?}");
        assert!(redirect[0]["error"].as_str().unwrap_or("").contains("redirects are not followed"), "{redirect:#?}");
        assert_eq!(redirect[0]["delivery_state"], "failed");
        assert!(slow[0]["status"].is_null(), "{slow:#?}");
        assert!(slow[0]["error"].as_str().unwrap_or("").contains("did not answer in time"), "{slow:#?}");
        assert!(slow[0]["duration_ms"].as_i64().unwrap_or(0) < 2_000, "{slow:#?}");
        // The receiver saw the slow delivery only: the redirect was never followed to /hook.
        assert_eq!(receiver.got().len(), 1);
    }
}

db_test! {
    async fn another_tenants_subscription_is_404_and_never_gets_this_tenants_proposals(db) {
        let (receiver_a, address_a) = Receiver::start().await;
        let (receiver_b, address_b) = Receiver::start().await;
        let app = app(db, &[]).await;
        let admin_a = keys::create_for_tenant(&app.db.conn, "a-admin", Role::Admin, Some("tenanta"), chrono::Utc::now()).await.expect("key");
        let admin_b = keys::create_for_tenant(&app.db.conn, "b-admin", Role::Admin, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        let agent_b = keys::create_for_tenant(&app.db.conn, "b-agent", Role::Agent, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        let events = ["proposal.waiting", "proposal.decided"];
        let a = subscribe(&app, &admin_a, &format!("http://{address_a}/hook"), &events).await;
        let b = subscribe(&app, &admin_b, &format!("http://{address_b}/hook"), &events).await;
        assert_eq!(a["subscription"]["tenant"], "tenanta");

        let path = format!("/v1/webhooks/{}", a["subscription"]["id"]);
        for method in [Method::GET, Method::DELETE] {
            let (status, answer) = app.call(method.clone(), &path, &admin_b, None).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{method}: {answer}");
        }
        let (_, listed) = app.call(Method::GET, "/v1/webhooks", &admin_b, None).await;
        assert_eq!(listed["subscriptions"].as_array().map(Vec::len), Some(1), "{listed}");
        let (status, _) = app.call(Method::GET, "/v1/webhooks?tenant=tenanta", &admin_b, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        // A proposal in tenant B.
        let call = json!({"tool": "update_instructions", "arguments": {"instructions": "Buy milk"}, "conversation_id": "c-1", "user_id": "u-1"});
        let (status, answer) = app.call(Method::POST, "/v1/agents/assistant/tool-calls", &agent_b, Some(call)).await;
        assert_eq!(answer["status"], "proposed_for_approval", "{status}: {answer}");
        let proposal = answer["proposal_id"].clone();
        let (status, answer) = app.call(Method::POST, &format!("/v1/proposals/{proposal}/decline"), &admin_b, None).await;
        assert!(status.is_success(), "{answer}");

        let got = receiver_b.wait_for("waiting and decided", |g| g.len() >= 2).await;
        let mut kinds: Vec<String> = got.iter().map(Got::kind).collect();
        kinds.sort();
        assert_eq!(kinds, ["proposal.decided", "proposal.waiting"]);
        let data = &got[0].json()["data"];
        assert_eq!(data["tenant"], "tenantb");
        assert!(data.get("arguments").is_none() && !got[0].body.contains("Buy milk"), "{}", got[0].body);
        assert!(got.iter().all(|g| g.signed_by(&secret(&b))));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(receiver_a.got().is_empty(), "tenant A got {:?}", receiver_a.got());
    }
}

db_test! {
    async fn every_rollout_transition_is_delivered_as_its_event(db) {
        let (receiver, address) = Receiver::start().await;
        let app = app(db, &[]).await;
        let url = format!("http://{address}/hook");
        let rollouts = ["rollout.started", "rollout.changed", "rollout.completed", "rollout.aborted"];
        let created = subscribe(&app, &app.operator, &url, &rollouts).await;
        let secret = secret(&created);
        // Revision 2 saved, `production` moved back to 1, so 2 can be its candidate.
        save_soul(&app, "The candidate soul.").await;
        let production = "/v1/agents/assistant/labels/production";
        let (status, answer) = app
            .call(Method::PUT, production, &app.operator, Some(json!({"revision": 1})))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");

        let rollout = format!("{production}/rollout");
        let steps = [
            (Method::POST, rollout.clone(), json!({"candidate": 2, "percent": 10, "reason": "try it"})),
            (Method::PATCH, rollout.clone(), json!({"percent": 20})),
            (Method::POST, format!("{rollout}/complete"), json!({})),
        ];
        for (method, path, body) in steps {
            let (status, answer) = app.call(method, &path, &app.operator, Some(body)).await;
            assert!(status.is_success(), "{path}: {status} {answer}");
        }

        let got = receiver.wait_for("start, change, completion", |g| g.len() >= 3).await;
        let mut kinds: Vec<String> = got.iter().map(Got::kind).collect();
        kinds.sort();
        assert_eq!(kinds, ["rollout.changed", "rollout.completed", "rollout.started"]);
        for delivery in &got {
            assert!(delivery.signed_by(&secret), "{delivery:?}");
            let data = &delivery.json()["data"];
            assert_eq!((data["agent"].as_str(), data["label"].as_str()), (Some("assistant"), Some("production")), "{data}");
            assert_eq!((data["base"].as_i64(), data["candidate"].as_i64()), (Some(1), Some(2)), "{data}");
        }
        let changed = got.iter().find(|g| g.kind() == "rollout.changed").expect("changed").json();
        assert_eq!(changed["data"]["share"], 20.0, "{changed}");
    }
}
