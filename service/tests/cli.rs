//! The `loadout` binary as an operator runs it: real processes, real databases.

#[allow(dead_code, unused_imports, unused_macros)]
mod support;

use std::process::{Command, Output};

use crate::support::TestDb;
use crate::support::wire::http;
use sea_orm::{ConnectionTrait, Statement};

fn loadout(database_url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .env_remove("RUST_LOG")
        .output()
        .expect("run the loadout binary")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

async fn status_lines(db: &TestDb) -> String {
    let out = loadout(&db.url, &["migrate", "status"]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

async fn up_then_status(db: TestDb) {
    let out = loadout(&db.url, &["migrate", "up"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("status_after_up", status_lines(&db).await);
}

#[tokio::test]
async fn migrate_up_then_status_lists_every_migration_on_sqlite() {
    up_then_status(TestDb::sqlite().await).await;
}

#[tokio::test]
async fn migrate_up_then_status_lists_every_migration_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    up_then_status(db).await;
}

#[tokio::test]
async fn the_database_url_flag_works_before_and_after_the_subcommand() {
    let db = TestDb::sqlite().await;
    let before = Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(["--database-url", &db.url, "migrate", "up", "-n", "1"])
        .env_remove("DATABASE_URL")
        .output()
        .expect("run");
    assert!(before.status.success(), "{}", stderr(&before));
    let after = Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(["migrate", "status", "--database-url", &db.url])
        .env_remove("DATABASE_URL")
        .output()
        .expect("run");
    assert_eq!(
        stdout(&after),
        "applied\tm20260224_000001_create_base_schema\npending\tm20260224_000002_canonicalize_tool_registry\npending\tm20260301_000003_channels_and_prompt_sections\npending\tm20260310_000004_keys_versions_generation\npending\tm20260320_000005_proposal_ledger\npending\tm20260401_000006_connectors\npending\tm20260410_000007_tenant_user_instructions\npending\tm20260410_000008_link_delete_reminders\npending\tm20261124_000009_console_sessions\npending\tm20261124_000010_mcp_connectors\npending\tm20261124_000011_agent_scoped_keys\npending\tm20261125_000012_synced_tool_schemas\npending\tm20261125_000013_idempotency_records\npending\tm20261125_000014_operator_role\npending\tm20261125_000015_key_names_per_tenant\npending\tm20261125_000016_agent_revisions\npending\tm20261125_000017_label_promotion\npending\tm20261126_000018_rollouts\npending\tm20261126_000019_outcomes\npending\tm20261126_000020_webhooks\npending\tm20261127_000021_members\npending\tm20261127_000022_tenant_bounds\npending\tm20261128_000023_policies\npending\tm20261128_000024_tool_contracts\npending\tm20261207_000025_guard_holds\npending\tm20261207_000026_evaluations\n"
    );
}

#[tokio::test]
async fn two_concurrent_migrate_up_processes_apply_each_migration_once() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_loadout"))
            .args(["migrate", "up"])
            .env("DATABASE_URL", &db.url)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let (first, second) = (spawn(), spawn());
    for child in [first, second] {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "a concurrent migrate up failed: {}",
            stderr(&out)
        );
    }
    let rows = db
        .conn
        .query_all_raw(Statement::from_string(
            db.conn.get_database_backend(),
            "SELECT version, COUNT(*) AS n FROM seaql_migrations GROUP BY version ORDER BY version",
        ))
        .await
        .expect("read the migration table");
    let recorded: Vec<(String, i64)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get("", "version").expect("version"),
                r.try_get("", "n").expect("n"),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("m20260224_000001_create_base_schema".to_owned(), 1),
            ("m20260224_000002_canonicalize_tool_registry".to_owned(), 1),
            (
                "m20260301_000003_channels_and_prompt_sections".to_owned(),
                1
            ),
            ("m20260310_000004_keys_versions_generation".to_owned(), 1),
            ("m20260320_000005_proposal_ledger".to_owned(), 1),
            ("m20260401_000006_connectors".to_owned(), 1),
            ("m20260410_000007_tenant_user_instructions".to_owned(), 1),
            ("m20260410_000008_link_delete_reminders".to_owned(), 1),
            ("m20261124_000009_console_sessions".to_owned(), 1),
            ("m20261124_000010_mcp_connectors".to_owned(), 1),
            ("m20261124_000011_agent_scoped_keys".to_owned(), 1),
            ("m20261125_000012_synced_tool_schemas".to_owned(), 1),
            ("m20261125_000013_idempotency_records".to_owned(), 1),
            ("m20261125_000014_operator_role".to_owned(), 1),
            ("m20261125_000015_key_names_per_tenant".to_owned(), 1),
            ("m20261125_000016_agent_revisions".to_owned(), 1),
            ("m20261125_000017_label_promotion".to_owned(), 1),
            ("m20261126_000018_rollouts".to_owned(), 1),
            ("m20261126_000019_outcomes".to_owned(), 1),
            ("m20261126_000020_webhooks".to_owned(), 1),
            ("m20261127_000021_members".to_owned(), 1),
            ("m20261127_000022_tenant_bounds".to_owned(), 1),
            ("m20261128_000023_policies".to_owned(), 1),
            ("m20261128_000024_tool_contracts".to_owned(), 1),
            ("m20261207_000025_guard_holds".to_owned(), 1),
            ("m20261207_000026_evaluations".to_owned(), 1),
        ]
    );
}

#[test]
fn an_unreachable_database_is_one_line_without_the_password() {
    let out = loadout(
        "postgres://app:hunter2@127.0.0.1:9/loadout",
        &["migrate", "status"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: cannot connect to database postgres://app:***@127.0.0.1:9/loadout"),
        "{err}"
    );
    assert!(!err.contains("hunter2"));
}

#[test]
fn a_malformed_database_url_is_refused_with_a_clear_error() {
    let out = loadout("mysql://root:pw@localhost/x", &["migrate", "up"]);
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!(stderr(&out), @"error: unsupported database URL mysql://root:***@localhost/x: use sqlite://FILE or postgres://USER@HOST/DB");
}

#[tokio::test]
async fn seed_twice_creates_once() {
    let db = TestDb::sqlite().await.migrated().await;
    let first = loadout(&db.url, &["seed"]);
    let second = loadout(&db.url, &["seed"]);
    assert_eq!(
        stdout(&first),
        "seed: created 1 agent, 23 links; already present: tools, channels\n"
    );
    assert_eq!(
        stdout(&second),
        "seed: nothing to create; every seeded row is already present\n"
    );
}

fn template(args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadout"))
        .arg("template")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write stdin");
    child.wait_with_output().expect("wait")
}

fn python_safe_substitute(text: &str, vars: &std::path::Path) -> String {
    let out = Command::new("python3")
        .args(["-c", "import json,string,sys; sys.stdout.write(string.Template(sys.stdin.read()).safe_substitute(json.load(open(sys.argv[1]))))"])
        .arg(vars)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .expect("python3 is required for the parity reference");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn template_render_matches_python_byte_for_byte() {
    let vars = std::env::temp_dir().join(format!("loadout-vars-{}.json", std::process::id()));
    std::fs::write(
        &vars,
        r#"{"soul": "kind $identity", "x": "1", "K": "kelvin"}"#,
    )
    .expect("write vars");
    let text = "Hi $soul ${x}$$ $5 $nope ${x\n$\u{212A} $K\r\n$";
    let out = template(
        &["render", "--vars", vars.to_str().expect("path")],
        text.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), python_safe_substitute(text, &vars));
    let _ = std::fs::remove_file(vars);
}

#[test]
fn strict_render_fails_on_the_first_problem_with_its_position() {
    let vars =
        std::env::temp_dir().join(format!("loadout-vars-strict-{}.json", std::process::id()));
    std::fs::write(&vars, r#"{"soul": "s"}"#).expect("write vars");
    let out = template(
        &["render", "--strict", "--vars", vars.to_str().expect("path")],
        b"$soul\n  $nope $5",
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: unknown placeholder $nope at line 2, column 3\n"
    );
    let _ = std::fs::remove_file(vars);
}

#[test]
fn template_lint_exits_1_on_errors_and_0_on_warnings() {
    let bad = template(&["lint"], b"Hello $sou1");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stdout(&bad).starts_with("1:7: error: unknown placeholder $sou1"),
        "{}",
        stdout(&bad)
    );
    let warn = template(&["lint"], b"Costs $5; call read_memory");
    assert_eq!(warn.status.code(), Some(0), "{}", stdout(&warn));
    assert_eq!(stdout(&warn).lines().count(), 2);
}

#[test]
fn invalid_utf8_and_oversized_templates_are_refused() {
    let out = template(&["lint"], b"ok \xc3\x28");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: the template is not valid UTF-8 (first bad byte at offset 3)\n"
    );
    let out = template(&["--max-template-bytes", "4", "lint"], b"12345");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("limit of 4 bytes"),
        "{}",
        stderr(&out)
    );
}

