//! The application under test: built by `serve`'s own start-up path
//! (`loadout::app::start`: the secrets key, migrate, seed, check and the first
//! operator key under the migration lock, the serving pool, the state) from `serve`'s
//! own flags, over a fresh database. Every in-process request goes through the
//! router and its answer through the contract checker ([`crate::support::contract`]).
//!
//! ```ignore
//! let app = TestApp::new(db).await;                       // serve with no flags
//! let app = TestApp::builder(db).flag("--max-auth-failures=3").build().await;
//! let (status, body) = app.call(Method::GET, "/v1/tools", &app.operator, None).await;
//! ```

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::app::start::Jobs;
use loadout::app::{AppState, Settings};
use loadout::auth::keys::Role;
use loadout::vocab::{Clock, SystemClock};
use serde_json::Value;
use tower::ServiceExt;

use crate::support::TestDb;
use crate::support::api::Reply;

/// A started application over its own database.
pub struct TestApp {
    pub state: AppState,
    /// The operator key the start-up printed (a fresh database has no key).
    pub operator: String,
    /// An agent key (`test-agent`).
    pub agent: String,
    router: axum::Router,
    _jobs: Option<Jobs>,
    /// Last, so the database outlives the state's pool.
    pub db: TestDb,
}

/// How a [`TestApp`] is started: `serve`'s flags, and the seams a test needs.
pub struct Builder {
    db: TestDb,
    flags: Vec<String>,
    clock: Arc<dyn Clock>,
    jobs: bool,
    url: Option<String>,
}

impl Builder {
    /// One of `serve`'s flags, as typed: `"--max-auth-failures=3"`.
    pub fn flag(mut self, flag: impl Into<String>) -> Self {
        self.flags.push(flag.into());
        self
    }

    /// The clock the state reads (a fixed instant, say).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Also run `serve`'s background jobs: the generation poller (and listener on
    /// Postgres) and the proposal sweeper.
    pub fn jobs(mut self) -> Self {
        self.jobs = true;
        self
    }

    /// Reach the database at `url` instead of the test database's own (a proxy in
    /// front of it).
    pub fn through(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    pub async fn build(self) -> TestApp {
        let Builder {
            db,
            flags,
            clock,
            jobs,
            url,
        } = self;
        let url = url.unwrap_or_else(|| db.url.clone());
        let started = start(&url, &flags, clock).await;
        let operator = match started.new_key {
            Some((_, key)) => key,
            // A database a test prepared with keys of its own: one more operator.
            None => db.key("test-operator", Role::Operator).await,
        };
        let agent = db.key("test-agent", Role::Agent).await;
        let state = started.state;
        let jobs = jobs.then(|| state.spawn_jobs());
        TestApp {
            router: loadout::http::router(state.clone()),
            state,
            operator,
            agent,
            _jobs: jobs,
            db,
        }
    }
}

/// `serve`'s start-up over `url` with `flags` (the tests' secrets key unless the
/// flags name one).
async fn start(url: &str, flags: &[String], clock: Arc<dyn Clock>) -> loadout::app::start::Started {
    let mut argv: Vec<String> = flags.to_vec();
    if !flags.iter().any(|f| f.starts_with("--secrets-key")) {
        argv.push(format!("--secrets-key={}", crate::support::SECRETS_KEY));
    }
    let settings = Settings::from_flags(&argv).expect("serve's flags");
    loadout::app::start::start(url, settings, clock)
        .await
        .expect("serve's start-up")
}

/// A process over `db` as `serve` starts it with `flags`: a replica, or the
/// application of a test that keeps its database in hand.
pub async fn state(db: &TestDb, flags: &[&str]) -> AppState {
    state_at(&db.url, flags).await
}

/// [`state`] over the database at `url` (a proxy in front of a test database).
pub async fn state_at(url: &str, flags: &[&str]) -> AppState {
    let flags: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
    start(url, &flags, Arc::new(SystemClock)).await.state
}

impl TestApp {
    /// The application `loadout serve` with no flags runs, over `db`.
    pub async fn new(db: TestDb) -> TestApp {
        Self::builder(db).build().await
    }

