//! Three replicas on one Postgres behind a real HAProxy, with the deployment
//! recipe as shipped: `deploy/haproxy.cfg` (only its addresses changed to free
//! ports) and each replica started with `deploy/loadout@.service`'s `ExecStart`.
//!
//! Under a steady load through the balancer: a replica killed (SIGKILL) and
//! started again, then every replica restarted in turn (SIGTERM, which drains),
//! with no failed request; an edit through the balancer served by every replica;
//! an MCP 2025-11-25 session kept on its replica by the stickiness rule.
//!
//! Needs `haproxy` (Debian's package; `.ci/run` installs it) and Postgres
//! (`LOADOUT_TEST_POSTGRES_URL`). Without haproxy it says it was skipped, unless
//! `LOADOUT_REQUIRE_HAPROXY=1` (as CI sets) makes that a failure.

#[allow(dead_code, unused_imports, unused_macros)]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::TestDb;
use crate::support::wire::{KeepAlive, http, status_line, try_http};

const HAPROXY: &str = "/usr/sbin/haproxy";

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn haproxy_installed() -> bool {
    let there = Path::new(HAPROXY).exists();
    assert!(
        there || std::env::var("LOADOUT_REQUIRE_HAPROXY").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_HAPROXY=1 but {HAPROXY} is missing (apt-get install haproxy)"
    );
    if !there {
        eprintln!("skipped: no {HAPROXY} (apt-get install haproxy)");
    }
    there
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn loadout(url: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(args)
        .env("DATABASE_URL", url)
        .env_remove("RUST_LOG")
        .output()
        .expect("run loadout");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned()
}

/// A replica started as the unit starts it: its `ExecStart` with `%i` the port.
fn start_replica(url: &str, port: u16, logs: &Path) -> Child {
    let unit = deploy("loadout@.service");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let mut words = exec.split_whitespace();
    words.next(); // the installed binary's path; this build's instead
    let args: Vec<String> = words.map(|w| w.replace("%i", &port.to_string())).collect();
    let log = std::fs::File::create(logs.join(format!("replica-{port}.log"))).expect("log");
    Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(&args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start a replica")
}

fn wait_ready(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = try_http(addr, "GET", "/ready", &[], "")
            .is_ok_and(|(head, _)| status_line(&head).contains(" 200 "));
        if ready {
            return;
        }
        assert!(Instant::now() < deadline, "{addr} never became ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn signal(child: &Child, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// Long enough for HAProxy (`inter 500ms rise 2`) to take a ready replica back.
const CHECKS_SEE_IT: Duration = Duration::from_millis(1500);

/// Readers through the balancer until stopped: how many answered 200, and what
/// every other answer was.
struct Load {
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
    failed: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(balancer: &str, key: &str, readers: usize) -> Load {
        let (stop, served, failed) = (Arc::default(), Arc::default(), Arc::default());
        let threads = (0..readers)
            .map(|_| {
                let (stop, served, failed): (
                    Arc<AtomicBool>,
                    Arc<AtomicUsize>,
                    Arc<Mutex<Vec<String>>>,
                ) = (Arc::clone(&stop), Arc::clone(&served), Arc::clone(&failed));
                let (balancer, authorization) = (balancer.to_owned(), format!("Bearer {key}"));
                std::thread::spawn(move || {
                    let mut connection = KeepAlive::new(&balancer);
                    let path = "/v1/agents/assistant/prompt?channel=web";
                    while !stop.load(Ordering::Relaxed) {
                        match connection.get(path, &[("Authorization", &authorization)]) {
                            Ok((status, _)) if status.contains(" 200 ") => {
                                served.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok((status, body)) => failed
                                .lock()
                                .expect("lock")
                                .push(format!("{status}: {body:.200}")),
                            Err(e) => failed.lock().expect("lock").push(e.to_string()),
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            served,
            failed,
            threads,
        }
    }

    fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            thread.join().expect("a reader");
        }
        let failed = self.failed.lock().expect("lock").clone();
        (self.served.load(Ordering::Relaxed), failed)
    }
}

/// A 2025-11-25 session through the balancer: `initialize`, then `tools/list`
/// several times; every one must reach the replica that holds the session.
fn mcp_session_sticks(balancer: &str, key: &str) {
    let authorization = format!("Bearer {key}");
    let headers = [
        ("Authorization", authorization.as_str()),
        ("Accept", "application/json, text/event-stream"),
    ];
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"replicas","version":"0"}}}"#;
    let (head, body) =
        try_http(balancer, "POST", "/mcp", &headers, initialize).expect("initialize");
    assert!(status_line(&head).contains(" 200 "), "{head}\n{body}");
    let session = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("a session id: {head}"));
    let in_session = [
        headers[0],
        headers[1],
        ("Mcp-Session-Id", session.as_str()),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    try_http(balancer, "POST", "/mcp", &in_session, initialized).expect("initialized");
    for n in 2..8 {
        let list = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/list"}}"#);
        let (head, body) =
            try_http(balancer, "POST", "/mcp", &in_session, &list).expect("tools/list");
        assert!(
            status_line(&head).contains(" 200 ") && body.contains("create_memories"),
            "request {n} of the session left its replica: {head}\n{body:.300}"
        );
    }
}

#[tokio::test]
async fn three_replicas_behind_haproxy_lose_no_request_to_a_kill_or_a_rolling_restart() {
    if !haproxy_installed() {
        return;
    }
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let url = db.url.clone();
    loadout(&url, &["migrate", "up"]);
    loadout(&url, &["seed"]);
    let admin = loadout(
        &url,
        &["keys", "create", "--role", "operator", "--name", "lb-admin"],
    );
    let agent = loadout(
        &url,
        &[
            "keys",
            "create",
            "--role",
            "agent",
            "--agent",
            "assistant",
            "--name",
            "lb-agent",
        ],
    );

    let work: PathBuf =
        std::env::temp_dir().join(format!("loadout-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("a work directory");
    let ports = [free_port(), free_port(), free_port()];
    let balancer = format!("127.0.0.1:{}", free_port());
    let mut config = deploy("haproxy.cfg").replace("127.0.0.1:8080", &balancer);
    for (n, port) in ports.iter().enumerate() {
        config = config.replace(
            &format!("127.0.0.1:808{}", n + 1),
            &format!("127.0.0.1:{port}"),
        );
    }
    let config_path = work.join("haproxy.cfg");
    std::fs::write(&config_path, config).expect("write the configuration");
    let mut haproxy = Command::new(HAPROXY)
        .args(["-db", "-f"])
        .arg(&config_path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join("haproxy.log")).expect("log"))
        .spawn()
        .expect("start haproxy");

    let mut replicas: Vec<Child> = ports
        .iter()
        .map(|p| start_replica(&url, *p, &work))
        .collect();
    for port in ports {
        wait_ready(&format!("127.0.0.1:{port}"));
    }
    std::thread::sleep(CHECKS_SEE_IT);

    // An edit through the balancer is served by every replica.
    let marker = format!("Edited through the balancer {}.", std::process::id());
    let (status, body) = http(
        &balancer,
        "PUT",
        "/v1/agents/assistant/prompt-template",
        &admin,
        &format!(r#"{{"template": "{marker} $soul"}}"#),
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    for port in ports {
        let addr = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while !http(
            &addr,
            "GET",
            "/v1/agents/assistant/prompt?channel=web",
            &agent,
            "",
        )
        .1
        .contains(&marker)
        {
            assert!(
                Instant::now() < deadline,
                "replica {addr} never served the edit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    mcp_session_sticks(&balancer, &agent);

    let load = Load::start(&balancer, &agent, 4);
    std::thread::sleep(Duration::from_millis(500));
    // A replica killed outright, then started again.
    replicas[1].kill().expect("kill -9 a replica");
    replicas[1].wait().expect("reap it");
    std::thread::sleep(Duration::from_secs(1));
    replicas[1] = start_replica(&url, ports[1], &work);
    wait_ready(&format!("127.0.0.1:{}", ports[1]));
    std::thread::sleep(CHECKS_SEE_IT);
    // A rolling restart: each replica drains (SIGTERM) and starts again.
    for (n, port) in ports.iter().enumerate() {
        signal(&replicas[n], "TERM");
        let exit = replicas[n].wait().expect("wait for the replica");
        assert!(exit.success(), "replica {port} exited with {exit}");
        replicas[n] = start_replica(&url, *port, &work);
        wait_ready(&format!("127.0.0.1:{port}"));
        std::thread::sleep(CHECKS_SEE_IT);
    }
    let (served, failed) = load.finish();

    for mut child in replicas {
        child.kill().ok();
        child.wait().ok();
    }
    haproxy.kill().ok();
    haproxy.wait().ok();
    assert!(
        failed.is_empty(),
        "{} of {} requests failed, e.g. {:?} (logs in {})",
        failed.len(),
        served + failed.len(),
        &failed[..failed.len().min(5)],
        work.display()
    );
    assert!(served > 100, "the load barely ran: {served} requests");
    println!("served {served} requests through a kill and a rolling restart, none failed");
    std::fs::remove_dir_all(&work).ok();
}
