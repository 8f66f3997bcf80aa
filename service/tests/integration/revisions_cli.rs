//! `loadout revisions` and `loadout labels` (issue 25, item 6): parsed as the
//! binary parses them and run on the test's database, on both backends. The
//! binary itself runs them in `service/tests/cli.rs`.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use clap::Parser;
use loadout::cli::{Cli, Command};
use serde_json::{Value, json};

/// What `loadout ARGS...` prints, or its error as `main` prints it.
async fn run(app: &TestApp, args: &[&str]) -> Result<String, String> {
    let cli = Cli::try_parse_from(std::iter::once("loadout").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    let out = match cli.command {
        Command::Revisions(args) => loadout::cli::revisions::output(&app.db.conn, &args).await,
        Command::Labels(args) => loadout::cli::labels::output(&app.db.conn, &args).await,
        Command::Promote(args) => loadout::cli::promote::promote(&app.db.conn, args).await,
        Command::Rollback(args) => loadout::cli::promote::rollback(&app.db.conn, args).await,
        other => panic!("not a release command: {other:?}"),
    };
    out.map_err(|e| format!("{e:#}"))
}

async fn ok(app: &TestApp, args: &[&str]) -> String {
    run(app, args)
        .await
        .unwrap_or_else(|e| panic!("loadout {args:?}: {e}"))
}

async fn write(app: &TestApp, method: Method, path: &str, body: Value) {
    let (status, answer) = app.call(method, path, &app.operator, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {answer}");
}

/// Revision 2: the soul gains a line and get_tasks needs approval.
async fn second_revision(app: &TestApp) {
    let soul = app
        .call(Method::GET, "/v1/agents/assistant", &app.operator, None)
        .await
        .1["soul"]
        .as_str()
        .expect("soul")
        .to_owned();
    write(
        app,
        Method::PATCH,
        "/v1/agents/assistant",
        json!({"soul": format!("{soul}\nAlways be brief.")}),
    )
    .await;
    write(
        app,
        Method::PATCH,
        "/v1/tools/get_tasks",
        json!({"approval_tier": "requires_approval"}),
    )
    .await;
}

/// The tab-separated cells of each line, with the one at `skip` (a time) left out.
fn cells(text: &str, skip: usize) -> Vec<Vec<String>> {
    text.lines()
        .map(|l| {
            l.split('\t')
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, c)| c.to_owned())
                .collect()
        })
        .collect()
}

db_test! {
    async fn revisions_lists_each_revision_newest_first_with_its_author_and_labels(db) {
        let app = TestApp::new(db).await;
        second_revision(&app).await;
        let out = ok(&app, &["revisions", "assistant"]).await;
        let lines = cells(&out, 1);
        // Two writes, two revisions: the soul (2) and the tier (3, by a tool write,
        // which names no author).
        assert_eq!(lines.len(), 3, "{out}");
        assert_eq!((lines[0][0].as_str(), lines[0][1].as_str(), lines[0][3].as_str()), ("3", "-", "latest,production"));
        assert_eq!((lines[2][0].as_str(), lines[2][1].as_str(), lines[2][3].as_str()), ("1", "seed", "-"));
        assert_eq!(lines[0][2].len(), 12, "a hash prefix: {out}");
    }
}

db_test! {
    async fn revisions_diff_prints_the_soul_as_a_unified_diff_and_the_changed_tool(db) {
        let app = TestApp::new(db).await;
        second_revision(&app).await;
        let out = ok(&app, &["revisions", "assistant", "--diff", "1", "3"]).await;
        assert!(out.starts_with("assistant: revision 1 → 3\n--- soul (revision 1)\n+++ soul (revision 3)\n@@ -"), "{out}");
        assert!(out.contains("\n+Always be brief.\n"), "{out}");
        assert!(out.contains("tool changed: get_tasks\n  approval_tier: \"auto\" → \"requires_approval\"\n"), "{out}");
        assert!(out.ends_with("tool contract: compatible for callers\n  compatible get_tasks approval_tier_raised: auto → requires_approval: calls are still taken, and may wait for an approver\n"), "{out}");

        let same = ok(&app, &["revisions", "assistant", "--diff", "2", "2"]).await;
        assert_eq!(same, "assistant: revision 2 → 2\nno differences\n");
    }
}

