//! Rollouts (issue 26, item 1): a label split between its revision and a
//! candidate for a share of users, sticky per user in every process; raising the
//! share only adds users; pause, resume, complete and abort; gated sign-off; a
//! tool call validated against the revision its caller was served; a move of the
//! label ends the rollout.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::Role;
use loadout::fetch::{self, Prompts};
use serde_json::{Value, json};

const AGENT: &str = "/v1/agents/assistant";
const PRODUCTION: &str = "/v1/agents/assistant/labels/production";
const ROLLOUT: &str = "/v1/agents/assistant/labels/production/rollout";

async fn ok(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, &app.operator, body).await;
    assert!(status.is_success(), "{method} {path}: {status} {answer}");
    answer
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// The assistant with revision 2 saved and `production` back on 1 (a `direct`
/// agent: the move is made at once).
async fn two_revisions(app: &TestApp) {
    ok(
        app,
        Method::PATCH,
        AGENT,
        Some(json!({"soul": "The candidate soul."})),
    )
    .await;
    ok(app, Method::PUT, PRODUCTION, Some(json!({"revision": 1}))).await;
}

/// Starts a rollout of revision 2 on `production` at `percent`.
async fn start(app: &TestApp, percent: f64) -> Value {
    let body = json!({"candidate": 2, "percent": percent, "reason": "try it"});
    let (status, answer) = app
        .call(Method::POST, ROLLOUT, &app.operator, Some(body))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    answer
}

/// The revision `production` serves `user` through the fetch domain function.
async fn served(prompts: &Prompts<'_>, user: &str) -> i32 {
    fetch::pick(prompts, "assistant", "production", Some(user))
        .await
        .expect("pick")
        .served
        .number
}

fn user(i: usize) -> String {
    format!("user-{i:05}")
}

/// The users (of the first `n`) on the candidate.
async fn on_candidate(app: &TestApp, n: usize) -> Vec<usize> {
    let prompts = app.state.prompts();
    let mut found = Vec::new();
    for i in 0..n {
        if served(&prompts, &user(i)).await == 2 {
            found.push(i);
        }
    }
    found
}

db_test! {
    async fn ten_thousand_users_at_ten_percent_land_within_one_and_a_half_points_of_ten_percent(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 10.0).await;
        let candidates = on_candidate(&app, 10_000).await.len();
        assert!((850..=1150).contains(&candidates), "{candidates} of 10,000 on the candidate");

        // A sample through real HTTP agrees with the domain, body and header.
        let prompts = app.state.prompts();
        for i in (0..10_000).step_by(97) {
            let expected = served(&prompts, &user(i)).await;
            let reply = app.get(&format!("{AGENT}/prompt?channel=web&user_id={}", user(i))).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            assert_eq!(reply.body["provenance"]["revision"], json!(expected), "{}", reply.body);
            let header = reply.headers.get("loadout-revision").and_then(|v| v.to_str().ok());
            assert_eq!(header, Some(expected.to_string().as_str()));
            let side = if expected == 2 { "candidate" } else { "base" };
            assert_eq!(reply.body["provenance"]["rollout"]["side"], side, "{}", reply.body);
        }
    }
}

db_test! {
    async fn each_user_gets_the_same_revision_on_repeated_fetches_and_from_another_process(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 30.0).await;
        let replica = app.replica(&[]).await;
        let (here, there) = (app.state.prompts(), replica.prompts());
        for i in 0..500 {
            let first = served(&here, &user(i)).await;
            assert_eq!(served(&here, &user(i)).await, first, "{} again", user(i));
            assert_eq!(served(&there, &user(i)).await, first, "{} in the other process", user(i));
        }
    }
}

db_test! {
    async fn raising_the_share_to_twenty_percent_keeps_every_user_who_had_the_candidate(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 10.0).await;
        let before = on_candidate(&app, 2_000).await;
        let raised = ok(&app, Method::PATCH, ROLLOUT, Some(json!({"percent": 20}))).await;
        assert_eq!(raised["percent"], json!(20.0));
        let after = on_candidate(&app, 2_000).await;
        assert!(before.iter().all(|i| after.contains(i)), "someone lost the candidate");
        assert!(after.len() > before.len() + 100, "{} then {}", before.len(), after.len());
        let kinds: Vec<&str> = raised["events"].as_array().expect("events").iter()
            .map(|e| e["kind"].as_str().expect("kind")).collect();
        assert_eq!(kinds, ["started", "share_changed"]);
    }
}

