//! Evaluations (issue 52) against a scripted OpenAI-compatible server on loopback
//! (the real model's end-to-end run is `evals_model.rs`): a run scores every
//! assertion and keeps each case; the release check refuses a regressing candidate
//! and passes a fine one; a run resumes after its process dies without repeating a
//! case; timeouts, 429s and malformed answers are each a case's error, never the
//! run's end; cancel, budgets, bounds and tenants hold.
//!
//! The scripted server (`scripted_model.rs`) answers from what it is sent: the
//! system prompt holding `SAY-NOTHING` gives "I do not know."; otherwise the user's
//! question decides; the judge (a forced `verdict` call) passes an `<Output>` holding
//! "Paris". Model names pick faults: `slow` sleeps past the timeout, `limited`
//! answers 429 with `Retry-After: 1` the first time, `broken` answers a body that
//! is no completion.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::scripted_model::scripted;
use crate::support::sea_orm::{ConnectionTrait, Statement};
use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, Role};
use serde_json::{Value, json};

const UNPROTECT: &str = "label_protected";

async fn app(db: crate::support::TestDb) -> TestApp {
    TestApp::builder(db.seeded().await)
        .flag("--connector-allow=127.0.0.1")
        .build()
        .await
}

async fn connect(app: &TestApp, address: SocketAddr, timeout_ms: u64) {
    let (status, body) = app.call(Method::POST, "/v1/model-connections", &app.operator, Some(json!({
        "name": "scripted", "base_url": format!("http://{address}/v1"),
        "models": ["good", "slow", "limited", "broken"], "api_key": "sk-test-secret-123", "timeout_ms": timeout_ms,
        "input_price": 1.0, "output_price": 2.0}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["has_api_key"], true);
    assert!(
        !body.to_string().contains("sk-test-secret-123"),
        "the key is never shown: {body}"
    );
}

/// Six questions about France whose assertions pass on the seeded agent.
fn france_cases(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            json!({"description": format!("france {i}"), "channel": "web",
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "assert": [{"type": "icontains", "value": "paris"}]})
        })
        .collect()
}