db_test! {
    async fn revisions_diff_json_is_what_the_api_answers(db) {
        let app = TestApp::new(db).await;
        second_revision(&app).await;
        let out = ok(&app, &["revisions", "assistant", "--diff", "1", "3", "--json"]).await;
        let printed: Value = serde_json::from_str(&out).expect("json");
        let (status, api) = app.call(Method::GET, "/v1/agents/assistant/revisions/1/diff/3", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(printed, api);
    }
}

db_test! {
    async fn revisions_show_prints_who_made_it_its_labels_and_what_it_serves(db) {
        let app = TestApp::new(db).await;
        let out = ok(&app, &["revisions", "assistant", "--show", "1"]).await;
        assert!(out.starts_with("revision 1 of assistant, by seed at "), "{out}");
        assert!(out.contains("\nlabels: latest,production\n"), "{out}");
        assert!(out.contains("\nsoul:\n  "), "{out}");
        assert!(out.contains("\ntools (23):\n  "), "{out}");
        assert!(out.contains("\n  get_tasks\tbuiltin\tauto\n") || out.contains("\n  get_tasks\t"), "{out}");

        let json: Value = serde_json::from_str(&ok(&app, &["revisions", "assistant", "--show", "1", "--json"]).await).expect("json");
        assert_eq!(json["number"], 1);
        assert_eq!(json["content"]["tools"].as_array().map(Vec::len), Some(23));
    }
}

db_test! {
    async fn labels_prints_each_label_and_history_each_move_newest_first(db) {
        let app = TestApp::new(db).await;
        second_revision(&app).await;
        let labels = cells(&ok(&app, &["labels", "assistant"]).await, 2);
        assert_eq!(labels, [["latest", "3"], ["production", "3"]]);

        let moves = cells(&ok(&app, &["labels", "assistant", "--history", "production"]).await, 0);
        assert_eq!(moves, [
            ["publish", "2 → 3", "-", "-", "-"],
            ["publish", "1 → 2", "operator", "-", "-"],
            ["publish", "- → 1", "seed", "-", "-"],
        ]);
        let json: Value = serde_json::from_str(&ok(&app, &["labels", "assistant", "--history", "production", "--json"]).await).expect("json");
        assert_eq!(json["moves"].as_array().map(Vec::len), Some(3));
    }
}

db_test! {
    async fn an_unknown_agent_revision_or_label_is_one_clear_error(db) {
        let app = TestApp::new(db).await;
        let err = run(&app, &["revisions", "nobody"]).await.expect_err("no such agent");
        assert_eq!(err, "no agent named \"nobody\"");
        let err = run(&app, &["revisions", "assistant", "--show", "9"]).await.expect_err("no revision 9");
        assert_eq!(err, "agent \"assistant\" has no revision 9");
        let err = run(&app, &["labels", "assistant", "--history", "canary"]).await.expect_err("no such label");
        assert_eq!(err, "agent \"assistant\" has no label \"canary\"");
        let err = run(&app, &["revisions", "assistant", "--show", "1", "--diff", "1", "2"]).await.expect_err("one at a time");
        assert!(err.contains("cannot be used with"), "{err}");
    }
}

db_test! {
    async fn promote_moves_a_direct_agents_label_at_once_and_rollback_moves_it_back(db) {
        let app = TestApp::new(db).await;
        second_revision(&app).await;
        let out = ok(&app, &["promote", "assistant", "production", "1", "--reason", "back to the seed"]).await;
        assert_eq!(out, "assistant/production: revision 3 → 1 (move)\n");
        let out = ok(&app, &["rollback", "assistant", "production", "--reason", "too far"]).await;
        assert_eq!(out, "assistant/production: revision 1 → 3 (rollback)\n");

        let moves = cells(&ok(&app, &["labels", "assistant", "--history", "production"]).await, 0);
        assert_eq!(moves[..2], [
            ["rollback", "1 → 3", "cli", "-", "too far"],
            ["move", "3 → 1", "cli", "-", "back to the seed"],
        ]);
        // The serving side sees the move: production serves revision 3 again.
        let labels = cells(&ok(&app, &["labels", "assistant"]).await, 2);
        assert_eq!(labels[1], ["production", "3"]);
    }
}

db_test! {
    async fn promoting_a_gated_agents_production_waits_for_someone_else_to_sign_off(db) {
        let app = TestApp::new(db).await;
        second_revision(&app).await;
        write(&app, Method::PATCH, "/v1/agents/assistant", json!({"release_mode": "gated"})).await;
        write(&app, Method::PATCH, "/v1/agents/assistant", json!({"soul": "Staged."})).await;
        let labels = cells(&ok(&app, &["labels", "assistant"]).await, 2);
        assert_eq!(labels, [["latest", "4"], ["production", "3"]]);

        let out = ok(&app, &["promote", "assistant", "production", "4", "--json"]).await;
        let request: Value = serde_json::from_str(&out).expect("json");
        assert_eq!((request["state"].as_str(), request["requested_by"].as_str()), (Some("pending"), Some("cli")), "{request}");
        let labels = cells(&ok(&app, &["labels", "assistant"]).await, 2);
        assert_eq!(labels[1], ["production", "3"], "nothing moves before the sign-off");

        // A second promotion of the label while one is pending is refused.
        let err = run(&app, &["promote", "assistant", "production", "1"]).await.expect_err("pending");
        assert!(err.contains("already pending"), "{err}");

        let id = request["id"].as_i64().expect("id");
        let (status, body) = app.call(Method::POST, &format!("/v1/change-requests/{id}/approve"), &app.operator, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let labels = cells(&ok(&app, &["labels", "assistant"]).await, 2);
        assert_eq!(labels[1], ["production", "4"]);
    }
}

db_test! {
    async fn rolling_back_a_label_that_never_moved_is_refused(db) {
        let app = TestApp::new(db).await;
        let err = run(&app, &["rollback", "assistant", "production"]).await.expect_err("never moved");
        assert!(err.contains("has never moved"), "{err}");
        let err = run(&app, &["promote", "assistant", "latest", "1"]).await.expect_err("latest is automatic");
        assert!(err.contains("latest"), "{err}");
    }
}
