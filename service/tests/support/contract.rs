//! The API's contract, checked on every response the integration suite receives:
//! the status must be documented for the operation in `/openapi.json`, and the
//! body must validate (with a real JSON Schema validator, over the document's
//! components) against the schema documented for that status.

use std::sync::LazyLock;

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

/// The OpenAPI document as JSON, built once per test process.
static DOC: LazyLock<Value> = LazyLock::new(|| {
    serde_json::to_value(loadout::http::openapi()).expect("the OpenAPI document serialises")
});

/// The documented path template that `path` (without its query) matches, preferring
/// the template with the most literal segments.
pub fn template_for(path: &str) -> Option<&'static str> {
    let path = path.split('?').next().unwrap_or(path);
    let segments: Vec<&str> = path.split('/').collect();
    let paths = DOC["paths"].as_object()?;
    paths
        .keys()
        .filter(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            parts.len() == segments.len()
                && parts.iter().zip(&segments).all(|(t, s)| {
                    (t.starts_with('{') && t.ends_with('}') && !s.is_empty()) || t == s
                })
        })
        .max_by_key(|template| template.split('/').filter(|p| !p.starts_with('{')).count())
        .map(String::as_str)
}

/// The schema documented for `(method, path, status)`, or why there is none.
/// `Ok(None)` means the status is documented with no body (304).
fn documented(method: &str, path: &str, status: u16) -> Result<Option<Value>, String> {
    let error_body = json!({"$ref": "#/components/schemas/ErrorBody"});
    let Some(template) = template_for(path) else {
        // The fallback: no such route.
        return match status {
            404 => Ok(Some(error_body)),
            _ => Err(format!(
                "{method} {path}: no documented route, and status {status} is not the 404 fallback"
            )),
        };
    };
    let Some(operation) = DOC["paths"][template].get(method.to_ascii_lowercase()) else {
        return match status {
            405 => Ok(Some(error_body)),
            // The body limit and auth run before the method router only for known methods.
            _ => Err(format!(
                "{method} {template}: undocumented method answered {status}"
            )),
        };
    };
    let Some(response) = operation["responses"].get(status.to_string()) else {
        return Err(format!(
            "{method} {template}: status {status} is not documented"
        ));
    };
    match response.get("content") {
        None => Ok(None),
        Some(content) => match content.get("application/json") {
            Some(media) => Ok(Some(media["schema"].clone())),
            // Text bodies (/metrics) are not JSON; their presence is the contract.
            None => Ok(Some(json!({"type": "string"}))),
        },
    }
}

/// Checks one response against the contract; the error says what broke it.
pub fn check(method: &str, path: &str, status: u16, body: &[u8]) -> Result<(), String> {
    let Some(mut schema) = documented(method, path, status)? else {
        return match body.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "{method} {path} {status}: documented without a body, got one"
            )),
        };
    };
    let instance: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(_) if schema == json!({"type": "string"}) => return Ok(()),
        Err(e) => {
            return Err(format!(
                "{method} {path} {status}: the body is not JSON ({e})"
            ));
        }
    };
    if let Some(object) = schema.as_object_mut() {
        object.insert("components".into(), DOC["components"].clone());
    }
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        format!("{method} {path} {status}: the documented schema does not compile: {e}")
    })?;
    let problems: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    match problems.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{method} {path} {status}: the body breaks its documented schema:\n  {}\nbody: {instance}",
            problems.join("\n  ")
        )),
    }
}

