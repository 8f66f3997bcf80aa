//! Configuration as code (issue 27): export to a folder, plan, apply in one guarded
//! write, on both backends. The binary's `export` / `plan` / `apply` run in
//! `service/tests/cli.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{Backend, TempDir, TestApp, TestDb, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::{Principal, Role};
use loadout::bundle::apply::{self, Applied, Base};
use loadout::bundle::plan::{self, Action, PlanFile};
use loadout::bundle::{files, read};
use loadout::error::Error;
use serde_json::{Value, json};

fn cli() -> Principal {
    Principal::database("cli")
}

/// A fresh database of the same backend, migrated, never seeded.
async fn empty_like(db: &TestDb) -> TestDb {
    let fresh = match db.backend {
        Backend::Sqlite => TestDb::sqlite().await,
        Backend::Postgres => TestDb::postgres().await.expect("postgres"),
    };
    fresh.migrated().await
}

async fn export(db: &sea_orm::DatabaseConnection, dir: &Path) {
    let bundle = read::export(db).await.expect("export");
    files::write(dir, &bundle).expect("write");
}

/// Every file under `dir` by relative path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path
                    .strip_prefix(dir)
                    .expect("prefix")
                    .display()
                    .to_string();
                out.insert(name, std::fs::read(&path).expect("read"));
            }
        }
    }
    out
}

fn plan_file(plan: &plan::Plan) -> PlanFile {
    PlanFile {
        version: plan.version,
        against: plan.against.clone(),
        objects: plan.objects.clone(),
        target: plan.target.clone(),
        prune: plan.prune,
    }
}

/// Applies the folder to `db` with `base` (the export's state when `None`).
async fn apply_dir(
    db: &sea_orm::DatabaseConnection,
    dir: &Path,
    base: Option<Base>,
    prune: bool,
) -> Result<Applied, Error> {
    let mut target = files::read(dir).expect("read folder");
    let state = target.state.take();
    let base = base.unwrap_or(match state {
        Some(s) => Base::Export(s),
        None => Base::Nothing,
    });
    let generation = loadout::cache::Generation::new(
        loadout::db::generation::current(db)
            .await
            .expect("generation"),
    );
    let who = cli();
    let keyring = loadout::secrets::Keyring::none();
    let outbound =
        loadout::connectors::client::Outbound::new(vec!["127.0.0.1".parse().expect("ip")], None)
            .expect("outbound");
    let input = apply::Apply {
        target,
        base,
        prune,
        who: &who,
        keyring: &keyring,
        outbound: &outbound,
        max_template_bytes: 64 * 1024,
        request_ttl: chrono::TimeDelta::hours(24),
        evals: &loadout::evals::DEFAULTS,
    };
    let writer = loadout::db::Writer {
        db,
        generation: &generation,
        now: chrono::Utc::now(),
        key: None,
    };
    apply::apply(&writer, input).await
}

async fn plan_dir(db: &sea_orm::DatabaseConnection, dir: &Path, prune: bool) -> plan::Plan {
    let target = files::read(dir).expect("read folder");
    let current = read::current(db).await.expect("current");
    plan::compute(&current, &target, prune, None)
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).expect("read");
    std::fs::write(path, f(text)).expect("write");
}

async fn ok(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, &app.operator, body).await;
    assert_eq!(status, StatusCode::OK, "{method} {path}: {answer}");
    answer
}

db_test! {
    async fn an_export_applied_to_an_empty_database_exports_the_same_bytes_and_plans_no_change(db) {
        let app = TestApp::new(db).await;
        let empty = empty_like(&app.db).await;
        let (first, second) = (tempfile_dir(), tempfile_dir());
        export(&app.db.conn, first.path()).await;

        // Another instance: plan against it, then apply that plan.
        let planned = plan_dir(&empty.conn, first.path(), false).await;
        assert!(planned.changes_anything);
        assert!(planned.changes.iter().all(|c| c.action == Action::Create));
        apply_dir(&empty.conn, first.path(), Some(Base::Plan(plan_file(&planned))), false)
            .await
            .expect("apply");

        export(&empty.conn, second.path()).await;
        assert_eq!(tree(first.path()), tree(second.path()));
        let again = plan_dir(&empty.conn, second.path(), false).await;
        assert!(!again.changes_anything, "{:?}", again.changes);
    }
}