async fn seeded_sqlite() -> TestDb {
    let db = TestDb::sqlite().await;
    for args in [&["migrate", "up"][..], &["seed"]] {
        let out = loadout(&db.url, args);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    db
}

const AT: [&str; 4] = ["--at", "2026-11-21T08:30:00Z", "--tz", "Europe/Berlin"];

fn prompt(db: &TestDb, extra: &[&str]) -> Output {
    let mut args = vec!["prompt", "render", "--agent", "assistant"];
    args.extend_from_slice(extra);
    loadout(&db.url, &args)
}

#[tokio::test]
async fn prompt_render_prints_the_seeded_prompt_and_the_builtin_one_without_a_template() {
    let db = seeded_sqlite().await;
    let web = prompt(&db, &[&["--channel", "web"][..], &AT].concat());
    assert!(web.status.success(), "{}", stderr(&web));
    let text = stdout(&web);
    assert!(text.starts_with("You are Assistant, "), "{text}");
    assert!(text.contains("Saturday 21 November 2026, 09:30 (Europe/Berlin, UTC+01:00)"));
    assert!(text.contains("## How you work\n"));

    let json = prompt(&db, &[&["--channel", "web", "--json"][..], &AT].concat());
    let rendered: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(rendered["provenance"]["source"], "template");
    assert_eq!(rendered["provenance"]["channel"], "web");
    assert_eq!(rendered["text"], text.as_str());

    db.conn
        .execute_unprepared("UPDATE agent_configurations SET prompt_template = NULL")
        .await
        .expect("clear the template");
    let builtin = prompt(&db, &[&["--channel", "web", "--json"][..], &AT].concat());
    let rendered: serde_json::Value = serde_json::from_slice(&builtin.stdout).expect("json");
    assert_eq!(rendered["provenance"]["source"], "builtin");
    assert!(
        rendered["text"]
            .as_str()
            .expect("text")
            .contains("## How you work\n")
    );

    let scheduled = prompt(&db, &[&["--channel", "scheduled"][..], &AT].concat());
    assert!(scheduled.status.success(), "{}", stderr(&scheduled));
    assert!(!stdout(&scheduled).contains("## How you work"));
}

#[tokio::test]
async fn prompt_render_takes_memory_notes_and_the_users_instructions() {
    let db = seeded_sqlite().await;
    db.conn
        .execute_unprepared(
            "INSERT INTO user_agent_prompt_customizations (tenant_id, user_id, agent_id, instructions, is_active, created_at, updated_at) \
             SELECT 'default', 'u-1', id, 'Always answer in French.', true, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z' FROM agent_configurations",
        )
        .await
        .expect("insert instructions");
    let args = [
        &["--channel", "telegram", "--user", "u-1"][..],
        &[
            "--memory-note",
            "Has a cat called Miso.",
            "--memory-note",
            "Runs on Tuesdays.",
        ],
        &["--last-message-at", "2026-11-01T10:00:00Z"],
        &AT,
    ]
    .concat();
    let out = prompt(&db, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("## User instructions\nAlways answer in French.\n"),
        "{text}"
    );
    assert!(
        text.contains("- Has a cat called Miso.\n- Runs on Tuesdays.\n"),
        "{text}"
    );
    assert!(
        text.contains("## Welcome back\nThe user's last message was 2 weeks ago"),
        "{text}"
    );
}

#[tokio::test]
async fn prompt_render_shows_a_users_instructions_only_for_their_tenant() {
    let db = seeded_sqlite().await;
    db.conn
        .execute_unprepared(
            "INSERT INTO user_agent_prompt_customizations (tenant_id, user_id, agent_id, instructions, is_active, created_at, updated_at) \
             SELECT 'acme', 'alice', id, 'Acme alice: answer in French.', true, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z' FROM agent_configurations",
        )
        .await
        .expect("insert instructions");
    let render = |tenant: Option<&str>| {
        let mut args = vec!["--channel", "web", "--user", "alice"];
        if let Some(tenant) = tenant {
            args.extend(["--tenant", tenant]);
        }
        let out = prompt(&db, &[&args[..], &AT].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    assert!(render(Some("acme")).contains("Acme alice: answer in French."));
    assert!(!render(Some("globex")).contains("Acme alice"));
    assert!(
        !render(None).contains("Acme alice"),
        "the default tenant is not acme"
    );
}

#[tokio::test]
async fn prompt_render_refuses_bad_input_with_one_clear_line() {
    let db = seeded_sqlite().await;
    let cases: [(&[&str], &str); 3] = [
        (
            &["--channel", "sms"],
            "error: unknown channel \"sms\"; known channels: heartbeat, scheduled, session_open, telegram, web\n",
        ),
        (
            &["--channel", "web", "--tz", "Mars/Olympus"],
            "unknown time zone \"Mars/Olympus\"; use an IANA name such as Europe/Berlin",
        ),
        (
            &["--channel", "web", "--at", "yesterday"],
            "not an RFC 3339 instant",
        ),
    ];
    for (args, expected) in cases {
        let out = prompt(&db, args);
        assert!(!out.status.success(), "{args:?} must fail");
        assert!(stdout(&out).is_empty(), "{args:?} printed a prompt");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    let out = loadout(
        &db.url,
        &["prompt", "render", "--agent", "nobody", "--channel", "web"],
    );
    assert_eq!(stderr(&out), "error: no agent named \"nobody\"\n");
}

/// A bare HTTP/1.1 request over a TcpStream: status line and body.
fn http_get(addr: &str, path: &str, key: &str) -> (String, String) {
    http(addr, "GET", path, key, "")
}

/// Starts `loadout serve` on a free port; returns the child, its address and what it printed on stdout first.
fn spawn_serve(
    url: &str,
    extra: &[&str],
    stdout_lines: usize,
) -> (std::process::Child, String, Vec<String>) {
    use std::io::{BufRead, BufReader};
    let mut child = start_serve(url, extra);
    let addr = listening_address(&mut child);
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut printed = Vec::new();
    for _ in 0..stdout_lines {
        let mut l = String::new();
        out.read_line(&mut l).expect("read stdout");
        printed.push(l.trim_end().to_owned());
    }
    (child, addr, printed)
}

/// Starts `loadout serve` on a free port, stdout and stderr piped, without waiting.
fn start_serve(url: &str, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .args(extra)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn serve")
}

/// Reads the child's stderr until it says where it listens.
fn listening_address(child: &mut std::process::Child) -> String {
    use std::io::{BufRead, BufReader};
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("listening on http://") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).expect("read stderr") > 0,
            "serve exited early"
        );
    }
    line.trim()
        .rsplit("http://")
        .next()
        .expect("address")
        .to_owned()
}

/// Sends SIGTERM and reads everything the process printed on stdout until it ends.
fn terminate_reading_stdout(child: &mut std::process::Child) -> String {
    use std::io::Read;
    let mut out = child.stdout.take().expect("stdout");
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(killed.expect("kill").success());
    let mut text = String::new();
    out.read_to_string(&mut text).expect("read stdout");
    text
}

fn stop(mut child: std::process::Child) {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "serve exited with {exit}");
}

