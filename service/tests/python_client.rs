//! The Python client (`clients/python`): its pytest suite against the real binary
//! (`CARGO_BIN_EXE_loadout`) on each backend. The suite starts `loadout serve` on a free
//! 127.0.0.1 port over the database given, makes its keys with `loadout keys create`,
//! and checks the cache (TTL, 304s, stale, disk, fallback), approvals, errors, spans,
//! the OpenAI Agents SDK adapter, and that the checked-in models are what
//! `clients/python/generate` makes from this binary's `/openapi.json`.
//!
//! `tests/peers/install` makes its pinned environment (`tests/peers/.peers/venv-pyclient`,
//! from `tests/peers/requirements-pyclient.txt`, with the client installed editable;
//! `.ci/run` runs it). Without it these tests say they were skipped, unless
//! `LOADOUT_REQUIRE_PEERS=1` (as CI sets) makes that a failure.

#[allow(dead_code, unused_imports, unused_macros)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::TestDb;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn python() -> PathBuf {
    root().join("tests/peers/.peers/venv-pyclient/bin/python")
}

fn installed() -> bool {
    let ready = python().exists() && root().join("tests/peers/.peers/stamp").exists();
    assert!(
        ready || std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_PEERS=1 but the Python client's environment is not installed: run tests/peers/install"
    );
    if !ready {
        eprintln!(
            "skipped: the Python client's environment is not installed (tests/peers/install)"
        );
    }
    ready
}

fn run_pytest(database_url: &str) {
    let output = Command::new(python())
        .args([
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "clients/python/tests",
        ])
        .current_dir(root())
        .env("LOADOUT_BIN", env!("CARGO_BIN_EXE_loadout"))
        .env("LOADOUT_TEST_DATABASE_URL", database_url)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("RUST_LOG")
        .env_remove("LOADOUT_URL")
        .env_remove("LOADOUT_API_KEY")
        .output()
        .expect("run pytest in tests/peers/.peers/venv-pyclient");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{text}");
    assert!(
        output.status.success(),
        "the Python client's tests failed:\n{text}"
    );
}

#[tokio::test]
async fn the_python_client_passes_its_tests_against_serve_on_sqlite() {
    if !installed() {
        return;
    }
    let db = TestDb::sqlite().await;
    run_pytest(&db.url);
}

#[tokio::test]
async fn the_python_client_passes_its_tests_against_serve_on_postgres() {
    if !installed() {
        return;
    }
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    run_pytest(&db.url);
}
