//! The real router over a real, migrated and seeded database, on both backends.

use std::time::{Duration, Instant};

use crate::support::api::{Reply, send};
use crate::support::{TestApp, TestDb, db_test};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use loadout::app::AppState;
use loadout::auth::keys::{self};
use loadout::prompt::builder::FixedClock;
use loadout::registry::catalog::Seeds;
use serde_json::{Value, json};

/// The application at a fixed instant.
async fn app(db: TestDb) -> TestApp {
    let now = "2026-11-21T08:30:00Z".parse().expect("instant");
    TestApp::builder(db).clock(FixedClock(now)).build().await
}

fn error_code(reply: &Reply) -> &str {
    reply.body["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {}", reply.body))
}

db_test! {
    async fn an_agent_key_reads_every_channels_prompt_and_its_tools(db) {
        let api = app(db).await;
        for channel in ["web", "telegram", "scheduled", "heartbeat", "session_open"] {
            let reply = api.get(&format!("/v1/agents/assistant/prompt?channel={channel}&tz=Europe/Berlin")).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            assert_eq!(reply.body["provenance"]["channel"], channel);
            assert_eq!(reply.body["provenance"]["source"], "template");
            // The API serves exactly what the builder snapshots hold.
            let golden = std::fs::read_to_string(format!(
                "{}/tests/integration/snapshots/integration__prompt__{channel}__template__bare.snap",
                env!("CARGO_MANIFEST_DIR")
            )).expect("golden file");
            let golden = golden.splitn(3, "---\n").nth(2).expect("snapshot body");
            assert_eq!(reply.body["text"].as_str().expect("text").trim_end(), golden.trim_end(), "{channel}");
        }
        let web = api.get("/v1/agents/assistant/prompt?channel=web").await;
        // Keys sorted: JSON key order is not part of the contract (and PostgreSQL's
        // `jsonb` keeps stored schemas in its own), so both backends share a snapshot.
        insta::assert_json_snapshot!("prompt_web_provenance", loadout::digest::sorted(&web.body["provenance"]));
        for format in ["openai", "anthropic", "mcp"] {
            let reply = api.get(&format!("/v1/agents/assistant/tools?format={format}")).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            insta::assert_json_snapshot!(format!("tools_{format}"), loadout::digest::sorted(&reply.body));
        }
        let loadout = api.get("/v1/agents/assistant/loadout?channel=web&format=openai").await;
        assert_eq!(loadout.status, StatusCode::OK);
        assert_eq!(loadout.body["prompt"]["text"], web.body["text"]);
        assert_eq!(loadout.body["tools"].as_array().expect("tools").len(), 23);
    }
}

db_test! {
    async fn a_request_without_a_key_is_401(db) {
        let api = app(db).await;
        let reply = api.json(Method::GET, "/v1/agents/assistant/prompt?channel=web", None, None).await;
        assert_eq!((reply.status, error_code(&reply)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    }
}

db_test! {
    async fn a_forged_secret_with_a_real_prefix_is_401(db) {
        let api = app(db).await;
        // Same prefix, another secret: flip the last hex digit.
        let last = if api.agent.ends_with('0') { '1' } else { '0' };
        let forged = format!("{}{last}", &api.agent[..api.agent.len() - 1]);
        assert_ne!(forged, api.agent);
        let reply = api.json(Method::GET, "/v1/agents/assistant/prompt?channel=web", Some(&forged), None).await;
        assert_eq!((reply.status, error_code(&reply)), (StatusCode::UNAUTHORIZED, "unauthorized"));
    }
}

db_test! {
    async fn an_agent_key_may_not_use_admin_routes_and_an_admin_key_may(db) {
        let api = app(db).await;
        let reply = api.json(Method::GET, "/v1/agents", Some(&api.agent), None).await;
        assert_eq!((reply.status, error_code(&reply)), (StatusCode::FORBIDDEN, "forbidden"));
        assert_eq!(api.json(Method::GET, "/v1/agents", Some(&api.operator), None).await.status, StatusCode::OK);
    }
}

db_test! {
    async fn health_and_readiness_need_no_key(db) {
        let api = app(db).await;
        assert_eq!(api.json(Method::GET, "/health", None, None).await.status, StatusCode::OK);
        assert_eq!(api.json(Method::GET, "/ready", None, None).await.status, StatusCode::OK);
    }
}

db_test! {
    async fn a_revoked_key_stops_working_although_it_was_cached(db) {
        let api = app(db).await;
        let path = "/v1/agents/assistant/prompt?channel=web";
        // The key works (and is cached), then is revoked the way `loadout keys revoke` does it.
        assert_eq!(api.get(path).await.status, StatusCode::OK);
        let txn = sea_orm::TransactionTrait::begin(&api.db.conn).await.expect("txn");
        keys::revoke(&txn, "default", "test-agent", chrono::Utc::now()).await.expect("revoke");
        loadout::db::generation::bump(&txn).await.expect("bump");
        txn.commit().await.expect("commit");
        let deadline = Instant::now() + Duration::from_secs(10);
        let poller = api.state.spawn_generation_poller();
        while api.get(path).await.status != StatusCode::UNAUTHORIZED {
            assert!(Instant::now() < deadline, "a revoked key kept working");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        poller.abort();
    }
}

db_test! {
    async fn an_unchanged_prompt_answers_304_and_a_template_edit_is_seen_by_the_next_fetch(db) {
        let api = app(db).await;
        let path = "/v1/agents/assistant/prompt?channel=web";
        let first = api.get(path).await;
        let etag = first.etag.clone().expect("etag");
        let again = api.send(Method::GET, path, Some(&api.agent), None, Some(&etag)).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED);
        assert_eq!(again.body, Value::Null);

        let put = api.json(Method::PUT, "/v1/agents/assistant/prompt-template", Some(&api.operator),
            Some(json!({"template": "Be brief on $channel_guidance", "expected_version": 1}))).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.body);
        assert_eq!(put.body["version"], 2);

        let next = api.send(Method::GET, path, Some(&api.agent), None, Some(&etag)).await;
        assert_eq!(next.status, StatusCode::OK);
        assert_ne!(next.etag.as_deref(), Some(etag.as_str()));
        assert!(next.body["text"].as_str().expect("text").starts_with("Be brief on The user is chatting"));
        assert_eq!(next.body["provenance"]["template_version"], 2);

        let cleared = api.json(Method::DELETE, "/v1/agents/assistant/prompt-template", Some(&api.operator), None).await;
        assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.body);
        let builtin = api.get(path).await;
        assert_eq!(builtin.body["provenance"]["source"], "builtin");
        assert_eq!(builtin.body["text"], first.body["text"]);

        let restored = api.json(Method::POST, "/v1/agents/assistant/prompt-template/versions/2/restore", Some(&api.operator), None).await;
        assert_eq!(restored.body["version"], 4, "{}", restored.body);
        let versions = api.json(Method::GET, "/v1/agents/assistant/prompt-template/versions", Some(&api.operator), None).await;
        let listed: Vec<(i64, String, Value)> = versions.body["versions"].as_array().expect("versions").iter()
            .map(|v| (v["version"].as_i64().expect("n"), v["author"].as_str().expect("author").to_owned(), v["template"].clone()))
            .collect();
        assert_eq!(listed, [
            (1, "seed".to_owned(), json!(Seeds::embedded().expect("seeds").assistant.prompt_template)),
            (2, "operator".to_owned(), json!("Be brief on $channel_guidance")),
            (3, "operator".to_owned(), Value::Null),
            (4, "operator".to_owned(), json!("Be brief on $channel_guidance")),
        ]);
    }
}

