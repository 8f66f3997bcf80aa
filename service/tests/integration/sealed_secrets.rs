//! Connectors' header values sealed at rest (issue 23): stored sealed and sent as
//! given, kept working without a key (new ones refused, the check warns), sealed and
//! rotated by `loadout secrets`, dropped when the host changes, erased on delete; the
//! key file made owner-only beside an embedded database; a wrong key named, never
//! garbage. And a sync that leaves a link an admin switched off, off.

use std::sync::{Arc, Mutex};

use crate::support::sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use crate::support::{Backend, TestDb, db_test};
use axum::http::{HeaderMap, Method, StatusCode};
use entity::{connectors, webhook_subscriptions};
use loadout::app::AppState;
use loadout::auth::keys::{self, Role};
use loadout::cli::secrets::{SecretsArgs, SecretsCommand};
use loadout::secrets::{Key, Keyring};
use serde_json::{Value, json};

use super::mcp_connectors::McpServer;

const SECRET: &str = "Bearer backend-secret";

/// A real HTTP server on 127.0.0.1 that keeps the `Authorization` header of every
/// request it gets.
async fn target() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().route(
        "/ok",
        axum::routing::post(move |headers: HeaderMap| {
            let log = log.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_owned();
                log.lock().expect("log").push(auth);
                axum::Json(json!({"done": true}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.ok() });
    (format!("http://{address}"), seen)
}

/// One key for a process: the same key every time it is asked for by `n`.
fn key(n: u8) -> Key {
    Key::from_bytes(&[n; 32]).expect("key")
}

/// `serve`'s flags for a process holding key `n` (`--secrets-key`).
fn ring(n: u8) -> Vec<String> {
    let file = KeyFile::new(n);
    let flags = vec![format!("--secrets-key-file={}", file.0.display())];
    std::mem::forget(file); // read when the process starts, which may be later
    flags
}

struct Site {
    db: TestDb,
    state: AppState,
    operator: String,
    admin: String,
    agent: String,
}

impl Site {
    async fn new(db: TestDb, keyring: Vec<String>) -> Site {
        let db = db.seeded().await;
        let operator = keys::create(&db.conn, "operator", Role::Operator, chrono::Utc::now())
            .await
            .expect("key");
        let admin = keys::create(&db.conn, "admin", Role::Admin, chrono::Utc::now())
            .await
            .expect("key");
        let agent = keys::create(&db.conn, "agent", Role::Agent, chrono::Utc::now())
            .await
            .expect("key");
        let state = Site::state(&db, keyring).await;
        Site {
            db,
            state,
            operator,
            admin,
            agent,
        }
    }

    /// A process on the same database started by `serve`'s start-up with the
    /// secrets flags `keyring` (none: no key, which only Postgres can have).
    async fn state(db: &TestDb, keyring: Vec<String>) -> AppState {
        let mut flags = keyring;
        flags.push("--connector-allow=127.0.0.1".to_owned());
        let settings = loadout::app::Settings::from_flags(&flags).expect("flags");
        let clock = std::sync::Arc::new(loadout::vocab::SystemClock);
        loadout::app::start::start(&db.url, settings, clock)
            .await
            .expect("start")
            .state
    }

    /// The same site as a process started with `keyring` instead.
    async fn restarted(mut self, keyring: Vec<String>) -> Site {
        self.state = Site::state(&self.db, keyring).await;
        self
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        crate::support::api::call(&self.state, method, path, &self.operator, body).await
    }

    async fn create(&self, url: &str, headers: Value) -> (StatusCode, Value) {
        let body = json!({"name": "backend", "url": format!("{url}/ok"), "headers": headers, "timeout_ms": 5000});
        self.call(Method::POST, "/v1/connectors", Some(body)).await
    }

    async fn bind(&self) {
        let (status, body) = self
            .call(
                Method::PUT,
                "/v1/tools/delete_tasks/connector",
                Some(json!({"connector": "backend"})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    /// Proposes a `delete_tasks` call and approves it: the proposal as decided.
    async fn run_call(&self) -> Value {
        let (status, body) = crate::support::api::call(&self.state, Method::POST, "/v1/agents/assistant/tool-calls", &self.agent,
            Some(json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]}, "conversation_id": "c"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = body["proposal_id"].as_i64().expect("id");
        let path = format!("/v1/proposals/{id}/approve");
        let (status, body) =
            crate::support::api::call(&self.state, Method::POST, &path, &self.admin, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// The connector's `headers` as stored.
    async fn stored(&self) -> Value {
        connectors::Entity::find()
            .filter(connectors::Column::Name.eq("backend"))
            .one(&self.db.conn)
            .await
            .expect("read")
            .expect("the row")
            .headers
    }

    /// A connector as saved before sealing existed: plain header values.
    async fn plain_connector(&self, url: &str) {
        let now = chrono::Utc::now();
        connectors::ActiveModel {
            name: Set("backend".to_owned()),
            kind: Set("http".to_owned()),
            url: Set(format!("{url}/ok")),
            method: Set("POST".to_owned()),
            headers: Set(json!({"authorization": SECRET})),
            timeout_ms: Set(5000),
            created_at: Set(now),
            updated_at: Set(now),
            deleted_at: Set(None),
            ..Default::default()
        }
        .insert(&self.db.conn)
        .await
        .expect("insert");
    }

    async fn check_codes(&self) -> Vec<String> {
        let (status, report) = self.call(Method::GET, "/v1/registry/check", None).await;
        assert_eq!(status, StatusCode::OK, "{report}");
        report["problems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["kind"] == "connector")
            .map(|p| {
                format!(
                    "{} {}",
                    p["code"].as_str().unwrap_or(""),
                    p["message"].as_str().unwrap_or("")
                )
            })
            .collect()
    }

    /// `loadout secrets ...` on this database.
    async fn secrets(&self, command: SecretsCommand) -> anyhow::Result<()> {
        loadout::cli::secrets::run(&self.db.conn, &self.db.url, command).await
    }
}

/// A key file in the temp directory, removed when dropped.
struct KeyFile(std::path::PathBuf);

impl KeyFile {
    fn new(n: u8) -> KeyFile {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let name = format!("loadout-test-key-{}-{n}-{nanos}", std::process::id());
        let path = std::env::temp_dir().join(name);
        loadout::secrets::source::replace(&path, &key(n)).expect("write the key file");
        KeyFile(path)
    }

    fn args(&self) -> SecretsArgs {
        SecretsArgs {
            secrets_key_file: Some(self.0.clone()),
            ..Default::default()
        }
    }
}

impl Drop for KeyFile {
    fn drop(&mut self) {
        std::fs::remove_file(&self.0).ok();
    }
}

fn sealed_with(stored: &Value, header: &str, key_id: &str) {
    let value = stored[header].as_str().unwrap_or_default();
    assert!(
        value.starts_with(&format!("lo-sealed:v1:{key_id}:")),
        "{stored}"
    );
    assert!(
        !stored.to_string().contains("backend-secret"),
        "plaintext at rest: {stored}"
    );
}

db_test! {
    async fn a_header_value_is_stored_sealed_and_a_call_still_sends_it(db) {
        let (url, seen) = target().await;
        let site = Site::new(db, ring(1)).await;
        let (status, body) = site.create(&url, json!({"authorization": SECRET})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        assert_eq!(body["headers"], json!(["authorization"]));
        assert!(!body.to_string().contains("backend-secret"), "{body}");

        sealed_with(&site.stored().await, "authorization", &key(1).id().to_string());
        site.bind().await;
        let done = site.run_call().await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(*seen.lock().expect("log"), [SECRET]);
    }
}

db_test! {
    async fn without_a_key_a_plain_connector_keeps_working_new_values_are_refused_and_check_warns(db) {
        let (url, seen) = target().await;
        if db.backend == crate::support::Backend::Sqlite {
            // `serve` on an embedded SQLite database always has a key: it makes one
            // beside the file. A process without one is a server database's.
            return;
        }
        let site = Site::new(db, Vec::new()).await;
        site.plain_connector(&url).await;
        site.bind().await;
        let done = site.run_call().await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(*seen.lock().expect("log"), [SECRET], "the upgrade locked the connector out");

        let (status, body) = site.call(Method::PATCH, "/v1/connectors/backend", Some(json!({"headers": {"x-api-key": "new"}}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("secrets_key_missing")), "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("LOADOUT_SECRETS_KEY") && message.contains("--secrets-key-file"), "{message}");
        let (status, body) = site.call(Method::POST, "/v1/connectors",
            Some(json!({"name": "other", "url": format!("{url}/ok"), "headers": {"x-api-key": "new"}}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("secrets_key_missing")), "{body}");
        let (status, body) = site.call(Method::POST, "/v1/connectors",
            Some(json!({"name": "other", "url": format!("{url}/ok")}))).await;
        assert_eq!(status, StatusCode::CREATED, "a connector without headers needs no key: {body}");
        assert_eq!(site.stored().await, json!({"authorization": SECRET}), "the refusals changed nothing");

        let codes = site.check_codes().await;
        assert!(codes.iter().any(|c| c.starts_with("secrets_not_sealed") && c.contains("no secrets key")), "{codes:?}");
    }
}

db_test! {
    async fn the_seal_command_seals_plain_values_and_erases_those_of_deleted_connectors(db) {
        let (url, seen) = target().await;
        let site = Site::new(db, ring(2)).await;
        site.plain_connector(&url).await;
        let codes = site.check_codes().await;
        assert!(codes.iter().any(|c| c.starts_with("secrets_not_sealed") && c.contains("plain text")), "{codes:?}");
        let gone = connectors::ActiveModel {
            name: Set("gone".to_owned()),
            kind: Set("http".to_owned()),
            url: Set(format!("{url}/ok")),
            method: Set("POST".to_owned()),
            headers: Set(json!({"authorization": "Bearer old-secret"})),
            timeout_ms: Set(5000),
            created_at: Set(chrono::Utc::now()),
            updated_at: Set(chrono::Utc::now()),
            deleted_at: Set(Some(chrono::Utc::now())),
            ..Default::default()
        };
        gone.insert(&site.db.conn).await.expect("insert");

        let file = KeyFile::new(2);
        site.secrets(SecretsCommand::Seal { key: file.args() }).await.expect("seal");
        sealed_with(&site.stored().await, "authorization", &key(2).id().to_string());
        let gone = connectors::Entity::find().filter(connectors::Column::Name.eq("gone")).one(&site.db.conn).await.expect("read").expect("row");
        assert_eq!(gone.headers, json!({}), "a deleted connector keeps no credentials");
        assert_eq!(site.check_codes().await, Vec::<String>::new());

        site.bind().await;
        let done = site.run_call().await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(*seen.lock().expect("log"), [SECRET]);
        let before = site.stored().await;
        site.secrets(SecretsCommand::Seal { key: file.args() }).await.expect("seal again");
        assert_eq!(site.stored().await, before, "sealing twice changes nothing");
    }
}

db_test! {
    async fn rotating_seals_every_value_with_the_new_key_and_the_old_key_no_longer_opens_them(db) {
        let (url, seen) = target().await;
        let site = Site::new(db, ring(3)).await;
        let (status, body) = site.create(&url, json!({"authorization": SECRET})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        site.bind().await;
        let (old, new) = (KeyFile::new(3), KeyFile::new(4));

        let wrong = site.secrets(SecretsCommand::Rotate { new_key_file: new.0.clone(), key: KeyFile::new(5).args() }).await;
        let why = format!("{:#}", wrong.expect_err("the wrong current key"));
        assert!(why.contains(&key(3).id().to_string()), "names the key that sealed it: {why}");
        sealed_with(&site.stored().await, "authorization", &key(3).id().to_string());

        site.secrets(SecretsCommand::Rotate { new_key_file: new.0.clone(), key: old.args() }).await.expect("rotate");
        sealed_with(&site.stored().await, "authorization", &key(4).id().to_string());

        let site = site.restarted(ring(4)).await;
        let done = site.run_call().await;
        assert_eq!(done["state"], "succeeded", "{done}");
        assert_eq!(*seen.lock().expect("log"), [SECRET]);

        let previous = KeyFile::new(4);
        let mut during = ring(5);
        during.push(format!("--secrets-previous-key-file={}", previous.0.display()));
        let site = site.restarted(during).await;
        let done = site.run_call().await;
        assert_eq!(done["state"], "succeeded", "a previous key still opens: {done}");
    }
}

db_test! {
    async fn a_wrong_key_is_named_and_nothing_is_sent(db) {
        let (url, seen) = target().await;
        let site = Site::new(db, ring(6)).await;
        let (status, body) = site.create(&url, json!({"authorization": SECRET})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        site.bind().await;

        let site = site.restarted(ring(7)).await;
        let failed = site.run_call().await;
        assert_eq!(failed["state"], "failed", "{failed}");
        let error = failed["result"]["error"].as_str().unwrap_or_default();
        assert!(error.contains(&key(6).id().to_string()) && error.contains("does not hold"), "{failed}");
        assert_eq!(failed["result"]["retryable"], false);
        assert!(seen.lock().expect("log").is_empty(), "a request went out with garbage");
        let codes = site.check_codes().await;
        assert!(codes.iter().any(|c| c.starts_with("secrets_unreadable") && c.contains(&key(6).id().to_string())), "{codes:?}");

        // A sealed value copied to another header does not open either.
        let mut moved = site.stored().await;
        moved["x-other"] = moved["authorization"].clone();
        let row = connectors::Entity::find().filter(connectors::Column::Name.eq("backend")).one(&site.db.conn).await.expect("read").expect("row");
        let mut active: connectors::ActiveModel = row.into();
        active.headers = Set(moved);
        active.update(&site.db.conn).await.expect("update");
        let site = site.restarted(ring(6)).await;
        let failed = site.run_call().await;
        let error = failed["result"]["error"].as_str().unwrap_or_default();
        assert!(error.contains("does not open") && error.contains("copied"), "{failed}");
        assert!(seen.lock().expect("log").is_empty(), "{failed}");
    }
}

db_test! {
    async fn changing_the_host_drops_header_values_unless_the_same_request_gives_them(db) {
        let (url, _) = target().await;
        let (other, _) = target().await;
        let site = Site::new(db, ring(8)).await;
        let (status, body) = site.create(&url, json!({"authorization": SECRET})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let patch = |body: Value| site.call(Method::PATCH, "/v1/connectors/backend", Some(body));

        let (status, body) = patch(json!({"url": format!("{url}/elsewhere?x=1")})).await;
        assert_eq!((status, body["headers"].clone()), (StatusCode::OK, json!(["authorization"])), "same host: {body}");
        let (status, body) = patch(json!({"url": format!("{other}/ok"), "headers": {"authorization": "Bearer for-other"}})).await;
        assert_eq!((status, body["headers"].clone()), (StatusCode::OK, json!(["authorization"])), "given again: {body}");
        let (status, body) = patch(json!({"url": format!("{url}/ok")})).await;
        assert_eq!((status, body["headers"].clone()), (StatusCode::OK, json!([])), "moved: {body}");
        assert_eq!(site.stored().await, json!({}));
        let https = url.replacen("http://", "https://", 1);
        let (_, body) = patch(json!({"headers": {"authorization": SECRET}})).await;
        assert_eq!(body["headers"], json!(["authorization"]));
        let (status, body) = patch(json!({"url": format!("{https}/ok")})).await;
        assert_eq!((status, body["headers"].clone()), (StatusCode::OK, json!([])), "another scheme: {body}");
    }
}

db_test! {
    async fn deleting_a_connector_erases_its_header_values(db) {
        let (url, _) = target().await;
        let site = Site::new(db, ring(9)).await;
        let (status, body) = site.create(&url, json!({"authorization": SECRET, "x-api-key": "k"})).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, body) = site.call(Method::DELETE, "/v1/connectors/backend", None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let row = connectors::Entity::find().filter(connectors::Column::Name.eq("backend")).one(&site.db.conn).await.expect("read").expect("row");
        assert!(row.deleted_at.is_some());
        assert_eq!(row.headers, json!({}), "{row:?}");
    }
}

db_test! {
    async fn a_key_file_is_made_owner_only_beside_an_embedded_database_and_never_for_postgres(db) {
        let args = SecretsArgs::default();
        let beside = loadout::secrets::source::beside_sqlite(&db.url);
        let made: Vec<Keyring> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..4).map(|_| s.spawn(|| args.keyring(&db.url, true).expect("keyring").0)).collect();
            runs.into_iter().map(|r| r.join().expect("join")).collect()
        });
        match db.backend {
            Backend::Sqlite => {
                let path = beside.expect("a sqlite file has a key file");
                let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).expect("made").permissions());
                assert_eq!(mode & 0o777, 0o600, "owner-only");
                let first = made[0].sealing().expect("a key");
                assert!(made.iter().all(|k| k.sealing() == Some(first)), "four starts at once, one key: {made:?}");
                let again = args.keyring(&db.url, false).expect("read").0;
                assert_eq!(again.sealing(), Some(first), "the next start reads it");
                let leftovers: Vec<_> = std::fs::read_dir(path.parent().expect("dir")).expect("list").flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{}.", path.file_name().expect("name").to_string_lossy())))
                    .collect();
                assert!(leftovers.is_empty(), "drafts left behind: {leftovers:?}");
            }
            Backend::Postgres => {
                assert_eq!(beside, None);
                assert!(made.iter().all(|k| k.sealing().is_none()), "a shared database gets no made key");
            }
        }
    }
}

db_test! {
    async fn a_sync_leaves_a_link_an_admin_switched_off_off(db) {
        let server = McpServer::start();
        let site = Site::new(db, ring(10)).await;
        let (status, body) = site.call(Method::POST, "/v1/connectors",
            Some(json!({"name": "weather", "kind": "mcp", "url": server.url, "headers": {"authorization": "Bearer mcp-secret"}, "timeout_ms": 5000, "trusted": true}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let sync = || site.call(Method::POST, "/v1/connectors/weather/sync", Some(json!({"agent": "assistant"})));
        let (status, body) = sync().await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let link = |links: &Value, tool: &str| {
            links["links"].as_array().into_iter().flatten().find(|l| l["tool"] == tool).map(|l| l["active"].clone())
        };
        let (_, links) = site.call(Method::GET, "/v1/agents/assistant/links", None).await;
        assert_eq!(link(&links, "get_weather_forecast"), Some(json!(true)), "a missing link is made: {links}");

        let (status, body) = site.call(Method::DELETE, "/v1/agents/assistant/links/get_weather_forecast", None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = sync().await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (_, links) = site.call(Method::GET, "/v1/agents/assistant/links", None).await;
        assert_eq!(link(&links, "get_weather_forecast"), Some(json!(false)), "switched back on: {links}");
        assert_eq!(link(&links, "delete_weather_alerts"), Some(json!(true)), "{links}");
    }
}

db_test! {
    async fn rotating_reseals_webhook_secrets_in_the_same_step(db) {
        let site = Site::new(db, ring(8)).await;
        let body = json!({"url": "http://127.0.0.1:9/hook", "events": ["label.moved"]});
        let (status, created) = site.call(Method::POST, "/v1/webhooks", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let secret = created["secret"].as_str().expect("secret").to_owned();
        let id = i32::try_from(created["subscription"]["id"].as_i64().expect("id")).expect("id");
        let stored = || async {
            webhook_subscriptions::Entity::find_by_id(id)
                .one(&site.db.conn)
                .await
                .expect("read")
                .expect("the row")
                .secret
        };
        assert_eq!(loadout::secrets::sealed_with(&stored().await), Some(key(8).id()));

        let (old, new) = (KeyFile::new(8), KeyFile::new(9));
        site.secrets(SecretsCommand::Rotate { new_key_file: new.0.clone(), key: old.args() }).await.expect("rotate");

        let sealed = stored().await;
        assert_eq!(loadout::secrets::sealed_with(&sealed), Some(key(9).id()));
        let only_new = Keyring::new(key(9), Vec::new());
        let context = loadout::secrets::webhook_secret_context(id);
        let opened = only_new.open(&sealed, &context).expect("the new key alone opens it");
        assert_eq!(opened.expose(), secret, "the same secret, sealed anew");
        assert!(Keyring::new(key(8), Vec::new()).open(&sealed, &context).is_err());
    }
}
