//! The peer matrix: software loadout did not write, at pinned versions, driven
//! against the real binary on each backend by `tests/peers/run.py` (see
//! `tests/peers/README.md`): the MCP conformance suite, the Python MCP SDK on
//! both protocol revisions, the OpenAI Agents SDK, a FastMCP server as a
//! connector's remote, and two OpenAPI client generators.
//!
//! `tests/peers/install` puts the peers in `tests/peers/.peers/` (`.ci/run` runs
//! it). Without them these tests say they were skipped, unless
//! `LOADOUT_REQUIRE_PEERS=1` (as CI sets) makes that a failure.

#[allow(dead_code, unused_imports, unused_macros)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::TestDb;

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers")
}

fn installed() -> bool {
    let ready = peers_dir().join(".peers/stamp").exists();
    assert!(
        ready || std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_PEERS=1 but the peers are not installed: run tests/peers/install"
    );
    if !ready {
        eprintln!("skipped: the peers are not installed (tests/peers/install)");
    }
    ready
}

fn run_matrix(database_url: &str) {
    let output = Command::new("python3")
        .arg(peers_dir().join("run.py"))
        .args(["--loadout", env!("CARGO_BIN_EXE_loadout")])
        .args(["--database-url", database_url])
        .env_remove("RUST_LOG")
        .output()
        .expect("run python3 tests/peers/run.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The matrix is worth seeing in CI's log whether it passed or not.
    println!("{text}");
    assert!(output.status.success(), "a peer failed:\n{text}");
}

#[tokio::test]
async fn the_peer_matrix_passes_on_sqlite() {
    if !installed() {
        return;
    }
    let db = TestDb::sqlite().await;
    run_matrix(&db.url);
}

#[tokio::test]
async fn the_peer_matrix_passes_on_postgres() {
    if !installed() {
        return;
    }
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    run_matrix(&db.url);
}