const TEMPLATE: &str = "/v1/agents/assistant/prompt-template";

db_test! {
    async fn a_template_with_a_lint_error_is_refused_with_the_problem(db) {
        let api = app(db).await;
        let typo = api.json(Method::PUT, TEMPLATE, Some(&api.operator), Some(json!({"template": "Hi $sou1"}))).await;
        assert_eq!((typo.status, error_code(&typo)), (StatusCode::UNPROCESSABLE_ENTITY, "lint_failed"));
        assert_eq!(typo.body["error"]["details"]["problems"][0]["code"], "unknown_placeholder");
    }
}

db_test! {
    async fn a_forced_template_is_saved_and_recorded_as_forced(db) {
        let api = app(db).await;
        let forced = api.json(Method::PUT, TEMPLATE, Some(&api.operator), Some(json!({"template": "Hi $sou1", "force": true}))).await;
        assert_eq!(forced.status, StatusCode::OK, "{}", forced.body);
        assert_eq!(forced.body["forced"], true);
    }
}

db_test! {
    async fn a_template_with_warnings_is_saved_with_them(db) {
        let api = app(db).await;
        let warned = api.json(Method::PUT, TEMPLATE, Some(&api.operator), Some(json!({"template": "Costs $5 $soul"}))).await;
        assert_eq!(warned.status, StatusCode::OK);
        assert_eq!(warned.body["warnings"][0]["code"], "invalid_placeholder");
    }
}

db_test! {
    async fn a_save_against_a_stale_version_is_409_with_the_current_one(db) {
        let api = app(db).await;
        let first = api.json(Method::PUT, TEMPLATE, Some(&api.operator), Some(json!({"template": "$soul", "expected_version": 1}))).await;
        assert_eq!(first.body["version"], 2, "{}", first.body);
        let stale = api.json(Method::PUT, TEMPLATE, Some(&api.operator), Some(json!({"template": "x", "expected_version": 1}))).await;
        assert_eq!((stale.status, error_code(&stale)), (StatusCode::CONFLICT, "conflict"));
        assert_eq!(stale.body["error"]["details"]["current_version"], 2);
    }
}

