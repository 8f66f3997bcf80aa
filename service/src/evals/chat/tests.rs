//! The client against a fault server: a real HTTP server on 127.0.0.1 that answers
//! each request with the next reply of its script (the last one repeating), after
//! a delay if told, and keeps what it was sent.

#![cfg(test)]

use std::future::ready;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::*;
use crate::connectors::client::outbound::Outbound;
use crate::registry::formats::{OpenAiFunction, OpenAiTool};
use crate::releases::model::Parameters;
use crate::secrets::{KEY_BYTES, Key, Keyring, Secret};

/// A secret as a connection's opened key would be.
pub(super) fn secret(plain: &str) -> Secret {
    let key = Key::from_bytes(&[7; KEY_BYTES]).expect("key");
    let ring = Keyring::new(key, vec![]);
    let sealed = ring.seal(plain, b"test").expect("seal");
    ring.open(&sealed, b"test").expect("open")
}

#[derive(Clone)]
enum Payload {
    Text(String),
    /// This many MiB of spaces, sent in 1 MiB chunks without a length.
    Streamed(usize),
}

#[derive(Clone)]
struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    payload: Payload,
    delay: Duration,
}

impl Reply {
    fn new(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", "application/json".into())],
            payload: Payload::Text(body.into()),
            delay: Duration::ZERO,
        }
    }

    fn json(status: u16, body: Value) -> Reply {
        Reply::new(status, &body.to_string())
    }

    fn header(mut self, name: &'static str, value: &str) -> Reply {
        self.headers.push((name, value.into()));
        self
    }
}

/// A normal answer: text, a finish reason, usage and a model.
fn hello() -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test-2025",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        }),
    )
}

/// What the server was sent.
struct Seen {
    path: String,
    authorization: Option<String>,
    body: Value,
}

struct Fault {
    replies: Vec<Reply>,
    seen: Mutex<Vec<Seen>>,
}

struct Server {
    base_url: String,
    port: u16,
    fault: Arc<Fault>,
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let fault = Arc::new(Fault {
            replies,
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(answer).with_state(fault.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Server {
            base_url: format!("http://127.0.0.1:{port}/v1"),
            port,
            fault,
        }
    }

    fn hits(&self) -> usize {
        self.fault.seen.lock().expect("seen").len()
    }

    fn sent(&self, hit: usize) -> (String, Option<String>, Value) {
        let seen = self.fault.seen.lock().expect("seen");
        let s = &seen[hit];
        (s.path.clone(), s.authorization.clone(), s.body.clone())
    }

    fn endpoint(&self) -> Endpoint<'_> {
        Endpoint {
            base_url: &self.base_url,
            api_key: None,
            timeout: Duration::from_secs(5),
            structured: Structured::JsonSchema,
        }
    }

    /// Fails unless `error`'s words leave out where the server is.
    fn assert_no_address(&self, error: &ChatError) {
        let words = error.to_string();
        assert!(
            !words.contains("127.0.0.1") && !words.contains(&self.port.to_string()),
            "{words}"
        );
    }
}

async fn answer(
    State(fault): State<Arc<Fault>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let hit = {
        let mut seen = fault.seen.lock().expect("seen");
        seen.push(Seen {
            path: uri.to_string(),
            authorization: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
        seen.len() - 1
    };
    let reply = fault.replies[hit.min(fault.replies.len() - 1)].clone();
    tokio::time::sleep(reply.delay).await;
    let body = match reply.payload {
        Payload::Text(text) => Body::from(text),
        Payload::Streamed(mib) => Body::from_stream(futures_util::stream::iter(
            (0..mib).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1024 * 1024])),
        )),
    };
    let mut response = (StatusCode::from_u16(reply.status).expect("status"), body).into_response();
    for (name, value) in reply.headers {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_str(&value).expect("header"));
    }
    response
}

/// The client allowed to reach 127.0.0.1.
fn outbound() -> Outbound {
    Outbound::new(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)], None).expect("client")
}

fn ask() -> Ask {
    Ask {
        model: "gpt-test".into(),
        messages: vec![
            ChatMessage {
                role: Role::System,
                content: "Be brief.".into(),
            },
            ChatMessage {
                role: Role::User,
                content: "Hi".into(),
            },
        ],
        ..Ask::default()
    }
}

/// Retries without spending real seconds on backoff.
fn quick(attempts: u32) -> Retry {
    Retry {
        attempts,
        max_wait: Duration::from_secs(30),
        first_wait: Duration::from_millis(1),
    }
}

#[tokio::test]
async fn a_normal_answer_is_read_with_its_usage_and_model() {
    let server = Server::start(vec![hello()]).await;

    let answer = complete(&outbound(), &server.endpoint(), &ask())
        .await
        .expect("answer");

    assert_eq!(answer.content, "Hello.");
    assert_eq!(answer.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        answer.usage,
        Usage {
            prompt_tokens: 12,
            completion_tokens: 3
        }
    );
    assert_eq!(answer.model.as_deref(), Some("gpt-test-2025"));
    assert!(answer.tool_calls.is_empty());
    assert_eq!(answer.attempts, 1);
    assert_eq!(server.sent(0).0, "/v1/chat/completions");
}

