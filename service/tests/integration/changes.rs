//! The change stream (issue 53, item 1): `GET /v1/changes` over a real connection.
//! What a key is sent (its tenant's, its agent's, its label's), what it is not
//! (another tenant's users, another agent), replay from `Last-Event-ID` (from the
//! ring, or one `everything` when too much was missed), the end of a revoked
//! key's stream, the bounds, the close at shutdown, and an edit on one replica
//! reaching a stream held on another (Postgres).

use std::time::Duration;

use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, Role};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::{TestApp, db_test};

const AGENT: &str = "/v1/agents/assistant";

/// A change stream read over a real connection.
struct Stream {
    lines: BufReader<TcpStream>,
    status: u16,
    head: String,
}

/// One event: its `id` and its `data`.
#[derive(Debug, Clone)]
struct Event {
    id: i64,
    data: Value,
}

impl Stream {
    async fn open(
        address: std::net::SocketAddr,
        path: &str,
        key: &str,
        last: Option<i64>,
    ) -> Stream {
        let mut socket = TcpStream::connect(address).await.expect("connect");
        let last = last
            .map(|id| format!("Last-Event-ID: {id}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nAccept: text/event-stream\r\n{last}\r\n"
        );
        socket.write_all(request.as_bytes()).await.expect("write");
        let mut lines = BufReader::new(socket);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            lines.read_line(&mut line).await.expect("head");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Stream {
            lines,
            status,
            head,
        }
    }

    /// The next event (heartbeats and `retry:` skipped), or `None` when the
    /// stream ends or nothing comes within `wait`. The body is chunked: chunk
    /// sizes are lines of hex alone, skipped as they never start with a field name.
    async fn next(&mut self, wait: Duration) -> Option<Event> {
        let read = async {
            let mut id = None;
            loop {
                let mut line = String::new();
                if self.lines.read_line(&mut line).await.ok()? == 0 {
                    return None;
                }
                let line = line.trim_end();
                if let Some(value) = line.strip_prefix("id: ") {
                    id = value.parse().ok();
                } else if let Some(value) = line.strip_prefix("data: ") {
                    let data = serde_json::from_str(value).expect("data is JSON");
                    return Some(Event {
                        id: id.expect("an id before data"),
                        data,
                    });
                } else if line == "0" {
                    return None;
                }
            }
        };
        tokio::time::timeout(wait, read).await.ok().flatten()
    }

    /// Events up to and including the next `ready`.
    async fn until_ready(&mut self) -> Vec<Event> {
        let mut seen = Vec::new();
        while let Some(event) = self.next(Duration::from_secs(5)).await {
            let ready = event.data["type"] == "ready";
            seen.push(event);
            if ready {
                return seen;
            }
        }
        panic!("no ready frame; saw {seen:?}");
    }
}

const SOON: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(700);

async fn ok(app: &TestApp, method: Method, path: &str, key: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, key, body).await;
    assert!(status.is_success(), "{method} {path}: {status} {answer}");
    answer
}

/// A new revision of the assistant (`direct`: `latest` and `production` move to it).
async fn edit(app: &TestApp, soul: &str) {
    ok(
        app,
        Method::PATCH,
        AGENT,
        &app.operator,
        Some(json!({"soul": soul})),
    )
    .await;
}