db_test! {
    async fn a_paused_rollout_serves_the_base_to_everyone_and_a_resume_brings_the_same_users_back(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 25.0).await;
        let before = on_candidate(&app, 1_000).await;
        assert!(!before.is_empty());
        let paused = ok(&app, Method::PATCH, ROLLOUT, Some(json!({"paused": true}))).await;
        assert_eq!(paused["state"], "paused");
        assert!(on_candidate(&app, 1_000).await.is_empty(), "a pause serves the base");
        let resumed = ok(&app, Method::PATCH, ROLLOUT, Some(json!({"paused": false}))).await;
        assert_eq!(resumed["state"], "active");
        assert_eq!(on_candidate(&app, 1_000).await, before);
    }
}

db_test! {
    async fn completing_a_rollout_moves_the_label_to_the_candidate_as_a_rollout_move(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 50.0).await;
        let done = ok(&app, Method::POST, &format!("{ROLLOUT}/complete"), Some(json!({"reason": "good"}))).await;
        assert_eq!((done["state"].as_str(), done["end_reason"].as_str()), (Some("completed"), Some("good")));
        let moves = ok(&app, Method::GET, &format!("{PRODUCTION}/history"), None).await;
        let last = &moves["moves"][0];
        assert_eq!((last["kind"].as_str(), last["to_revision"].as_i64()), (Some("rollout"), Some(2)), "{last}");
        assert_eq!(on_candidate(&app, 200).await.len(), 200, "everyone gets the candidate, now the label's");
        let status = ok(&app, Method::GET, ROLLOUT, None).await;
        assert_eq!((status["current"].clone(), status["past"][0]["state"].clone()), (Value::Null, json!("completed")));
    }
}

db_test! {
    async fn aborting_a_rollout_serves_the_base_to_everyone_and_the_history_says_why(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 50.0).await;
        assert!(!on_candidate(&app, 100).await.is_empty());
        let aborted = ok(&app, Method::POST, &format!("{ROLLOUT}/abort"), Some(json!({"reason": "complaints"}))).await;
        assert_eq!(aborted["state"], "aborted");
        let last = aborted["events"].as_array().and_then(|e| e.last()).expect("an event");
        assert_eq!((last["kind"].as_str(), last["reason"].as_str()), (Some("aborted"), Some("complaints")));
        assert!(on_candidate(&app, 100).await.is_empty());
        let (status, _) = app.call(Method::PATCH, ROLLOUT, &app.operator, Some(json!({"percent": 5}))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "nothing runs any more");
    }
}

db_test! {
    async fn moving_the_label_by_hand_aborts_its_running_rollout(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        start(&app, 50.0).await;
        ok(&app, Method::PUT, PRODUCTION, Some(json!({"revision": 2}))).await;
        let status = ok(&app, Method::GET, ROLLOUT, None).await;
        assert_eq!(status["current"], Value::Null, "{status}");
        let ended = &status["past"][0];
        assert_eq!(ended["state"], "aborted");
        assert!(ended["end_reason"].as_str().is_some_and(|r| r.contains("label moved")), "{ended}");
    }
}

