//! One client address against everyone else, on real sockets through the real
//! connection loop (`transport::server::serve` with `loadout serve`'s limits): a body
//! trickled on more sockets than the global cap, a body below the minimum rate,
//! more connections than one address may hold, an oversized sign-in form, and
//! failed authentications. Client sockets are bound to their own loopback
//! addresses (127.0.0.0/8 is all loopback on Linux), so each test is one address.
//!
//! The only timed assertion is the issue's "within 1 s" for the other clients'
//! requests during the trickle; other waits are generous bounds for a test that
//! would otherwise hang on the code before the limits.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use crate::support::{TestApp, TestDb, db_test};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;

/// The issue's bound for everyone else's requests while one address attacks.
const WITHIN: Duration = Duration::from_secs(1);

struct Served {
    app: TestApp,
    addr: SocketAddr,
}

/// A server on 127.0.0.1 with `serve`'s connection loop and the limits `flags` give.
async fn serve(db: TestDb, flags: &[&str]) -> Served {
    let mut app = TestApp::builder(db);
    for flag in flags {
        app = app.flag(*flag);
    }
    let app = app.build().await;
    let addr = app.listen().await;
    Served { app, addr }
}

/// A connection to `to` from the loopback address `from`.
async fn connect(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("ip")
}

/// One request on a new connection from `from` (`Connection: close`): the status
/// and the body. `Err` when the connection fails.
async fn request(
    from: IpAddr,
    to: SocketAddr,
    head: &str,
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>, String)> {
    let mut stream = connect(from, to).await?;
    let mut message = format!(
        "{head}Host: {to}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    message.extend_from_slice(body);
    stream.write_all(&message).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    parse(&answer).ok_or_else(|| {
        std::io::Error::other(format!(
            "no whole answer: {:?}",
            String::from_utf8_lossy(&answer)
        ))
    })
}

/// A whole HTTP/1.1 answer: status, body and head.
fn parse(answer: &[u8]) -> Option<(u16, Vec<u8>, String)> {
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, answer[split + 4..].to_vec(), head))
}

/// A GET with a key from `from`, its answer checked against the API contract.
async fn get(
    from: IpAddr,
    to: SocketAddr,
    path: &str,
    key: Option<&str>,
) -> (u16, Vec<u8>, String) {
    let authorization = key
        .map(|k| format!("Authorization: Bearer {k}\r\n"))
        .unwrap_or_default();
    let head = format!("GET {path} HTTP/1.1\r\n{authorization}");
    let (status, body, head) = request(from, to, &head, b"")
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    crate::support::contract::check("GET", path, status, &body).unwrap_or_else(|e| panic!("{e}"));
    (status, body, head)
}

/// Opens `sockets` connections from `from`, each sending the head of a console
/// sign-in that declares a 4,000-byte form and then one byte of it every `every`
/// for as long as the set lives: the slow-body attack. Returns once every
/// connection is open and has sent its head (a refused one counts too).
async fn trickle(from: IpAddr, to: SocketAddr, sockets: usize, every: Duration) -> JoinSet<()> {
    let (opened, mut ready) = tokio::sync::mpsc::channel(sockets);
    let mut attack = JoinSet::new();
    for _ in 0..sockets {
        let opened = opened.clone();
        attack.spawn(async move {
            let Ok(mut stream) = connect(from, to).await else {
                opened.send(()).await.ok();
                return;
            };
            let head = format!(
                "POST /console/sign-in HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\nk"
            );
            let sent = stream.write_all(head.as_bytes()).await;
            opened.send(()).await.ok();
            if sent.is_err() {
                return;
            }
            loop {
                tokio::time::sleep(every).await;
                if stream.write_all(b"e").await.is_err() {
                    return;
                }
            }
        });
    }
    for _ in 0..sockets {
        ready.recv().await;
    }
    // Let the server take in what the kernel has queued.
    tokio::time::sleep(Duration::from_millis(300)).await;
    attack
}

/// `work`, which must finish within the issue's bound.
async fn within_a_second<T>(what: &str, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(WITHIN, work)
        .await
        .unwrap_or_else(|_| {
            panic!("{what} did not answer within {WITHIN:?} while 127.0.0.2 trickled")
        })
}

