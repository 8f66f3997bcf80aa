//! The TypeScript client (`clients/typescript`): built with its pinned `tsc`, then its
//! `node --test` suite against the real binary (`CARGO_BIN_EXE_loadout`) on each backend.
//! The suite starts `loadout serve` on a free 127.0.0.1 port over the database given, makes
//! its keys with `loadout keys create`, and checks the cache (TTL, 304s, stale, disk after a
//! restart, fallback, timeouts, one request per key), approvals, typed errors, spans, the
//! OpenAI Agents SDK and Vercel AI SDK adapters, the README's examples, the core with no
//! `node:` module, and that the checked-in types are what `scripts/generate.mjs` makes
//! from this binary's `/openapi.json`.
//!
//! `tests/peers/install` runs `npm ci` in `clients/typescript` (its `package-lock.json`)
//! and brings node 24 (the peer matrix's); `.ci/run` runs it. Without it these tests say
//! they were skipped, unless `LOADOUT_REQUIRE_PEERS=1` (as CI sets) makes that a failure.

#[allow(dead_code, unused_imports, unused_macros)]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::support::TestDb;

/// The two backends' runs build into the same `dist/`: one at a time.
static BUILD: Mutex<()> = Mutex::new(());

fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../clients/typescript")
}

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers/.peers")
}

fn node() -> PathBuf {
    peers().join("node_modules/.bin/node")
}

/// Installed means the whole install finished (its stamp), not only that some files exist.
fn installed() -> bool {
    let ready = node().exists()
        && peers().join("stamp").exists()
        && package().join("node_modules/typescript").exists();
    assert!(
        ready || std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_PEERS=1 but the TypeScript client's environment is not installed: run tests/peers/install"
    );
    if !ready {
        eprintln!(
            "skipped: the TypeScript client's environment is not installed (tests/peers/install)"
        );
    }
    ready
}

fn run(what: &str, command: &mut Command) {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{text}");
    assert!(output.status.success(), "{what} failed:\n{text}");
}

fn build_and_test(database_url: &str) {
    let _one = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    run(
        "tsc",
        Command::new(node())
            .args(["node_modules/typescript/bin/tsc", "-p", "."])
            .current_dir(package()),
    );
    run(
        "the TypeScript client's tests",
        Command::new(node())
            .args(["--test", "--test-concurrency=1", "test/*.test.mjs"])
            .current_dir(package())
            .env("LOADOUT_BIN", env!("CARGO_BIN_EXE_loadout"))
            .env("LOADOUT_TEST_DATABASE_URL", database_url)
            .env_remove("RUST_LOG")
            .env_remove("LOADOUT_URL")
            .env_remove("LOADOUT_API_KEY"),
    );
}

#[tokio::test]
async fn the_typescript_client_passes_its_tests_against_serve_on_sqlite() {
    if !installed() {
        return;
    }
    let db = TestDb::sqlite().await;
    build_and_test(&db.url);
}

#[tokio::test]
async fn the_typescript_client_passes_its_tests_against_serve_on_postgres() {
    if !installed() {
        return;
    }
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    build_and_test(&db.url);
}