db_test! {
    async fn a_rollout_is_refused_for_an_unknown_label_or_revision_the_base_itself_or_a_second_one(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        let try_start = |path: String, body: Value| {
            let app = &app;
            async move { app.call(Method::POST, &path, &app.operator, Some(body)).await }
        };
        let (status, body) = try_start(format!("{AGENT}/labels/nope/rollout"), json!({"candidate": 2, "percent": 5})).await;
        assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "label_not_found"), "{body}");
        let (status, body) = try_start(ROLLOUT.to_owned(), json!({"candidate": 9, "percent": 5})).await;
        assert_eq!((status, code(&body)), (StatusCode::NOT_FOUND, "revision_not_found"), "{body}");
        let (status, body) = try_start(ROLLOUT.to_owned(), json!({"candidate": 1, "percent": 5})).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "candidate_is_base"), "{body}");
        let (status, body) = try_start(ROLLOUT.to_owned(), json!({"candidate": 2, "percent": 5.001})).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_percent"), "{body}");
        let (status, body) = try_start("/v1/agents/nobody/labels/production/rollout".to_owned(), json!({"candidate": 2, "percent": 5})).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        start(&app, 12.34).await;
        let (status, body) = try_start(ROLLOUT.to_owned(), json!({"candidate": 2, "percent": 5})).await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        let (status, body) = app.call(Method::POST, ROLLOUT, &app.agent, Some(json!({"candidate": 2, "percent": 5}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an agent key starts nothing: {body}");
    }
}

db_test! {
    async fn in_gated_mode_a_rollout_starts_and_completes_only_after_a_sign_off(db) {
        let app = TestApp::new(db).await;
        let approver = app.key("approver", Role::Approver).await;
        ok(&app, Method::PATCH, AGENT, Some(json!({"release_mode": "gated"}))).await;
        ok(&app, Method::PATCH, AGENT, Some(json!({"soul": "The candidate soul."}))).await;
        let body = json!({"candidate": 2, "percent": 10, "guard": {"min_outcomes": 100, "alpha": 0.05}});
        let (status, asked) = app.call(Method::POST, ROLLOUT, &app.operator, Some(body)).await;
        assert_eq!((status, asked["kind"].as_str()), (StatusCode::ACCEPTED, Some("rollout_start")), "{asked}");
        assert_eq!(asked["percent"], json!(10.0));
        assert_eq!(ok(&app, Method::GET, ROLLOUT, None).await["current"], Value::Null, "nothing runs before the sign-off");
        let path = |id: &Value, how: &str| format!("/v1/change-requests/{id}/{how}");
        let (status, _) = app.call(Method::POST, &path(&asked["id"], "approve"), &app.operator, Some(json!({}))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "never its author");
        let (status, approved) = app.call(Method::POST, &path(&asked["id"], "approve"), &approver, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        let running = ok(&app, Method::GET, ROLLOUT, None).await;
        assert_eq!(running["current"]["state"], "active", "{running}");
        assert_eq!(running["current"]["guard"]["min_outcomes"], 100);
        assert_eq!(running["current"]["events"][0]["change_request_id"], asked["id"]);

        let (status, asked) = app.call(Method::POST, &format!("{ROLLOUT}/complete"), &app.operator, Some(json!({}))).await;
        assert_eq!((status, asked["kind"].as_str()), (StatusCode::ACCEPTED, Some("rollout_complete")), "{asked}");
        let (status, approved) = app.call(Method::POST, &path(&asked["id"], "approve"), &approver, Some(json!({}))).await;
        assert_eq!(status, StatusCode::OK, "{approved}");
        let moves = ok(&app, Method::GET, &format!("{PRODUCTION}/history"), None).await;
        let last = &moves["moves"][0];
        assert_eq!((last["kind"].as_str(), last["to_revision"].as_i64(), last["approver"].as_str()),
            (Some("rollout"), Some(2), Some("approver")), "{last}");
    }
}

db_test! {
    async fn the_tools_and_a_tool_call_follow_the_revision_the_subject_is_served(db) {
        let app = TestApp::new(db).await;
        let schema = json!({"type": "object", "properties": {
            "ids": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "reason": {"type": "string"}}, "required": ["ids", "reason"], "additionalProperties": false});
        ok(&app, Method::PATCH, "/v1/tools/delete_tasks", Some(json!({"parameters": schema}))).await;
        ok(&app, Method::PUT, PRODUCTION, Some(json!({"revision": 1}))).await;
        start(&app, 50.0).await;
        let candidates = on_candidate(&app, 40).await;
        let candidate = user(candidates[0]);
        let base = user((0..40).find(|i| !candidates.contains(i)).expect("someone on the base"));

        // The cached tools answer is keyed by the revision picked, never shared across sides.
        for _ in 0..2 {
            for (who, revision) in [(&candidate, 2), (&base, 1)] {
                let reply = app.get(&format!("{AGENT}/tools?user_id={who}")).await;
                assert_eq!(reply.body["revision"], revision, "{who}: {}", reply.body);
            }
        }
        let call = |who: &str| json!({"tool": "delete_tasks", "arguments": {"ids": ["t1"]},
            "conversation_id": "c", "user_id": who});
        let path = "/v1/agents/assistant/tool-calls";
        let (status, body) = app.call(Method::POST, path, &app.agent, Some(call(&candidate))).await;
        assert_eq!((status, code(&body)), (StatusCode::UNPROCESSABLE_ENTITY, "invalid_arguments"), "the candidate requires a reason: {body}");
        let (status, body) = app.call(Method::POST, path, &app.agent, Some(call(&base))).await;
        assert_eq!((status, body["status"].clone()), (StatusCode::OK, json!("proposed_for_approval")), "the base has no reason: {body}");
    }
}

db_test! {
    async fn over_mcp_each_subject_gets_its_sides_revision_named_in_meta(db) {
        use rmcp::ServiceExt;
        use rmcp::model::{GetPromptRequestParams, PaginatedRequestParams};
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        let rollout = start(&app, 50.0).await["id"].clone();
        let candidates = on_candidate(&app, 40).await;
        let on_candidate_ = user(candidates[0]);
        let on_base = user((0..40).find(|i| !candidates.contains(i)).expect("someone on the base"));
        let base = format!("http://{}/mcp/agents/assistant", app.listen().await);
        let connect = |query: String| {
            let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(format!("{base}{query}")).auth_header(app.agent.clone());
            let client = loadout::connectors::client::Outbound::new(vec!["127.0.0.1".parse().expect("ip")], None)
                .expect("client").client().clone();
            ().serve(rmcp::transport::StreamableHttpClientTransport::with_client(client, config))
        };
        let as_json = |m: &Option<rmcp::model::MetaObject>| m.as_ref().map(|m| Value::Object(m.0.clone()));
        let meta = |revision: i64, side: &str| Some(json!({"loadout/revision": revision, "loadout/label": "production",
            "loadout/rollout": rollout, "loadout/side": side}));
        let request_meta = |key: &str, value: &str| json!({key: value}).as_object().cloned().unwrap_or_default().into();

        // The endpoint's ?user_id= is the subject of everything the session asks.
        for (who, revision, side) in [(&on_candidate_, 2, "candidate"), (&on_base, 1, "base")] {
            let session = connect(format!("?user_id={who}")).await.expect("initialize");
            assert_eq!(as_json(&session.peer_info().expect("info").meta), meta(revision, side), "{who}");
            let listed = session.list_tools(None).await.expect("tools/list");
            assert_eq!(as_json(&listed.meta), meta(revision, side), "{who}");
            let prompt = session.get_prompt(GetPromptRequestParams::new("web")).await.expect("prompts/get");
            assert_eq!(as_json(&prompt.meta), meta(revision, side), "{who}");
            session.cancel().await.ok();
        }

        // A request's _meta user_id (else conversation_id) picks per request on a shared session.
        let shared = connect(String::new()).await.expect("initialize");
        for (who, revision, side) in [(&on_candidate_, 2, "candidate"), (&on_base, 1, "base")] {
            let mut ask = GetPromptRequestParams::new("web");
            ask.meta = Some(request_meta("user_id", who));
            let prompt = shared.get_prompt(ask).await.expect("prompts/get");
            assert_eq!(as_json(&prompt.meta), meta(revision, side), "{who}");
            let mut page = PaginatedRequestParams::default();
            page.meta = Some(request_meta("user_id", who));
            let listed = shared.list_tools(Some(page)).await.expect("tools/list");
            assert_eq!(as_json(&listed.meta), meta(revision, side), "{who}");
        }
        let prompts = app.state.prompts();
        let conversation = "conv-7";
        let expected = fetch::pick(&prompts, "assistant", "production", Some(conversation)).await.expect("pick").served.number;
        let mut ask = GetPromptRequestParams::new("web");
        ask.meta = Some(request_meta("conversation_id", conversation));
        let prompt = shared.get_prompt(ask).await.expect("prompts/get");
        assert_eq!(as_json(&prompt.meta).and_then(|m| m["loadout/revision"].as_i64()), Some(i64::from(expected)));
        shared.cancel().await.ok();
    }
}

/// What `loadout rollout ARGS...` prints, parsed as the binary parses it, or its error.
async fn cli(app: &TestApp, args: &[&str]) -> Result<String, String> {
    use clap::Parser;
    use loadout::cli::{Cli, Command};
    let argv = ["loadout", "rollout", "assistant", "production"];
    let cli = Cli::try_parse_from(argv.into_iter().chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    let Command::Rollout(args) = cli.command else {
        panic!("not a rollout")
    };
    loadout::cli::rollout::run(&app.db.conn, args)
        .await
        .map_err(|e| format!("{e:#}"))
}

db_test! {
    async fn the_rollout_command_starts_sets_pauses_resumes_shows_and_completes_on_the_database(db) {
        let app = TestApp::new(db).await;
        two_revisions(&app).await;
        let out = cli(&app, &["start", "2", "12.5", "--reason", "try it"]).await.expect("start");
        assert!(out.starts_with("assistant/production: rollout ") && out.contains("active: revision 2 for 12.5% of users, revision 1 for the rest"), "{out}");
        let out = cli(&app, &["set", "20"]).await.expect("set");
        assert!(out.contains("revision 2 for 20% of users"), "{out}");
        let out = cli(&app, &["pause"]).await.expect("pause");
        assert!(out.contains(" paused: "), "{out}");
        assert!(on_candidate(&app, 200).await.is_empty(), "the CLI's write reaches the serving side");
        cli(&app, &["resume"]).await.expect("resume");
        let shown: Value = serde_json::from_str(&cli(&app, &["show", "--json"]).await.expect("show")).expect("json");
        let kinds: Vec<&str> = shown["current"]["events"].as_array().expect("events").iter().map(|e| e["kind"].as_str().unwrap_or("")).collect();
        assert_eq!(kinds, ["started", "share_changed", "paused", "resumed"]);
        assert_eq!(shown["current"]["author"], "cli");
        let out = cli(&app, &["complete"]).await.expect("complete");
        assert!(out.contains(" completed: "), "{out}");
        let err = cli(&app, &["abort"]).await.expect_err("nothing runs");
        assert!(err.contains("no running rollout"), "{err}");
    }
}