db_test! {
    async fn a_template_edited_in_a_file_is_a_line_diff_in_the_plan_and_served_after_the_apply(db) {
        let app = TestApp::new(db).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let template = dir.path().join("agents/assistant/template.md");
        edit(&template, |t| format!("{t}\nAlways answer in haiku.\n"));

        let planned = plan_dir(&app.db.conn, dir.path(), false).await;
        assert!(planned.changes_anything);
        assert_eq!(planned.changes.len(), 1, "{:?}", planned.changes);
        let change = &planned.changes[0];
        assert_eq!((change.object.as_str(), change.action), ("agent/assistant", Action::Update));
        let diff = &change.texts.iter().find(|t| t.field == "template").expect("template diff").diff;
        let inserted: Vec<&str> = diff
            .hunks
            .iter()
            .flat_map(|h| h.lines.iter())
            .filter(|l| l.kind.sign() == '+')
            .map(|l| l.text.as_str())
            .collect();
        assert!(inserted.contains(&"Always answer in haiku."), "{inserted:?}");

        apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        app.state.generation.observe(loadout::db::generation::current(&app.db.conn).await.expect("gen"));
        let (status, served) = app
            .call(Method::GET, "/v1/agents/assistant/prompt?channel=web", &app.agent, None)
            .await;
        assert_eq!(status, StatusCode::OK, "{served}");
        assert!(served["text"].as_str().expect("text").contains("Always answer in haiku."));
        assert!(!plan_dir(&app.db.conn, dir.path(), false).await.changes_anything);
    }
}

db_test! {
    async fn an_edit_made_between_plan_and_apply_makes_the_apply_refuse_naming_the_object(db) {
        let app = TestApp::new(db).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        edit(&dir.path().join("agents/assistant/template.md"), |t| format!("{t}\nBe brief.\n"));
        let planned = plan_dir(&app.db.conn, dir.path(), false).await;

        // Someone edits the agent through the API, as the console does.
        ok(&app, Method::PATCH, "/v1/agents/assistant", Some(json!({"soul": "Edited meanwhile."}))).await;

        let refused = apply_dir(&app.db.conn, dir.path(), Some(Base::Plan(plan_file(&planned))), false)
            .await
            .expect_err("stale");
        assert_eq!(refused.code, "configuration_changed");
        assert!(refused.message.contains("agent/assistant"), "{}", refused.message);
        // Without the plan, the export's own state refuses it too.
        let refused = apply_dir(&app.db.conn, dir.path(), None, false).await.expect_err("stale");
        assert!(refused.message.contains("agent/assistant"), "{}", refused.message);
        let agent = ok(&app, Method::GET, "/v1/agents/assistant", None).await;
        assert!(!agent["prompt_template"].as_str().expect("template").contains("Be brief."));
    }
}

db_test! {
    async fn a_bundle_that_breaks_the_registry_rules_is_refused_whole_with_nothing_written(db) {
        let app = TestApp::new(db).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let before = read::export(&app.db.conn).await.expect("export").state;
        // A soul change that would be fine, and a builtin no code implements.
        edit(&dir.path().join("agents/assistant/soul.md"), |s| format!("{s}\nNew line.\n"));
        std::fs::write(
            dir.path().join("tools/get_weather.json"),
            serde_json::to_string_pretty(&json!({
                "active": true, "approval_tier": "auto", "connector": null,
                "description": "The weather.", "prompt_section": null, "strict": true, "type": "builtin",
                "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}
            })).expect("json"),
        ).expect("write");

        let refused = apply_dir(&app.db.conn, dir.path(), None, false).await.expect_err("refused");
        assert_eq!(refused.code, "registry_check_failed", "{}", refused.message);
        let after = read::export(&app.db.conn).await.expect("export").state;
        assert_eq!(before, after, "nothing written");
    }
}

db_test! {
    async fn no_header_value_appears_in_an_exported_file_or_a_plan(db) {
        let app = TestApp::builder(db).flag("--connector-allow=127.0.0.1").build().await;
        ok_created(&app, "/v1/connectors", json!({
            "name": "crm", "url": "http://127.0.0.1:9/api",
            "headers": {"Authorization": "Bearer s3cr3t-header-value"}
        })).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        for (path, bytes) in tree(dir.path()) {
            assert!(!String::from_utf8_lossy(&bytes).contains("s3cr3t"), "{path}");
        }
        let connector = std::fs::read_to_string(dir.path().join("connectors/crm.toml")).expect("read");
        assert!(connector.contains("LOADOUT_HEADER_CRM_AUTHORIZATION"), "{connector}");

        // A plan given a new value says it changed, never what it is.
        let mut target = files::read(dir.path()).expect("read");
        target.connectors[0].headers.insert(
            "Authorization".into(),
            loadout::bundle::HeaderValue::Value { value: "Bearer 0ther-s3cr3t".into() },
        );
        let current = read::current(&app.db.conn).await.expect("current");
        let planned = plan::compute(&current, &target, false, Some(&app.state.secrets));
        let text = serde_json::to_string(&planned).expect("json");
        assert!(planned.changes_anything, "{text}");
        assert!(!text.contains("s3cr3t"), "{text}");
        let (status, body) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(!body.to_string().contains("s3cr3t"));
    }
}