#[tokio::test]
async fn tool_calls_come_back_with_their_names_and_argument_text() {
    let server = Server::start(vec![Reply::json(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_order", "arguments": "{\"id\":\"A1\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "refund", "arguments": "{not json"}}
        ]}, "finish_reason": "tool_calls"}]}),
    )])
    .await;

    let answer = complete(&outbound(), &server.endpoint(), &ask())
        .await
        .expect("answer");

    assert_eq!(
        answer.tool_calls,
        [
            ToolCall {
                name: "get_order".into(),
                arguments: r#"{"id":"A1"}"#.into()
            },
            ToolCall {
                name: "refund".into(),
                arguments: "{not json".into()
            },
        ]
    );
    assert_eq!(answer.content, "");
    assert_eq!(answer.usage, Usage::default());
    assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
}

fn ask_with_everything() -> Ask {
    let tool = OpenAiTool {
        kind: "function",
        function: OpenAiFunction {
            name: "get_order".into(),
            description: "Reads an order.".into(),
            parameters: json!({"type": "object", "properties": {}, "additionalProperties": false, "required": []}),
            strict: true,
        },
    };
    Ask {
        tools: vec![tool],
        tool_choice: Some(json!("auto")),
        parameters: Parameters {
            temperature: Some(0.2),
            max_tokens: Some(100),
            top_p: None,
            provider_options: [("seed".to_owned(), json!(42))].into_iter().collect(),
        },
        response_schema: Some(json!({"type": "object"})),
        ..ask()
    }
}

#[tokio::test]
async fn the_request_carries_the_model_messages_tools_and_parameters() {
    let server = Server::start(vec![hello()]).await;

    complete(&outbound(), &server.endpoint(), &ask_with_everything())
        .await
        .expect("answer");

    let (_, _, body) = server.sent(0);
    assert_eq!(
        body,
        json!({
            "model": "gpt-test",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
            "tools": [{"type": "function", "function": {"name": "get_order", "description": "Reads an order.",
                "parameters": {"type": "object", "properties": {}, "additionalProperties": false, "required": []},
                "strict": true}}],
            "tool_choice": "auto",
            "temperature": 0.2,
            "max_tokens": 100,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": true}},
            "stream": false,
            "seed": 42
        })
    );
}