/// Waits until the process's hub has read every change committed so far (it reads
/// after each commit, on its own task).
async fn caught_up(app: &TestApp) {
    let wanted = app.state.generation.current();
    for _ in 0..100 {
        if app.state.changes.position().1 >= wanted {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the hub did not read generation {wanted}");
}

/// The next event whose `change` is `change`, skipping others.
async fn next_change(stream: &mut Stream, change: &str) -> Event {
    while let Some(event) = stream.next(SOON).await {
        if event.data["change"] == change {
            return event;
        }
    }
    panic!("no {change} event");
}

db_test! {
    async fn a_label_move_reaches_a_stream_and_names_the_revision_and_the_generation(db) {
        let app = TestApp::builder(db.seeded().await).jobs().build().await;
        let address = app.listen().await;
        let mut stream = Stream::open(address, "/v1/changes", &app.agent, None).await;
        assert_eq!(stream.status, 200, "{}", stream.head);
        assert!(stream.head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{}", stream.head);
        let ready = stream.until_ready().await.pop().expect("ready");
        edit(&app, "A calmer soul.").await;
        let moved = next_change(&mut stream, "label.moved").await;
        assert!(moved.id > ready.id, "{moved:?} after {ready:?}");
        assert_eq!(moved.data["type"], "refetchEvaluation");
        assert_eq!(moved.data["agent"], "assistant");
        let mut labels = vec![(moved.data["label"].clone(), moved.data["revision"].clone())];
        let other = next_change(&mut stream, "label.moved").await;
        labels.push((other.data["label"].clone(), other.data["revision"].clone()));
        labels.sort_by_key(|(l, _)| l.to_string());
        assert_eq!(labels, vec![(json!("latest"), json!(2)), (json!("production"), json!(2))]);
        // The etag names a generation at least the write's: a fetch that sends it is current.
        let generation = moved.data["generation"].as_i64().expect("generation");
        assert!(generation >= app.state.generation.current() - 1, "{moved:?}");
        assert_eq!(moved.data["etag"], format!("\"g{generation}\""));
        let fetched = app.get("/v1/agents/assistant/prompt?channel=web").await;
        assert_eq!(fetched.headers["loadout-revision"], "2");
        // Nothing else came: no content, no other agent's change.
        let text = moved.data.to_string();
        assert!(!text.contains("calmer"), "an event carries no content: {text}");
        assert!(stream.next(QUIET).await.is_none());
    }
}

db_test! {
    async fn a_tenants_users_changes_reach_that_tenant_only_and_a_scoped_key_its_agent_only(db) {
        let app = TestApp::builder(db.seeded().await).jobs().build().await;
        let address = app.listen().await;
        let now = chrono::Utc::now();
        let a_admin = keys::create_for_tenant(&app.db.conn, "a-admin", Role::Admin, Some("tenanta"), now).await.expect("key");
        let a_agent = keys::create_for_tenant(&app.db.conn, "a-agent", Role::Agent, Some("tenanta"), now).await.expect("key");
        let b_agent = keys::create_for_tenant(&app.db.conn, "b-agent", Role::Agent, Some("tenantb"), now).await.expect("key");
        let scoped = app.key("scoped", Role::Agent).await;
        ok(&app, Method::POST, "/v1/agents", &app.operator, Some(json!({
            "name": "helper", "identity": {"display_name": "Helper", "role": "a helper", "description": "Helps."},
            "soul": "Helpful."
        }))).await;
        let made = ok(&app, Method::POST, "/v1/keys", &app.operator, Some(json!({"name": "helper-only", "role": "agent", "agent": "helper"}))).await;
        let helper_only = made["key"].as_str().expect("key").to_owned();
        drop(scoped);

        let mut a = Stream::open(address, "/v1/changes", &a_agent, None).await;
        let mut b = Stream::open(address, "/v1/changes", &b_agent, None).await;
        let mut helper = Stream::open(address, "/v1/changes", &helper_only, None).await;
        for stream in [&mut a, &mut b, &mut helper] {
            assert_eq!(stream.status, 200, "{}", stream.head);
            stream.until_ready().await;
        }
        // A scoped key cannot ask for another agent's stream: 404, as for its prompt.
        let refused = Stream::open(address, "/v1/changes?agent=assistant", &helper_only, None).await;
        assert_eq!(refused.status, 404, "{}", refused.head);

        ok(&app, Method::PUT, "/v1/agents/assistant/users/alice/instructions", &a_admin,
            Some(json!({"instructions": "Short answers."}))).await;
        let changed = next_change(&mut a, "instructions.changed").await;
        assert_eq!(changed.data["agent"], "assistant");
        assert_eq!(changed.data["user"], "alice");
        assert!(!changed.data.to_string().contains("Short answers"), "{changed:?}");
        assert!(b.next(QUIET).await.is_none(), "another tenant hears nothing of tenant a's users");
        assert!(helper.next(QUIET).await.is_none(), "a key scoped to helper hears nothing of assistant");

        // The other half: shared changes still reach every tenant, and the scoped key its own agent's.
        edit(&app, "Shared change.").await;
        next_change(&mut b, "label.moved").await;
        ok(&app, Method::PATCH, "/v1/agents/helper", &app.operator, Some(json!({"soul": "More helpful."}))).await;
        let mine = next_change(&mut helper, "label.moved").await;
        assert_eq!(mine.data["agent"], "helper");
    }
}

db_test! {
    async fn a_reconnect_gets_what_it_missed_or_one_everything_when_too_much_was(db) {
        let app = TestApp::builder(db.seeded().await).flag("--stream-history=4").jobs().build().await;
        let address = app.listen().await;
        let mut stream = Stream::open(address, "/v1/changes?label=production", &app.agent, None).await;
        let ready = stream.until_ready().await.pop().expect("ready");
        drop(stream);
        edit(&app, "Missed one.").await;
        caught_up(&app).await;
        // Back with the last id: the missed production move (and no `latest` one), then ready.
        let mut again = Stream::open(address, "/v1/changes?label=production", &app.agent, Some(ready.id)).await;
        let seen = again.until_ready().await;
        let changes: Vec<&Value> = seen.iter().map(|e| &e.data).filter(|d| d["type"] == "refetchEvaluation").collect();
        assert_eq!(changes.len(), 1, "{seen:?}");
        assert_eq!(changes[0]["label"], "production");
        assert_eq!(changes[0]["revision"], 2);
        let resumed = seen.last().expect("ready").id;
        drop(again);
        // Away for more than the history holds: one `everything`.
        for i in 0..4 {
            edit(&app, &format!("Away {i}.")).await;
        }
        caught_up(&app).await;
        let mut late = Stream::open(address, "/v1/changes", &app.agent, Some(resumed)).await;
        let seen = late.until_ready().await;
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(seen[0].data["change"], "everything");
        assert_eq!(seen[0].data["reason"], "history");
        assert!(seen[1].id > resumed);
    }
}

db_test! {
    async fn a_revoked_keys_stream_ends_and_the_bounds_answer_429(db) {
        let app = TestApp::builder(db.seeded().await)
            .flag("--max-streams-per-tenant=2").flag("--max-streams=3").jobs().build().await;
        let address = app.listen().await;
        let doomed = app.key("doomed", Role::Agent).await;
        let mut first = Stream::open(address, "/v1/changes", &doomed, None).await;
        first.until_ready().await;
        let mut second = Stream::open(address, "/v1/changes", &app.agent, None).await;
        second.until_ready().await;
        let over = Stream::open(address, "/v1/changes", &app.agent, None).await;
        assert_eq!(over.status, 429, "{}", over.head);
        assert!(over.head.to_ascii_lowercase().contains("retry-after: 5"), "{}", over.head);
        // Another tenant still has its share, up to the process's bound.
        let other = keys::create_for_tenant(&app.db.conn, "b-agent", Role::Agent, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        let mut theirs = Stream::open(address, "/v1/changes", &other, None).await;
        assert_eq!(theirs.status, 200, "{}", theirs.head);
        theirs.until_ready().await;
        let full = Stream::open(address, "/v1/changes", &other, None).await;
        assert_eq!(full.status, 429, "{}", full.head);

        ok(&app, Method::DELETE, "/v1/keys/doomed", &app.operator, None).await;
        let ended = async {
            while first.next(SOON).await.is_some() {}
        };
        tokio::time::timeout(Duration::from_secs(10), ended).await.expect("the revoked key's stream ends");
        // Its slot came back; the other stream is still open and hears changes.
        edit(&app, "Still listening.").await;
        next_change(&mut second, "label.moved").await;
        let again = Stream::open(address, "/v1/changes", &doomed, None).await;
        assert_eq!(again.status, 401, "{}", again.head);

        // Shutdown ends every stream.
        app.state.changes.close();
        let closed = async { while second.next(SOON).await.is_some() {} };
        tokio::time::timeout(Duration::from_secs(10), closed).await.expect("streams end at shutdown");
    }
}

/// An edit through one replica reaches a stream held on another (Postgres: NOTIFY).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_on_one_replica_reaches_a_stream_on_another() {
    let Some(db) = crate::support::TestDb::postgres().await else {
        return;
    };
    let app = TestApp::builder(db.seeded().await).jobs().build().await;
    let other = app.replica(&[]).await;
    let _jobs = other.spawn_jobs();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let limits = loadout::transport::server::Limits::from(&other.settings.connections);
    tokio::spawn(loadout::transport::server::serve(
        listener,
        loadout::http::router(other.clone()),
        limits,
        std::future::pending(),
    ));
    let mut stream = Stream::open(address, "/v1/changes?label=production", &app.agent, None).await;
    stream.until_ready().await;
    let started = std::time::Instant::now();
    edit(&app, "Through replica one.").await;
    let moved = next_change(&mut stream, "label.moved").await;
    assert_eq!(moved.data["revision"], 2, "{moved:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    // The other replica serves what the event names once asked with its etag.
    let etag = moved.data["etag"].as_str().expect("etag").to_owned();
    let request = axum::http::Request::get("/v1/agents/assistant/prompt?channel=web")
        .header("authorization", format!("Bearer {}", app.agent))
        .header("loadout-generation", etag)
        .body(axum::body::Body::empty())
        .expect("request");
    let reply = crate::support::api::request_reply(&other, request).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.headers["loadout-revision"], "2");
}