db_test! {
    async fn bad_requests_get_one_error_shape_and_change_nothing(db) {
        let api = app(db).await;
        let before = crate::support::dump::rows(&api.db).await;
        let path = "/v1/agents/assistant/prompt-template";
        let big = vec![b'a'; 1024 * 1024 + 1];
        let reply = api.send(Method::PUT, path, Some(&api.operator), Some(big), None).await;
        assert_eq!((reply.status, error_code(&reply)), (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"));
        let reply = api.send(Method::PUT, path, Some(&api.operator), Some(b"{\"template\":".to_vec()), None).await;
        assert_eq!((reply.status, error_code(&reply)), (StatusCode::BAD_REQUEST, "bad_request"));
        assert!(reply.body["error"]["message"].as_str().expect("message").contains("malformed JSON"));
        let reply = api.json(Method::PATCH, "/v1/agents/assistant", Some(&api.operator), Some(json!({"soul": "x", "id": 9}))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let reply = api.json(Method::PATCH, "/v1/agents/assistant", Some(&api.operator), Some(json!({"soul_version": 9}))).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let reply = api.get("/v1/agents/nobody/prompt?channel=web").await;
        assert_eq!((reply.status, error_code(&reply)), (StatusCode::NOT_FOUND, "not_found"));
        let reply = api.get("/v1/agents/assistant/prompt?channel=sms").await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert_eq!(reply.body["error"]["details"]["known_channels"][0], "heartbeat");
        let reply = api.get("/v1/agents/Bad%20Name/prompt?channel=web").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let reply = api.get("/v1/agents/assistant/prompt?channel=web&tz=Mars/Base").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let reply = api.get("/v1/agents/assistant/tools?format=xml").await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        crate::support::dump::assert_same(&crate::support::dump::rows(&api.db).await, &before);
    }
}

db_test! {
    async fn soul_edits_are_versioned_and_user_instructions_reach_the_prompt(db) {
        let api = app(db).await;
        let reply = api.json(Method::PATCH, "/v1/agents/assistant", Some(&api.operator),
            Some(json!({"soul": "Be terse.", "expected_soul_version": 1}))).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        assert_eq!(reply.body["soul_version"], 2);
        let stale = api.json(Method::PATCH, "/v1/agents/assistant", Some(&api.operator),
            Some(json!({"soul": "Be verbose.", "expected_soul_version": 1}))).await;
        assert_eq!(stale.status, StatusCode::CONFLICT);

        let put = api.json(Method::PUT, "/v1/agents/assistant/users/u-42/instructions", Some(&api.operator),
            Some(json!({"instructions": "Reply in Spanish."}))).await;
        assert_eq!(put.status, StatusCode::OK, "{}", put.body);
        let prompt = api.get("/v1/agents/assistant/prompt?channel=telegram&user_id=u-42").await;
        let text = prompt.body["text"].as_str().expect("text");
        assert!(text.contains("\nBe terse.\n"), "{text}");
        assert!(text.contains("## User instructions\nReply in Spanish.\n"), "{text}");
        assert_eq!(prompt.body["provenance"]["soul_version"], 2);

        let off = api.json(Method::PUT, "/v1/agents/assistant/users/u-42/instructions", Some(&api.operator),
            Some(json!({"instructions": null}))).await;
        assert_eq!(off.status, StatusCode::OK);
        let prompt = api.get("/v1/agents/assistant/prompt?channel=telegram&user_id=u-42").await;
        assert!(!prompt.body["text"].as_str().expect("text").contains("Reply in Spanish."));
    }
}

/// Two processes' worth of state (own pools, own caches, own pollers) on one database:
/// a write through one is served by the other once its poller sees the generation.
async fn a_write_on_one_replica_reaches_the_other(db: TestDb) {
    let api = app(db).await;
    let other = api.replica(&[]).await;
    let poller = other.spawn_generation_poller();
    let path = "/v1/agents/assistant/prompt?channel=web";
    let warm = send(&other, Method::GET, path, Some(&api.agent), None, None).await;
    assert_eq!(warm.body["provenance"]["template_version"], 1);

    let written = Instant::now();
    let put = api
        .json(
            Method::PUT,
            "/v1/agents/assistant/prompt-template",
            Some(&api.operator),
            Some(json!({"template": "Replica check: $soul"})),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK);
    loop {
        let seen = send(&other, Method::GET, path, Some(&api.agent), None, None).await;
        if seen.body["provenance"]["template_version"] == 2 {
            assert!(
                seen.body["text"]
                    .as_str()
                    .expect("text")
                    .starts_with("Replica check: ")
            );
            break;
        }
        // Generous: the figure that matters (≤ 1 s) is measured by bench/, not asserted here.
        assert!(
            written.elapsed() < Duration::from_secs(20),
            "the other replica never saw the write"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    poller.abort();
}

#[tokio::test]
async fn a_write_on_one_postgres_replica_reaches_the_other() {
    if let Some(db) = TestDb::postgres().await {
        a_write_on_one_replica_reaches_the_other(db).await;
    }
}

#[tokio::test]
async fn a_write_on_one_sqlite_replica_reaches_the_other() {
    a_write_on_one_replica_reaches_the_other(TestDb::sqlite().await).await;
}

/// Fetches the prompt from `state` until it shows template `version`; generous on
/// purpose (the propagation delay is measured by bench/propagation.sh).
async fn wait_for_template(state: &AppState, agent: &str, version: i64) {
    let path = "/v1/agents/assistant/prompt?channel=web";
    let started = Instant::now();
    loop {
        let seen = send(state, Method::GET, path, Some(agent), None, None).await;
        if seen.body["provenance"]["template_version"] == version {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "template version {version} never reached the other state"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn put_template(api: &TestApp, template: &str) {
    let put = api
        .json(
            Method::PUT,
            "/v1/agents/assistant/prompt-template",
            Some(&api.operator),
            Some(json!({ "template": template })),
        )
        .await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.body);
}

/// No poller at all: only the notification sent on commit can bring the write over.
#[tokio::test]
async fn a_listening_postgres_replica_hears_a_write_without_polling() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let api = app(db).await;
    let other = api.replica(&[]).await;
    wait_for_template(&other, &api.agent, 1).await;
    let listener = other.spawn_generation_listener().expect("Postgres listens");
    wait_until_listening(&api.db).await;

    // Two writes: the listener reads the generation once as it starts, so at least
    // the second can only arrive as a notification.
    put_template(&api, "Pushed: $soul").await;
    wait_for_template(&other, &api.agent, 2).await;
    put_template(&api, "Pushed again: $soul").await;
    wait_for_template(&other, &api.agent, 3).await;
    listener.abort();
}

/// Waits until a listener's connection to this database has run its `LISTEN`.
async fn wait_until_listening(db: &TestDb) {
    use sea_orm::{ConnectionTrait, Statement};
    let sql = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
         AND application_name = '{}' AND query LIKE 'LISTEN%'",
        loadout::db::generation::listen::APPLICATION_NAME
    );
    let started = Instant::now();
    loop {
        let row = db
            .conn
            .query_one_raw(Statement::from_string(
                db.conn.get_database_backend(),
                sql.clone(),
            ))
            .await
            .expect("pg_stat_activity")
            .expect("a row");
        if row.try_get::<i64>("", "n").expect("count") > 0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the listener never listened"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A write committed before the listener listens is never notified to it: the
/// listener reads the generation as soon as it listens (as after every reconnect).
#[tokio::test]
async fn a_postgres_listener_reads_the_generation_as_soon_as_it_listens() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let api = app(db).await;
    let other = api.replica(&[]).await;
    wait_for_template(&other, &api.agent, 1).await;
    put_template(&api, "Missed: $soul").await;
    let stale = send(
        &other,
        Method::GET,
        "/v1/agents/assistant/prompt?channel=web",
        Some(&api.agent),
        None,
        None,
    )
    .await;
    assert_eq!(
        stale.body["provenance"]["template_version"], 1,
        "nothing told the other state yet"
    );

    let listener = other.spawn_generation_listener().expect("Postgres listens");
    wait_for_template(&other, &api.agent, 2).await;
    listener.abort();
}

#[tokio::test]
async fn a_sqlite_state_has_no_listener() {
    let api = app(TestDb::sqlite().await).await;
    assert!(api.state.spawn_generation_listener().is_none());
}

db_test! {
    async fn tools_are_created_by_the_vocabulary_edited_linked_and_soft_deleted(db) {
        let api = app(db).await;
        let admin = Some(api.operator.as_str());
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false});
        let bad = api.json(Method::POST, "/v1/tools", admin,
            Some(json!({"name": "fetch_weather", "description": "Weather.", "approval_tier": "auto", "parameters": schema}))).await;
        assert_eq!((bad.status, error_code(&bad)), (StatusCode::UNPROCESSABLE_ENTITY, "name_outside_vocabulary"));
        assert!(bad.body["error"]["message"].as_str().expect("message").contains("not a canonical verb"));
        let no_tier = api.json(Method::POST, "/v1/tools", admin,
            Some(json!({"name": "get_weather", "description": "Weather.", "parameters": schema}))).await;
        assert_eq!(no_tier.status, StatusCode::BAD_REQUEST, "the tier is required: {}", no_tier.body);
        let loose = json!({"type": "object", "properties": {"city": {"type": "string"}}});
        let not_strict = api.json(Method::POST, "/v1/tools", admin,
            Some(json!({"name": "get_weather", "description": "Weather.", "approval_tier": "auto", "parameters": loose}))).await;
        assert_eq!((not_strict.status, error_code(&not_strict)), (StatusCode::UNPROCESSABLE_ENTITY, "schema_not_strict"));
        let single = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false});
        let not_list = api.json(Method::PATCH, "/v1/tools/delete_tasks", admin, Some(json!({"parameters": single}))).await;
        assert_eq!((not_list.status, error_code(&not_list)), (StatusCode::UNPROCESSABLE_ENTITY, "schema_not_a_list"));
        let report = api.json(Method::GET, "/v1/registry/check", admin, None).await;
        assert_eq!((report.body["ok"].clone(), report.body["errors"].clone()), (json!(true), json!(0)), "{}", report.body);
        let not_schema = api.json(Method::POST, "/v1/tools", admin,
            Some(json!({"name": "get_weather", "description": "Weather.", "approval_tier": "auto", "parameters": {"type": "string"}}))).await;
        assert_eq!(error_code(&not_schema), "invalid_schema");

        let created = api.json(Method::POST, "/v1/tools", admin,
            Some(json!({"name": "get_weather", "description": "Weather for a city.", "approval_tier": "auto",
                        "parameters": schema, "prompt_section": "Use get_weather for forecasts."}))).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let again = api.json(Method::POST, "/v1/tools", admin,
            Some(json!({"name": "get_weather", "description": "x", "approval_tier": "auto", "parameters": schema}))).await;
        assert_eq!(again.status, StatusCode::CONFLICT);

        let tools_path = "/v1/agents/assistant/tools?format=anthropic";
        let names = |reply: &Reply| reply.body["tools"].as_array().expect("tools").iter()
            .map(|t| t["name"].as_str().expect("name").to_owned()).collect::<Vec<_>>();
        assert!(!names(&api.get(tools_path).await).contains(&"get_weather".to_owned()));
        let attached = api.json(Method::PUT, "/v1/agents/assistant/links/get_weather", admin, None).await;
        assert_eq!(attached.status, StatusCode::OK, "{}", attached.body);
        assert!(names(&api.get(tools_path).await).contains(&"get_weather".to_owned()));
        let prompt = api.get("/v1/agents/assistant/prompt?channel=web").await;
        assert!(prompt.body["text"].as_str().expect("text").contains("Use get_weather for forecasts."));

        let edited = api.json(Method::PATCH, "/v1/tools/get_weather", admin, Some(json!({"approval_tier": "requires_approval"}))).await;
        assert_eq!(edited.body["approval_tier"], "requires_approval");
        let mass = api.json(Method::PATCH, "/v1/tools/get_weather", admin, Some(json!({"deleted_at": null}))).await;
        assert_eq!(mass.status, StatusCode::BAD_REQUEST);

        let deleted = api.json(Method::DELETE, "/v1/tools/get_weather", admin, None).await;
        assert_eq!(deleted.status, StatusCode::OK);
        assert!(!names(&api.get(tools_path).await).contains(&"get_weather".to_owned()));
        assert_eq!(api.json(Method::GET, "/v1/tools/get_weather", admin, None).await.status, StatusCode::NOT_FOUND);
        let rows = crate::support::dump::rows(&api.db).await;
        let row = rows["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "get_weather").expect("row kept");
        assert!(!row["deleted_at"].is_null(), "soft-deleted, not removed");
        let links = api.json(Method::GET, "/v1/agents/assistant/links", admin, None).await;
        let link = links.body["links"].as_array().expect("links").iter().find(|l| l["tool"] == "get_weather").expect("link kept").clone();
        assert_eq!(link["active"], false);
    }
}

db_test! {
    async fn channel_guidance_edits_reach_the_next_prompt(db) {
        let api = app(db).await;
        let admin = Some(api.operator.as_str());
        let listed = api.json(Method::GET, "/v1/channels", admin, None).await;
        assert_eq!(listed.body["channels"].as_array().expect("channels").len(), 5);
        let edited = api.json(Method::PATCH, "/v1/channels/heartbeat", admin,
            Some(json!({"guidance": "Only speak up for overdue tasks.", "include_operating_model": true}))).await;
        assert_eq!(edited.status, StatusCode::OK, "{}", edited.body);
        let prompt = api.get("/v1/agents/assistant/prompt?channel=heartbeat").await;
        let text = prompt.body["text"].as_str().expect("text");
        assert!(text.contains("## Channel\nOnly speak up for overdue tasks.\n"), "{text}");
        assert!(text.contains("## How you work\n"), "{text}");
        assert_eq!(api.json(Method::GET, "/v1/channels/sms", admin, None).await.status, StatusCode::NOT_FOUND);
    }
}

db_test! {
    async fn preview_renders_a_candidate_for_every_channel_and_saves_nothing(db) {
        let api = app(db).await;
        let before = crate::support::dump::rows(&api.db).await;
        let reply = api.json(Method::POST, "/v1/agents/assistant/prompt/preview", Some(&api.operator),
            Some(json!({"template": "[$channel_guidance] $sou1"}))).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let renders = reply.body["renders"].as_array().expect("renders");
        assert_eq!(renders.len(), 5);
        assert!(renders.iter().all(|r| r["text"].as_str().expect("text").ends_with("] $sou1")));
        assert_eq!(reply.body["lint"][0]["code"], "unknown_placeholder");
        let one = api.json(Method::POST, "/v1/agents/assistant/prompt/preview", Some(&api.operator),
            Some(json!({"template": null, "channel": "scheduled"}))).await;
        assert_eq!(one.body["renders"][0]["source"], "builtin");
        crate::support::dump::assert_same(&crate::support::dump::rows(&api.db).await, &before);
    }
}

db_test! {
    async fn metrics_need_an_admin_key_and_count_requests_by_route(db) {
        let api = app(db).await;
        api.get("/v1/agents/assistant/prompt?channel=web").await;
        api.get("/v1/agents/assistant/prompt?channel=web").await;
        api.get("/v1/agents/assistant/prompt?channel=sms").await;
        assert_eq!(api.json(Method::GET, "/metrics", Some(&api.agent), None).await.status, StatusCode::FORBIDDEN);
        let request = Request::builder().uri("/metrics")
            .header(header::AUTHORIZATION, format!("Bearer {}", api.operator))
            .header(header::ACCEPT, "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4")
            .body(Body::empty()).expect("request");
        let response = api.request(request).await;
        assert_eq!(response.status, StatusCode::OK);
        assert_eq!(response.headers[header::CONTENT_TYPE], loadout::metrics::CONTENT_TYPE, "Prometheus asks for OpenMetrics");
        let text = response.body.as_str().expect("text").to_owned();
        assert!(text.contains("loadout_http_requests_total{route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"200\"} 2\n"), "{text}");
        assert!(text.contains("loadout_http_requests_total{route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"404\"} 1\n"), "{text}");
        assert!(text.contains("loadout_http_request_duration_seconds_count{route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"200\"} 2\n"), "{text}");
        assert!(text.contains("loadout_cache_hits_total "), "{text}");

        let open = crate::support::app::through(
            loadout::http::ops::metrics_router(api.state.clone()),
            Request::builder().uri("/metrics").body(Body::empty()).expect("request"),
        ).await;
        assert_eq!(open.status, StatusCode::OK);
        assert_eq!(open.headers[header::CONTENT_TYPE], "text/plain; charset=utf-8", "a client that did not ask for OpenMetrics");
    }
}

db_test! {
    async fn agents_are_created_served_and_soft_deleted(db) {
        let api = app(db).await;
        let admin = Some(api.operator.as_str());
        let body = json!({"name": "researcher", "identity": {"display_name": "Researcher"}, "soul": "Dig deep.",
                          "prompt_template": "$identity\n$soul\n$channel_guidance"});
        let created = api.json(Method::POST, "/v1/agents", admin, Some(body.clone())).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        assert_eq!(api.json(Method::POST, "/v1/agents", admin, Some(body)).await.status, StatusCode::CONFLICT);
        let prompt = api.get("/v1/agents/researcher/prompt?channel=web").await;
        assert!(prompt.body["text"].as_str().expect("text").starts_with("You are Researcher.\nDig deep.\nThe user is chatting"), "{}", prompt.body);
        let tools = api.get("/v1/agents/researcher/tools?format=openai").await;
        assert_eq!(tools.body["tools"], json!([]));

        let deleted = api.json(Method::DELETE, "/v1/agents/researcher", admin, None).await;
        assert_eq!(deleted.status, StatusCode::OK);
        assert_eq!(api.get("/v1/agents/researcher/prompt?channel=web").await.status, StatusCode::NOT_FOUND);
        let rows = crate::support::dump::rows(&api.db).await;
        let row = rows["agent_configurations"].as_array().expect("agents").iter().find(|a| a["name"] == "researcher").expect("row kept");
        assert!(!row["deleted_at"].is_null());
    }
}

db_test! {
    async fn every_route_is_in_the_openapi_document_and_every_documented_route_is_served(db) {
        let api = app(db).await;
        let spec = api.json(Method::GET, "/openapi.json", None, None).await;
        assert_eq!(spec.status, StatusCode::OK);
        assert!(spec.body["openapi"].as_str().expect("version").starts_with("3."));
        let paths = spec.body["paths"].as_object().expect("paths");
        let mut operations = Vec::new();
        for (path, item) in paths {
            for method in ["get", "post", "put", "patch", "delete"] {
                if item.get(method).is_some() {
                    operations.push((method.to_uppercase(), path.clone()));
                }
            }
        }
        // The routes, as a person reads them in docs/http-api.md; the spec must hold exactly these.
        let mut expected: Vec<(String, String)> = [
            "GET /health", "GET /ready", "GET /metrics", "GET /openapi.json",
            "GET /v1/agents/{agent}/prompt", "POST /v1/agents/{agent}/prompt/render",
            "GET /v1/agents/{agent}/tools", "GET /v1/agents/{agent}/loadout", "GET /v1/changes",
            "GET /v1/agents", "POST /v1/agents", "GET /v1/agents/{agent}", "PATCH /v1/agents/{agent}",
            "DELETE /v1/agents/{agent}", "GET /v1/agents/{agent}/prompt-template",
            "PUT /v1/agents/{agent}/prompt-template", "DELETE /v1/agents/{agent}/prompt-template",
            "GET /v1/agents/{agent}/prompt-template/versions",
            "GET /v1/agents/{agent}/prompt-template/versions/{version}",
            "POST /v1/agents/{agent}/prompt-template/versions/{version}/restore",
            "POST /v1/agents/{agent}/prompt/preview",
            "GET /v1/agents/{agent}/users/{user_id}/instructions",
            "PUT /v1/agents/{agent}/users/{user_id}/instructions",
            "GET /v1/agents/{agent}/revisions", "GET /v1/agents/{agent}/revisions/{number}",
            "GET /v1/agents/{agent}/revisions/{from}/diff/{to}",
            "GET /v1/agents/{agent}/labels", "GET /v1/agents/{agent}/labels/{label}/history",
            "PUT /v1/agents/{agent}/labels/{label}", "POST /v1/agents/{agent}/labels/{label}/rollback",
            "POST /v1/agents/{agent}/labels/{label}/rollout", "GET /v1/agents/{agent}/labels/{label}/rollout",
            "PATCH /v1/agents/{agent}/labels/{label}/rollout",
            "POST /v1/agents/{agent}/labels/{label}/rollout/complete",
            "POST /v1/agents/{agent}/labels/{label}/rollout/abort",
            "POST /v1/agents/{agent}/outcomes", "GET /v1/agents/{agent}/outcomes",
            "GET /v1/change-requests", "GET /v1/change-requests/{id}",
            "POST /v1/change-requests/{id}/approve", "POST /v1/change-requests/{id}/decline",
            "GET /v1/tools", "POST /v1/tools", "GET /v1/tools/{tool}", "PATCH /v1/tools/{tool}",
            "DELETE /v1/tools/{tool}", "GET /v1/agents/{agent}/links",
            "PUT /v1/agents/{agent}/links/{tool}", "DELETE /v1/agents/{agent}/links/{tool}",
            "GET /v1/channels", "GET /v1/channels/{channel}", "PATCH /v1/channels/{channel}",
            "GET /v1/registry/check",
            "POST /v1/agents/{agent}/tool-calls", "GET /v1/proposals/{id}",
            "GET /v1/conversations/{conversation_id}/proposals", "POST /v1/proposals/{id}/approve",
            "POST /v1/proposals/{id}/decline", "POST /v1/proposals/{id}/retry",
            "PUT /v1/users/{user_id}/tools/{tool}/preference",
            "GET /v1/connectors", "POST /v1/connectors", "GET /v1/connectors/{connector}",
            "PATCH /v1/connectors/{connector}", "DELETE /v1/connectors/{connector}", "POST /v1/connectors/{connector}/sync",
            "PUT /v1/tools/{tool}/connector",
            "GET /v1/keys", "POST /v1/keys", "DELETE /v1/keys/{key}",
            "GET /v1/members", "POST /v1/members/{member}/signer-grants", "GET /v1/signer-grants",
            "GET /v1/agents/{agent}/policy", "PUT /v1/agents/{agent}/policy", "POST /v1/agents/{agent}/policy/validate",
            "GET /v1/agents/{agent}/model", "PUT /v1/agents/{agent}/model",
            "GET /v1/agents/{agent}/replay",
            "GET /v1/agents/{agent}/snapshots", "PUT /v1/agents/{agent}/snapshots", "DELETE /v1/agents/{agent}/snapshots",
            "GET /v1/agents/{agent}/snapshots/compare",
            "POST /v1/change-requests/{id}/checks",
            "GET /v1/tool-changes", "GET /v1/tool-changes/{id}",
            "POST /v1/tool-changes/{id}/accept", "POST /v1/tool-changes/{id}/reject",
            "GET /v1/groups", "POST /v1/groups", "GET /v1/groups/{group}", "DELETE /v1/groups/{group}",
            "PUT /v1/groups/{group}/members/{user_id}", "DELETE /v1/groups/{group}/members/{user_id}",
            "POST /v1/signer-grants/{id}/approve", "POST /v1/signer-grants/{id}/decline",
            "GET /v1/config", "POST /v1/config/plan", "POST /v1/config/apply",
            "GET /v1/webhooks", "POST /v1/webhooks", "GET /v1/webhooks/{id}", "PATCH /v1/webhooks/{id}",
            "DELETE /v1/webhooks/{id}", "POST /v1/webhooks/{id}/rotate-secret",
            "GET /v1/webhooks/{id}/deliveries",
            "GET /v1/model-connections", "POST /v1/model-connections", "GET /v1/model-connections/{connection}",
            "PATCH /v1/model-connections/{connection}", "DELETE /v1/model-connections/{connection}",
            "GET /v1/agents/{agent}/datasets", "GET /v1/agents/{agent}/datasets/{dataset}",
            "PUT /v1/agents/{agent}/datasets/{dataset}", "DELETE /v1/agents/{agent}/datasets/{dataset}",
            "POST /v1/agents/{agent}/eval-runs", "GET /v1/eval-runs", "GET /v1/eval-runs/{id}",
            "GET /v1/eval-runs/{id}/cases", "POST /v1/eval-runs/{id}/cancel", "GET /v1/eval-runs/{id}/compare",
        ].iter().map(|r| { let (m, p) = r.split_once(' ').expect("method path"); (m.to_owned(), p.to_owned()) }).collect();
        expected.sort();
        operations.sort();
        assert_eq!(operations, expected);

        // Each documented operation reaches a handler (never the fallback), read-only ones
        // with 2xx. Reads first and deletes last, so nothing is gone before it is read.
        // One proposal exists, so the proposal routes have something to read.
        let proposal = api.json(Method::POST, "/v1/agents/assistant/tool-calls", Some(&api.operator),
            Some(json!({"tool": "update_instructions", "arguments": {"instructions": "x"}, "conversation_id": "c-1", "user_id": "u-1"}))).await;
        assert_eq!(proposal.body["proposal_id"], 1, "{}", proposal.body);
        // And one connector (a public address literal: saving it resolves nothing).
        let connector = api.json(Method::POST, "/v1/connectors", Some(&api.operator),
            Some(json!({"name": "backend", "url": "http://93.184.216.34/hook"}))).await;
        assert_eq!(connector.status, StatusCode::CREATED, "{}", connector.body);
        // And one webhook subscription (a public address literal: saving it resolves nothing).
        let subscription = api.json(Method::POST, "/v1/webhooks", Some(&api.operator),
            Some(json!({"url": "https://93.184.216.34/hook", "events": ["label.moved"]}))).await;
        assert_eq!((subscription.status, &subscription.body["subscription"]["id"]), (StatusCode::CREATED, &json!(1)), "{}", subscription.body);
        // One group, for the group routes.
        let group = api.json(Method::POST, "/v1/groups", Some(&api.operator), Some(json!({"name": "ops"}))).await;
        assert_eq!(group.status, StatusCode::OK, "{}", group.body);
        // And one change request: a gated agent's production asked to move.
        let gated = api.json(Method::PATCH, "/v1/agents/assistant", Some(&api.operator),
            Some(json!({"release_mode": "gated", "soul": "Staged."}))).await;
        assert_eq!(gated.status, StatusCode::OK, "{}", gated.body);
        let asked = api.json(Method::PUT, "/v1/agents/assistant/labels/production", Some(&api.operator),
            Some(json!({"revision": 2}))).await;
        assert_eq!((asked.status, &asked.body["id"]), (StatusCode::ACCEPTED, &json!(1)), "{}", asked.body);
        // And a model connection, a dataset and a run of it (queued: no runner here).
        let connection = api.json(Method::POST, "/v1/model-connections", Some(&api.operator),
            Some(json!({"name": "model", "base_url": "https://93.184.216.34/v1", "models": ["m"]}))).await;
        assert_eq!(connection.status, StatusCode::CREATED, "{}", connection.body);
        let dataset = api.json(Method::PUT, "/v1/agents/assistant/datasets/smoke", Some(&api.operator),
            Some(json!({"cases": [{"channel": "web", "messages": [{"role": "user", "content": "Hi"}], "assert": [{"type": "contains", "value": "Hi"}]}]}))).await;
        assert_eq!(dataset.status, StatusCode::OK, "{}", dataset.body);
        let run = api.json(Method::POST, "/v1/agents/assistant/eval-runs", Some(&api.operator),
            Some(json!({"dataset": "smoke", "connection": "model"}))).await;
        assert_eq!((run.status, &run.body["id"]), (StatusCode::ACCEPTED, &json!(1)), "{}", run.body);
        let rank = |m: &str| match m { "GET" => 0, "DELETE" => 2, _ => 1 };
        operations.sort_by_key(|(m, p)| (rank(m), p.clone()));
        for (method, path) in &operations {
            let concrete = path.replace("{agent}", "assistant").replace("{tool}", "get_tasks")
                .replace("{id}", "1").replace("{conversation_id}", "c-1").replace("{connector}", "backend")
                .replace("{channel}", "web").replace("{user_id}", "u-1").replace("{version}", "1")
                .replace("{number}", "1").replace("{label}", "production")
                .replace("{from}", "1").replace("{to}", "1").replace("{group}", "ops")
                .replace("{connection}", "model").replace("{dataset}", "smoke");
            let concrete = match concrete.as_str() {
                "/v1/agents/assistant/prompt" | "/v1/agents/assistant/loadout" => format!("{concrete}?channel=web"),
                "/v1/agents/assistant/snapshots/compare" => format!("{concrete}?revision=1"),
                "/v1/eval-runs/1/compare" => format!("{concrete}?base=1"),
                "/v1/agents/assistant/snapshots" if method == "DELETE" => format!("{concrete}?channel=web"),
                _ => concrete,
            };
            let reply = api.json(Method::from_bytes(method.as_bytes()).expect("method"), &concrete, Some(&api.operator), None).await;
            let fallback = reply.body["error"]["message"] == "no such route";
            assert!(!fallback && reply.status != StatusCode::METHOD_NOT_ALLOWED, "{method} {concrete}: {} {}", reply.status, reply.body);
            // No MCP server holds a tool change here: its handler answers that there is none.
            let none_held = concrete == "/v1/tool-changes/1" && reply.body["error"]["message"] == "no tool change 1";
            if method == "GET" && !none_held {
                assert!(reply.status.is_success(), "{method} {concrete}: {} {}", reply.status, reply.body);
            }
        }
    }
}

db_test! {
    async fn admin_writes_that_would_fail_loadout_check_are_refused_and_roll_back(db) {
        let api = app(db).await;
        let admin = Some(api.operator.as_str());
        let before = crate::support::dump::rows(&api.db).await;

        let retired = api.json(Method::PATCH, "/v1/agents/assistant", admin, Some(json!({"soul": "Call read_memory first."}))).await;
        assert_eq!((retired.status, error_code(&retired)), (StatusCode::UNPROCESSABLE_ENTITY, "registry_check_failed"), "{}", retired.body);
        assert_eq!(retired.body["error"]["details"]["problems"][0]["code"], "prompt_names_inactive_tool");

        let gone = api.json(Method::DELETE, "/v1/tools/get_tasks", admin, None).await;
        assert_eq!((gone.status, error_code(&gone)), (StatusCode::UNPROCESSABLE_ENTITY, "registry_check_failed"));
        assert_eq!(gone.body["error"]["details"]["problems"][0]["code"], "catalog_tool_deleted");

        let template = api.json(Method::PUT, "/v1/agents/assistant/prompt-template", admin, Some(json!({"template": "$soul Use store_memory."}))).await;
        assert_eq!(error_code(&template), "registry_check_failed", "{}", template.body);
        // Nothing was written: every refusal rolled back.
        crate::support::dump::assert_same(&crate::support::dump::rows(&api.db).await, &before);

        // Forcing is an explicit, recorded decision: the check reports it as a warning.
        let forced = api.json(Method::PUT, "/v1/agents/assistant/prompt-template", admin, Some(json!({"template": "$soul Use store_memory.", "force": true}))).await;
        assert_eq!(forced.status, StatusCode::OK, "{}", forced.body);
        let report = api.json(Method::GET, "/v1/registry/check", admin, None).await;
        assert_eq!(report.body["errors"], 0, "{}", report.body);
    }
}
