//! The test harness every test binary of this package declares (`mod support;`;
//! `mod.rs`, so that cargo does not take it for a test of its own):
//! a fresh real database per test, SQLite always and Postgres when
//! `LOADOUT_TEST_POSTGRES_URL` is set, built by the real migrator.

pub mod api;
pub mod app;
pub mod contract;
pub mod dump;
pub mod legacy;
pub mod wire;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use sea_orm::{ConnectionTrait, Database, DatabaseConnection};

pub use app::TestApp;
pub use sea_orm;

/// Which backend a [`TestDb`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database that exists for one test and is removed when it is dropped.
pub struct TestDb {
    pub conn: DatabaseConnection,
    pub url: String,
    pub backend: Backend,
    cleanup: Cleanup,
}

enum Cleanup {
    File(std::path::PathBuf),
    PgDatabase { admin_url: String, name: String },
}

fn unique_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "loadout_test_{}_{}_{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl TestDb {
    /// A new SQLite file in the system temp directory.
    pub async fn sqlite() -> TestDb {
        Self::sqlite_in(&std::env::temp_dir()).await
    }

    /// A new SQLite file in `dir` (a small file system, say).
    pub async fn sqlite_in(dir: &std::path::Path) -> TestDb {
        let path = dir.join(format!("{}.db", unique_name()));
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let conn = loadout::db::connect(&url)
            .await
            .expect("open a fresh SQLite database");
        TestDb {
            conn,
            url,
            backend: Backend::Sqlite,
            cleanup: Cleanup::File(path),
        }
    }

    /// A new Postgres database, or `None` when no server is configured.
    /// With `LOADOUT_REQUIRE_POSTGRES=1` a missing server fails the test instead.
    pub async fn postgres() -> Option<TestDb> {
        let Ok(admin_url) = std::env::var("LOADOUT_TEST_POSTGRES_URL") else {
            assert!(
                std::env::var("LOADOUT_REQUIRE_POSTGRES").as_deref() != Ok("1"),
                "LOADOUT_REQUIRE_POSTGRES=1 but LOADOUT_TEST_POSTGRES_URL is not set"
            );
            eprintln!("skipped: LOADOUT_TEST_POSTGRES_URL is not set");
            return None;
        };
        let name = unique_name();
        let admin = Database::connect(&admin_url)
            .await
            .expect("connect to LOADOUT_TEST_POSTGRES_URL");
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create a test database");
        admin.close().await.ok();
        let url = database_url_with_name(&admin_url, &name);
        let conn = loadout::db::connect(&url)
            .await
            .expect("open the fresh Postgres database");
        Some(TestDb {
            conn,
            url,
            backend: Backend::Postgres,
            cleanup: Cleanup::PgDatabase { admin_url, name },
        })
    }

    /// The same database as `self`, through a new, independent pool.
    pub async fn reconnect(&self) -> DatabaseConnection {
        loadout::db::connect(&self.url).await.expect("reconnect")
    }

    /// Applies every migration.
    pub async fn migrated(self) -> TestDb {
        loadout::db::migrate::up(&self.conn)
            .await
            .expect("migrate up");
        self
    }

    /// Applies every migration, then seeds the embedded catalog, agent and channels.
    pub async fn seeded(self) -> TestDb {
        let db = self.migrated().await;
        let seeds = loadout::registry::catalog::Seeds::embedded().expect("seeds");
        loadout::registry::seed::run(&db.conn, &seeds, chrono::Utc::now())
            .await
            .expect("seed");
        db
    }

    /// A new key of `role` named `name`, in the default tenant, with a member of
    /// its own. An operator's or approver's member is granted sign-off, as
    /// `loadout keys create --signer` does (the power such keys had before members).
    pub async fn key(&self, name: &str, role: loadout::auth::keys::Role) -> String {
        use loadout::auth::keys::Role;
        let key = loadout::auth::keys::create(&self.conn, name, role, chrono::Utc::now())
            .await
            .expect("create a key");
        if matches!(role, Role::Operator | Role::Approver) {
            loadout::auth::signers::set_signer_on_database(
                &self.conn,
                "default",
                name,
                true,
                None,
                chrono::Utc::now(),
            )
            .await
            .expect("grant sign-off");
        }
        key
    }
}

/// Rolls a database back until `name` is the newest migration
/// applied, however many were added after it.
pub async fn migrate_down_to(db: &DatabaseConnection, name: &str) {
    use migration::{Migrator, MigratorTrait};
    // Counted among the applied ones, so a database already partly down (or a
    // migration added later) goes exactly to `name`.
    let applied = Migrator::get_applied_migrations(db)
        .await
        .expect("applied migrations");
    let at = applied
        .iter()
        .position(|m| m.name() == name)
        .unwrap_or_else(|| panic!("no applied migration {name}"));
    let later = u32::try_from(applied.len() - at - 1).expect("few migrations");
    Migrator::down(db, Some(later))
        .await
        .expect("migrations down");
}

/// The tests' secrets key (base64), as `serve` would hold one: a state without a
/// key refuses connectors' header values (422).
pub const SECRETS_KEY: &str = "dIVwoYg9Hd8m08hcoMfOH359LAaAfFuu0KZQisME1GY=";

/// [`SECRETS_KEY`] as a state holds it.
pub fn keyring() -> loadout::secrets::Keyring {
    let key = loadout::secrets::Key::from_base64(SECRETS_KEY).expect("the tests' key");
    loadout::secrets::Keyring::new(key, Vec::new())
}

/// `postgres://u@h:5432/postgres?x` → `postgres://u@h:5432/NAME?x`.
fn database_url_with_name(url: &str, name: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    let mut out = format!("{}/{name}", &base[..host_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm", ".secrets-key"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::PgDatabase { admin_url, name } => {
                let (admin_url, name) = (admin_url.clone(), name.clone());
                // Drop runs inside the test's runtime; a fresh one on its own thread can block.
                let _ = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .ok()?;
                    rt.block_on(async {
                        let admin = Database::connect(&admin_url).await.ok()?;
                        admin
                            .execute_unprepared(&format!(
                                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                            ))
                            .await
                            .ok()?;
                        admin.close().await.ok()
                    })
                })
                .join();
            }
        }
    }
}

/// Defines one test per backend: `NAME::sqlite` and `NAME::postgres`, each with a fresh database.
macro_rules! db_test {
    ($(#[$meta:meta])* async fn $name:ident($db:ident) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let $db = $crate::support::TestDb::sqlite().await;
                $body
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let Some($db) = $crate::support::TestDb::postgres().await else { return };
                $body
            }
        }
    };
}
pub(crate) use db_test;

/// A folder under the system's temporary folder, removed when dropped.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// A new, empty folder whose name starts with `loadout-{what}-`.
    pub fn new(what: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("loadout-{what}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("mkdir");
        Self(path)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
