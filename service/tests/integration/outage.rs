//! While Postgres is away: connections killed as a restart kills them answer 503 with
//! `Retry-After` (a read is retried on a fresh connection and succeeds), every request
//! and `/ready` answer 503 within a second, and everything recovers without a restart.
//! The machine's Postgres is shared, so an outage is a TCP proxy in front of it that
//! stops listening, and a restart is `pg_terminate_backend`. An outage is Postgres
//! only: SQLite is a file, it does not go away; on both, a request that waits for a
//! lock is not mistaken for an outage.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::api::Reply;
use crate::support::sea_orm::{ConnectionTrait, Database, DatabaseConnection};
use crate::support::{TestDb, db_test};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::app::AppState;
use loadout::auth::keys::Role;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

async fn send(
    state: &AppState,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> Reply {
    let body = body.map(|b| b.to_string().into_bytes());
    crate::support::api::send(state, method, path, key, body, None).await
}

/// The answer's `Retry-After`.
fn retry_after(reply: &Reply) -> Option<&str> {
    reply
        .headers
        .get(header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
}

fn code(reply: &Reply) -> &str {
    reply.body["error"]["code"].as_str().unwrap_or("")
}

/// A 503 in the one shape, with `Retry-After` in seconds.
fn assert_unavailable(reply: &Reply) {
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.body
    );
    let seconds = retry_after(reply).expect("Retry-After on a 503");
    assert!(
        seconds.parse::<u32>().is_ok_and(|s| s >= 1),
        "Retry-After: {seconds}"
    );
    assert!(reply.body["error"]["message"].is_string(), "{}", reply.body);
}

/// Kills every connection to the test database, as a Postgres restart does, and
/// (`wait`) waits until they are gone; under load the pool opens new ones at once.
async fn kill_connections(db: &TestDb, wait: bool) {
    let admin_url = std::env::var("LOADOUT_TEST_POSTGRES_URL").expect("postgres url");
    let admin = Database::connect(&admin_url)
        .await
        .expect("admin connection");
    let name = db
        .url
        .rsplit('/')
        .next()
        .expect("database name")
        .split('?')
        .next()
        .expect("name");
    let others =
        format!("FROM pg_stat_activity WHERE datname = '{name}' AND pid <> pg_backend_pid()");
    admin
        .execute_unprepared(&format!("SELECT pg_terminate_backend(pid) {others}"))
        .await
        .expect("terminate");
    if wait {
        gone(&admin, &others).await;
    }
    admin.close().await.ok();
}

/// Waits until no connection that `others` selects is left.
async fn gone(admin: &DatabaseConnection, others: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = admin
            .query_one_raw(crate::support::sea_orm::Statement::from_string(
                admin.get_database_backend(),
                format!("SELECT count(*) AS n {others}"),
            ))
            .await
            .expect("count")
            .and_then(|row| row.try_get::<i64>("", "n").ok())
            .unwrap_or(0);
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} connections outlived pg_terminate_backend"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Warms the pool so that it holds idle connections for a kill to leave dead.
async fn warm(state: &AppState, admin: &str) {
    for _ in 0..3 {
        let reply = send(state, Method::GET, "/v1/agents", Some(admin), None).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_makes_a_write_answer_503_with_retry_after_and_a_read_retry_on_a_fresh_connection()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let db = db.seeded().await;
    let admin = db.key("admin", Role::Operator).await;
    let agent = db.key("agent", Role::Agent).await;
    let state = crate::support::app::state(&db, &[]).await;

    // A write on a killed connection is not retried: its 503 says when to retry.
    warm(&state, &admin).await;
    kill_connections(&db, true).await;
    let put = send(
        &state,
        Method::PUT,
        "/v1/agents/assistant/prompt-template",
        Some(&admin),
        Some(json!({"template": "After the restart. $soul"})),
    )
    .await;
    assert_unavailable(&put);
    assert_eq!(code(&put), "unavailable");

    // The next write works: the dead connections are not reused.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let put = send(
            &state,
            Method::PUT,
            "/v1/agents/assistant/prompt-template",
            Some(&admin),
            Some(json!({"template": "After the restart. $soul"})),
        )
        .await;
        if put.status == StatusCode::OK {
            break;
        }
        assert_unavailable(&put);
        assert!(
            Instant::now() < deadline,
            "writes did not recover: {}",
            put.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A read on a killed connection (an uncached key and agent) is retried on a fresh
    // connection: the client sees its answer.
    warm(&state, &admin).await;
    kill_connections(&db, true).await;
    let prompt = send(
        &state,
        Method::GET,
        "/v1/agents/assistant/prompt?channel=web",
        Some(&agent),
        None,
    )
    .await;
    assert_eq!(prompt.status, StatusCode::OK, "{}", prompt.body);
}

/// A TCP proxy in front of the shared Postgres that can go away and come back on
/// the same port: refused connections and reset sockets, as a real outage gives.
struct Proxy {
    port: u16,
    running: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Proxy {
    async fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let proxy = Proxy {
            port,
            running: Arc::default(),
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let running = self.running.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let piping = tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect("127.0.0.1:5432").await {
                        tokio::io::copy_bidirectional(&mut client, &mut server)
                            .await
                            .ok();
                    }
                });
                running.lock().expect("lock").push(piping);
            }
        });
        self.running.lock().expect("lock").push(accept);
    }

    /// Stops listening and cuts every connection.
    fn outage(&self) {
        for task in self.running.lock().expect("lock").drain(..) {
            task.abort();
        }
    }

    /// Listens again on the same port.
    async fn recover(&self) {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("reuseaddr");
        socket
            .bind(([127, 0, 0, 1], self.port).into())
            .expect("rebind the proxy's port");
        self.serve(socket.listen(64).expect("listen"));
    }

    /// `url` with its host and port replaced by the proxy's.
    fn url(&self, url: &str) -> String {
        let (head, rest) = url.split_once('@').expect("user@host");
        let path = &rest[rest.find('/').expect("/db")..];
        format!("{head}@127.0.0.1:{}{path}", self.port)
    }
}