async fn put_dataset(app: &TestApp, name: &str, cases: Vec<Value>) -> Value {
    let (status, body) = app
        .call(
            Method::PUT,
            &format!("/v1/agents/assistant/datasets/{name}"),
            &app.operator,
            Some(json!({"cases": cases})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Carries out every claimable run in this process, as the background job would.
async fn drain(app: &TestApp) {
    let mut runner = app.state.eval_runner();
    runner.retry = loadout::evals::chat::Retry {
        attempts: 3,
        max_wait: Duration::from_secs(2),
        first_wait: Duration::from_millis(10),
    };
    while let Some(run) = runner.claim().await.expect("claim") {
        runner.carry_out(run).await.expect("carry out");
    }
}

async fn run(app: &TestApp, key: &str, body: Value) -> Value {
    let (status, run) = app
        .call(
            Method::POST,
            "/v1/agents/assistant/eval-runs",
            key,
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    assert_eq!(run["state"], "queued");
    run
}

db_test! {
    async fn a_run_scores_every_assertion_and_keeps_each_case(db) {
        let app = app(db).await;
        let (script, address) = scripted().await;
        connect(&app, address, 10_000).await;
        let cases = json!([
            {"description": "capital", "channel": "web", "messages": [{"role": "user", "content": "What is the capital of France?"}],
             "assert": [{"type": "contains", "value": "Paris"}, {"type": "icontains", "value": "CAPITAL"}, {"type": "regex", "value": "^Paris"},
                        {"type": "not-contains", "value": "London"}, {"type": "starts-with", "value": "Paris"}, {"type": "latency", "threshold": 5000},
                        {"type": "cost", "threshold": 0.01}, {"type": "llm-rubric", "value": "Names the capital of France"}]},
            {"description": "json", "channel": "web", "messages": [{"role": "user", "content": "Answer in JSON: which city?"}],
             "assert": [{"type": "is-json"}, {"type": "contains-json", "value": {"type": "object", "required": ["city"]}}, {"type": "equals", "value": "Paris"}]},
            {"description": "tool", "channel": "web", "messages": [{"role": "user", "content": "Remember milk."}],
             "tool_choice": {"type": "function", "function": {"name": "create_tasks"}},
             "assert": [{"type": "tool-call", "value": {"name": "create_tasks", "arguments": {"tasks": [{"title": "Buy milk"}]}}},
                        {"type": "is-valid-openai-tools-call"}]},
            {"description": "vars", "channel": "telegram", "user_id": "alice", "vars": {"name": "Ada"}, "messages": [{"role": "user", "content": "Hello {{name}}"}],
             "assert": [{"type": "contains", "value": "Hello Ada"}, {"type": "llm-rubric", "value": "Names Paris"}]}
        ]);
        let saved = put_dataset(&app, "smoke", cases.as_array().expect("cases").clone()).await;
        assert_eq!((saved["version"].as_i64(), saved["created"].as_bool()), (Some(1), Some(true)));
        let again = put_dataset(&app, "smoke", cases.as_array().expect("cases").clone()).await;
        assert_eq!((again["version"].as_i64(), again["created"].as_bool()), (Some(1), Some(false)), "the same cases make no version");

        let admin = app.key("evals-admin", Role::Admin).await;
        let started = run(&app, &admin, json!({"dataset": "smoke", "connection": "scripted", "model": "good"})).await;
        let id = started["id"].as_i64().expect("an id");
        drain(&app).await;
        let (status, done) = app.call(Method::GET, &format!("/v1/eval-runs/{id}/cases"), &admin, None).await;
        assert_eq!(status, StatusCode::OK, "{done}");
        assert_eq!(done["run"]["state"], "succeeded", "{done}");
        assert_eq!((done["run"]["total"].as_i64(), done["run"]["done"].as_i64()), (Some(4), Some(4)));
        let cases = done["cases"].as_array().expect("cases");
        let verdicts = |i: usize| -> Vec<(String, bool)> {
            cases[i]["verdicts"].as_array().expect("verdicts").iter()
                .map(|v| (v["type"].as_str().unwrap_or_default().to_owned(), v["pass"].as_bool().unwrap_or_default())).collect()
        };
        assert!(verdicts(0).iter().all(|(_, pass)| *pass), "every assertion of the first case passes: {:?}", cases[0]);
        assert_eq!(verdicts(1), vec![("is-json".into(), true), ("contains-json".into(), true), ("equals".into(), false)]);
        assert!(verdicts(2).iter().all(|(_, pass)| *pass), "the forced tool call is scored: {:?}", cases[2]);
        assert_eq!(cases[2]["tool_calls"][0]["name"], "create_tasks");
        assert_eq!(verdicts(3), vec![("contains".into(), true), ("llm-rubric".into(), false)], "vars filled; the judge refuses: {:?}", cases[3]);
        assert_eq!(cases[3]["verdicts"][1]["reason"], "does not name Paris", "the judge's reason is kept");
        assert_eq!((cases[0]["passed"].as_bool(), cases[1]["passed"].as_bool(), cases[2]["passed"].as_bool(), cases[3]["passed"].as_bool()),
            (Some(true), Some(false), Some(true), Some(false)));
        assert_eq!(done["run"]["passed"], 2);
        assert!(done["run"]["prompt_tokens"].as_i64() >= Some(400), "tokens recorded, judges included: {}", done["run"]);
        assert!(done["run"]["cost"].as_f64().is_some_and(|c| c > 0.0), "the connection's prices make a cost");

        // What was sent: the revision's prompt for the channel first, its tools, the key.
        let bodies = script.bodies.lock().expect("lock").clone();
        let first = &bodies[0];
        assert_eq!(first["model"], "good");
        assert_eq!(first["messages"][0]["role"], "system");
        let rendered = app.call(Method::GET, "/v1/agents/assistant/prompt?channel=web", &app.agent, None).await.1;
        assert_eq!(first["messages"][0]["content"].as_str().map(|s| s.len() > 100), Some(true));
        assert!(rendered["text"].as_str().is_some());
        assert!(first["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["function"]["name"] == "create_tasks")), "the revision's tools in OpenAI's format");

        // The finished run's event, for the run's tenant.
        let events = app.db.conn.query_all_raw(Statement::from_string(app.db.conn.get_database_backend(),
            "SELECT body FROM webhook_events WHERE event_type = 'eval_run.finished'")).await.expect("events");
        assert_eq!(events.len(), 1);

        // Another tenant's admin sees nothing of it.
        let other = keys::create_scoped(&app.db.conn, "other-admin", Role::Admin, Some("other"), None, chrono::Utc::now()).await.expect("key");
        let (status, _) = app.call(Method::GET, &format!("/v1/eval-runs/{id}"), &other, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let (_, listed) = app.call(Method::GET, "/v1/eval-runs", &other, None).await;
        assert_eq!(listed["runs"].as_array().map(Vec::len), Some(0));
    }
}

db_test! {
    async fn faults_are_a_cases_error_never_the_runs_end(db) {
        let app = app(db).await;
        let (script, address) = scripted().await;
        connect(&app, address, 1_000).await;
        put_dataset(&app, "faults", france_cases(2)).await;
        let mut ids = Vec::new();
        for model in ["slow", "limited", "broken"] {
            ids.push(run(&app, &app.operator, json!({"dataset": "faults", "connection": "scripted", "model": model})).await["id"].as_i64().expect("id"));
        }
        drain(&app).await;
        let view = |id: i64| { let app = &app; async move { app.call(Method::GET, &format!("/v1/eval-runs/{id}/cases"), &app.operator, None).await.1 } };
        let slow = view(ids[0]).await;
        assert_eq!(slow["run"]["state"], "succeeded", "{slow}");
        assert_eq!(slow["run"]["errors"], 2);
        assert!(slow["cases"][0]["error"].as_str().is_some_and(|e| e.contains("did not answer within 1 s")), "{}", slow["cases"][0]);
        let limited = view(ids[1]).await;
        assert_eq!((limited["run"]["passed"].as_i64(), limited["run"]["errors"].as_i64()), (Some(2), Some(0)), "a 429 with Retry-After is waited out: {limited}");
        let broken = view(ids[2]).await;
        assert_eq!(broken["run"]["errors"], 2, "{broken}");
        let error = broken["cases"][0]["error"].as_str().unwrap_or_default();
        assert!(!error.contains("127.0.0.1") && !error.contains("sk-test"), "no address or key in an error: {error}");
        assert!(script.hits.load(Ordering::SeqCst) >= 2 + 3 + 2);
    }
}

db_test! {
    async fn a_run_resumes_after_its_process_dies_and_repeats_no_case(db) {
        let app = app(db).await;
        let (script, address) = scripted().await;
        connect(&app, address, 10_000).await;
        put_dataset(&app, "resume", france_cases(6)).await;
        let id = run(&app, &app.operator, json!({"dataset": "resume", "connection": "scripted"})).await["id"].as_i64().expect("id");

        // The first process claims the run and dies after two cases.
        let first = app.state.eval_runner();
        let claimed = first.claim().await.expect("claim").expect("the queued run");
        let task = tokio::spawn(async move { first.carry_out(claimed).await });
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, view) = app.call(Method::GET, &format!("/v1/eval-runs/{id}"), &app.operator, None).await;
            if view["done"].as_i64() >= Some(2) { break; }
            assert!(std::time::Instant::now() < deadline, "two cases within 20 s: {view}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        task.abort();
        let _ = task.await;

        // Another process does not take it while the lease holds; once it lapses, it does.
        let mut second = app.state.eval_runner();
        assert!(second.claim().await.expect("claim").is_none(), "the lease holds");
        second.clock = Arc::new(loadout::vocab::FixedClock(chrono::Utc::now() + chrono::TimeDelta::minutes(2)));
        let resumed = second.claim().await.expect("claim").expect("the lapsed run");
        assert_eq!(i64::from(resumed.id), id);
        second.carry_out(resumed).await.expect("carry out");
        let (_, done) = app.call(Method::GET, &format!("/v1/eval-runs/{id}/cases"), &app.operator, None).await;
        assert_eq!((done["run"]["state"].as_str(), done["run"]["done"].as_i64(), done["run"]["passed"].as_i64()), (Some("succeeded"), Some(6), Some(6)), "{done}");
        let indices: Vec<i64> = done["cases"].as_array().expect("cases").iter().map(|c| c["index"].as_i64().expect("index")).collect();
        assert_eq!(indices, vec![0, 1, 2, 3, 4, 5], "each case once");
        let hits = script.hits.load(Ordering::SeqCst);
        assert!((6..=7).contains(&hits), "at most the case in flight is asked again: {hits}");
    }
}

db_test! {
    async fn cancel_budgets_and_bounds_hold(db) {
        let app = TestApp::builder(db.seeded().await)
            .flag("--connector-allow=127.0.0.1").flag("--eval-max-queued=2").flag("--eval-token-budget=250")
            .build().await;
        let (_, address) = scripted().await;
        connect(&app, address, 10_000).await;
        put_dataset(&app, "bounds", france_cases(5)).await;
        let body = json!({"dataset": "bounds", "connection": "scripted"});
        let a = run(&app, &app.operator, body.clone()).await["id"].as_i64().expect("id");
        let b = run(&app, &app.operator, body.clone()).await["id"].as_i64().expect("id");
        let (status, refused) = app.call(Method::POST, "/v1/agents/assistant/eval-runs", &app.operator, Some(body.clone())).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("limit_reached")), "{refused}");
        let (status, cancelled) = app.call(Method::POST, &format!("/v1/eval-runs/{a}/cancel"), &app.operator, None).await;
        assert_eq!((status, cancelled["state"].as_str()), (StatusCode::OK, Some("cancelled")), "{cancelled}");
        let (status, _) = app.call(Method::POST, &format!("/v1/eval-runs/{a}/cancel"), &app.operator, None).await;
        assert_eq!(status, StatusCode::CONFLICT, "an ended run is not cancelled again");
        drain(&app).await;
        let (_, spent) = app.call(Method::GET, &format!("/v1/eval-runs/{b}"), &app.operator, None).await;
        assert_eq!(spent["state"], "failed", "{spent}");
        assert!(spent["error"].as_str().is_some_and(|e| e.contains("token budget")), "{spent}");
        assert_eq!(spent["done"], 3, "110 tokens a case: the third passes 250, the fourth is not asked");
        let (status, refused) = app.call(Method::POST, "/v1/agents/assistant/eval-runs", &app.operator,
            Some(json!({"dataset": "bounds", "connection": "scripted", "token_budget": 1000}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "a budget over --eval-token-budget: {refused}");
        let (status, _) = app.call(Method::POST, "/v1/agents/assistant/eval-runs", &app.agent, Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "agents do not start runs");
    }
}

db_test! {
    async fn the_release_check_refuses_a_candidate_that_regresses(db) {
        let app = app(db).await;
        let (_, address) = scripted().await;
        connect(&app, address, 10_000).await;
        put_dataset(&app, "gate", france_cases(6)).await;
        let approver = app.key("gate-approver", Role::Approver).await;
        let (status, body) = app.call(Method::PATCH, "/v1/agents/assistant", &app.operator, Some(json!({"release_mode": "gated"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let labels = app.call(Method::GET, "/v1/agents/assistant/labels", &app.operator, None).await.1;
        let production = labels["labels"].as_array().expect("labels").iter().find(|l| l["name"] == "production").expect("production")["revision"].as_i64().expect("n");
        let gate = json!({"dataset": "gate", "connection": "scripted", "min_pass_rate": 0.8});
        let (status, body) = app.call(Method::PUT, "/v1/agents/assistant/labels/production", &app.operator,
            Some(json!({"revision": production, "require_evals": gate}))).await;
        assert_eq!(status, StatusCode::OK, "setting a gate where there is none needs no sign-off: {body}");
        let (status, body) = app.call(Method::PUT, "/v1/agents/assistant/labels/production", &app.operator,
            Some(json!({"revision": production, "require_evals": null}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some(UNPROTECT)), "one person does not remove a signed-off gate: {body}");
        let (status, body) = app.call(Method::PUT, "/v1/agents/assistant/labels/production", &app.operator,
            Some(json!({"revision": production, "require_evals": {"dataset": "gate", "connection": "scripted", "min_pass_rate": 0.1}}))).await;
        assert_eq!((status, body["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some(UNPROTECT)), "nor loosens it: {body}");

        for (soul, regresses) in [("Answer briefly. SAY-NOTHING", true), ("Answer briefly and well.", false)] {
            let (status, body) = app.call(Method::PATCH, "/v1/agents/assistant", &app.operator, Some(json!({"soul": soul}))).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let latest = app.call(Method::GET, "/v1/agents/assistant/revisions", &app.operator, None).await.1["revisions"][0]["number"].as_i64().expect("n");
            let (status, request) = app.call(Method::PUT, "/v1/agents/assistant/labels/production", &app.operator, Some(json!({"revision": latest}))).await;
            assert_eq!(status, StatusCode::ACCEPTED, "{request}");
            let id = request["id"].as_i64().expect("a change request");
            let evals = request["checks"]["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "evals").expect("an evals check").clone();
            assert_eq!(evals["status"], "pending", "{evals}");
            let (status, refused) = app.call(Method::POST, &format!("/v1/change-requests/{id}/approve"), &approver, Some(json!({}))).await;
            assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("checks_failed")), "pending blocks: {refused}");
            drain(&app).await;
            let (status, rechecked) = app.call(Method::POST, &format!("/v1/change-requests/{id}/checks"), &app.operator, None).await;
            assert_eq!(status, StatusCode::OK, "{rechecked}");
            let evals = rechecked["checks"]["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "evals").expect("evals").clone();
            let (status, decided) = app.call(Method::POST, &format!("/v1/change-requests/{id}/approve"), &approver, Some(json!({}))).await;
            if regresses {
                assert_eq!(evals["status"], "fail", "{evals}");
                let words = evals["summary"].to_string();
                assert!(words.contains("case 0 (france 0) turned from pass to fail"), "{words}");
                assert!(words.contains("worse than the base with confidence"), "{words}");
                assert!(evals["runs"]["candidate"].as_i64().is_some() && evals["runs"]["base"].as_i64().is_some());
                assert_eq!((status, decided["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("checks_failed")), "{decided}");
                let (status, _) = app.call(Method::POST, &format!("/v1/change-requests/{id}/decline"), &approver, Some(json!({}))).await;
                assert_eq!(status, StatusCode::OK);
            } else {
                assert_eq!(evals["status"], "pass", "{evals}");
                assert_eq!(status, StatusCode::OK, "a candidate as good as its base is approved: {decided}");
            }
        }
    }
}