/// The surfaces outside `/openapi.json` have contracts of their own: the console
/// answers HTML or a redirect, and the MCP endpoint JSON-RPC 2.0 messages (as JSON
/// or server-sent events) or, refusing before JSON-RPC, the API's error body.
fn check_outside(
    path: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Result<(), String>> {
    let route = path.split('?').next().unwrap_or(path);
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if route == "/console" || route.starts_with("/console/") {
        let fine = match status {
            300..=399 => headers.contains_key(header::LOCATION),
            _ => {
                body.is_empty()
                    || content_type.starts_with("text/html")
                    || content_type.starts_with("text/css")
                    || content_type.starts_with("text/javascript")
            }
        };
        return Some(match fine {
            true => Ok(()),
            false => Err(format!(
                "{path} {status}: a console answer is a page or a redirect, got {content_type:?}"
            )),
        });
    }
    if route == "/mcp" || route.starts_with("/mcp/") {
        return Some(check_mcp(path, status, content_type, body));
    }
    if route.starts_with("/api/public/") {
        return Some(check_langfuse(path, status, body));
    }
    if route.starts_with("/ofrep/") {
        return Some(check_ofrep(path, status, body));
    }
    None
}

/// OFREP's answers, as its providers read them: an evaluation (`key`, `reason`,
/// `variant`; `value` unless `DISABLED`), a bulk answer (`flags`, `eventStreams`),
/// an empty 304, an OFREP error (`errorCode`, `errorDetails`) or, for the key and
/// the method, the API's own error body.
fn check_ofrep(path: &str, status: u16, body: &[u8]) -> Result<(), String> {
    if status == 304 {
        return match body.is_empty() {
            true => Ok(()),
            false => Err(format!("{path} 304 with a body")),
        };
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("{path} {status}: not JSON ({e})"))?;
    let text = |v: &Value, field: &str| v.get(field).is_some_and(Value::is_string);
    let evaluation = |v: &Value| {
        text(v, "key")
            && text(v, "variant")
            && ["STATIC", "SPLIT", "DISABLED"].contains(&v["reason"].as_str().unwrap_or(""))
            && (v["reason"] == "DISABLED" || v.get("value").is_some_and(|v| !v.is_null()))
    };
    let failure = |v: &Value| text(v, "errorCode") && text(v, "errorDetails");
    let fine = match status {
        200 if value.get("flags").is_some() => {
            value["flags"].as_array().is_some_and(|flags| {
                flags
                    .iter()
                    .all(|f| evaluation(f) || (text(f, "key") && failure(f)))
            }) && value["eventStreams"]
                .as_array()
                .is_some_and(|s| !s.is_empty())
        }
        200 => evaluation(&value),
        401 | 403 | 405 | 429 => value["error"]["code"].is_string(),
        _ => failure(&value),
    };
    match fine {
        true => Ok(()),
        false => Err(format!("{path} {status}: not an OFREP answer: {value}")),
    }
}

/// Langfuse's prompt API: a `TextPrompt`, or Langfuse's error body `{message, error}`.
fn check_langfuse(path: &str, status: u16, body: &[u8]) -> Result<(), String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("{path} {status}: not JSON ({e})"))?;
    let mut keys: Vec<&str> = value
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    keys.sort_unstable();
    let fine = match status {
        200 => {
            value["type"] == "text"
                && value["name"].is_string()
                && value["version"].is_i64()
                && value["prompt"].is_string()
                && value["config"].is_object()
                && value["labels"].is_array()
                && value["tags"].is_array()
        }
        _ => {
            keys == ["error", "message"]
                && value["error"].is_string()
                && value["message"].is_string()
        }
    };
    match fine {
        true => Ok(()),
        false => Err(format!("{path} {status}: not Langfuse's shape: {value}")),
    }
}

fn check_mcp(path: &str, status: u16, content_type: &str, body: &[u8]) -> Result<(), String> {
    let rpc = |message: &Value| message.get("jsonrpc") == Some(&json!("2.0"));
    if body.is_empty() {
        return Ok(());
    }
    if content_type.starts_with("text/event-stream") {
        let text = String::from_utf8_lossy(body);
        for data in text.lines().filter_map(|l| l.strip_prefix("data:")) {
            let data = data.trim();
            if data.is_empty() {
                continue;
            }
            let message: Value = serde_json::from_str(data)
                .map_err(|e| format!("{path} {status}: an event is not JSON ({e}): {data}"))?;
            if !rpc(&message) {
                return Err(format!(
                    "{path} {status}: an event is not JSON-RPC 2.0: {data}"
                ));
            }
        }
        return Ok(());
    }
    let message: Value = serde_json::from_slice(body).map_err(|e| {
        format!(
            "{path} {status}: the body is not JSON ({e}): {}",
            String::from_utf8_lossy(body)
        )
    })?;
    if rpc(&message) {
        return Ok(());
    }
    // Refused before JSON-RPC (auth, limits, an unknown session): the API's shape.
    let mut schema = json!({"$ref": "#/components/schemas/ErrorBody"});
    if let Some(object) = schema.as_object_mut() {
        object.insert("components".into(), DOC["components"].clone());
    }
    let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
    match validator.is_valid(&message) {
        true => Ok(()),
        false => Err(format!(
            "{path} {status}: neither JSON-RPC 2.0 nor the error body: {message}"
        )),
    }
}

/// Checks any answer: the API's against `/openapi.json`, the console's and the
/// MCP endpoint's against theirs.
pub fn check_answer(
    method: &str,
    path: &str,
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), String> {
    match check_outside(path, status, headers, body) {
        Some(result) => result,
        None => check(method, path, status, body),
    }
}

/// [`check_answer`], panicking with its message: for the suite's request helpers.
pub fn assert_answer(method: &str, path: &str, status: u16, headers: &HeaderMap, body: &[u8]) {
    if let Err(problem) = check_answer(method, path, status, headers, body) {
        panic!("response breaks the API contract: {problem}");
    }
}