    pub fn builder(db: TestDb) -> Builder {
        Builder {
            db,
            flags: Vec::new(),
            clock: Arc::new(SystemClock),
            jobs: false,
            url: None,
        }
    }

    /// Another process over the same database (a replica), started the same way
    /// with `flags`.
    pub async fn replica(&self, flags: &[&str]) -> AppState {
        state(&self.db, flags).await
    }

    /// Publishes every agent, as a configuration write does, and bumps the
    /// generation: rows written behind the API (a drifted database) are served
    /// from the next publish on, as after a restart.
    pub async fn publish(&self) {
        loadout::releases::publish_all(&self.db.conn, Some("rows"), self.state.clock.now())
            .await
            .expect("publish");
        let generation = loadout::db::generation::bump(&self.db.conn)
            .await
            .expect("bump");
        self.state.generation.observe(generation);
    }

    /// Serves the application on 127.0.0.1 through `serve`'s connection loop, with
    /// the limits its flags gave, until the test ends; the address.
    pub async fn listen(&self) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        let limits = loadout::transport::server::Limits::from(&self.state.settings.connections);
        tokio::spawn(loadout::transport::server::serve(
            listener,
            self.router.clone(),
            limits,
            std::future::pending(),
        ));
        address
    }

    /// A new key of `role` named `name`, in the default tenant.
    pub async fn key(&self, name: &str, role: Role) -> String {
        self.db.key(name, role).await
    }

    /// Any request, through the router; the answer is checked against the contract.
    pub async fn request(&self, request: Request<Body>) -> Reply {
        through(self.router.clone(), request).await
    }

    /// One request; `body` is sent as is (it need not be valid JSON).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Vec<u8>>,
        if_none_match: Option<&str>,
    ) -> Reply {
        let request = crate::support::api::request(method, path, key, body, if_none_match);
        self.request(request).await
    }

    /// A JSON request with a key: `(status, body)`.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let body = body.map(|b| b.to_string().into_bytes());
        let reply = self.send(method, path, Some(key), body, None).await;
        (reply.status, reply.body)
    }

    /// A request with a JSON body (or none), and a key or none.
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let body = body.map(|b| b.to_string().into_bytes());
        self.send(method, path, key, body, None).await
    }

    /// A GET with the agent key.
    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, Some(&self.agent), None, None)
            .await
    }
}

/// `request` through `router`, its answer read whole and checked against the contract.
pub async fn through(router: axum::Router, request: Request<Body>) -> Reply {
    let method = request.method().clone();
    let path = request
        .uri()
        .path_and_query()
        .map_or("", |p| p.as_str())
        .to_owned();
    let response = router.oneshot(request).await.expect("infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let etag = headers
        .get(header::ETAG)
        .map(|v| v.to_str().expect("ascii").to_owned());
    if is_event_stream(&headers) {
        // A change stream never ends: read up to its `ready` frame, then hang up.
        let text = first_frames(response.into_body()).await;
        return Reply {
            status,
            etag,
            headers,
            body: Value::String(text),
        };
    }
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    crate::support::contract::assert_answer(
        method.as_str(),
        &path,
        status.as_u16(),
        &headers,
        &bytes,
    );
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Reply {
        status,
        etag,
        headers,
        body,
    }
}

fn is_event_stream(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// A change stream's frames up to and including its first `ready` frame (5 s at most).
async fn first_frames(body: Body) -> String {
    use futures_util::StreamExt;
    let mut data = body.into_data_stream();
    let mut text = String::new();
    let read = async {
        while !text.contains("\"type\":\"ready\"") {
            match data.next().await {
                Some(Ok(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
    text
}