#[tokio::test]
async fn json_object_schema_mode_sends_llama_cpps_response_format_and_keeps_the_query() {
    let server = Server::start(vec![hello()]).await;
    let base_url = format!("{}/?api-version=1", server.base_url);
    let endpoint = Endpoint {
        base_url: &base_url,
        structured: Structured::JsonObjectSchema,
        ..server.endpoint()
    };

    complete(&outbound(), &endpoint, &ask_with_everything())
        .await
        .expect("answer");

    let (path, _, body) = server.sent(0);
    assert_eq!(path, "/v1/chat/completions?api-version=1");
    assert_eq!(
        body["response_format"],
        json!({"type": "json_object", "schema": {"type": "object"}})
    );
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_for_then_answered() {
    let server = Server::start(vec![
        Reply::json(429, json!({"error": {"message": "slow down"}})).header("retry-after", "2"),
        hello(),
    ])
    .await;
    let (outbound, endpoint, ask) = (outbound(), server.endpoint(), ask());
    let mut waits = Vec::new();

    let answer = retry::retrying(
        Retry::default(),
        || complete(&outbound, &endpoint, &ask),
        |d| {
            waits.push(d);
            ready(())
        },
    )
    .await
    .expect("answer");

    assert_eq!(waits, [Duration::from_secs(2)]);
    assert_eq!(answer.attempts, 2);
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_429_asking_for_longer_than_allowed_fails_at_once() {
    let server = Server::start(vec![
        Reply::json(429, json!({"error": {"message": "quota"}})).header("retry-after", "3600"),
        hello(),
    ])
    .await;

    let error = complete_with_retries(&outbound(), &server.endpoint(), &ask(), quick(3))
        .await
        .expect_err("gave up");

    assert!(error.is_retryable());
    assert_eq!(
        error.to_string(),
        "the model server is rate limiting (HTTP 429): quota; it asked to wait 3600 s, longer than the 30 s allowed"
    );
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_500_then_an_answer_takes_two_attempts() {
    let server = Server::start(vec![Reply::new(500, "<html>oops</html>"), hello()]).await;

    let answer = complete_with_retries(&outbound(), &server.endpoint(), &ask(), quick(3))
        .await
        .expect("answer");

    assert_eq!(answer.attempts, 2);
    assert_eq!(answer.content, "Hello.");
}

#[tokio::test]
async fn a_server_slower_than_the_timeout_is_retried_then_given_up_on() {
    let mut slow = hello();
    slow.delay = Duration::from_secs(10);
    let server = Server::start(vec![slow]).await;
    let endpoint = Endpoint {
        timeout: Duration::from_millis(200),
        ..server.endpoint()
    };

    let error = complete_with_retries(&outbound(), &endpoint, &ask(), quick(2))
        .await
        .expect_err("too slow");

    assert_eq!(
        error,
        ChatError::Unavailable {
            message: "the model server did not answer within 200 ms (gave up after 2 attempts)"
                .into(),
            retry_after: None
        }
    );
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_400_is_refused_with_the_providers_message_and_not_retried() {
    let server = Server::start(vec![
        Reply::json(
            400,
            json!({"error": {"message": "The model `gpt-nope` does not exist", "type": "invalid_request_error"}}),
        ),
        hello(),
    ])
    .await;

    let error = complete_with_retries(&outbound(), &server.endpoint(), &ask(), quick(3))
        .await
        .expect_err("refused");

    assert_eq!(
        error,
        ChatError::Refused(
            "the model server refused the request (HTTP 400): The model `gpt-nope` does not exist"
                .into()
        )
    );
    assert_eq!(server.hits(), 1);
    server.assert_no_address(&error);
}

#[tokio::test]
async fn a_redirect_is_refused_without_saying_where_to() {
    let server = Server::start(vec![
        Reply::new(302, "").header("location", "http://elsewhere.example/v1/chat/completions"),
    ])
    .await;

    let error = complete(&outbound(), &server.endpoint(), &ask())
        .await
        .expect_err("refused");

    assert!(matches!(error, ChatError::Refused(_)), "{error:?}");
    let words = error.to_string();
    assert!(words.contains("HTTP 302"), "{words}");
    assert!(!words.contains("elsewhere"), "{words}");
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn bodies_that_are_not_chat_completions_are_malformed_and_not_retried() {
    let cases = [
        ("not JSON", "Hello."),
        ("no choices", "{}"),
        ("no choices", r#"{"choices": []}"#),
        (
            "arguments",
            r#"{"choices": [{"message": {"tool_calls": [{"function": {"name": "f", "arguments": 7}}]}}]}"#,
        ),
        ("wrong type", r#"{"choices": "many"}"#),
    ];
    for (why, body) in cases {
        let server = Server::start(vec![Reply::new(200, body), hello()]).await;

        let error = complete_with_retries(&outbound(), &server.endpoint(), &ask(), quick(3))
            .await
            .expect_err(why);

        assert!(matches!(error, ChatError::Malformed(_)), "{why}: {error:?}");
        assert_eq!(server.hits(), 1, "{why}");
        assert!(!error.to_string().contains("Hello"), "{why}: {error}");
    }
}

#[tokio::test]
async fn an_answer_over_the_cap_is_malformed_with_or_without_a_length() {
    let over = format!(r#"{{"pad": "{}"}}"#, " ".repeat(MAX_ANSWER_BYTES));
    let streamed = Reply {
        payload: Payload::Streamed(MAX_ANSWER_BYTES / (1024 * 1024) + 1),
        ..hello()
    };
    for reply in [Reply::new(200, &over), streamed] {
        let server = Server::start(vec![reply]).await;

        let error = complete(&outbound(), &server.endpoint(), &ask())
            .await
            .expect_err("too big");

        assert_eq!(
            error,
            ChatError::Malformed("the model server's answer is larger than 4 MiB".into())
        );
    }
}

#[tokio::test]
async fn a_loopback_server_not_allow_listed_is_refused_before_any_request() {
    let server = Server::start(vec![hello()]).await;
    let strict = Outbound::new(vec![], None).expect("client");

    let error = complete_with_retries(&strict, &server.endpoint(), &ask(), quick(3))
        .await
        .expect_err("refused");

    assert!(matches!(error, ChatError::Refused(_)), "{error:?}");
    assert!(error.to_string().contains("--connector-allow"), "{error}");
    server.assert_no_address(&error);
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn the_api_key_goes_in_the_authorization_header_and_in_no_error() {
    let key = secret("sk-test-0123456789");
    let server = Server::start(vec![
        Reply::json(
            401,
            json!({"error": {"message": "Incorrect API key provided: sk-test-0123456789"}}),
        ),
        Reply::json(503, json!({"error": "overloaded sk-test-0123456789"})),
    ])
    .await;
    let endpoint = Endpoint {
        api_key: Some(&key),
        ..server.endpoint()
    };

    let refused = complete(&outbound(), &endpoint, &ask())
        .await
        .expect_err("401");
    let unavailable = complete(&outbound(), &endpoint, &ask())
        .await
        .expect_err("503");

    assert_eq!(
        server.sent(0).1.as_deref(),
        Some("Bearer sk-test-0123456789")
    );
    for error in [&refused, &unavailable] {
        let words = error.to_string();
        assert!(!words.contains("sk-test"), "{words}");
        assert!(!format!("{error:?}").contains("sk-test"), "{error:?}");
    }
    assert_eq!(
        refused.to_string(),
        "the model server refused the request (HTTP 401): Incorrect API key provided: [redacted]"
    );
    assert!(unavailable.is_retryable());
}
