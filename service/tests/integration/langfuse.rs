//! The Langfuse-compatible prompt read API (`/api/public/v2/prompts/{name}`): who may
//! read what, with which key, and what is refused in Langfuse's error shape; and the
//! import (`loadout import langfuse`): every label serves what Langfuse served for it,
//! and the export folder is read by a bundle's rules. The real Langfuse SDKs reading
//! it are peers (tests/peers/langfuse).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use base64::Engine;
use loadout::auth::keys::{self, Role};
use loadout::bundle::langfuse as langfuse_import;
use serde_json::json;

use crate::support::api::Reply;
use crate::support::{TempDir, TestApp, db_test};

fn basic(secret: &str) -> String {
    let pair = format!("pk-lf-anything:{secret}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

async fn get(app: &TestApp, path: &str, authorization: Option<&str>) -> Reply {
    let mut request = Request::builder().method(Method::GET).uri(path);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    app.request(request.body(Body::empty()).expect("request"))
        .await
}

fn refused(reply: &Reply, status: StatusCode, error: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["error"], error, "{}", reply.body);
}

db_test! {
    async fn a_langfuse_client_reads_what_its_key_reaches_and_nothing_else(db) {
        let app = TestApp::new(db.seeded().await).await;
        let operator = app.key("lf-operator", Role::Operator).await;
        let (status, body) = app.call(Method::POST, "/v1/agents", &operator,
            Some(json!({"name": "researcher", "identity": {"name": "Researcher"}, "soul": "You dig."}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let scoped = keys::create_scoped(&app.db.conn, "lf-assistant", Role::Agent, None, Some("assistant"), chrono::Utc::now())
            .await.expect("a scoped key");
        let approver = app.key("lf-approver", Role::Approver).await;

        // The rendered prompt is REST's, with Basic auth or a Bearer key, encoded slash or not.
        let rest = app.get("/v1/agents/assistant/prompt?channel=web").await;
        for (path, auth) in [
            ("/api/public/v2/prompts/assistant%2Fweb", basic(&scoped)),
            ("/api/public/v2/prompts/assistant/web?label=production", format!("Bearer {scoped}")),
        ] {
            let got = get(&app, path, Some(&auth)).await;
            assert_eq!(got.status, StatusCode::OK, "{path}: {}", got.body);
            assert_eq!(got.body["version"], rest.body["provenance"]["revision"]);
            assert_eq!(got.body["prompt"], rest.body["text"], "{path}");
            assert_eq!(got.body["labels"], json!(["latest", "production"]));
        }
        // The template in Langfuse's syntax.
        let template = get(&app, "/api/public/v2/prompts/assistant?version=1", Some(&basic(&scoped))).await;
        assert_eq!(template.status, StatusCode::OK, "{}", template.body);
        assert!(template.body["prompt"].as_str().unwrap_or_default().starts_with("{{identity}}"), "{}", template.body);

        // Another agent is exactly an agent that does not exist, for a scoped key.
        let other = get(&app, "/api/public/v2/prompts/researcher%2Fweb", Some(&basic(&scoped))).await;
        let none = get(&app, "/api/public/v2/prompts/nobody%2Fweb", Some(&basic(&scoped))).await;
        refused(&other, StatusCode::NOT_FOUND, "LangfuseNotFoundError");
        let text = |r: &Reply| r.body["message"].as_str().unwrap_or_default().replace("researcher", "X").replace("nobody", "X");
        assert_eq!(text(&other), text(&none));
        // The operator reaches it; it renders the built-in assembly, so it has no template.
        let researcher = get(&app, "/api/public/v2/prompts/researcher%2Fweb", Some(&basic(&operator))).await;
        assert_eq!(researcher.status, StatusCode::OK, "{}", researcher.body);
        let builtin = get(&app, "/api/public/v2/prompts/researcher", Some(&basic(&operator))).await;
        refused(&builtin, StatusCode::NOT_FOUND, "LangfuseNotFoundError");
        assert!(text(&builtin).contains("built-in assembly"), "{}", builtin.body);

        // Keys: none, a wrong one, a revoked one, one of a role that reads no prompts.
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", None).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some(&basic("lo_wrong"))).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some("Basic !!not-base64")).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some(&basic(&approver))).await, StatusCode::FORBIDDEN, "ForbiddenError");
        keys::revoke_now(&app.db.conn, "default", "lf-assistant", chrono::Utc::now()).await.expect("revoke");
        app.publish().await;
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some(&basic(&scoped))).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");

        // What loadout does not have, or cannot take.
        let reader = basic(&operator);
        for (path, status, error) in [
            ("/api/public/v2/prompts/assistant%2Fnope", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/assistant%2Fweb?version=999", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/assistant%2Fweb?label=nope", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/assistant%2Fweb?version=two", StatusCode::BAD_REQUEST, "InvalidRequestError"),
            ("/api/public/v2/prompts/Team%20Bot", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/a%2Fb%2Fc", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/traces", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts", StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowedError"),
        ] {
            refused(&get(&app, path, Some(&reader)).await, status, error);
        }
        let write = Request::builder().method(Method::POST).uri("/api/public/v2/prompts")
            .header(header::AUTHORIZATION, &reader).header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"name":"x","prompt":"y","type":"text"}"#)).expect("request");
        let reply = app.request(write).await;
        refused(&reply, StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowedError");
        assert!(reply.body["message"].as_str().unwrap_or_default().contains("reads prompts only"), "{}", reply.body);
    }
}

/// Imports the Langfuse export in `dir` as `loadout import langfuse DIR --apply`
/// does: read, planned against the database, applied; the plan.
async fn import(app: &TestApp, dir: &std::path::Path) -> langfuse_import::ImportPlan {
    let exported = langfuse_import::read_dir(dir).expect("the export is read");
    let now = app.state.clock.now();
    let plan = langfuse_import::plan(&app.db.conn, &exported, now)
        .await
        .expect("a plan");
    let who = loadout::auth::Principal::database("import");
    let ttl = chrono::TimeDelta::hours(1);
    let max = app.state.settings.max_template_bytes;
    langfuse_import::apply(&app.state.writer(None), &plan, &who, max, ttl)
        .await
        .expect("the import");
    plan
}

/// What a Langfuse client gets for `name` with `query`: the prompt's text.
async fn served(app: &TestApp, name: &str, query: &str) -> String {
    let path = format!("/api/public/v2/prompts/{name}?{query}");
    let got = get(app, &path, Some(&basic(&app.operator))).await;
    assert_eq!(got.status, StatusCode::OK, "{path}: {}", got.body);
    got.body["prompt"].as_str().unwrap_or_default().to_owned()
}

db_test! {
    async fn latest_serves_langfuse_s_latest_even_when_it_repeats_an_earlier_text(db) {
        let app = TestApp::new(db.seeded().await).await;
        let dir = TempDir::new("langfuse-latest");
        let export = r#"[
 {"name":"support-bot","version":1,"type":"text","prompt":"You help {{customer}}. Be kind.","labels":[]},
 {"name":"support-bot","version":2,"type":"text","prompt":"You help {{customer}}. Be brief.","labels":["production"]},
 {"name":"support-bot","version":3,"type":"text","prompt":"You help {{customer}}. Be kind.","labels":["latest","staging"]}
]"#;
        std::fs::write(dir.path().join("support-bot.json"), export).expect("write");

        import(&app, dir.path()).await;

        // What Langfuse served for each label, loadout serves.
        assert_eq!(served(&app, "support-bot", "label=latest").await, "You help {{customer}}. Be kind.");
        assert_eq!(served(&app, "support-bot", "label=staging").await, "You help {{customer}}. Be kind.");
        assert_eq!(served(&app, "support-bot", "label=production").await, "You help {{customer}}. Be brief.");
        assert_eq!(served(&app, "support-bot", "").await, "You help {{customer}}. Be brief.");
        // A second import changes nothing.
        let again = langfuse_import::read_dir(dir.path()).expect("read");
        let plan = langfuse_import::plan(&app.db.conn, &again, app.state.clock.now()).await.expect("plan");
        assert!(!plan.changes_anything, "{plan:?}");
    }
}

db_test! {
    async fn a_label_langfuse_allows_is_imported_and_served_and_404_while_absent(db) {
        let app = TestApp::new(db.seeded().await).await;
        let reader = basic(&app.operator);
        // Absent, as Langfuse answers: 404, never a 400 for a label Langfuse allows.
        for label in ["_canary", "-edge", ".beta", "..", "Prod"] {
            let path = format!("/api/public/v2/prompts/assistant%2Fweb?label={label}");
            refused(&get(&app, &path, Some(&reader)).await, StatusCode::NOT_FOUND, "LangfuseNotFoundError");
        }

        let dir = TempDir::new("langfuse-labels");
        let export = r#"[
 {"name":"canary-bot","version":1,"type":"text","prompt":"Old.","labels":["production",".."]},
 {"name":"canary-bot","version":2,"type":"text","prompt":"New.","labels":["latest","_canary","-edge",".beta"]}
]"#;
        std::fs::write(dir.path().join("canary-bot.json"), export).expect("write");
        let plan = import(&app, dir.path()).await;

        for label in ["_canary", "-edge", ".beta"] {
            assert_eq!(served(&app, "canary-bot", &format!("label={label}")).await, "New.", "{label}");
        }
        assert_eq!(served(&app, "canary-bot", "label=production").await, "Old.");
        let (status, labels) = app.call(Method::GET, "/v1/agents/canary-bot/labels", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{labels}");
        let names: Vec<&str> = labels["labels"].as_array().into_iter().flatten().filter_map(|l| l["name"].as_str()).collect();
        assert_eq!(names, ["-edge", ".beta", "_canary", "latest", "production"]);
        // `..` cannot be a path segment: refused at import, with the reason.
        let dots = plan.prompts[0].labels.iter().find(|l| l.label == "..").expect("the `..` label");
        assert_eq!(dots.step, langfuse_import::LabelStep::Skip);
        assert!(dots.note.as_deref().unwrap_or_default().contains("URL path"), "{dots:?}");
    }
}

/// A prompt version as Langfuse's API answers it.
fn prompt_json(name: &str) -> String {
    format!(
        r#"{{"name":"{name}","version":1,"type":"text","prompt":"I am {name}.","labels":["production"]}}"#
    )
}

db_test! {
    async fn an_export_is_read_by_the_bundle_rules_no_link_out_no_pipe_no_device(db) {
        let app = TestApp::new(db.seeded().await).await;
        let dir = TempDir::new("langfuse-files");
        let outside = TempDir::new("langfuse-outside");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/inside.json"), prompt_json("inside")).expect("write");
        // A link that stays inside the folder is read.
        std::os::unix::fs::symlink(dir.path().join("sub/inside.json"), dir.path().join("alias.json")).expect("symlink");
        let read = langfuse_import::read_dir(dir.path()).expect("read");
        assert_eq!(read.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["inside"]);

        let refused = |why: &str| {
            let error = langfuse_import::read_dir(dir.path()).expect_err("refused");
            assert!(format!("{error:#}").contains(why), "{error:#}");
        };
        // A file linked out of the folder, a folder linked out of it, a device.
        std::fs::write(outside.path().join("leak.json"), prompt_json("leak")).expect("write");
        let link = dir.path().join("leak.json");
        std::os::unix::fs::symlink(outside.path().join("leak.json"), &link).expect("symlink");
        refused("leads out of the folder");
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink(outside.path(), &link).expect("symlink");
        refused("leads out of the folder");
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink("/dev/zero", &link).expect("symlink");
        refused("leads out of the folder");
        std::fs::remove_file(&link).expect("rm");

        // A named pipe with a prompt waiting in it is never read.
        let pipe = dir.path().join("pipe.json");
        let made = std::process::Command::new("mkfifo").arg(&pipe).status().expect("mkfifo");
        assert!(made.success());
        let writer = {
            let pipe = pipe.clone();
            std::thread::spawn(move || std::fs::write(pipe, prompt_json("piped")).ok())
        };
        refused("is not a regular file");
        // Lets the writer finish if nothing opened the pipe.
        let release = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&pipe)
        };
        writer.join().expect("the writer");
        drop(release);
        std::fs::remove_file(&pipe).expect("rm");

        let plan = import(&app, dir.path()).await;
        assert_eq!(plan.prompts.iter().map(|p| p.langfuse.as_str()).collect::<Vec<_>>(), ["inside"]);
    }
}