#[tokio::test]
async fn two_serve_processes_on_one_postgres_see_each_others_writes() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let (first, first_addr, printed) = spawn_serve(&db.url, &[], 3);
    let admin = printed[2].clone();
    let (second, second_addr, _) = spawn_serve(&db.url, &["--no-migrate"], 0);
    let path = "/v1/agents/assistant/prompt?channel=web";
    let (status, warm) = http_get(&second_addr, path, &admin);
    assert_eq!(status, "HTTP/1.1 200 OK", "{warm}");
    assert!(warm.contains("\"template_version\":1"), "{warm}");

    let (status, body) = http(
        &first_addr,
        "PUT",
        "/v1/agents/assistant/prompt-template",
        &admin,
        r#"{"template": "Written through the first process. $soul"}"#,
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let written = std::time::Instant::now();
    loop {
        let (_, seen) = http_get(&second_addr, path, &admin);
        if seen.contains("Written through the first process.") {
            break;
        }
        // Generous on purpose: the ≤ 1 s figure is measured by bench/load.sh, not asserted here.
        assert!(
            written.elapsed() < std::time::Duration::from_secs(20),
            "the second process never saw the write"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stop(second);
    stop(first);
}

/// Waits until `addr` serves a prompt containing `text`; generous on purpose (the
/// propagation delay is measured by bench/propagation.sh, not asserted here).
fn wait_until_served(addr: &str, key: &str, text: &str) {
    let started = std::time::Instant::now();
    loop {
        let (_, seen) = http_get(addr, "/v1/agents/assistant/prompt?channel=web", key);
        if seen.contains(text) {
            return;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{addr} never served {text:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// With the poll set to ten minutes, only LISTEN/NOTIFY brings a write over; after
/// the listening connections are killed, the listeners reconnect (reading the
/// generation at once) and writes keep arriving.
#[tokio::test]
async fn serve_processes_on_one_postgres_hear_writes_without_polling_across_a_killed_listener() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let slow = ["--generation-poll-ms", "600000"];
    let (first, first_addr, printed) = spawn_serve(&db.url, &slow, 3);
    let admin = printed[2].clone();
    let (second, second_addr, _) =
        spawn_serve(&db.url, &[&slow[..], &["--no-migrate"]].concat(), 0);
    wait_until_served(&second_addr, &admin, "\"template_version\":1");
    let put = |text: &str| {
        let body = format!(r#"{{"template": "{text} $soul"}}"#);
        let (status, reply) = http(
            &first_addr,
            "PUT",
            "/v1/agents/assistant/prompt-template",
            &admin,
            &body,
        );
        assert_eq!(status, "HTTP/1.1 200 OK", "{reply}");
    };

    put("Pushed before the kill.");
    wait_until_served(&second_addr, &admin, "Pushed before the kill.");

    let killed = db
        .conn
        .query_one_raw(Statement::from_string(
            db.conn.get_database_backend(),
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'loadout-listen'",
        ))
        .await
        .expect("terminate")
        .expect("a row");
    assert_eq!(
        killed.try_get::<i64>("", "n").expect("count"),
        2,
        "one listener per process"
    );
    put("Pushed after the kill.");
    wait_until_served(&second_addr, &admin, "Pushed after the kill.");
    put("Pushed once listening again.");
    wait_until_served(&second_addr, &admin, "Pushed once listening again.");
    stop(second);
    stop(first);
}

/// Migrate, seed and the first operator key run under the migration lock: two
/// replicas started at once on a fresh Postgres both serve, and exactly one key is printed.
#[tokio::test]
async fn two_serve_processes_started_together_on_a_fresh_postgres_print_one_operator_key() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let mut children = [start_serve(&db.url, &[]), start_serve(&db.url, &[])];
    let addrs = children.each_mut().map(listening_address);
    for addr in &addrs {
        let (status, body) = http_get(addr, "/ready", "none");
        assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    }
    // Printed before "listening", and line-buffered: all there by now, or never.
    let outputs = children.each_mut().map(terminate_reading_stdout);
    let keys: Vec<&str> = outputs
        .iter()
        .flat_map(|o| o.lines())
        .filter(|l| l.starts_with("lo_"))
        .collect();
    assert_eq!(keys.len(), 1, "{outputs:?}");
    for child in &mut children {
        assert!(child.wait().expect("wait").success());
    }
    // The key is good, and a third start finds the schema, the seed and it whole.
    let (child, addr, _) = spawn_serve(&db.url, &[], 0);
    let (status, body) = http_get(&addr, "/v1/agents/assistant/prompt?channel=web", keys[0]);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    stop(child);
}

#[tokio::test]
async fn serve_migrates_seeds_prints_an_operator_key_and_stops_cleanly_on_sigterm() {
    let db = TestDb::sqlite().await;
    let (child, addr, printed) = spawn_serve(&db.url, &[], 3);
    assert!(printed[0].contains("operator key"), "{printed:?}");
    let key = &printed[2];
    assert!(key.starts_with("lo_"), "{printed:?}");

    let (status, body) = http_get(&addr, "/v1/agents/assistant/prompt?channel=scheduled", key);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(body.contains("\"source\":\"template\""), "{body}");

    stop(child);

    // Exactly one key was made, and it is listed without its secret.
    let out = loadout(&db.url, &["keys", "list"]);
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
}

/// Revoking every key and restarting must not print a working key to whoever reads
/// the output: only a database that never had a key gets one.
#[tokio::test]
async fn serve_prints_a_key_only_for_a_database_that_never_had_one() {
    let db = TestDb::sqlite().await;
    let (child, _, printed) = spawn_serve(&db.url, &[], 3);
    assert!(printed[2].starts_with("lo_"), "{printed:?}");
    stop(child);
    assert!(
        loadout(&db.url, &["keys", "revoke", "operator"])
            .status
            .success()
    );

    let mut child = start_serve(&db.url, &[]);
    let addr = listening_address(&mut child);
    let (status, _) = http_get(&addr, "/ready", "none");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let text = terminate_reading_stdout(&mut child);
    assert!(child.wait().expect("wait").success());
    assert!(!text.contains("lo_"), "a key was printed again: {text}");
    let listed = stdout(&loadout(&db.url, &["keys", "list"]));
    assert_eq!(listed.lines().count(), 1, "no key was made: {listed}");
}

#[tokio::test]
async fn on_sigterm_serve_drains_with_ready_503_while_it_still_serves_then_stops() {
    let db = TestDb::sqlite().await;
    let (mut child, addr, printed) = spawn_serve(&db.url, &["--drain-seconds", "3"], 3);
    let key = &printed[2];
    assert_eq!(http_get(&addr, "/ready", "none").0, "HTTP/1.1 200 OK");
    let terminated = std::time::Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, body) = http_get(&addr, "/ready", "none");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable", "{body}");
    assert!(body.contains("shutting down"), "{body}");
    let (status, body) = http_get(&addr, "/v1/agents/assistant/prompt?channel=web", key);
    assert_eq!(
        status, "HTTP/1.1 200 OK",
        "still serving while draining: {body}"
    );
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "serve exited with {exit}");
    let took = terminated.elapsed();
    assert!(
        took >= std::time::Duration::from_secs(3),
        "stopped accepting after the drain, not before: {took:?}"
    );
    assert!(
        std::net::TcpStream::connect(&addr).is_err(),
        "no longer listening"
    );
}

#[tokio::test]
async fn keys_create_prints_the_key_alone_on_the_last_line_and_revoke_disables_it() {
    let db = TestDb::sqlite().await.migrated().await;
    let out = loadout(
        &db.url,
        &["keys", "create", "--role", "agent", "--name", "bot"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let key = text.lines().last().expect("a last line");
    assert!(
        key.starts_with("lo_") && key.len() == 3 + 12 + 1 + 64,
        "{text}"
    );
    let principal = loadout::auth::keys::authenticate(&db.conn, key)
        .await
        .expect("query");
    assert_eq!(
        principal.map(|p| p.role),
        Some(loadout::auth::keys::Role::Agent)
    );

    let listed = stdout(&loadout(&db.url, &["keys", "list"]));
    let columns: Vec<&str> = listed.lines().next().expect("a line").split('\t').collect();
    assert_eq!(
        (
            columns.len(),
            columns[0],
            columns[1],
            columns[3],
            columns[5]
        ),
        (7, "bot", "agent", "default", "-"),
        "name, role, prefix, tenant, created, revoked, scope: {listed}"
    );
    assert!(
        !listed.contains(&key[16..]),
        "the secret must never be listed"
    );

    let again = loadout(
        &db.url,
        &["keys", "create", "--role", "admin", "--name", "bot"],
    );
    assert_eq!(
        stderr(&again),
        "error: a key or member named \"bot\" already exists in the tenant\n"
    );
    assert!(
        loadout(&db.url, &["keys", "revoke", "bot"])
            .status
            .success()
    );
    assert_eq!(
        loadout::auth::keys::authenticate(&db.conn, key)
            .await
            .expect("query"),
        None
    );
}

#[tokio::test]
async fn check_passes_a_fresh_database_and_prints_counts_and_json() {
    let db = seeded_sqlite().await;
    let out = loadout(&db.url, &["check"]);
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(
        stdout(&out).ends_with("checked 23 catalog tools, 23 tools (23 active), 1 agents, 23 active links: 0 errors, 22 warnings\n"),
        "{}",
        stdout(&out)
    );
    let json = loadout(&db.url, &["check", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(report["ok"], true);
    assert_eq!(report["checked"]["active_tools"], 23);
    assert_eq!(report["problems"][0]["code"], "not_connected");

    let missing = loadout(
        &db.url,
        &["check", "--catalog", "/nonexistent/catalog.toml"],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).starts_with("error: cannot read the catalog /nonexistent/catalog.toml"),
        "{}",
        stderr(&missing)
    );
}

#[tokio::test]
async fn check_and_serve_refuse_a_drifted_database_unless_drift_is_allowed() {
    let db = seeded_sqlite().await;
    db.conn
        .execute_unprepared("UPDATE tools SET approval_tier = '' WHERE name = 'get_tasks'")
        .await
        .expect("plant drift");
    let out = loadout(&db.url, &["check"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("error: tool get_tasks: approval tier \"\" is not one of auto, user_configurable, requires_approval [missing_tier]"), "{}", stdout(&out));

    let refused = Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", &db.url)
        .env("RUST_LOG", "error")
        .output()
        .expect("run serve");
    assert_eq!(refused.status.code(), Some(1));
    let err = stderr(&refused);
    assert!(err.contains("[missing_tier]"), "{err}");
    assert!(err.contains("error: the registry check found 1 errors (listed above); fix them, or start with --allow-drift"), "{err}");

    let (child, addr, _) = spawn_serve(&db.url, &["--allow-drift"], 3);
    let (status, _) = http_get(&addr, "/health", "-");
    assert_eq!(status, "HTTP/1.1 200 OK");
    stop(child);
}

#[tokio::test]
async fn proposals_orphans_lists_a_dead_execution_without_changing_it() {
    let db = seeded_sqlite().await;
    db.conn
        .execute_unprepared(
            "INSERT INTO proposals (tenant_id, agent_id, tool_id, tool_name, conversation_id, arguments, arguments_hash, description, preview, state, attempts, max_attempts, outcome_unknown, expires_at, lease_until, created_at, updated_at) \
             SELECT 't1', a.id, t.id, t.name, 'c-1', '{}', 'h', 'Delete tasks', '[]', 'executing', 1, 3, false, \
                    '2030-01-01T00:00:00+00:00', '2026-01-01T00:05:00+00:00', '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00' \
             FROM agent_configurations a, tools t WHERE a.name = 'assistant' AND t.name = 'delete_tasks'",
        )
        .await
        .expect("plant an orphan");
    let out = loadout(&db.url, &["proposals", "orphans"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed = stdout(&out);
    assert!(
        listed
            .starts_with("1\tt1\texecuting\tdelete_tasks\tattempt 1\t2026-01-01T00:00:00+00:00\n"),
        "{listed}"
    );
    let again = stdout(&loadout(&db.url, &["proposals", "orphans"]));
    assert_eq!(again, listed, "listing changes nothing");
    let bad = loadout(&db.url, &["proposals", "orphans", "--lease-seconds", "0"]);
    assert_eq!(
        stderr(&bad),
        "error: --lease-seconds must be a positive number of seconds\n"
    );
}

#[tokio::test]
async fn a_process_killed_mid_execution_leaves_a_proposal_the_sweeper_fails_as_outcome_unknown() {
    let db = seeded_sqlite().await;
    // A backend that accepts connections and never answers: the execution hangs.
    let backend = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let backend_addr = backend.local_addr().expect("address");
    let (accepted_tx, accepted_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in backend.incoming().flatten() {
            held.push(stream);
            accepted_tx.send(()).ok();
        }
    });

    let flags = ["--connector-allow", "127.0.0.1"];
    let (mut first, addr, printed) = spawn_serve(&db.url, &flags, 3);
    let key = printed[2].clone();
    let connector = format!(
        r#"{{"name": "backend", "url": "http://{backend_addr}/hook", "timeout_ms": 2000}}"#
    );
    assert_eq!(
        http(&addr, "POST", "/v1/connectors", &key, &connector).0,
        "HTTP/1.1 201 Created"
    );
    let bind = r#"{"connector": "backend"}"#;
    assert_eq!(
        http(&addr, "PUT", "/v1/tools/delete_tasks/connector", &key, bind).0,
        "HTTP/1.1 200 OK"
    );
    let call = r#"{"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"}"#;
    let (status, body) = http(&addr, "POST", "/v1/agents/assistant/tool-calls", &key, call);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(body.contains("\"proposal_id\":1"), "{body}");

    let (approve_addr, approve_key) = (addr.clone(), key.clone());
    let approving = std::thread::spawn(move || {
        // Never answered: the process dies under it.
        let _ = std::panic::catch_unwind(|| {
            http(
                &approve_addr,
                "POST",
                "/v1/proposals/1/approve",
                &approve_key,
                "",
            )
        });
    });
    accepted_rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the execution reached the backend");
    first.kill().expect("kill -9 the server mid-execution");
    first.wait().expect("reap");
    approving.join().ok();

    // The execution's lease is its 2 s timeout plus the 5 s margin; the next
    // process's sweeper reads the real clock, so wait past it.
    std::thread::sleep(std::time::Duration::from_millis(7500));
    let orphans = stdout(&loadout(
        &db.url,
        &["proposals", "orphans", "--lease-seconds", "1"],
    ));
    assert!(
        orphans.starts_with("1\tdefault\texecuting\tdelete_tasks\tattempt 1\t"),
        "{orphans}"
    );

    let (second, addr, _) = spawn_serve(&db.url, &flags, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, proposal) = http_get(&addr, "/v1/proposals/1", &key);
        if proposal.contains("\"state\":\"failed\"") {
            assert!(proposal.contains("\"outcome_unknown\":true"), "{proposal}");
            assert!(proposal.contains("its outcome is unknown"), "{proposal}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the sweeper never failed the orphan: {proposal}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, retry) = http(&addr, "POST", "/v1/proposals/1/retry", &key, "");
    assert_eq!(
        status, "HTTP/1.1 409 Conflict",
        "an unknown outcome is never re-run: {retry}"
    );
    stop(second);
}

/// The `sh` blocks of a Markdown page (a path from the repository root), in order.
fn sh_blocks(page: &str) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(page);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{page}: {e}"));
    text.split("```sh\n")
        .skip(1)
        .map(|block| {
            block
                .split("\n```")
                .next()
                .expect("closed block")
                .to_owned()
        })
        .collect()
}

/// How a page's script is pasted.
#[derive(Clone, Copy, PartialEq)]
enum Shell {
    /// Stops at the first failing command, HTTP errors included.
    Strict,
    /// Runs every line, as a page whose commands show their exit codes expects.
    Lenient,
}

/// Runs `blocks` as one script pasted into a shell, in a fresh folder (its working
/// directory), against a `serve` started with `serve_flags` on a fresh SQLite
/// database there; what it printed. `cargo run [-q] --` is the binary under test.
fn paste(name: &str, blocks: &[String], serve_flags: &[&str], shell: Shell) -> String {
    let dir = std::env::temp_dir().join(format!("loadout-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite://{}/docs.db?mode=rwc", dir.display());
    let (child, addr, _) = spawn_serve(&url, serve_flags, 0);
    let script = blocks
        .join("\n")
        .replace("cargo run -q --", "\"$LOADOUT\"")
        .replace("cargo run --", "\"$LOADOUT\"")
        .replace("http://127.0.0.1:8080", &format!("http://{addr}"));
    let prelude = match shell {
        Shell::Strict => {
            "set -euo pipefail\ncurl() { command curl --silent --show-error --fail-with-body \"$@\"; }\n"
        }
        Shell::Lenient => "set -uo pipefail\n",
    };
    let out = Command::new("bash")
        .args(["-c", &format!("{prelude}{script}")])
        .current_dir(&dir)
        .env("LOADOUT", env!("CARGO_BIN_EXE_loadout"))
        .env("DATABASE_URL", &url)
        .output()
        .expect("bash");
    stop(child);
    std::fs::remove_dir_all(&dir).ok();
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() || shell == Shell::Lenient,
        "{}\n{printed}",
        String::from_utf8_lossy(&out.stderr)
    );
    printed
}

#[test]
fn the_configuration_as_code_walkthrough_works_when_pasted() {
    // The page's first block: export, edit, plan (exit 2: a change), apply, render;
    // then the commands page's render. Its last line shows the edit in the prompt.
    let mut blocks = vec![sh_blocks("docs/configuration-as-code.md")[0].clone()];
    blocks.extend(sh_blocks("docs/commands.md"));
    let printed = paste("config-as-code", &blocks, &[], Shell::Lenient);
    assert!(
        printed.contains("plan exited 2"),
        "the plan shows a change: {printed}"
    );
    assert!(
        printed.matches("Answer in one short paragraph.").count() >= 2,
        "both renders show the applied edit: {printed}"
    );
}

#[test]
fn the_readme_walkthrough_works_when_pasted() {
    // The two set-up commands (serve, and the test suite) are not pasted again.
    let blocks: Vec<String> = sh_blocks("README.md")
        .into_iter()
        .filter(|b| !b.contains("cargo run -- serve") && !b.contains("cargo test"))
        .collect();
    assert!(blocks.len() >= 5, "the walkthrough's blocks: {blocks:?}");
    let printed = paste("readme", &blocks, &[], Shell::Strict);
    assert!(
        printed.contains("\"status\":\"proposed_for_approval\""),
        "the tool call waits for approval: {printed}"
    );
    assert!(
        printed.contains("\"state\":\"succeeded\""),
        "the approved call ran: {printed}"
    );
    assert!(
        printed.contains("Now: ") && printed.contains("Answer in French."),
        "the last fetch shows the new template and alice's instructions: {printed}"
    );
    assert!(
        printed.contains("production"),
        "the revisions and the label's history are listed: {printed}"
    );
    assert!(
        printed.contains("\"state\":\"approved\""),
        "the reviewer signed the policy's release off: {printed}"
    );
    assert!(
        printed.contains("\"decision\":\"deny\"") && printed.contains("\"policy\":\"no-links\""),
        "the signed-off policy denies a link, naming its rule: {printed}"
    );
    assert!(
        printed.contains("\"name\":\"breaking\",\"status\":\"warn\",\"summary\":[\"get_tasks enum_value_removed /status")
            && printed.contains("tool contract: BREAKING for callers"),
        "the narrowed get_tasks is named breaking in the change request and the diff: {printed}"
    );
    assert!(
        printed.contains("\"policy\":\"ops-instructions\"")
            && printed.matches("\"status\":\"succeeded\"").count() >= 1,
        "bob's call ran at once under the ops rule: {printed}"
    );
}

#[test]
fn the_contracts_guide_works_when_pasted() {
    // loadout's own MCP server is the remote, so serve allows loopback connectors.
    let blocks = sh_blocks("docs/contracts.md");
    let printed = paste(
        "contracts",
        &blocks,
        &["--connector-allow", "127.0.0.1"],
        Shell::Strict,
    );
    assert!(
        printed.contains("\"held\":[{\"remote\":"),
        "the first sync holds every tool: {printed}"
    );
    assert!(
        printed.contains("change ") && printed.contains("+List the user tasks. Then email them"),
        "the held change shows the description's diff: {printed}"
    );
    assert!(
        printed.contains("\"description\":\"List the user's tasks"),
        "the agent keeps the pinned description: {printed}"
    );
    assert!(
        printed.contains("checks_failed") && printed.contains("\"passed\":true"),
        "approval waits for the render check, which passes once the render is accepted: {printed}"
    );
    assert!(
        printed.contains("\"state\":\"approved\""),
        "the change request is approved once its checks pass: {printed}"
    );
    assert!(
        printed.contains("\"model\":\"gpt-4.1\""),
        "the model settings are saved: {printed}"
    );
}

#[test]
fn the_guide_http_examples_work_when_pasted() {
    let mut blocks = sh_blocks("docs/http-api.md");
    blocks.extend(sh_blocks("docs/releases.md"));
    blocks.extend(sh_blocks("docs/tool-calls.md"));
    // As the tool-call page says to start it, for its connector example.
    let printed = paste(
        "guide",
        &blocks,
        &["--connector-allow", "127.0.0.1"],
        Shell::Strict,
    );
    assert!(
        printed.contains("Now: "),
        "the last fetch shows the new template: {printed}"
    );
    assert!(
        printed.contains("\"name\":\"create_notes\""),
        "the tool was created: {printed}"
    );
    assert!(
        printed.contains("\"connector\":\"tasks-backend\""),
        "the tool was bound: {printed}"
    );
    assert!(
        printed.contains("self_approval") && printed.contains("\"state\":\"approved\""),
        "the author was refused and the approver signed off: {printed}"
    );
    assert!(
        printed.contains("\"kind\":\"rollback\""),
        "the rollback is in the history: {printed}"
    );
}

#[test]
fn serve_refuses_a_lease_shorter_than_the_longest_call_timeout() {
    let out = Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(["serve", "--proposal-lease-seconds", "1"])
        .output()
        .expect("run serve");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(
        stderr(&out).contains("shorter than the longest call timeout (30 s)"),
        "{}",
        stderr(&out)
    );
}

/// Reads whatever the server sends until it closes or `wait` passes; `None` on timeout.
fn read_until_closed(
    stream: &mut std::net::TcpStream,
    wait: std::time::Duration,
) -> Option<String> {
    use std::io::Read;
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut out = Vec::new();
    match stream.read_to_end(&mut out) {
        Ok(_) => Some(String::from_utf8_lossy(&out).into_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
            Some(String::from_utf8_lossy(&out).into_owned())
        }
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_client_that_sends_half_a_header_is_cut_off_while_others_are_served() {
    use std::io::Write;
    let db = TestDb::sqlite().await;
    let (child, addr, _) = spawn_serve(&db.url, &["--header-timeout-ms", "500"], 3);
    let mut slow: Vec<std::net::TcpStream> = (0..50)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&addr).expect("connect");
            s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
                .expect("half a head");
            s
        })
        .collect();
    let (status, body) = http_get(&addr, "/health", "none");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    for s in &mut slow {
        // Closed by the server (no response, or a 408 hyper writes), never left open.
        let closed = read_until_closed(s, std::time::Duration::from_secs(10));
        assert!(
            closed.is_some(),
            "a half-sent request was still open after 10 s"
        );
    }
    stop(child);
}

#[tokio::test]
async fn a_declared_oversize_body_is_refused_with_413_before_anything_reads_it() {
    use std::io::Write;
    let db = TestDb::sqlite().await;
    let (child, addr, _) = spawn_serve(&db.url, &[], 3);
    let mut s = std::net::TcpStream::connect(&addr).expect("connect");
    // No key and no body: only the declared length can decide, and it must, at once.
    s.write_all(b"POST /v1/tools HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
        .expect("head");
    let reply = read_until_closed(&mut s, std::time::Duration::from_secs(10)).expect("an answer");
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("\"code\":\"payload_too_large\""), "{reply}");
    stop(child);
}

#[tokio::test]
async fn past_the_connection_limit_a_client_waits_until_a_connection_closes() {
    use std::io::Write;
    let db = TestDb::sqlite().await;
    let (child, addr, _) = spawn_serve(
        &db.url,
        &["--max-connections", "2", "--header-timeout-ms", "1500"],
        3,
    );
    let idle: Vec<std::net::TcpStream> = (0..2)
        .map(|_| std::net::TcpStream::connect(&addr).expect("connect"))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut third = std::net::TcpStream::connect(&addr).expect("connect (kernel queue)");
    third
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("request");
    assert_eq!(
        read_until_closed(&mut third, std::time::Duration::from_millis(500)),
        None,
        "served although two connections held the limit"
    );
    // The idle two are closed by the header timeout; then the third is served.
    let reply = read_until_closed(&mut third, std::time::Duration::from_secs(10)).expect("served");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    drop(idle);
    stop(child);
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_cut_off_by_the_idle_timeout() {
    use std::io::Write;
    let db = TestDb::sqlite().await;
    let (child, addr, printed) = spawn_serve(&db.url, &["--idle-timeout-secs", "1"], 3);
    let admin = &printed[2];
    let mut s = std::net::TcpStream::connect(&addr).expect("connect");
    // A whole head (so the header timeout is done with it), then 10 of 100 body bytes.
    write!(
        s,
        "POST /v1/tools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {admin}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\": "
    )
    .expect("head and a little body");
    let closed = read_until_closed(&mut s, std::time::Duration::from_secs(10));
    assert!(
        closed.is_some(),
        "a stalled upload was still open after 10 s"
    );
    let (status, body) = http_get(&addr, "/health", "none");
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    stop(child);
}

/// `loadout` with extra environment variables.
fn loadout_with(database_url: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadout"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .output()
        .expect("run the loadout binary")
}

/// A key file holding a new key: (path, key id).
fn new_key_file(dir: &std::path::Path, name: &str) -> (std::path::PathBuf, String) {
    let key = loadout::secrets::Key::generate().expect("key");
    let path = dir.join(format!("{name}-{}", std::process::id()));
    loadout::secrets::source::replace(&path, &key).expect("key file");
    (path, key.id().to_string())
}

#[tokio::test]
async fn serve_makes_an_owner_only_secrets_key_beside_sqlite_and_secrets_seal_and_rotate_use_it() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::fs::PermissionsExt;
    let db = TestDb::sqlite().await;
    let beside = loadout::secrets::source::beside_sqlite(&db.url).expect("a key file path");
    let mut child = start_serve(&db.url, &["--connector-allow", "127.0.0.1"]);
    let mut stderr_lines = Vec::new();
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let addr = loop {
        let mut line = String::new();
        assert!(
            err.read_line(&mut line).expect("stderr") > 0,
            "serve exited: {stderr_lines:?}"
        );
        if let Some(addr) = line.trim().strip_prefix("loadout listening on http://") {
            break addr.to_owned();
        }
        stderr_lines.push(line);
    };
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut printed = Vec::new();
    for _ in 0..3 {
        let mut l = String::new();
        out.read_line(&mut l).expect("stdout");
        printed.push(l.trim_end().to_owned());
    }
    let said = stderr_lines.concat();
    assert!(
        said.contains("secrets key") && said.contains(&beside.display().to_string()),
        "{said}"
    );
    let mode = std::fs::metadata(&beside)
        .expect("made")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "owner-only");
    let key_text = std::fs::read_to_string(&beside).expect("read");
    assert!(!said.contains(key_text.trim()), "the key was printed");

    let connector = r#"{"name": "backend", "url": "http://127.0.0.1:9/hook", "headers": {"authorization": "Bearer cli-secret"}}"#;
    let (status, body) = http(&addr, "POST", "/v1/connectors", &printed[2], connector);
    assert_eq!(status, "HTTP/1.1 201 Created", "{body}");
    stop(child);

    let sealed = loadout(&db.url, &["secrets", "seal"]);
    assert!(sealed.status.success(), "{}", stderr(&sealed));
    assert!(
        stdout(&sealed).contains("\"unchanged\": 1"),
        "{}",
        stdout(&sealed)
    );

    let dir = beside.parent().expect("dir");
    let (new_file, new_id) = new_key_file(dir, "loadout-new-key");
    let new_path = new_file.display().to_string();
    let rotated = loadout(&db.url, &["secrets", "rotate", "--new-key-file", &new_path]);
    assert!(rotated.status.success(), "{}", stderr(&rotated));
    assert!(
        stdout(&rotated).contains(&format!("\"key_id\": \"{new_id}\"")),
        "{}",
        stdout(&rotated)
    );
    let now = loadout::secrets::source::read_file(&beside).expect("the key file");
    assert_eq!(
        now.id().to_string(),
        new_id,
        "the key beside the database is the new one"
    );

    // Rotating on with a key that did not seal the values: refused, the key named.
    let (wrong_file, _) = new_key_file(dir, "loadout-wrong-key");
    let wrong_path = wrong_file.display().to_string();
    let refused = loadout(
        &db.url,
        &[
            "secrets",
            "rotate",
            "--new-key-file",
            &wrong_path,
            "--secrets-key-file",
            &wrong_path,
        ],
    );
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains(&new_id) && stderr(&refused).contains("does not hold"),
        "{}",
        stderr(&refused)
    );
    let garbage = loadout_with(
        &db.url,
        &[("LOADOUT_SECRETS_KEY", "not-a-key-at-all")],
        &["check"],
    );
    assert!(!garbage.status.success());
    assert!(
        stderr(&garbage).contains("LOADOUT_SECRETS_KEY is not usable"),
        "{}",
        stderr(&garbage)
    );
    assert!(
        !stderr(&garbage).contains("not-a-key-at-all"),
        "the key text was echoed"
    );
    for path in [new_file, wrong_file] {
        std::fs::remove_file(path).ok();
    }
}

#[tokio::test]
async fn the_release_commands_run_on_the_database_as_the_readme_shows() {
    let db = seeded_sqlite().await;
    let run = |args: &[&str]| {
        let out = loadout(&db.url, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    let list = run(&["revisions", "assistant"]);
    assert!(list.starts_with("1\t"), "{list}");
    assert!(list.ends_with("\tlatest,production\n"), "{list}");
    assert_eq!(
        run(&["revisions", "assistant", "--diff", "1", "1"]),
        "assistant: revision 1 → 1\nno differences\n"
    );
    assert_eq!(
        run(&["promote", "assistant", "staging", "1", "--reason", "try it"]),
        "assistant/staging: created at revision 1 (move)\n"
    );
    let labels: Vec<String> = run(&["labels", "assistant"])
        .lines()
        .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(labels, ["latest 1", "production 1", "staging 1"]);

    let missing = loadout(&db.url, &["revisions", "nobody"]);
    assert!(!missing.status.success());
    assert_eq!(stderr(&missing), "error: no agent named \"nobody\"\n");
}

#[tokio::test]
async fn webhooks_create_prints_the_secret_once_and_list_disable_and_deliveries_work() {
    let db = seeded_sqlite().await;
    let key = format!("--secrets-key={}", crate::support::SECRETS_KEY);
    let out = loadout(
        &db.url,
        &[
            "webhooks",
            "create",
            "--url",
            "http://127.0.0.1:9/hook",
            "--events",
            "label.moved,proposal.waiting",
            "--connector-allow",
            "127.0.0.1",
            &key,
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let created: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let secret = created["secret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_"), "{created}");
    let id = created["subscription"]["id"].to_string();

    let out = loadout(&db.url, &["webhooks", "list", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !stdout(&out).contains(&secret[6..]),
        "the secret is never listed"
    );
    // The API's shape, as `--help` says: an object holding the list.
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    let events = listed["subscriptions"][0]["events"]
        .as_array()
        .expect("events");
    assert!(
        events.contains(&serde_json::json!("label.moved")),
        "{listed}"
    );

    let out = loadout(&db.url, &["webhooks", "disable", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("disabled"), "{}", stdout(&out));
    let out = loadout(&db.url, &["webhooks", "deliveries", &id, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let log: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(log, serde_json::json!({"attempts": []}));

    let out = loadout(
        &db.url,
        &[
            "webhooks",
            "create",
            "--url",
            "http://127.0.0.1:9/hook",
            &key,
        ],
    );
    assert!(!out.status.success(), "loopback is refused unless allowed");
    assert!(
        stderr(&out).contains("--connector-allow"),
        "{}",
        stderr(&out)
    );
}

/// A receiver on 127.0.0.1 that records each POST's `webhook-id` and body; its address.
async fn webhook_receiver() -> (
    std::sync::Arc<std::sync::Mutex<Vec<(String, String)>>>,
    String,
) {
    use axum::http::HeaderMap;
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let seen = seen.clone();
            async move {
                let id = headers
                    .get("webhook-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                seen.lock().expect("lock").push((id, body));
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    (got, address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_killed_between_the_change_and_the_delivery_delivers_after_restart() {
    let db = TestDb::sqlite().await;
    let (got, receiver) = webhook_receiver().await;
    // The first process writes the outbox and delivers nothing, then dies by SIGKILL.
    let flags = ["--connector-allow", "127.0.0.1"];
    let (mut first, addr, printed) = spawn_serve(
        &db.url,
        &[&flags[..], &["--no-webhook-delivery"]].concat(),
        3,
    );
    let key = printed[2].clone();
    let url = format!("http://{receiver}/hook");
    let (status, body) = http(
        &addr,
        "POST",
        "/v1/webhooks",
        &key,
        &format!("{{\"url\": \"{url}\"}}"),
    );
    assert_eq!(status, "HTTP/1.1 201 Created", "{body}");
    let (status, body) = http(
        &addr,
        "PATCH",
        "/v1/agents/assistant",
        &key,
        "{\"soul\": \"Before the crash.\"}",
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    first.kill().expect("SIGKILL");
    first.wait().expect("wait");
    assert!(got.lock().expect("lock").is_empty());

    let (second, _, _) = spawn_serve(&db.url, &flags, 0);
    let mut delivered = Vec::new();
    for _ in 0..200 {
        delivered = got.lock().expect("lock").clone();
        if delivered.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    stop(second);
    let mut kinds: Vec<String> = delivered
        .iter()
        .map(|(_, body)| {
            let event: serde_json::Value = serde_json::from_str(body).expect("json");
            event["type"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["label.moved", "label.moved", "revision.published"],
        "{delivered:?}"
    );
}

// Configuration as code (issue 27): export, plan, apply as an operator runs them.

/// A fixed secrets key (base64 of 32 zero bytes): the binary seals header values with it.
const TEST_SECRETS_KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

fn config(database_url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_loadout"));
    command
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("LOADOUT_SECRETS_KEY", TEST_SECRETS_KEY)
        .env("RUST_LOG", "debug")
        .env("LOADOUT_CONNECTOR_ALLOW", "127.0.0.1");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run the loadout binary")
}

async fn seeded(db: TestDb) -> TestDb {
    for args in [&["migrate", "up"][..], &["seed"]] {
        let out = loadout(&db.url, args);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    db
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("loadout-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Export, edit a template, plan (exit 2 with the line), apply the plan, plan again
/// (exit 0), and the template is what the database renders.
async fn round_trip(db: TestDb, name: &str) {
    let db = seeded(db).await;
    let dir = scratch(name);
    let d = dir.to_str().expect("path");
    let out = config(&db.url, &["export", d], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = config(&db.url, &["plan", d], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );

    let template = dir.join("agents/assistant/template.md");
    let text = std::fs::read_to_string(&template).expect("template");
    std::fs::write(&template, format!("{text}\nAlways answer in haiku.\n")).expect("write");
    let plan = dir.join("plan.json");
    let p = plan.to_str().expect("path");
    let out = config(&db.url, &["plan", d, "--out", p], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("~ agent/assistant"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("+Always answer in haiku."),
        "{}",
        stdout(&out)
    );

    let out = config(&db.url, &["apply", d, "--plan", p], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = config(&db.url, &["plan", d], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = prompt(&db, &["--channel", "web"]);
    assert!(
        stdout(&out).contains("Always answer in haiku."),
        "{}",
        stderr(&out)
    );

    // The same plan again: the instance is already what it asked for; nothing to do.
    let out = config(&db.url, &["apply", d, "--plan", p], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Applied: 0 changed"),
        "{}",
        stdout(&out)
    );
    // An edit made since the plan (here, on the database) refuses it, naming the agent.
    let soul = dir.join("agents/assistant/soul.md");
    std::fs::write(&soul, "Edited elsewhere.\n").expect("write");
    let other = scratch(&format!("{name}-other"));
    let o = other.to_str().expect("path");
    let out = config(&db.url, &["export", o], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(
        other.join("agents/assistant/soul.md"),
        "Edited meanwhile.\n",
    )
    .expect("write");
    let out = config(&db.url, &["apply", o], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = config(&db.url, &["apply", d], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("agent/assistant"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&other);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn export_plan_apply_round_trip_on_sqlite() {
    round_trip(TestDb::sqlite().await, "sqlite").await;
}

#[tokio::test]
async fn export_plan_apply_round_trip_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    round_trip(db, "postgres").await;
}

/// A connector's header reads its value from the environment at apply time; a
/// missing variable refuses the apply naming it; the value is in no file, plan,
/// answer or log line.
async fn header_values(db: TestDb, name: &str) {
    let db = seeded(db).await;
    let dir = scratch(&format!("headers-{name}"));
    let d = dir.to_str().expect("path");
    let out = config(&db.url, &["export", d], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(
        dir.join("connectors/crm.toml"),
        "kind = \"http\"\nurl = \"http://127.0.0.1:9/api\"\nmethod = \"POST\"\ntimeout_ms = 5000\n\n[headers]\nAuthorization = { env = \"LOADOUT_HEADER_CRM_TOKEN\" }\n",
    )
    .expect("write");

    let out = config(&db.url, &["apply", d], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("LOADOUT_HEADER_CRM_TOKEN"),
        "{}",
        stderr(&out)
    );

    let secret = "Bearer s3cr3t-from-env";
    let mut seen = String::new();
    let copy = scratch(&format!("headers-{name}-export"));
    let c = copy.to_str().expect("path");
    for args in [&["apply", d][..], &["plan", d], &["export", c]] {
        let out = config(&db.url, args, &[("LOADOUT_HEADER_CRM_TOKEN", secret)]);
        assert!(out.status.code() != Some(1), "{args:?}: {}", stderr(&out));
        seen.push_str(&stdout(&out));
        seen.push_str(&stderr(&out));
    }
    for entry in std::fs::read_dir(copy.join("connectors")).expect("dir") {
        seen.push_str(&std::fs::read_to_string(entry.expect("entry").path()).expect("read"));
    }
    assert!(!seen.contains("s3cr3t"), "{seen}");
    // The plan against the applied value is empty; a new value is a change.
    let out = config(
        &db.url,
        &["plan", d],
        &[("LOADOUT_HEADER_CRM_TOKEN", secret)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out)
            .contains("connector/crm header Authorization \u{2190} $LOADOUT_HEADER_CRM_TOKEN"),
        "the plan names the variable it read: {}",
        stdout(&out)
    );
    let out = config(
        &db.url,
        &["plan", d],
        &[("LOADOUT_HEADER_CRM_TOKEN", "Bearer rotated")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("header Authorization value"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("rotated"), "{}", stdout(&out));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&copy);
}

#[tokio::test]
async fn header_values_come_from_the_environment_and_are_never_shown_on_sqlite() {
    header_values(TestDb::sqlite().await, "sqlite").await;
}

#[tokio::test]
async fn header_values_come_from_the_environment_and_are_never_shown_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    header_values(db, "postgres").await;
}

/// A bundle reads only its own folder and only header variables: a header naming
/// `DATABASE_URL`, a soul linked to a file outside the folder and a soul that is a
/// named pipe are each refused with the reason, before anything is read or
/// written; an apply that moves a connector to another host keeps none of its
/// stored header values; a URL the connectors route refuses is refused.
async fn bundle_boundaries(db: TestDb, name: &str) {
    let db = seeded(db).await;
    let dir = scratch(&format!("bounds-{name}"));
    let d = dir.to_str().expect("path");
    let out = config(&db.url, &["export", d], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let crm = dir.join("connectors/crm.toml");
    let connector = |url: &str, var: &str| {
        format!(
            "kind = \"http\"\nurl = \"{url}\"\nmethod = \"POST\"\ntimeout_ms = 5000\n\n[headers]\nAuthorization = {{ env = \"{var}\" }}\n"
        )
    };

    // A variable that is not a header variable is refused by plan and apply,
    // whether or not it is set, and the plan never prints it.
    std::fs::write(&crm, connector("http://127.0.0.1:9/api", "DATABASE_URL")).expect("write");
    for command in ["plan", "apply"] {
        let out = config(&db.url, &[command, d], &[]);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("$DATABASE_URL, which is not a header variable"),
            "{command}: {}",
            stderr(&out)
        );
        assert!(
            !stdout(&out).contains(&db.url),
            "{command} printed the variable"
        );
    }
    // Allowed by name, it is read.
    let out = config(
        &db.url,
        &["plan", d, "--allow-header-env", "DATABASE_URL"],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stdout(&out).contains("$DATABASE_URL"), "{}", stdout(&out));

    // A URL the connectors route refuses (a metadata address, another scheme).
    for url in ["http://169.254.169.254/latest", "gopher://127.0.0.1:70/"] {
        std::fs::write(&crm, connector(url, "LOADOUT_HEADER_CRM")).expect("write");
        let out = config(
            &db.url,
            &["apply", d],
            &[("LOADOUT_HEADER_CRM", "Bearer a")],
        );
        assert_eq!(out.status.code(), Some(1), "{url}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("url_refused"),
            "{url}: {}",
            stderr(&out)
        );
    }

    // Applied on 127.0.0.1:9, then moved: the CLI resolves the variable, so the
    // moved connector holds the value given with the move; over the API a header
    // kept by `env` on a move is refused (tests/integration/config_as_code.rs).
    std::fs::write(
        &crm,
        connector("http://127.0.0.1:9/api", "LOADOUT_HEADER_CRM"),
    )
    .expect("write");
    let out = config(
        &db.url,
        &["apply", d],
        &[("LOADOUT_HEADER_CRM", "Bearer old")],
    );
    assert!(out.status.success(), "{}", stderr(&out));

    // A soul linked out of the folder, and a soul that is a FIFO.
    let soul = dir.join("agents/assistant/soul.md");
    let outside = scratch(&format!("bounds-{name}-outside"));
    std::fs::create_dir_all(&outside).expect("mkdir");
    let secret = outside.join("environ");
    std::fs::write(&secret, "LOADOUT_SECRETS_KEY=leaked").expect("write");
    std::fs::remove_file(&soul).expect("rm soul");
    std::os::unix::fs::symlink(&secret, &soul).expect("symlink");
    for command in ["plan", "apply"] {
        let out = config(
            &db.url,
            &[command, d],
            &[("LOADOUT_HEADER_CRM", "Bearer old")],
        );
        assert_eq!(out.status.code(), Some(1), "{command}: {}", stdout(&out));
        assert!(
            stderr(&out).contains("leads out of the folder"),
            "{command}: {}",
            stderr(&out)
        );
        assert!(
            !stdout(&out).contains("leaked"),
            "{command}: {}",
            stdout(&out)
        );
    }
    std::fs::remove_file(&soul).expect("rm link");
    let made = std::process::Command::new("mkfifo")
        .arg(&soul)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let out = config(
        &db.url,
        &["plan", d],
        &[("LOADOUT_HEADER_CRM", "Bearer old")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("is not a regular file"),
        "{}",
        stderr(&out)
    );
    // A link that stays inside the folder is read.
    std::fs::remove_file(&soul).expect("rm fifo");
    let inside = dir.join("agents/assistant/operating_model.md");
    std::fs::write(&inside, "Linked within the folder.\n").expect("write");
    std::os::unix::fs::symlink(&inside, &soul).expect("symlink");
    let out = config(
        &db.url,
        &["plan", d],
        &[("LOADOUT_HEADER_CRM", "Bearer old")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Linked within the folder."),
        "{}",
        stdout(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&outside);
}

#[tokio::test]
async fn a_bundle_reads_only_its_folder_and_header_variables_on_sqlite() {
    bundle_boundaries(TestDb::sqlite().await, "sqlite").await;
}

#[tokio::test]
async fn a_bundle_reads_only_its_folder_and_header_variables_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    bundle_boundaries(db, "postgres").await;
}

/// `export --url --key` reads a running instance through `GET /v1/config` and
/// writes the same bytes as an export from its database.
#[tokio::test]
async fn an_export_through_the_api_is_byte_identical_to_one_from_the_database() {
    let db = TestDb::sqlite().await;
    let (serve, addr, printed) = spawn_serve(&db.url, &[], 3);
    let key = printed[2].clone();
    // A dataset whose assertion value is an object: its keys come back in order both ways.
    let dataset = r#"{"cases": [{"channel": "web", "messages": [{"role": "user", "content": "Hi"}],
        "assert": [{"type": "contains-json", "value": {"type": "object", "required": ["a"]}}]}]}"#;
    let (status, body) = http(
        &addr,
        "PUT",
        "/v1/agents/assistant/datasets/smoke",
        &key,
        dataset,
    );
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    let (api, direct) = (scratch("via-api"), scratch("via-db"));
    let url = format!("http://{addr}");
    let out = config(
        &db.url,
        &[
            "export",
            api.to_str().expect("path"),
            "--url",
            &url,
            "--key",
            &key,
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = config(&db.url, &["export", direct.to_str().expect("path")], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    stop(serve);
    let diff = Command::new("diff")
        .arg("-r")
        .arg(&api)
        .arg(&direct)
        .output()
        .expect("diff");
    assert!(diff.status.success(), "{}", stdout(&diff));
    assert!(api.join("agents/assistant/datasets/smoke.json").exists());
    let _ = std::fs::remove_dir_all(&api);
    let _ = std::fs::remove_dir_all(&direct);
}

/// A Langfuse export as its API answers prompts (`GET /api/public/v2/prompts/{name}?version=N`):
/// three versions of one prompt with `{{variables}}` and a dollar, production on the second;
/// a chat prompt of system messages under a folder name; one it cannot import; and a
/// prompt for the existing, gated `assistant`.
const LANGFUSE_EXPORT: [(&str, &str); 4] = [
    (
        "support-bot.json",
        r#"[
 {"id":"a1","name":"support-bot","version":1,"type":"text","prompt":"You help customers of Acme. Refunds over $50 need a manager.","config":{},"labels":[],"tags":[],"commitMessage":null,"createdAt":"2026-01-01T00:00:00.000Z"},
 {"id":"a2","name":"support-bot","version":2,"type":"text","prompt":"You help {{customer}} of Acme. It is {{ current_time }}. Refunds over $50 need a manager.","config":{"model":"gpt-5"},"labels":["production"],"tags":["support"],"commitMessage":"greet by name"},
 {"id":"a3","name":"support-bot","version":3,"type":"text","prompt":"You help {{customer}} of Acme, briefly. Refunds over $50 need a manager.","config":{},"labels":["staging","latest"],"tags":[],"commitMessage":null}
]"#,
    ),
    (
        "team/research.json",
        r#"{"name":"team/Research Helper","version":1,"type":"chat","prompt":[{"role":"system","content":"You research."},{"role":"system","content":"Cite sources."}],"config":null,"labels":["production","latest"],"tags":[]}"#,
    ),
    (
        "qa.json",
        r#"{"data":[{"name":"qa","version":1,"type":"chat","prompt":[{"role":"system","content":"Answer."},{"role":"user","content":"{{question}}"}],"labels":["production"]}]}"#,
    ),
    (
        "assistant.json",
        r#"{"name":"assistant","version":7,"type":"text","prompt":"{{identity}}\n\nImported from Langfuse.\n\n{{channel_guidance}}","labels":["production"]}"#,
    ),
];

fn write_langfuse_export(dir: &std::path::Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write the export");
    }
}

async fn count(db: &TestDb, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) AS n FROM {table}");
    let row = db
        .conn
        .query_one_raw(Statement::from_string(db.conn.get_database_backend(), sql))
        .await
        .expect("count")
        .expect("a row");
    row.try_get::<i64>("", "n").expect("n")
}

async fn langfuse_import_plans_applies_and_reapplies_as_a_no_op(db: TestDb) {
    for args in [&["migrate", "up"][..], &["seed"]] {
        let out = loadout(&db.url, args);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let gated = "UPDATE agent_configurations SET release_mode = 'gated' WHERE name = 'assistant'";
    db.conn
        .execute_raw(Statement::from_string(
            db.conn.get_database_backend(),
            gated,
        ))
        .await
        .expect("gate assistant");
    let dir = std::env::temp_dir().join(format!(
        "loadout-langfuse-{:?}-{}",
        db.backend,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let export = dir.to_str().expect("utf-8");
    let import = |more: &[&str]| {
        loadout(
            &db.url,
            &[&["import", "langfuse", export][..], more].concat(),
        )
    };

    // A crash after the first save is what a partial export imports: version 1 only.
    let all: Vec<serde_json::Value> = serde_json::from_str(LANGFUSE_EXPORT[0].1).expect("JSON");
    let only_v1 = serde_json::to_string(&all[..1]).expect("JSON");
    write_langfuse_export(&dir, &[("support-bot.json", &only_v1)]);
    let out = import(&["--apply"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("saved support-bot version 1 as revision 1"),
        "{}",
        stdout(&out)
    );

    write_langfuse_export(&dir, &LANGFUSE_EXPORT);
    let plan = import(&[]);
    assert_eq!(
        plan.status.code(),
        Some(2),
        "{}{}",
        stdout(&plan),
        stderr(&plan)
    );
    let text = stdout(&plan);
    for line in [
        "  agent support-bot ← Langfuse \"support-bot\"",
        "  = version 1: already revision 1",
        "  + version 2: saved as a new revision",
        "      {{variables}} made placeholders: current_time",
        "      kept as written (loadout does not fill them; a Langfuse client's compile does): {{customer}}",
        "  ~ label production → version 2: moves there",
        "+ agent team-research-helper (new) ← Langfuse \"team/Research Helper\"",
        "! Langfuse \"qa\": not imported",
        "      a chat prompt with a message that is not a system message (user): loadout serves one system prompt",
        "  ? label production → version 7: a change request is opened (sign-off needed)",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    let json = import(&["--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("--json is JSON");
    assert_eq!(json["plan"]["changes_anything"], true);
    assert!(json["applied"].is_null());

    let revisions = count(&db, "agent_revisions").await;
    let applied = import(&["--apply"]);
    assert!(applied.status.success(), "{}", stderr(&applied));
    let text = stdout(&applied);
    for line in [
        "saved support-bot version 2 as revision 2",
        "saved support-bot version 3 as revision 3",
        "saved team-research-helper version 1 as revision 1",
        "moved support-bot label production to revision 2",
        "moved support-bot label staging to revision 3",
        "opened change request #",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert_eq!(count(&db, "agent_revisions").await, revisions + 4);
    let labels = loadout(&db.url, &["labels", "support-bot"]);
    let labels: Vec<String> = stdout(&labels)
        .lines()
        .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(labels, ["latest 3", "production 2", "staging 3"]);
    // The gated agent's production waits for sign-off; its latest moved.
    let assistant = stdout(&loadout(&db.url, &["labels", "assistant"]));
    assert!(assistant.contains("production\t1"), "{assistant}");
    // The template keeps what loadout does not fill, and the dollar.
    let served = loadout(
        &db.url,
        &[
            "prompt",
            "render",
            "--agent",
            "support-bot",
            "--channel",
            "web",
            "--at",
            "2026-11-21T08:30:00Z",
        ],
    );
    assert_eq!(
        stdout(&served),
        "You help {{customer}} of Acme, briefly. Refunds over $50 need a manager.",
        "{}",
        stderr(&served)
    );

    // Twice: nothing saved, no label moved, no second request.
    let (moves, requests) = (
        count(&db, "label_moves").await,
        count(&db, "change_requests").await,
    );
    let again = import(&[]);
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    assert!(
        stdout(&again).contains("No changes: the export is imported."),
        "{}",
        stdout(&again)
    );
    assert!(
        stdout(&again).contains("change request #"),
        "{}",
        stdout(&again)
    );
    let reapplied = import(&["--apply"]);
    assert!(reapplied.status.success(), "{}", stderr(&reapplied));
    assert!(
        stdout(&reapplied).contains("Applied: 0 saved, 0 labels moved, 0 change requests opened.")
    );
    assert_eq!(count(&db, "agent_revisions").await, revisions + 4);
    assert_eq!(count(&db, "label_moves").await, moves);
    assert_eq!(count(&db, "change_requests").await, requests);

    let bad = loadout(&db.url, &["import", "langfuse", "/nonexistent-export"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stderr(&bad).contains("cannot read /nonexistent-export"),
        "{}",
        stderr(&bad)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn a_langfuse_export_plans_applies_and_reapplies_as_a_no_op_on_sqlite() {
    langfuse_import_plans_applies_and_reapplies_as_a_no_op(TestDb::sqlite().await).await;
}

#[tokio::test]
async fn a_langfuse_export_plans_applies_and_reapplies_as_a_no_op_on_postgres() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    langfuse_import_plans_applies_and_reapplies_as_a_no_op(db).await;
}

#[test]
fn the_langfuse_guide_works_when_pasted() {
    // The page's shell blocks, then its Python example with the Langfuse SDK of the
    // peer matrix (tests/peers/install), given the key the first block made.
    let mut blocks = sh_blocks("docs/langfuse.md");
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/peers/.peers/venv-langfuse/bin/python");
    let required = std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() == Ok("1");
    assert!(
        python.exists() || !required,
        "LOADOUT_REQUIRE_PEERS=1 but tests/peers/install has not run"
    );
    if python.exists() {
        let page = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/langfuse.md"),
        )
        .expect("the page");
        let example = page
            .split("```python\n")
            .nth(1)
            .and_then(|b| b.split("\n```").next())
            .expect("a Python example");
        blocks.push(format!(
            "LOADOUT_URL=$L LOADOUT_API_KEY=$KEY {} - <<'PY'\n{example}\nPY",
            python.display()
        ));
    }
    let printed = paste("langfuse", &blocks, &[], Shell::Strict);
    assert!(
        printed.contains("\"name\":\"assistant/web\",\"version\":1,\"type\":\"text\""),
        "the rendered prompt in Langfuse's shape: {printed}"
    );
    assert!(
        printed.contains("\"error\":\"LangfuseNotFoundError\""),
        "a missing label is Langfuse's 404: {printed}"
    );
    assert!(
        printed.contains("saved support-bot version 2 as revision 2")
            && printed.contains("No changes: the export is imported."),
        "the import applies, then has nothing left to do: {printed}"
    );
    assert!(
        printed.contains("production\t2"),
        "production is the export's: {printed}"
    );
    if python.exists() {
        assert!(
            printed.contains("1 ['latest', 'production']") && printed.contains("Ada\n\nBe brief."),
            "the SDK reads the prompt and compiles the template: {printed}"
        );
    }
}

/// The peers' real model (`tests/peers/model/serve.py`) on a free port: the child
/// and its OpenAI base URL; `None` (skipped) when the peers are not installed,
/// unless `LOADOUT_REQUIRE_PEERS=1` makes that a failure.
fn model_server() -> Option<(std::process::Child, String)> {
    use std::io::BufRead;
    let peers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers");
    let ready = peers.join(".peers/venv-model/bin/python").exists();
    assert!(
        ready || std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_PEERS=1 but the model server is not installed: run tests/peers/install"
    );
    if !ready {
        eprintln!("skipped: the model server is not installed (tests/peers/install)");
        return None;
    }
    let mut child = Command::new("python3")
        .arg(peers.join("model/serve.py"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve.py starts");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("a line");
    let url = line
        .trim()
        .strip_prefix("MODEL_READY ")
        .unwrap_or_else(|| panic!("serve.py printed {line:?}"))
        .to_owned();
    Some((child, url))
}

#[test]
fn the_evaluations_guide_works_when_pasted() {
    let Some((mut model, url)) = model_server() else {
        return;
    };
    let base = url.trim_end_matches("/v1").to_owned();
    let blocks: Vec<String> = sh_blocks("docs/evaluations.md")
        .into_iter()
        .map(|b| b.replace("http://127.0.0.1:8091", &base))
        .collect();
    let printed = paste(
        "evaluations",
        &blocks,
        &["--connector-allow", "127.0.0.1"],
        Shell::Strict,
    );
    let _ = Command::new("kill").arg(model.id().to_string()).status();
    let _ = model.wait();
    assert!(
        printed.contains("\"passed\":3,\"errors\":0"),
        "the run passes every case: {printed}"
    );
    assert!(
        printed.contains("\"name\":\"evals\",\"status\":\"fail\"")
            && printed.contains("turned from pass to fail"),
        "the evals check fails, naming the turned cases: {printed}"
    );
    assert!(
        printed.contains("refused: the evals check fails"),
        "the signer cannot approve the candidate: {printed}"
    );
}

#[test]
fn the_changes_guide_works_when_pasted() {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/peers/.peers/venv-ofrep/bin/python");
    let ready = python.exists();
    assert!(
        ready || std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_PEERS=1 but the OpenFeature provider is not installed: run tests/peers/install"
    );
    if !ready {
        eprintln!("skipped: the OpenFeature provider is not installed (tests/peers/install)");
        return;
    }
    // The page's Python is run by the pinned provider's interpreter.
    let blocks: Vec<String> = sh_blocks("docs/changes.md")
        .into_iter()
        .map(|b| {
            b.replace(
                "python3 prompt_flag.py",
                &format!("{} prompt_flag.py", python.display()),
            )
        })
        .collect();
    let printed = paste("changes", &blocks, &[], Shell::Strict);
    assert!(
        printed.contains("\"change\":\"label.moved\",\"agent\":\"assistant\",\"label\":\"production\",\"revision\":2"),
        "the stream told of the edit: {printed}"
    );
    assert!(
        printed.contains("{\"key\":\"assistant:prompt:web\",\"value\":\"You are Assistant"),
        "one flag evaluated: {printed}"
    );
    assert!(
        printed.contains("2 STATIC You are Assistant, the user's personal chief of staff."),
        "the Python provider read the prompt: {printed}"
    );
}
