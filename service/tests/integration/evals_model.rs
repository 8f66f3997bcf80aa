//! Evaluations against a real model, offline (issue 52, item 6): llama-cpp-python's
//! OpenAI-compatible server with Gemma 3 270M, pinned in the peer matrix
//! (`tests/peers/model/serve.py`), on both backends:
//!
//! - a dataset end to end: deterministic assertions, a forced tool call, a judge
//!   asked with a schema (the `verdict` call), each case's output kept;
//! - the same cases run by promptfoo (pinned, `tests/peers/evals/promptfoo`) against
//!   the same server: the same output and the same verdict per case for every
//!   assertion both run the same way;
//! - a candidate that regresses (its model settings cut the answer to two tokens)
//!   refused by the label's required evaluation, and the run of it interrupted
//!   after two cases and resumed by another runner.
//!
//! Without the peers installed the test says it was skipped, unless
//! `LOADOUT_REQUIRE_PEERS=1` (CI) makes that a failure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use loadout::auth::keys::Role;
use serde_json::{Value, json};

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/peers")
}

/// The model server, stopped when dropped.
struct Model {
    child: Child,
    base_url: String,
}

impl Drop for Model {
    fn drop(&mut self) {
        // SIGTERM: serve.py stops the server it started.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// Starts the real model, or `None` (skipped) when the peers are not installed.
fn model() -> Option<Model> {
    let ready = peers().join(".peers/venv-model/bin/python").exists()
        && peers()
            .join(".peers/models/gemma3-270m-q4_k_m.gguf")
            .exists();
    assert!(
        ready || std::env::var("LOADOUT_REQUIRE_PEERS").as_deref() != Ok("1"),
        "LOADOUT_REQUIRE_PEERS=1 but the model server is not installed: run tests/peers/install"
    );
    if !ready {
        eprintln!("skipped: the model server is not installed (tests/peers/install)");
        return None;
    }
    let mut child = Command::new("python3")
        .arg(peers().join("model/serve.py"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve.py starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("a line");
    let base_url = line
        .trim()
        .strip_prefix("MODEL_READY ")
        .unwrap_or_else(|| panic!("serve.py printed {line:?}"))
        .to_owned();
    Some(Model { child, base_url })
}

const SYSTEM: &str = "You are a helpful assistant. Answer in one short sentence.";

/// An agent whose prompt is exactly [`SYSTEM`] on every channel (a template
/// without placeholders), with one tool, deterministic settings, and on
/// `telegram` a response schema.
async fn parity_agent(app: &TestApp) {
    let op = &app.operator;
    let (status, body) = app
        .call(
            Method::POST,
            "/v1/agents",
            op,
            Some(json!({"name": "parity", "identity": {}, "soul": "Parity."})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = app
        .call(
            Method::PUT,
            "/v1/agents/parity/prompt-template",
            op,
            Some(json!({"template": SYSTEM, "force": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tool = json!({"name": "get_weather", "type": "api", "approval_tier": "auto", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}});
    let (status, body) = app.call(Method::POST, "/v1/tools", op, Some(tool)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, body) = app
        .call(Method::PUT, "/v1/agents/parity/links/get_weather", op, None)
        .await;
    assert!(status.is_success(), "{body}");
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"], "additionalProperties": false});
    let settings = json!({"model": "gemma3-270m", "parameters": {"temperature": 0, "max_tokens": 48, "provider_options": {"seed": 1}},
        "channels": {"telegram": {"response_schema": schema}}});
    let (status, body) = app
        .call(Method::PUT, "/v1/agents/parity/model", op, Some(settings))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The cases: each a question and assertions both loadout and promptfoo run.
fn cases() -> Vec<Value> {
    let text = |d: &str, q: &str, assert: Value| json!({"description": d, "channel": "web", "messages": [{"role": "user", "content": q}], "assert": assert});
    vec![
        text(
            "capital",
            "What is the capital of France?",
            json!([
            {"type": "contains", "value": "capital of France"}, {"type": "icontains", "value": "WHAT IS THE CAPITAL"},
            {"type": "not-contains", "value": "London"}, {"type": "starts-with", "value": "You are"},
            {"type": "regex", "value": "France\\?"}, {"type": "is-json"}, {"type": "latency", "threshold": 120000}]),
        ),
        text(
            "colour",
            "What colour is the sky?",
            json!([
            {"type": "icontains", "value": "sky"}, {"type": "contains-any", "value": ["blue", "Blue", "grey"]},
            {"type": "not-icontains", "value": "SKY"}, {"type": "equals", "value": "Blue."}]),
        ),
        json!({"description": "json", "channel": "telegram", "messages": [{"role": "user", "content": "Which city is the capital of France? Answer in JSON."}],
            "assert": [{"type": "is-json"}, {"type": "contains-json", "value": {"type": "object", "required": ["city"]}}, {"type": "icontains", "value": "paris"}]}),
        json!({"description": "tool", "channel": "web", "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "assert": [{"type": "contains", "value": "get_weather"}, {"type": "icontains", "value": "paris"},
                       {"type": "tool-call", "value": {"name": "get_weather"}}, {"type": "is-valid-openai-tools-call"}]}),
        text(
            "judged",
            "What is the capital of France?",
            json!([
            {"type": "llm-rubric", "value": "The output mentions France"}]),
        ),
    ]
}

/// The assertions promptfoo runs as loadout does: `tool-call` is loadout's own;
/// `is-valid-openai-tools-call` differs on this server only because it also sends
/// the legacy `function_call` field, which promptfoo reads first; `llm-rubric`
/// asks each tool's own judge prompt; `latency` measures each client's own clock.
fn compared(kind: &str) -> bool {
    !matches!(
        kind,
        "tool-call" | "is-valid-openai-tools-call" | "llm-rubric" | "latency"
    )
}

/// The same cases as a promptfoo configuration (JSON is YAML): the prompt is the
/// agent's [`SYSTEM`] and the case's question; each case's provider sends what
/// loadout sends for it (the tools, the settings, the schema, the tool choice).
fn promptfoo_config(base_url: &str, tools: &Value, cases: &[Value]) -> Value {
    let config = |extra: Value| {
        let mut c = json!({"apiBaseUrl": base_url, "apiKey": "dummy", "temperature": 0, "seed": 1, "max_tokens": 48, "tools": tools});
        for (k, v) in extra.as_object().expect("object") {
            c[k] = v.clone();
        }
        c
    };
    let schema = json!({"type": "json_object", "schema": {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"], "additionalProperties": false}});
    let providers = json!([
        {"id": "openai:chat:gemma3-270m", "label": "web", "config": config(json!({}))},
        {"id": "openai:chat:gemma3-270m", "label": "telegram", "config": config(json!({"response_format": schema}))},
        {"id": "openai:chat:gemma3-270m", "label": "tool", "config": config(json!({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}))},
    ]);
    let tests: Vec<Value> = cases
        .iter()
        .filter(|c| {
            c["assert"]
                .as_array()
                .expect("assert")
                .iter()
                .any(|a| compared(a["type"].as_str().unwrap_or_default()))
        })
        .map(|c| {
            let provider = if c["tool_choice"].is_object() {
                "tool"
            } else {
                c["channel"].as_str().expect("channel")
            };
            let assert: Vec<&Value> = c["assert"]
                .as_array()
                .expect("assert")
                .iter()
                .filter(|a| compared(a["type"].as_str().unwrap_or_default()))
                .collect();
            json!({"description": c["description"], "providers": [provider],
                "vars": {"question": c["messages"][0]["content"]}, "assert": assert})
        })
        .collect();
    json!({"description": "loadout parity", "prompts": [{"raw": format!("[{{\"role\": \"system\", \"content\": {}}}, {{\"role\": \"user\", \"content\": \"{{{{question}}}}\"}}]", serde_json::to_string(SYSTEM).expect("json")), "label": "chat"}],
        "providers": providers, "tests": tests})
}

/// promptfoo's verdicts on `config`: one line per test, in order.
fn promptfoo(base_url: &str, config: &Value) -> Vec<Value> {
    let dir = crate::support::TempDir::new("promptfoo");
    let file = dir.path().join("promptfooconfig.yaml");
    std::fs::write(&file, serde_json::to_vec_pretty(config).expect("json")).expect("write");
    let out = dir.path().join("out.json");
    let status = Command::new(peers().join("evals/promptfoo"))
        .args(["eval", "-c"])
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .args([
            "--no-cache",
            "--no-write",
            "--no-table",
            "--no-progress-bar",
            "-j",
            "1",
        ])
        .env("MODEL_BASE_URL", base_url)
        .stdout(Stdio::null())
        .status()
        .expect("promptfoo runs");
    assert!(
        matches!(status.code(), Some(0 | 100)),
        "promptfoo exited {status}"
    );
    let lines = Command::new("python3")
        .arg(peers().join("evals/verdicts.py"))
        .arg(&out)
        .output()
        .expect("verdicts.py");
    String::from_utf8(lines.stdout)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

async fn drain(app: &TestApp) {
    let runner = app.state.eval_runner();
    while let Some(run) = runner.claim().await.expect("claim") {
        runner.carry_out(run).await.expect("carry out");
    }
}

async fn cases_of(app: &TestApp, id: i64) -> Value {
    let (status, body) = app
        .call(
            Method::GET,
            &format!("/v1/eval-runs/{id}/cases"),
            &app.operator,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

db_test! {
    async fn a_real_model_runs_a_dataset_as_promptfoo_scores_it_and_gates_a_regression(db) {
        let Some(model) = model() else { return };
        let app = TestApp::builder(db.seeded().await).flag("--connector-allow=127.0.0.1").build().await;
        let op = app.operator.clone();
        parity_agent(&app).await;
        let (status, body) = app.call(Method::POST, "/v1/model-connections", &op, Some(json!({"name": "gemma", "base_url": model.base_url,
            "models": ["gemma3-270m"], "timeout_ms": 120000, "structured": "json_object_schema"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let cases = cases();
        let (status, body) = app.call(Method::PUT, "/v1/agents/parity/datasets/parity", &op, Some(json!({"cases": cases}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");

        // 1. loadout runs the dataset.
        let (status, run) = app.call(Method::POST, "/v1/agents/parity/eval-runs", &op, Some(json!({"dataset": "parity", "connection": "gemma"}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{run}");
        drain(&app).await;
        let done = cases_of(&app, run["id"].as_i64().expect("id")).await;
        assert_eq!((done["run"]["state"].as_str(), done["run"]["errors"].as_i64()), (Some("succeeded"), Some(0)), "{done}");
        let ours = done["cases"].as_array().expect("cases").clone();
        let verdict = |case: &Value, kind: &str| case["verdicts"].as_array().expect("verdicts").iter().find(|v| v["type"] == kind).map(|v| v["pass"].as_bool());
        let tool = &ours[3];
        assert_eq!(tool["tool_calls"][0]["name"], "get_weather", "a forced tool call: {tool}");
        assert_eq!(verdict(tool, "tool-call"), Some(Some(true)), "{tool}");
        assert_eq!(verdict(tool, "is-valid-openai-tools-call"), Some(Some(true)), "the arguments fit the tool's schema: {tool}");
        let json_case = &ours[2];
        assert_eq!(verdict(json_case, "is-json"), Some(Some(true)), "the channel's response schema held the answer to JSON: {json_case}");
        let judged = &ours[4]["verdicts"][0];
        assert_eq!(judged["type"], "llm-rubric");
        assert!(judged["reason"].as_str().is_some_and(|r| !r.is_empty()) && !judged["reason"].as_str().unwrap_or_default().starts_with("the judge"),
            "the judge answered with a verdict: {judged}");
        assert!(done["run"]["prompt_tokens"].as_i64() > Some(0) && done["run"]["completion_tokens"].as_i64() > Some(0), "usage recorded: {}", done["run"]);

        // 2. promptfoo runs the same cases against the same server: the same outputs and verdicts.
        let tools = app.call(Method::GET, "/v1/agents/parity/tools?format=openai", &op, None).await.1["tools"].clone();
        let theirs = promptfoo(&model.base_url, &promptfoo_config(&model.base_url, &tools, &cases));
        let compared_cases: Vec<&Value> = ours.iter().filter(|c| c["verdicts"].as_array().expect("v").iter().any(|v| compared(v["type"].as_str().unwrap_or_default()))).collect();
        assert_eq!(theirs.len(), compared_cases.len(), "one line per compared case: {theirs:?}");
        for (mine, peer) in compared_cases.iter().zip(&theirs) {
            if mine["tool_calls"].as_array().is_none_or(Vec::is_empty) {
                assert_eq!(mine["output"], peer["output"], "the same answer to the same request: {} vs {}", mine, peer);
            }
            let ours: Vec<(String, bool)> = mine["verdicts"].as_array().expect("v").iter()
                .filter(|v| compared(v["type"].as_str().unwrap_or_default()))
                .map(|v| (v["type"].as_str().unwrap_or_default().to_owned(), v["pass"].as_bool().unwrap_or_default())).collect();
            let peer_verdicts: Vec<(String, bool)> = peer["assertions"].as_array().expect("assertions").iter()
                .map(|a| (a["type"].as_str().unwrap_or_default().to_owned(), a["pass"].as_bool().unwrap_or_default())).collect();
            assert_eq!(ours, peer_verdicts, "case {}: loadout's verdicts, then promptfoo's ({})", mine["description"], peer["output"]);
        }

        // 3. A candidate that regresses: the answer cut to two tokens.
        let questions = ["France", "Italy", "Spain", "Germany", "Japan", "Peru"];
        let gate_cases: Vec<Value> = questions.iter().map(|c| json!({"description": c, "channel": "web",
            "messages": [{"role": "user", "content": format!("What is the capital of {c}?")}],
            "assert": [{"type": "icontains", "value": "capital"}]})).collect();
        let (status, body) = app.call(Method::PUT, "/v1/agents/parity/datasets/gate", &op, Some(json!({"cases": gate_cases}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = app.call(Method::PATCH, "/v1/agents/parity", &op, Some(json!({"release_mode": "gated"}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let production = app.call(Method::GET, "/v1/agents/parity/labels", &op, None).await.1["labels"].as_array().expect("labels").iter()
            .find(|l| l["name"] == "production").expect("production")["revision"].as_i64().expect("n");
        let (status, body) = app.call(Method::PUT, "/v1/agents/parity/labels/production", &op,
            Some(json!({"revision": production, "require_checks": true, "require_evals": {"dataset": "gate", "connection": "gemma", "min_pass_rate": 0.9}}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let cut = json!({"model": "gemma3-270m", "parameters": {"temperature": 0, "max_tokens": 2, "provider_options": {"seed": 1}}});
        let (status, body) = app.call(Method::PUT, "/v1/agents/parity/model", &op, Some(cut)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let latest = app.call(Method::GET, "/v1/agents/parity/revisions", &op, None).await.1["revisions"][0]["number"].as_i64().expect("n");
        let (status, request) = app.call(Method::PUT, "/v1/agents/parity/labels/production", &op, Some(json!({"revision": latest}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{request}");
        let id = request["id"].as_i64().expect("a change request");
        let runs = request["checks"]["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "evals").expect("evals")["runs"].clone();

        // The candidate's run is interrupted after two cases and resumed by another runner.
        let candidate_run = runs["candidate"].as_i64().expect("a candidate run");
        let first = app.state.eval_runner();
        let mut claimed = None;
        while let Some(run) = first.claim().await.expect("claim") {
            if i64::from(run.id) == candidate_run { claimed = Some(run); break; }
            first.carry_out(run).await.expect("the base's run");
        }
        let claimed = claimed.expect("the candidate's run");
        let task = tokio::spawn(async move { first.carry_out(claimed).await });
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let view = app.call(Method::GET, &format!("/v1/eval-runs/{candidate_run}"), &op, None).await.1;
            if view["done"].as_i64() >= Some(2) { break; }
            assert!(std::time::Instant::now() < deadline, "two cases within 120 s: {view}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        task.abort();
        let _ = task.await;
        let mut second = app.state.eval_runner();
        second.clock = Arc::new(loadout::vocab::FixedClock(chrono::Utc::now() + chrono::TimeDelta::minutes(2)));
        let resumed = second.claim().await.expect("claim").expect("the lapsed run");
        second.carry_out(resumed).await.expect("resumed");
        let candidate = cases_of(&app, candidate_run).await;
        let indices: Vec<i64> = candidate["cases"].as_array().expect("cases").iter().map(|c| c["index"].as_i64().expect("i")).collect();
        assert_eq!(indices, vec![0, 1, 2, 3, 4, 5], "each case once after the restart: {candidate}");

        let approver = app.key("model-approver", Role::Approver).await;
        let (status, rechecked) = app.call(Method::POST, &format!("/v1/change-requests/{id}/checks"), &op, None).await;
        assert_eq!(status, StatusCode::OK, "{rechecked}");
        let evals = rechecked["checks"]["checks"].as_array().expect("checks").iter().find(|c| c["name"] == "evals").expect("evals").clone();
        assert_eq!(evals["status"], "fail", "{evals}");
        assert!(evals["summary"].to_string().contains("turned from pass to fail"), "{evals}");
        let (status, refused) = app.call(Method::POST, &format!("/v1/change-requests/{id}/approve"), &approver, Some(json!({}))).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("checks_failed")), "{refused}");
        drop(model);
    }
}
