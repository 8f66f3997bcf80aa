//! A scripted OpenAI-compatible Chat Completions server on loopback, for the
//! evaluation tests (`evals.rs`) and the console's evaluation pages (`console.rs`).
//!
//! It answers from what it is sent: the system prompt holding `SAY-NOTHING` gives
//! "I do not know."; otherwise the user's question decides (France: "Paris is the
//! capital of France."; JSON: `{"city": "Paris"}`; else "You said: ..."); the judge
//! (a forced `verdict` call) passes an `<Output>` holding "Paris". Model names pick
//! faults: `slow` sleeps 3 s, `limited` answers 429 with `Retry-After: 1` the first
//! time, `broken` answers a body that is no completion. Every answer uses 110 tokens.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What the server was asked.
#[derive(Clone, Default)]
pub(crate) struct Script {
    pub(crate) hits: Arc<AtomicUsize>,
    limited: Arc<AtomicUsize>,
    pub(crate) bodies: Arc<std::sync::Mutex<Vec<Value>>>,
}

/// Starts the server; its base URL is `http://{address}/v1`.
pub(crate) async fn scripted() -> (Script, SocketAddr) {
    let script = Script::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (script, address)
}

async fn completions(State(script): State<Script>, body: axum::body::Bytes) -> Response {
    script.hits.fetch_add(1, Ordering::SeqCst);
    let body: Value = serde_json::from_slice(&body).expect("a JSON request");
    script.bodies.lock().expect("lock").push(body.clone());
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    match model.as_str() {
        "slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        "limited" if script.limited.fetch_add(1, Ordering::SeqCst) == 0 => {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                [("retry-after", "1")],
                "slow down",
            )
                .into_response();
        }
        "broken" => return (StatusCode::OK, "{\"choices\": \"no\"}").into_response(),
        _ => {}
    }
    let message = answer(&body);
    let finish = if message["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    Json(
        json!({"id": "x", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}),
    )
    .into_response()
}

/// The assistant's message for a request `body`.
fn answer(body: &Value) -> Value {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let system = messages
        .first()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let user = messages
        .last()
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let forced = body["tool_choice"]["function"]["name"].as_str();
    match forced {
        Some("verdict") => {
            let output = user.split("</Output>").next().unwrap_or_default();
            let pass = output.contains("Paris");
            let arguments = json!({"pass": pass, "score": if pass {1.0} else {0.0},
                "reason": if pass {"names Paris"} else {"does not name Paris"}});
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "verdict", "arguments": arguments.to_string()}}]})
        }
        Some(tool) => {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": tool, "arguments": "{\"tasks\": [{\"title\": \"Buy milk\", \"description\": null, \"priority\": null, \"due_date\": null}]}"}}]})
        }
        None if system.contains("SAY-NOTHING") => {
            json!({"role": "assistant", "content": "I do not know."})
        }
        None if user.contains("France") => {
            json!({"role": "assistant", "content": "Paris is the capital of France."})
        }
        None if user.contains("JSON") => {
            json!({"role": "assistant", "content": "{\"city\": \"Paris\"}"})
        }
        None => json!({"role": "assistant", "content": format!("You said: {user}")}),
    }
}