db_test! {
    async fn prune_soft_deletes_what_the_folder_leaves_out_and_nothing_is_removed_without_it(db) {
        let app = TestApp::new(db).await;
        ok_created(&app, "/v1/tools", json!({
            "name": "get_orders", "description": "Orders.", "approval_tier": "auto",
            "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}
        })).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        std::fs::remove_file(dir.path().join("tools/get_orders.json")).expect("rm");

        let kept = plan_dir(&app.db.conn, dir.path(), false).await;
        assert!(!kept.changes_anything, "{:?}", kept.changes);
        assert_eq!(kept.changes[0].action, Action::Keep);
        apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        ok(&app, Method::GET, "/v1/tools/get_orders", None).await;

        let applied = apply_dir(&app.db.conn, dir.path(), None, true).await.expect("apply --prune");
        assert_eq!(applied.changes[0].action, Action::Remove);
        let (status, _) = app.call(Method::GET, "/v1/tools/get_orders", &app.operator, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let row = entity::tools::Entity::find()
            .filter(entity::tools::Column::Name.eq("get_orders"))
            .one(&app.db.conn)
            .await
            .expect("query")
            .expect("the row stays");
        assert!(row.deleted_at.is_some() && !row.is_active);
    }
}

db_test! {
    async fn in_gated_mode_an_apply_publishes_and_opens_a_change_request_for_production(db) {
        let app = TestApp::new(db).await;
        ok(&app, Method::PATCH, "/v1/agents/assistant", Some(json!({"release_mode": "gated"}))).await;
        let labels = || async {
            let body = ok(&app, Method::GET, "/v1/agents/assistant/labels", None).await;
            body["labels"].as_array().expect("labels").iter()
                .map(|l| (l["name"].as_str().expect("name").to_owned(), l["revision"].as_i64().expect("n")))
                .collect::<BTreeMap<_, _>>()
        };
        let before = labels().await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        edit(&dir.path().join("agents/assistant/soul.md"), |s| format!("{s}\nGated change.\n"));

        let applied = apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        assert_eq!(applied.change_requests.len(), 1);
        let request = &applied.change_requests[0];
        assert_eq!((request.label.as_str(), request.agent.as_str()), ("production", "assistant"));
        let after = labels().await;
        assert_eq!(after["production"], before["production"], "production waits for a sign-off");
        assert_eq!(i64::from(request.to_revision), after["latest"]);
        assert!(after["latest"] > before["latest"]);
    }
}

db_test! {
    async fn the_http_routes_plan_and_apply_one_document_and_only_an_operator_applies(db) {
        let app = TestApp::new(db).await;
        let admin = app.key("config-admin", Role::Admin).await;
        let (status, mut config) = app.call(Method::GET, "/v1/config", &admin, None).await;
        assert_eq!(status, StatusCode::OK, "{config}");
        let agents = config["agents"].as_array_mut().expect("agents");
        let assistant = agents.iter_mut().find(|a| a["name"] == "assistant").expect("assistant");
        assistant["soul"] = json!("Applied over HTTP.");
        let body = json!({"configuration": config});

        let (status, plan) = app.call(Method::POST, "/v1/config/plan", &admin, Some(body.clone())).await;
        assert_eq!(status, StatusCode::OK, "{plan}");
        assert_eq!(plan["changes_anything"], json!(true));
        assert_eq!(plan["changes"][0]["object"], json!("agent/assistant"));

        let (status, refused) = app.call(Method::POST, "/v1/config/apply", &admin, Some(body.clone())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");

        let mut with_plan = body.clone();
        with_plan["plan"] = plan;
        let (status, applied) = app.call(Method::POST, "/v1/config/apply", &app.operator, Some(with_plan)).await;
        assert_eq!(status, StatusCode::OK, "{applied}");
        let agent = ok(&app, Method::GET, "/v1/agents/assistant", None).await;
        assert_eq!(agent["soul"], json!("Applied over HTTP."));

        // The same document again: nothing to do.
        let (status, plan) = app.call(Method::POST, "/v1/config/plan", &admin, Some(body)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(plan["changes_anything"], json!(false), "{plan}");
    }
}

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

async fn ok_created(app: &TestApp, path: &str, body: Value) {
    let (status, answer) = app
        .call(Method::POST, path, &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{path}: {answer}");
}

fn tempfile_dir() -> TempDir {
    TempDir::new("config")
}

db_test! {
    async fn an_api_plan_tells_no_guess_from_the_stored_value_and_is_limited_per_key(db) {
        let app = TestApp::builder(db)
            .flag("--connector-allow=127.0.0.1")
            .flag("--plans-per-minute=4")
            .build()
            .await;
        ok_created(&app, "/v1/connectors", json!({
            "name": "crm", "url": "http://127.0.0.1:9/api",
            "headers": {"Authorization": "Bearer right-guess"}
        })).await;
        let admin = app.key("plan-admin", Role::Admin).await;
        let (status, config) = app.call(Method::GET, "/v1/config", &admin, None).await;
        assert_eq!(status, StatusCode::OK, "{config}");
        let guessed = |value: &str| {
            let mut config = config.clone();
            config["connectors"][0]["headers"]["Authorization"] = json!({"value": value});
            json!({"configuration": config})
        };
        let mut answers = Vec::new();
        for guess in ["Bearer right-guess", "Bearer wrong-guess"] {
            let (status, plan) = app.call(Method::POST, "/v1/config/plan", &admin, Some(guessed(guess))).await;
            assert_eq!(status, StatusCode::OK, "{plan}");
            answers.push((plan["changes_anything"].clone(), plan["changes"].clone(), plan["warnings"].clone()));
        }
        assert_eq!(answers[0], answers[1], "the right guess and a wrong one plan the same");
        assert_eq!(answers[0].0, json!(true));
        assert!(answers[0].1.to_string().contains("replaced"), "{:?}", answers[0]);

        // Four plans a minute for this key: two more, then 429 with Retry-After.
        for _ in 0..2 {
            let (status, _) = app.call(Method::POST, "/v1/config/plan", &admin, Some(guessed("x"))).await;
            assert_eq!(status, StatusCode::OK);
        }
        let reply = app.json(Method::POST, "/v1/config/plan", Some(&admin), Some(guessed("x"))).await;
        assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS, "{}", reply.body);
        assert_eq!(reply.body["error"]["code"], json!("too_many_plans"));
        assert!(reply.headers.contains_key("retry-after"));
        // Another key still plans.
        let other = app.key("plan-admin-2", Role::Admin).await;
        let (status, _) = app.call(Method::POST, "/v1/config/plan", &other, Some(guessed("x"))).await;
        assert_eq!(status, StatusCode::OK);
    }
}

db_test! {
    async fn an_apply_that_moves_a_connector_keeps_no_stored_header_value(db) {
        let app = TestApp::builder(db).flag("--connector-allow=127.0.0.1").build().await;
        ok_created(&app, "/v1/connectors", json!({
            "name": "crm", "url": "http://127.0.0.1:9/api",
            "headers": {"Authorization": "Bearer for-the-first-host"}
        })).await;
        let (status, config) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{config}");
        assert_eq!(config["connectors"][0]["headers"]["Authorization"]["env"], json!("LOADOUT_HEADER_CRM_AUTHORIZATION"));

        // Moved with the header kept by `env`: refused, nothing changed.
        let mut moved = config.clone();
        moved["connectors"][0]["url"] = json!("http://127.0.0.1:10/api");
        let (status, refused) = app.call(Method::POST, "/v1/config/apply", &app.operator, Some(json!({"configuration": moved}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["error"]["code"], json!("headers_need_values"));
        let crm = ok(&app, Method::GET, "/v1/connectors/crm", None).await;
        assert_eq!(crm["url"], json!("http://127.0.0.1:9/api"));

        // A same-host change (another path) keeps the stored value.
        let mut same = config.clone();
        same["connectors"][0]["url"] = json!("http://127.0.0.1:9/v2");
        let (status, applied) = app.call(Method::POST, "/v1/config/apply", &app.operator, Some(json!({"configuration": same}))).await;
        assert_eq!(status, StatusCode::OK, "{applied}");
        let crm = ok(&app, Method::GET, "/v1/connectors/crm", None).await;
        assert_eq!(crm["headers"], json!(["Authorization"]));

        // Moved with the header left out: applied, and no value is kept.
        let (_, config) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        let mut moved = config.clone();
        moved["connectors"][0]["url"] = json!("http://127.0.0.1:10/api");
        moved["connectors"][0]["headers"] = json!({});
        let (status, applied) = app.call(Method::POST, "/v1/config/apply", &app.operator, Some(json!({"configuration": moved}))).await;
        assert_eq!(status, StatusCode::OK, "{applied}");
        let crm = ok(&app, Method::GET, "/v1/connectors/crm", None).await;
        assert_eq!((crm["url"].clone(), crm["headers"].clone()), (json!("http://127.0.0.1:10/api"), json!([])));

        // A metadata address is refused as POST /v1/connectors refuses it.
        let mut metadata = config.clone();
        metadata["connectors"][0]["url"] = json!("http://169.254.169.254/latest");
        metadata["connectors"][0]["headers"] = json!({});
        let (status, refused) = app.call(Method::POST, "/v1/config/apply", &app.operator, Some(json!({"configuration": metadata}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["error"]["code"], json!("url_refused"));
    }
}

/// The index of the object named `name` in a configuration's `kind` list.
fn index_of(config: &Value, kind: &str, name: &str) -> usize {
    config[kind]
        .as_array()
        .and_then(|list| list.iter().position(|o| o["name"] == json!(name)))
        .unwrap_or_else(|| panic!("no {kind} named {name} in {config}"))
}

db_test! {
    async fn the_same_bad_input_gets_the_same_code_from_the_api_and_from_an_apply(db) {
        let app = TestApp::builder(db).flag("--connector-allow=127.0.0.1").build().await;
        ok_created(&app, "/v1/connectors", json!({"name": "crm", "url": "http://127.0.0.1:9/api"})).await;
        let (_, config) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        let long = "x".repeat(70 * 1024);
        // (what the API is sent, the configuration edit that says the same)
        let cases: Vec<(Method, &str, Value, &str, &str, &str, Value)> = vec![
            (Method::PUT, "/v1/tools/update_instructions/connector", json!({"connector": "crm"}),
             "tools", "update_instructions", "connector", json!("crm")),
            (Method::PATCH, "/v1/channels/web", json!({"guidance": long}),
             "channels", "web", "guidance", json!(long)),
            (Method::PATCH, "/v1/agents/assistant", json!({"identity": "a string"}),
             "agents", "assistant", "identity", json!("a string")),
            (Method::PATCH, "/v1/tools/get_tasks", json!({"description": " "}),
             "tools", "get_tasks", "description", json!(" ")),
        ];
        for (method, path, body, kind, name, field, value) in cases {
            let (refused, api) = app.call(method, path, &app.operator, Some(body)).await;
            assert!(refused.is_client_error(), "{path}: {refused} {api}");
            let mut edited = config.clone();
            let at = index_of(&edited, kind, name);
            edited[kind][at][field] = value;
            let (status, applied) = app
                .call(Method::POST, "/v1/config/apply", &app.operator, Some(json!({"configuration": edited})))
                .await;
            assert_eq!(
                (status, &applied["error"]["code"]),
                (refused, &api["error"]["code"]),
                "{kind}/{name}.{field}: {api} vs {applied}"
            );
        }
        let (_, after) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        assert_eq!(after, config, "nothing was written");
    }
}

db_test! {
    async fn a_policy_and_its_tests_round_trip_through_files_and_a_bad_one_is_refused_whole(db) {
        let app = TestApp::new(db).await;
        let policy = "@id(\"frozen\")\nforbid (principal, action == Action::\"update_instructions\", resource);\n";
        let tests = json!([{"tool": "update_instructions", "arguments": {"instructions": "x"}, "user": "u1", "expect": "deny", "policy": "frozen"}]);
        ok(&app, Method::PUT, "/v1/agents/assistant/policy", Some(json!({"policy": policy, "tests": tests}))).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let folder = dir.path().join("agents/assistant");
        assert_eq!(std::fs::read_to_string(folder.join("policy.cedar")).expect("policy.cedar"), policy);
        let written: Value = serde_json::from_str(&std::fs::read_to_string(folder.join("policy-tests.json")).expect("tests")).expect("json");
        assert_eq!(written, tests);
        assert!(!plan_dir(&app.db.conn, dir.path(), false).await.changes_anything, "an export plans no change");

        // Loosen it in the file: the plan shows a line diff, the apply serves it.
        edit(&folder.join("policy.cedar"), |t| t.replace("forbid", "permit"));
        std::fs::remove_file(folder.join("policy-tests.json")).expect("remove");
        let planned = plan_dir(&app.db.conn, dir.path(), false).await;
        let change = &planned.changes[0];
        assert!(change.texts.iter().any(|t| t.field == "policy"), "{:?}", change);
        apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        app.state.generation.observe(loadout::db::generation::current(&app.db.conn).await.expect("gen"));
        let (_, saved) = app.call(Method::GET, "/v1/agents/assistant/policy", &app.operator, None).await;
        assert!(saved["policy"].as_str().unwrap_or("").contains("permit"), "{saved}");
        assert_eq!(saved["tests"], json!([]));
        assert!(!plan_dir(&app.db.conn, dir.path(), false).await.changes_anything, "a re-apply is a no-op");

        // A policy naming an argument the tool lacks: refused, nothing written.
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let folder = dir.path().join("agents/assistant");
        std::fs::write(folder.join("policy.cedar"), "permit (principal, action == Action::\"update_instructions\", resource)\nwhen { context.arguments.nope == 1 };\n").expect("write");
        edit(&folder.join("soul.md"), |t| format!("{t}\nAlso this."));
        let refused = apply_dir(&app.db.conn, dir.path(), None, false).await.expect_err("refused");
        assert_eq!(refused.code, "invalid_policy", "{refused:?}");
        let (_, agent) = app.call(Method::GET, "/v1/agents/assistant", &app.operator, None).await;
        assert!(!agent["soul"].as_str().unwrap_or("").contains("Also this."), "nothing written: {agent}");
    }
}

db_test! {
    async fn model_settings_round_trip_through_files_and_are_served_with_the_loadout(db) {
        let app = TestApp::new(db).await;
        let settings = json!({
            "model": "gpt-4.1",
            "parameters": {"temperature": 0.2, "max_tokens": 800, "provider_options": {"seed": 7}},
            "response_schema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"], "additionalProperties": false},
            "channels": {"web": {"model": "gpt-4.1-mini", "parameters": {"max_tokens": 200}}},
        });
        let saved = ok(&app, Method::PUT, "/v1/agents/assistant/model", Some(settings.clone())).await;
        assert_eq!(saved["settings"], settings, "{saved}");
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let file = dir.path().join("agents/assistant/model.json");
        let written: Value = serde_json::from_str(&std::fs::read_to_string(&file).expect("model.json")).expect("json");
        assert_eq!(written, settings);
        assert!(!plan_dir(&app.db.conn, dir.path(), false).await.changes_anything, "an export plans no change");

        // Change the temperature in the file: the plan names it, the apply serves it.
        edit(&file, |t| t.replace("0.2", "0.7"));
        let planned = plan_dir(&app.db.conn, dir.path(), false).await;
        assert!(planned.changes[0].fields.iter().any(|f| f.field == "model"), "{:?}", planned.changes);
        apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        app.state.generation.observe(loadout::db::generation::current(&app.db.conn).await.expect("gen"));
        assert!(!plan_dir(&app.db.conn, dir.path(), false).await.changes_anything, "a re-apply is a no-op");
        let (status, loadout) = app.call(Method::GET, "/v1/agents/assistant/loadout?channel=web", &app.agent, None).await;
        assert_eq!(status, StatusCode::OK, "{loadout}");
        assert_eq!(loadout["model"]["model"], "gpt-4.1-mini", "the web channel's model: {loadout}");
        assert_eq!(loadout["model"]["parameters"], json!({"temperature": 0.7, "max_tokens": 200, "provider_options": {"seed": 7}}));
        assert_eq!(loadout["model"]["response_schema"]["required"], json!(["answer"]));

        // A revision's diff names what changed, by path.
        let (_, revisions) = app.call(Method::GET, "/v1/agents/assistant/revisions", &app.operator, None).await;
        let newest = revisions["revisions"][0]["number"].as_i64().expect("number");
        let (_, diff) = app.call(Method::GET, &format!("/v1/agents/assistant/revisions/{}/diff/{newest}", newest - 1), &app.operator, None).await;
        assert_eq!(diff["diff"]["model"], json!([{"field": "parameters.temperature", "before": 0.2, "after": 0.7}]), "{diff}");

        // Out of range: refused with the field, nothing saved.
        let (status, refused) = app.call(Method::PUT, "/v1/agents/assistant/model", &app.operator, Some(json!({"parameters": {"temperature": 9}}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert!(refused["error"]["message"].as_str().unwrap_or("").contains("parameters.temperature"), "{refused}");
    }
}

// Evaluation datasets (issue 52): each agent's datasets, the latest version of each,
// as `agents/NAME/datasets/DATASET.json`, planned and applied through their owner.

/// A case on the web channel asking `question`, whose reply must name `answer`
/// (and a `contains-json` schema: a free-form value whose keys the file sorts).
fn case(question: &str, answer: &str) -> Value {
    let asserts = json!([
        {"type": "icontains", "value": answer},
        {"type": "contains-json", "value": {"type": "object", "required": ["city"]}, "weight": 0.5},
    ]);
    let messages = json!([{"role": "user", "content": question}]);
    json!({"description": question, "channel": "web", "messages": messages, "assert": asserts})
}

async fn put_dataset(app: &TestApp, name: &str, cases: Value) -> Value {
    ok(
        app,
        Method::PUT,
        &format!("/v1/agents/assistant/datasets/{name}"),
        Some(json!({"cases": cases})),
    )
    .await
}

fn dataset_file(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join("agents/assistant/datasets")
        .join(format!("{name}.json"))
}

db_test! {
    async fn an_agents_datasets_export_as_files_and_an_unchanged_instance_exports_the_same_bytes(db) {
        let app = TestApp::new(db).await;
        let cases = json!([case("What is the capital of France?", "paris"), case("And of Italy?", "rome")]);
        put_dataset(&app, "smoke", cases.clone()).await;
        let (first, second) = (tempfile_dir(), tempfile_dir());
        export(&app.db.conn, first.path()).await;

        let text = std::fs::read_to_string(dataset_file(first.path(), "smoke")).expect("smoke.json");
        assert_eq!(serde_json::from_str::<Value>(&text).expect("json"), cases);
        assert!(text.starts_with("[\n  {\n    \"description\""), "indented, fields in order: {text}");
        export(&app.db.conn, second.path()).await;
        assert_eq!(tree(first.path()), tree(second.path()), "an unchanged instance exports the same bytes");
        assert!(!plan_dir(&app.db.conn, first.path(), false).await.changes_anything);
        let (_, config) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        let at = index_of(&config, "agents", "assistant");
        assert_eq!(config["agents"][at]["datasets"]["smoke"], cases, "{config}");

        // Another instance: the apply makes the agent, then its dataset; the export matches.
        let empty = empty_like(&app.db).await;
        let planned = plan_dir(&empty.conn, first.path(), false).await;
        let change = planned.changes.iter().find(|c| c.object == "dataset/assistant/smoke").expect("planned");
        assert_eq!(change.action, Action::Create);
        apply_dir(&empty.conn, first.path(), Some(Base::Plan(plan_file(&planned))), false).await.expect("apply");
        let copy = tempfile_dir();
        export(&empty.conn, copy.path()).await;
        assert_eq!(tree(first.path()), tree(copy.path()));
    }
}

db_test! {
    async fn a_case_edited_in_a_dataset_file_plans_an_update_and_the_apply_saves_version_2(db) {
        let app = TestApp::new(db).await;
        put_dataset(&app, "smoke", json!([case("What is the capital of France?", "paris")])).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let file = dataset_file(dir.path(), "smoke");
        let edited = json!([case("What is the capital of Spain?", "madrid"), case("And of Italy?", "rome")]);
        std::fs::write(&file, serde_json::to_string_pretty(&edited).expect("json")).expect("write");

        let planned = plan_dir(&app.db.conn, dir.path(), false).await;
        assert!(planned.changes_anything, "`loadout plan` exits 2");
        assert_eq!(planned.changes.len(), 1, "the agent itself is unchanged: {:?}", planned.changes);
        let change = &planned.changes[0];
        assert_eq!((change.object.as_str(), change.action), ("dataset/assistant/smoke", Action::Update));
        let printed = loadout::cli::config::plan_text(&planned);
        assert!(printed.contains("~ dataset/assistant/smoke\n    cases: 1 → 2\n"), "{printed}");
        assert!(printed.contains("+        \"content\": \"What is the capital of Spain?\""), "{printed}");
        assert!(printed.contains("-        \"content\": \"What is the capital of France?\""), "{printed}");

        let applied = apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        assert_eq!(applied.changes.len(), 1);
        let listed = ok(&app, Method::GET, "/v1/agents/assistant/datasets", None).await;
        assert_eq!((listed["datasets"][0]["version"].clone(), listed["datasets"][0]["created_by"].clone()), (json!(2), json!("cli")));
        let saved = loadout::evals::datasets::get(&app.db.conn, "assistant", "smoke", None).await.expect("get");
        assert_eq!(serde_json::to_value(&saved.cases).expect("json"), edited);
        assert!(!plan_dir(&app.db.conn, dir.path(), false).await.changes_anything, "a re-apply is a no-op");
    }
}

db_test! {
    async fn a_dataset_with_an_unknown_assertion_type_refuses_the_whole_apply_with_nothing_written(db) {
        let app = TestApp::new(db).await;
        put_dataset(&app, "smoke", json!([case("What is the capital of France?", "paris")])).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        let before = read::export(&app.db.conn).await.expect("export").state;
        // A soul change that would be fine, a new dataset that would be fine, and a bad one.
        edit(&dir.path().join("agents/assistant/soul.md"), |s| format!("{s}\nNew line.\n"));
        std::fs::write(dataset_file(dir.path(), "more"), json!([case("Italy?", "rome")]).to_string()).expect("write");
        edit(&dataset_file(dir.path(), "smoke"), |t| t.replace("\"icontains\"", "\"no-such-check\""));

        let refused = apply_dir(&app.db.conn, dir.path(), None, false).await.expect_err("refused");
        assert_eq!((refused.kind, refused.code), (loadout::error::Kind::Refused, "invalid_dataset"), "{refused:?}");
        assert!(refused.message.contains("cases[0].assert[0]"), "{}", refused.message);
        let after = read::export(&app.db.conn).await.expect("export").state;
        assert_eq!(before, after, "nothing written");
        let listed = ok(&app, Method::GET, "/v1/agents/assistant/datasets", None).await;
        assert_eq!(listed["datasets"].as_array().map(Vec::len), Some(1), "{listed}");
        assert_eq!(listed["datasets"][0]["version"], json!(1));

        // The same document over HTTP: the same 422.
        let (_, mut config) = app.call(Method::GET, "/v1/config", &app.operator, None).await;
        let at = index_of(&config, "agents", "assistant");
        config["agents"][at]["datasets"]["smoke"][0]["assert"][0]["type"] = json!("no-such-check");
        let (status, refused) = app
            .call(Method::POST, "/v1/config/apply", &app.operator, Some(json!({"configuration": config})))
            .await;
        assert_eq!((status, &refused["error"]["code"]), (StatusCode::UNPROCESSABLE_ENTITY, &json!("invalid_dataset")), "{refused}");
    }
}

db_test! {
    async fn a_dataset_saved_through_the_api_since_the_export_makes_the_apply_refuse_naming_it(db) {
        let app = TestApp::new(db).await;
        put_dataset(&app, "smoke", json!([case("What is the capital of France?", "paris")])).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        edit(&dir.path().join("agents/assistant/soul.md"), |s| format!("{s}\nFrom the folder.\n"));
        put_dataset(&app, "smoke", json!([case("What is the capital of Spain?", "madrid")])).await;

        let refused = apply_dir(&app.db.conn, dir.path(), None, false).await.expect_err("stale");
        assert_eq!(refused.code, "configuration_changed");
        assert!(refused.message.contains("dataset/assistant/smoke"), "{}", refused.message);
        assert!(!refused.message.contains("agent/assistant"), "the agent did not move: {}", refused.message);
    }
}

db_test! {
    async fn prune_soft_deletes_a_dataset_the_folder_leaves_out_and_it_stays_without_prune(db) {
        let app = TestApp::new(db).await;
        put_dataset(&app, "smoke", json!([case("What is the capital of France?", "paris")])).await;
        let dir = tempfile_dir();
        export(&app.db.conn, dir.path()).await;
        std::fs::remove_file(dataset_file(dir.path(), "smoke")).expect("rm");

        let kept = plan_dir(&app.db.conn, dir.path(), false).await;
        assert!(!kept.changes_anything, "{:?}", kept.changes);
        assert_eq!((kept.changes[0].object.as_str(), kept.changes[0].action), ("dataset/assistant/smoke", Action::Keep));
        assert!(loadout::cli::config::plan_text(&kept).contains("! dataset/assistant/smoke"));
        apply_dir(&app.db.conn, dir.path(), None, false).await.expect("apply");
        let listed = ok(&app, Method::GET, "/v1/agents/assistant/datasets", None).await;
        assert_eq!(listed["datasets"][0]["name"], json!("smoke"), "kept: {listed}");

        let applied = apply_dir(&app.db.conn, dir.path(), None, true).await.expect("apply --prune");
        assert_eq!((applied.changes[0].object.as_str(), applied.changes[0].action), ("dataset/assistant/smoke", Action::Remove));
        let listed = ok(&app, Method::GET, "/v1/agents/assistant/datasets", None).await;
        assert_eq!(listed["datasets"], json!([]), "{listed}");
        let row = entity::eval_datasets::Entity::find()
            .filter(entity::eval_datasets::Column::Name.eq("smoke"))
            .one(&app.db.conn)
            .await
            .expect("query")
            .expect("the row stays");
        assert!(row.deleted_at.is_some());
    }
}

#[test]
fn a_dataset_file_is_read_by_the_folders_rules() {
    let cases: Vec<loadout::evals::cases::Case> =
        serde_json::from_value(json!([case("What is the capital of France?", "paris")]))
            .expect("cases");
    let agent: loadout::bundle::AgentDoc = serde_json::from_value(json!({
        "name": "assistant", "identity": {}, "soul": "Helpful.", "release_mode": "direct",
    }))
    .expect("agent");
    let bundle = loadout::bundle::Bundle {
        version: loadout::bundle::LAYOUT_VERSION,
        agents: vec![loadout::bundle::AgentDoc {
            datasets: [("smoke".to_owned(), cases.clone())].into(),
            ..agent
        }],
        ..Default::default()
    };
    let (dir, outside) = (tempfile_dir(), tempfile_dir());
    files::write(dir.path(), &bundle).expect("write");
    assert_eq!(
        files::read(dir.path()).expect("read").agents[0].datasets["smoke"],
        cases
    );
    let folder = dir.path().join("agents/assistant/datasets");
    let file = folder.join("smoke.json");
    let refused = |what: &str| {
        let error = format!("{:#}", files::read(dir.path()).expect_err(what));
        assert!(error.contains(what), "{what}: {error}");
    };

    // A link out of the folder, to a file or as the datasets folder itself.
    std::fs::write(outside.path().join("leak.json"), "[]").expect("write");
    std::fs::remove_file(&file).expect("rm");
    std::os::unix::fs::symlink(outside.path().join("leak.json"), &file).expect("symlink");
    refused("leads out of the folder");
    std::fs::remove_dir_all(&folder).expect("rm");
    std::os::unix::fs::symlink(outside.path(), &folder).expect("symlink");
    refused("leads out of the folder");
    std::fs::remove_file(&folder).expect("rm");
    std::fs::create_dir(&folder).expect("mkdir");

    // Bounded: a file past four times the dataset limit (its indented JSON) is not read.
    let big = std::fs::File::create(&file).expect("create");
    big.set_len(4 * loadout::evals::cases::MAX_DATASET_BYTES as u64 + 1)
        .expect("grow");
    refused("the largest file read is");
    // A file not named NAME.json, and one that is no list of cases.
    std::fs::remove_file(&file).expect("rm");
    std::fs::write(folder.join("smoke.yaml"), "[]").expect("write");
    refused("expected NAME.json");
    std::fs::remove_file(folder.join("smoke.yaml")).expect("rm");
    std::fs::write(
        &file,
        r#"[{"channel": "web", "messages": [], "surprise": 1}]"#,
    )
    .expect("write");
    refused("is not a valid dataset");
}
