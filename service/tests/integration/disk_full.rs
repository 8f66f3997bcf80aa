//! SQLite on a full disk: every write is either refused with the clear error or
//! durably committed, never acknowledged and lost; what is served was committed;
//! writes work again, without a restart, once there is space.
//!
//! It needs a small file system of its own: the test mounts a tmpfs (root only).
//! Where it cannot, it says it was skipped, unless `LOADOUT_REQUIRE_TMPFS=1` (as
//! CI sets) makes that a failure.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::TestDb;
use crate::support::api::call;
use crate::support::sea_orm::{ConnectionTrait, Statement};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::Role;
use serde_json::json;

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!("loadout-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if mounted {
            return Some(Tmpfs(dir));
        }
        let _ = std::fs::remove_dir(&dir);
        assert!(
            std::env::var("LOADOUT_REQUIRE_TMPFS").as_deref() != Ok("1"),
            "LOADOUT_REQUIRE_TMPFS=1 but a tmpfs could not be mounted (root is needed)"
        );
        eprintln!("skipped: cannot mount a tmpfs (root is needed)");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Writes a file until the file system has no space left; returns its path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).expect("filler");
    let block = vec![b'x'; 4096];
    while file.write_all(&block).is_ok() {}
    let _ = file.write_all(&block[..1]);
    let _ = file.sync_all();
    path
}

/// Every committed template version, read through a connection of its own.
async fn committed(url: &str) -> BTreeMap<i64, String> {
    let db = loadout::db::connect(url).await.expect("a fresh connection");
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT version, body FROM prompt_versions WHERE kind = 'template' AND body IS NOT NULL",
        ))
        .await
        .expect("read the history");
    db.close().await.ok();
    rows.iter()
        .map(|r| {
            (
                r.try_get::<i32>("", "version").expect("version").into(),
                r.try_get::<String>("", "body").expect("body"),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_full_disk_no_acknowledged_write_is_lost_and_writes_recover_without_a_restart() {
    let Some(fs) = Tmpfs::mount("3m") else { return };
    let db = TestDb::sqlite_in(&fs.0).await.seeded().await;
    let admin = db.key("admin", Role::Operator).await;
    let state = crate::support::app::state(&db, &[]).await;
    let path = "/v1/agents/assistant/prompt-template";
    let put = |n: usize| {
        let state = state.clone();
        let admin = admin.clone();
        async move {
            let text = format!("Attempt {n} {}. $soul", "x".repeat(2048));
            let (status, body) = call(
                &state,
                Method::PUT,
                path,
                &admin,
                Some(json!({ "template": text })),
            )
            .await;
            (text, status, body)
        }
    };

    let filler = fill(&fs.0);
    let mut acknowledged: BTreeMap<i64, String> = BTreeMap::new();
    let mut refused = 0;
    for n in 0..24 {
        let (text, status, body) = put(n).await;
        match status {
            StatusCode::OK => {
                let version = body["version"].as_i64().expect("a version");
                assert!(
                    acknowledged.insert(version, text).is_none(),
                    "version {version} acknowledged twice"
                );
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                assert_eq!(body["error"]["code"], "storage_full", "{body}");
                refused += 1;
            }
            other => panic!("write {n}: {other} {body}"),
        }
        // What is served is committed: the current template is in the history a
        // fresh connection reads.
        let (status, current) = call(&state, Method::GET, path, &admin, None).await;
        if status == StatusCode::OK {
            let history = committed(&db.url).await;
            let served = current["template"].as_str().unwrap_or_default();
            let version = current["version"].as_i64().unwrap_or_default();
            assert!(
                history.get(&version).map(String::as_str) == Some(served),
                "write {n}: the served version {version} is not the committed one"
            );
        }
    }
    assert!(
        refused > 0,
        "the disk never filled: the test proves nothing"
    );

    let history = committed(&db.url).await;
    for (version, text) in &acknowledged {
        assert!(
            history.get(version) == Some(text),
            "version {version} was acknowledged but is not committed"
        );
    }

    std::fs::remove_file(filler).expect("free the space");
    let (text, status, body) = put(100).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "writes recover without a restart: {body}"
    );
    let version = body["version"].as_i64().expect("a version");
    assert!(
        !acknowledged.contains_key(&version),
        "version {version} reused"
    );
    assert_eq!(committed(&db.url).await.get(&version), Some(&text));
    let (status, ready) = call(&state, Method::GET, "/ready", &admin, None).await;
    assert_eq!(status, StatusCode::OK, "{ready}");
    drop(state);
    drop(db);
}