/// The global cap for the trickle test: 128 unless `LOADOUT_TRICKLE_MAX_CONNECTIONS`
/// says otherwise (`bench/trickle.sh` runs it with the default, 1,024, too).
fn trickle_cap() -> usize {
    std::env::var("LOADOUT_TRICKLE_MAX_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

db_test! {
    /// The issue's measurement: more trickling sockets than the global cap, all
    /// from 127.0.0.2, and /health, an agent fetch and an MCP call from 127.0.0.1
    /// each answer within a second. Before the per-address cap, the attack held
    /// every slot and the other requests waited in the accept queue.
    async fn a_trickle_on_more_sockets_than_the_global_cap_leaves_other_clients_answered_within_a_second(db) {
        let cap = trickle_cap();
        let served = serve(db, &["--max-connections", &cap.to_string()]).await;
        let sockets = cap + cap / 4;
        let attack = trickle(ip("127.0.0.2"), served.addr, sockets, Duration::from_secs(2)).await;
        let local = ip("127.0.0.1");

        let timed = std::time::Instant::now();
        let (status, _, _) = within_a_second("/health", get(local, served.addr, "/health", None)).await;
        assert_eq!(status, 200);
        let health = timed.elapsed();
        let timed = std::time::Instant::now();
        let path = "/v1/agents/assistant/prompt?channel=web";
        let (status, body, _) = within_a_second("an agent fetch", get(local, served.addr, path, Some(&served.app.agent))).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let fetch = timed.elapsed();
        let timed = std::time::Instant::now();
        let endpoint = format!("http://{}/mcp/agents/assistant?channel=web", served.addr);
        let client = within_a_second("MCP initialize", mcp::connect(&endpoint, &served.app.agent))
            .await
            .expect("initialize");
        let initialize = timed.elapsed();
        let timed = std::time::Instant::now();
        let tools = within_a_second("MCP tools/list", client.list_all_tools()).await.expect("tools/list");
        assert!(!tools.is_empty());
        let list = timed.elapsed();
        eprintln!(
            "trickle: {:?}, {sockets} sockets from 127.0.0.2, --max-connections {cap}: /health {health:.1?}, agent fetch {fetch:.1?}, MCP initialize {initialize:.1?}, MCP tools/list {list:.1?}",
            served.app.db.backend
        );
        drop(attack);
    }
}

/// Waits (at most `bound`) for the server to answer or close `stream`: the bytes
/// it sent before closing; `None` when it kept the connection open all along.
async fn closed_within(stream: &mut TcpStream, bound: Duration) -> Option<Vec<u8>> {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(bound, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
        }
    });
    read.await.ok().map(|()| answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holds_at_most_64_connections_and_the_next_is_closed_at_once() {
    let served = serve(TestDb::sqlite().await, &["--max-connections", "256"]).await;
    let from = ip("127.0.0.4");
    let mut held = Vec::new();
    for _ in 0..63 {
        held.push(connect(from, served.addr).await.expect("connect"));
    }
    // The accept loop takes connections in order: once a request on the 64th is
    // answered, all 64 are counted.
    let mut last = connect(from, served.addr).await.expect("connect");
    let health = format!("GET /health HTTP/1.1\r\nHost: {}\r\n\r\n", served.addr);
    last.write_all(health.as_bytes()).await.expect("send");
    let mut first = [0u8; 12];
    last.read_exact(&mut first)
        .await
        .expect("the 64th is served");
    assert_eq!(&first, b"HTTP/1.1 200");
    held.push(last);
    let mut over = connect(from, served.addr)
        .await
        .expect("the kernel accepts");
    let answer = closed_within(&mut over, Duration::from_secs(5)).await;
    assert_eq!(
        answer.as_deref(),
        Some(&b""[..]),
        "the 65th connection is closed without an answer"
    );
    let (status, _, _) = get(ip("127.0.0.1"), served.addr, "/health", None).await;
    assert_eq!(status, 200, "other addresses are served");
    held.clear();
    let served_again = async {
        loop {
            match request(from, served.addr, "GET /health HTTP/1.1\r\n", b"").await {
                Ok((200, _, _)) => return,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), served_again)
        .await
        .expect("closed connections give their places back");
}

#[test]
fn every_operation_behind_a_key_documents_429_with_retry_after() {
    let document = loadout::http::openapi();
    let paths = document["paths"].as_object().expect("paths");
    for (path, item) in paths {
        let operations = item.as_object().expect("path item");
        for (method, operation) in operations
            .iter()
            .filter(|(_, o)| o.get("responses").is_some())
        {
            let open = operation["security"].as_array().is_some_and(|s| {
                s.iter()
                    .all(|r| r.as_object().is_some_and(|r| r.is_empty()))
            });
            let answer = &operation["responses"]["429"];
            assert_eq!(answer.is_object(), !open, "{method} {path}");
            if !open {
                assert!(
                    answer["headers"]["Retry-After"].is_object(),
                    "{method} {path}"
                );
            }
        }
    }
}

/// The head of a console sign-in declaring `length` bytes of form.
fn sign_in_head(to: SocketAddr, length: usize) -> String {
    format!(
        "POST /console/sign-in HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_trickled_below_the_minimum_rate_is_cut_and_its_connection_closed() {
    let served = serve(TestDb::sqlite().await, &[]).await;
    let mut stream = connect(ip("127.0.0.3"), served.addr)
        .await
        .expect("connect");
    stream
        .write_all(sign_in_head(served.addr, 4000).as_bytes())
        .await
        .expect("head");
    let (reader, mut writer) = stream.split();
    let trickle = async {
        // Four bytes a second, far below the default 1,024 after the 5 s grace.
        for _ in 0..200 {
            if writer.write_all(b"k").await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    };
    let mut reader = reader;
    let answer = async {
        let mut answer = Vec::new();
        reader.read_to_end(&mut answer).await.ok();
        answer
    };
    let answer = tokio::select! {
        answer = answer => answer,
        () = trickle => panic!("the server read a trickled body for 50 s"),
    };
    let (status, body, _) = parse(&answer).expect("an answer before the close");
    assert_eq!(status, 400);
    let page = String::from_utf8_lossy(&body);
    assert!(page.contains("slower than 1024 bytes a second"), "{page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_form_over_4_kib_is_refused_before_it_is_read() {
    let served = serve(TestDb::sqlite().await, &[]).await;
    let mut stream = connect(ip("127.0.0.6"), served.addr)
        .await
        .expect("connect");
    stream
        .write_all(sign_in_head(served.addr, 4097).as_bytes())
        .await
        .expect("head");
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .expect("answered without the body");
    let (status, _, head) = parse(&answer).expect("an answer");
    assert_eq!(status, 413, "{head}");
    // Undeclared (chunked), the form is cut at 4 KiB too.
    let mut stream = connect(ip("127.0.0.6"), served.addr)
        .await
        .expect("connect");
    let form = format!("key={}", "a".repeat(5000));
    let chunked = format!(
        "POST /console/sign-in HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{form}\r\n0\r\n\r\n",
        served.addr,
        form.len()
    );
    stream.write_all(chunked.as_bytes()).await.expect("send");
    let answer = closed_within(&mut stream, Duration::from_secs(5))
        .await
        .expect("answered");
    let (status, _, head) = parse(&answer).expect("an answer");
    assert_eq!(status, 413, "{head}");
}

/// A well-formed key that does not exist (a different one each time).
fn unknown_key(n: usize) -> String {
    format!("lo_{n:012x}_{n:064x}")
}

db_test! {
    /// Bad keys from one address, on the API, MCP and the console sign-in: after
    /// the default 20 a minute, 429 with `Retry-After`; a valid key (even one
    /// never seen before) keeps working from there, and other addresses are untouched.
    async fn failed_authentications_from_one_address_are_answered_429_with_retry_after(db) {
        let served = serve(db, &[]).await;
        let (from, local) = (ip("127.0.0.5"), ip("127.0.0.1"));
        let path = "/v1/agents/assistant/prompt?channel=web";
        let (status, _, _) = get(local, served.addr, path, Some(&served.app.agent)).await;
        assert_eq!(status, 200, "the agent's key is known (and cached)");
        for n in 0..20 {
            let (status, _, _) = get(from, served.addr, path, Some(&unknown_key(n))).await;
            assert_eq!(status, 401, "failure {n} is answered as such");
        }
        let (status, body, head) = get(from, served.addr, path, Some(&unknown_key(20))).await;
        assert_eq!(status, 429, "{head}");
        let body: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(body["error"]["code"], "too_many_failures", "{body}");
        let retry_after = head
            .lines()
            .find_map(|l| l.strip_prefix("retry-after: "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert!(matches!(retry_after, Some(1..=60)), "{head}");

        let mcp = format!(
            "POST /mcp/agents/assistant HTTP/1.1\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            unknown_key(21)
        );
        let tools_list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let (status, body, _) = request(from, served.addr, &mcp, tools_list).await.expect("mcp");
        assert_eq!(status, 429, "{}", String::from_utf8_lossy(&body));
        let sign_in = "POST /console/sign-in HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n";
        let form = format!("key={}", unknown_key(22));
        let (status, _, head) = request(from, served.addr, sign_in, form.as_bytes()).await.expect("sign-in");
        assert_eq!(status, 429, "{head}");
        assert!(head.contains("retry-after: "), "{head}");

        let fresh = served.app.key("fresh-agent", loadout::auth::keys::Role::Agent).await;
        let (status, _, _) = get(from, served.addr, path, Some(&fresh)).await;
        assert_eq!(status, 200, "a valid key, even one never seen, is not refused");
        let (status, _, _) = get(local, served.addr, path, Some(&unknown_key(23))).await;
        assert_eq!(status, 401, "another address is not limited");
    }
}

db_test! {
    /// A flood of 5,000 bad tokens from one address (malformed and well-formed
    /// unknown keys, alternating) with a valid agent key sent from the same
    /// address every tenth request, never seen before the flood: every one of
    /// the valid key's requests is answered 200, while the flood is refused.
    async fn a_flood_of_bad_tokens_from_one_address_leaves_a_valid_key_there_answered(db) {
        let served = serve(db, &[]).await;
        let from = ip("127.0.0.7");
        let path = "/v1/agents/assistant/prompt?channel=web";
        let good = served.app.key("behind-the-nat", loadout::auth::keys::Role::Agent).await;
        let (mut refused, mut good_answers) = (0, Vec::new());
        for n in 0..5_000 {
            let bad = match n % 2 {
                0 => unknown_key(n),
                _ => format!("garbage-{n}"),
            };
            let (status, _, _) = get(from, served.addr, path, Some(&bad)).await;
            assert!(status == 401 || status == 429, "bad token {n}: {status}");
            refused += usize::from(status == 429);
            if n % 10 == 9 {
                let (status, _, _) = get(from, served.addr, path, Some(&good)).await;
                good_answers.push(status);
            }
        }
        assert!(refused > 4_000, "the flood itself is limited: {refused} 429s");
        assert_eq!(good_answers.len(), 500);
        assert!(
            good_answers.iter().all(|s| *s == 200),
            "the valid key got {:?}",
            good_answers.iter().filter(|s| **s != 200).collect::<Vec<_>>()
        );
    }
}

mod mcp {
    use rmcp::ServiceExt;
    use rmcp::service::{RoleClient, RunningService};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    /// An initialized MCP session over Streamable HTTP (loadout's own outbound
    /// client: rustls on ring, loopback allowed).
    pub async fn connect(url: &str, key: &str) -> Result<RunningService<RoleClient, ()>, String> {
        let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(key);
        let client = loadout::connectors::client::Outbound::new(
            vec!["127.0.0.1".parse().expect("ip")],
            None,
        )
        .expect("client")
        .client()
        .clone();
        ().serve(StreamableHttpClientTransport::with_client(client, config))
            .await
            .map_err(|e| e.to_string())
    }
}