/// `(reply, how long it took)`.
async fn timed(state: &AppState, path: &str, key: Option<&str>) -> (Reply, Duration) {
    let started = Instant::now();
    let reply = send(state, Method::GET, path, key, None).await;
    (reply, started.elapsed())
}

/// A console page that needs the database (a session to look up) is a 503 page,
/// not JSON, with `Retry-After`, while the breaker is open.
async fn console_page_is_a_fast_503(state: &AppState) {
    let request = Request::builder()
        .uri("/console/")
        .header(
            header::COOKIE,
            "loadout_session=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        )
        .body(Body::empty())
        .expect("request");
    let started = Instant::now();
    let response = crate::support::api::request_reply(state, request).await;
    let took = started.elapsed();
    assert_eq!(response.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        took < Duration::from_secs(2),
        "the console page took {took:?}"
    );
    assert!(response.headers.contains_key(header::RETRY_AFTER));
    let content_type = response
        .headers
        .get(header::CONTENT_TYPE)
        .expect("content type");
    assert!(
        content_type
            .to_str()
            .expect("ascii")
            .starts_with("text/html"),
        "{content_type:?}"
    );
}

/// The bound: while the database is away, every request is answered within a
/// second (a generous bound: the fast paths take a few hundred milliseconds).
const WITHIN: Duration = Duration::from_secs(1);

/// A request during the outage: a 503 with `Retry-After`, within [`WITHIN`].
async fn answered_503_within_a_second(
    state: &AppState,
    method: Method,
    path: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> Reply {
    let started = Instant::now();
    let reply = send(state, method.clone(), path, key, body).await;
    let took = started.elapsed();
    assert_unavailable(&reply);
    assert!(
        took < WITHIN,
        "{method} {path} took {took:?} during the outage"
    );
    eprintln!("{method} {path} during the outage: {took:?}");
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_an_outage_every_request_answers_within_a_second_ready_is_503_and_recovery_is_automatic()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let db = db.seeded().await;
    let admin = db.key("admin", Role::Operator).await;
    let agent = db.key("agent", Role::Agent).await;
    let newcomer = db.key("newcomer", Role::Agent).await;
    let proxy = Proxy::start().await;
    let state = crate::support::app::state_at(&proxy.url(&db.url), &[]).await;
    let cached = "/v1/agents/assistant/prompt?channel=web";
    assert_eq!(
        send(&state, Method::GET, cached, Some(&agent), None)
            .await
            .status,
        StatusCode::OK
    );
    warm(&state, &admin).await;

    proxy.outage();
    // The first request finds the database gone (a key not cached yet): not after the
    // pool's 5 s acquire timeout, nor after a retried read's second.
    answered_503_within_a_second(&state, Method::GET, cached, Some(&newcomer), None).await;
    // Every request that needs the database, and /ready, again and again: never a 200.
    let write = json!({"template": "During the outage. $soul"});
    for _ in 0..3 {
        answered_503_within_a_second(&state, Method::GET, "/v1/agents", Some(&admin), None).await;
        answered_503_within_a_second(
            &state,
            Method::PUT,
            "/v1/agents/assistant/prompt-template",
            Some(&admin),
            Some(write.clone()),
        )
        .await;
        let ready = answered_503_within_a_second(&state, Method::GET, "/ready", None, None).await;
        assert_eq!(code(&ready), "not_ready");
    }
    // A cached answer is still served.
    let (reply, _) = timed(&state, cached, Some(&agent)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    console_page_is_a_fast_503(&state).await;

    // The database comes back: requests work again without a restart.
    proxy.recover().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (reply, _) = timed(&state, "/v1/agents", Some(&admin)).await;
        if reply.status == StatusCode::OK {
            break;
        }
        assert_unavailable(&reply);
        assert!(Instant::now() < deadline, "no recovery: {}", reply.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // `/ready` follows once the breaker's probe has reached the database (it may
    // lag the first request that got through).
    loop {
        let (ready, _) = timed(&state, "/ready", None).await;
        if ready.status == StatusCode::OK {
            break;
        }
        assert_eq!(code(&ready), "not_ready", "{}", ready.body);
        assert!(
            Instant::now() < deadline,
            "/ready stays 503: {}",
            ready.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_whose_pool_holds_no_connection_answers_503_within_a_second_when_the_database_is_away()
 {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let db = db.seeded().await;
    let admin = db.key("admin", Role::Operator).await;
    let proxy = Proxy::start().await;
    let state = crate::support::app::state_at(&proxy.url(&db.url), &[]).await;
    warm(&state, &admin).await;
    // The pool's connections all closed (a pool idle past its timeout holds none): the
    // next request must open one, and the pool retries a refused connection for 5 s.
    let pool = state.db.get_postgres_connection_pool();
    while let Some(idle) = pool.try_acquire() {
        idle.close().await.ok();
    }
    proxy.outage();
    answered_503_within_a_second(
        &state,
        Method::PUT,
        "/v1/agents/assistant/prompt-template",
        Some(&admin),
        Some(json!({"template": "x $soul"})),
    )
    .await;
    let ready = answered_503_within_a_second(&state, Method::GET, "/ready", None, None).await;
    assert_eq!(code(&ready), "not_ready");
    proxy.recover().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_answers_within_about_a_second_while_the_database_does_not() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let db = db.seeded().await;
    let state = crate::support::app::state(&db, &[]).await;
    // The database is up but does not answer /ready's query: a lock is held on
    // the migration table.
    let holder = db.reconnect().await;
    let lock = crate::support::sea_orm::TransactionTrait::begin(&holder)
        .await
        .expect("begin");
    lock.execute_unprepared("LOCK TABLE seaql_migrations IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock");

    // Bounded here too: without the fix /ready would wait for the lock for ever.
    let (ready, took) =
        tokio::time::timeout(Duration::from_secs(10), timed(&state, "/ready", None))
            .await
            .expect("/ready answered");
    assert_unavailable(&ready);
    assert_eq!(code(&ready), "not_ready");
    assert_eq!(
        ready.body["error"]["message"],
        "the database did not answer within 1 s"
    );
    assert!(took < Duration::from_secs(2), "/ready took {took:?}");

    lock.rollback().await.expect("rollback");
    let (ready, _) = timed(&state, "/ready", None).await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.body);
}

/// Requests from one client until `stop`: admin reads, agents' fetches for new
/// users (a read of their instructions each) and template writes. Returns the
/// answers as `(status, Retry-After present)`.
async fn client(
    state: AppState,
    admin: String,
    agent: String,
    n: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(StatusCode, bool)> {
    let mut seen = Vec::new();
    let mut i = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        i += 1;
        let reply = match i % 3 {
            0 => send(&state, Method::GET, "/v1/agents", Some(&admin), None).await,
            1 => {
                let path = format!("/v1/agents/assistant/prompt?channel=web&user_id=u{n}-{i}");
                send(&state, Method::GET, &path, Some(&agent), None).await
            }
            _ => {
                let template = json!({"template": format!("Client {n}, write {i}. $soul")});
                let path = "/v1/agents/assistant/prompt-template";
                send(&state, Method::PUT, path, Some(&admin), Some(template)).await
            }
        };
        seen.push((reply.status, retry_after(&reply).is_some()));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_load_an_outage_and_killed_connections_answer_only_200_or_503_with_retry_after() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let db = db.seeded().await;
    let admin = db.key("admin", Role::Operator).await;
    let agent = db.key("agent", Role::Agent).await;
    let proxy = Proxy::start().await;
    let state = crate::support::app::state_at(&proxy.url(&db.url), &[]).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|n| {
            tokio::spawn(client(
                state.clone(),
                admin.clone(),
                agent.clone(),
                n,
                stop.clone(),
            ))
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(300)).await;
    kill_connections(&db, false).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.outage();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    proxy.recover().await;
    // Recovery is bounded, not timed: on a loaded machine the pool may need a
    // few seconds to reconnect, so wait (up to 20 s) for the first read that is
    // served again, then let the clients run on for a while.
    let recovered = tokio::time::timeout(Duration::from_secs(20), async {
        while send(&state, Method::GET, "/v1/agents", Some(&admin), None)
            .await
            .status
            != StatusCode::OK
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(
        recovered.is_ok(),
        "not served again 20 s after the recovery"
    );
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);

    let mut answers = Vec::new();
    let mut last = Vec::new();
    for client in clients {
        let seen = client.await.expect("a client's answers match the contract");
        last.extend(seen.last().copied());
        answers.extend(seen);
    }
    let unavailable = answers
        .iter()
        .filter(|(s, _)| *s == StatusCode::SERVICE_UNAVAILABLE)
        .count();
    eprintln!("{} answers, {unavailable} of them 503", answers.len());
    for (status, retry_after) in &answers {
        assert!(
            *status == StatusCode::OK
                || (*status == StatusCode::SERVICE_UNAVAILABLE && *retry_after),
            "{status} (Retry-After: {retry_after}) among {answers:?}"
        );
    }
    assert!(unavailable > 0, "the outage was not seen");
    // Recovered: every client's last answer was served.
    assert!(last.iter().all(|(s, _)| *s == StatusCode::OK), "{last:?}");
}

db_test! {
    async fn a_request_that_waits_for_a_lock_is_not_taken_for_an_outage(db) {
        let db = db.seeded().await;
        let admin = db.key("admin", Role::Operator).await;
        let state = crate::support::app::state(&db, &[]).await;
        // Another connection holds the write lock (SQLite) or the agent's row
        // (Postgres) for longer than a request waits before it is watched.
        let holder = db.reconnect().await;
        let held = loadout::db::begin_write(&holder).await.expect("begin");
        held.execute_unprepared("UPDATE agent_configurations SET updated_at = updated_at WHERE name = 'assistant'")
            .await
            .expect("hold the row");
        let write = {
            let (state, admin) = (state.clone(), admin.clone());
            tokio::spawn(async move {
                let template = json!({"template": "After the lock. $soul"});
                send(&state, Method::PUT, "/v1/agents/assistant/prompt-template", Some(&admin), Some(template)).await
            })
        };
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // Meanwhile reads are served.
        let read = send(&state, Method::GET, "/v1/agents", Some(&admin), None).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.body);
        held.commit().await.expect("release");

        let written = write.await.expect("the write");
        assert_eq!(written.status, StatusCode::OK, "the write waited for the lock: {}", written.body);
    }
}
