//! The `http` connector: sends an approved call's arguments as JSON to the
//! connector's URL (`https://`, or `http://`), once per attempt, with an
//! `Idempotency-Key` header, through the one pooled client of [`super::outbound`].
//! Results are sanitised: no response bodies of failures, no URLs, no headers.

use serde_json::Value;

use super::call::{Call, Outcome};
use super::outbound::{self, Outbound};
use super::target::{Connector, MAX_RESPONSE_BYTES, reserved};
use crate::secrets::Secret;

fn failure(error: &str, retryable: bool) -> Outcome {
    Outcome::failure(error, retryable)
}

/// A success whose answer was not JSON: its status only.
#[derive(serde::Serialize)]
struct StatusOnly {
    status: u16,
}

/// A context value as a header value: printable ASCII stays, every other byte (and
/// `%`) is percent-encoded, so any user or conversation id can travel.
fn header_text(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The context headers of a call: which tool, for which agent, tenant, user and
/// conversation, and which proposal and attempt.
fn context(call: &Call) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("loadout-tool", header_text(&call.tool)),
        ("loadout-agent", header_text(&call.agent)),
        ("loadout-tenant", header_text(&call.tenant)),
        (
            "loadout-conversation-id",
            header_text(&call.conversation_id),
        ),
        ("loadout-proposal-id", call.proposal_id.to_string()),
        ("loadout-attempt", call.attempt.to_string()),
    ];
    if let Some(user) = &call.user_id {
        headers.push(("loadout-user-id", header_text(user)));
    }
    headers
}

/// Sends one attempt: the arguments as the JSON body, the context as `Loadout-*`
/// headers, `Idempotency-Key: {proposal}:{attempt}`. 2xx → success with the JSON
/// body (or `{"status"}`); 4xx → not retryable; 5xx, timeouts and connection errors →
/// retryable; a refused address → not retryable. `headers` are the connector's,
/// opened for this attempt.
pub async fn call(
    connector: &Connector,
    headers: &[(String, Secret)],
    outbound: &Outbound,
    call: &Call,
) -> Outcome {
    let url = match outbound.check_url(&connector.url).await {
        Ok(url) => url,
        Err(e) => return failure(&format!("the connector's URL is refused: {e}"), false),
    };
    let Ok(method) = reqwest::Method::from_bytes(connector.method.as_bytes()) else {
        return failure("the connector's method is not valid", false);
    };
    let mut request = outbound
        .client()
        .request(method, url)
        .timeout(connector.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("idempotency-key", call.idempotency_key.as_str());
    for (name, value) in context(call) {
        request = request.header(name, value);
    }
    // Saved connectors cannot hold reserved or context headers; skip any a drifted
    // row holds rather than send two Hosts or a forged key.
    for (name, value) in headers {
        if reserved(name) {
            continue;
        }
        // Marked sensitive: kept out of the client's Debug output.
        let Ok(mut value) = reqwest::header::HeaderValue::from_str(value.expose()) else {
            return failure("the connector's method or headers are not valid", false);
        };
        value.set_sensitive(true);
        request = request.header(name.as_str(), value);
    }
    let response = match request.body(call.arguments.to_string()).send().await {
        Ok(response) => response,
        Err(e) => return sent_failure(&e),
    };
    let status = response.status();
    if status.is_server_error() {
        return failure(
            &format!("the connector failed (HTTP {})", status.as_u16()),
            true,
        );
    }
    if !status.is_success() {
        return failure(
            &format!("the connector refused the call (HTTP {})", status.as_u16()),
            false,
        );
    }
    let body = match read_body(response).await {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let status_only = || StatusOnly {
        status: status.as_u16(),
    };
    let result = serde_json::from_slice::<Value>(&body)
        .or_else(|_| serde_json::to_value(status_only()))
        .unwrap_or(Value::Null);
    Outcome {
        success: true,
        result,
    }
}

/// A request that got no answer, in words without URLs or addresses.
fn sent_failure(error: &reqwest::Error) -> Outcome {
    if let Some(refused) = outbound::refused_by_check(error) {
        return failure(&format!("the connector's URL is refused: {refused}"), false);
    }
    if error.is_builder() {
        return failure("the connector's method or headers are not valid", false);
    }
    if error.is_timeout() {
        return failure("the connector timed out", true);
    }
    failure("the connector could not be reached", true)
}

/// The answer's body, at most [`MAX_RESPONSE_BYTES`] (the request's timeout covers it).
async fn read_body(mut response: reqwest::Response) -> Result<Vec<u8>, Outcome> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(failure(
                        "the connector's answer is larger than 1 MiB",
                        false,
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) if e.is_timeout() => return Err(failure("the connector timed out", true)),
            Err(_) => return Err(failure("the connector's answer could not be read", true)),
        }
    }
}
