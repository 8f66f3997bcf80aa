//! The HTTP `api` connector: sends an approved call's arguments as JSON to the
//! connector's URL, once per attempt, with an `Idempotency-Key` header.
//!
//! Outbound URLs are checked before every call: `http` only (no TLS stack is built
//! in yet), and every address the host resolves to must be public unless it is on
//! the allow-list (`--connector-allow`; the tests allow 127.0.0.1). The request goes
//! to the checked address itself (the Host header carries the name), so DNS cannot
//! change between the check and the call. Redirects are never followed (hyper does
//! not). Results are sanitised: no response bodies of failures, no URLs, no headers.

pub mod store;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use serde_json::Value;

use crate::actions::ledger::{Call, Outcome};

/// Largest response body read from a connector.
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Why an outbound URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UrlRefused(pub String);

/// Addresses no connector may reach unless allow-listed: loopback, private,
/// link-local (cloud metadata included), unspecified, multicast, broadcast.
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.octets()[0] == 0
                || (v4.octets()[0] == 100 && (64..128).contains(&v4.octets()[1]))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// A checked destination: the address to connect to, and the request's path and host.
#[derive(Clone, Debug)]
pub struct Target {
    pub address: SocketAddr,
    pub host: String,
    pub path_and_query: String,
}

/// Checks `url` and resolves it to one allowed address.
pub async fn check_url(url: &str, allow: &[IpAddr]) -> Result<Target, UrlRefused> {
    let uri: hyper::Uri = url
        .parse()
        .map_err(|_| UrlRefused("the URL is not valid".into()))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(UrlRefused(
                "https connectors are not supported yet (no TLS stack is built in)".into(),
            ));
        }
        _ => return Err(UrlRefused("the URL must start with http://".into())),
    }
    let host = uri
        .host()
        .ok_or_else(|| UrlRefused("the URL has no host".into()))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(80);
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|_| UrlRefused(format!("the host {host} does not resolve")))?
        .collect();
    let Some(first) = addresses.first().copied() else {
        return Err(UrlRefused(format!("the host {host} does not resolve")));
    };
    if let Some(bad) = addresses
        .iter()
        .find(|a| forbidden(a.ip()) && !allow.contains(&a.ip()))
    {
        return Err(UrlRefused(format!(
            "{host} resolves to {}, a loopback, private, link-local or metadata address; allow-list it to use it",
            bad.ip()
        )));
    }
    Ok(Target {
        address: first,
        host: uri.authority().map_or(host, |a| a.to_string()),
        path_and_query: uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.to_string()),
    })
}

/// A connector as the executor needs it.
#[derive(Clone, Debug)]
pub struct Connector {
    pub name: String,
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
}

/// Whether a connector may not set this header (case-insensitive).
pub fn reserved(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    RESERVED_HEADERS.contains(&name.as_str()) || name.starts_with(CONTEXT_PREFIX)
}

fn failure(error: &str, retryable: bool) -> Outcome {
    Outcome::failure(error, retryable)
}

/// A success whose answer was not JSON: its status only.
#[derive(serde::Serialize)]
struct StatusOnly {
    status: u16,
}

/// Headers a connector may not set: loadout sets them, or they frame the request.
pub const RESERVED_HEADERS: [&str; 8] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "idempotency-key",
    "content-type",
];

/// The prefix of the context headers loadout sends; a connector may not set them.
pub const CONTEXT_PREFIX: &str = "loadout-";

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
/// retryable.
pub async fn call(connector: &Connector, allow: &[IpAddr], call: &Call) -> Outcome {
    let target = match check_url(&connector.url, allow).await {
        Ok(target) => target,
        Err(e) => return failure(&format!("the connector's URL is refused: {e}"), false),
    };
    let uri = format!("http://{}{}", target.address, target.path_and_query);
    let mut request = hyper::Request::builder()
        .method(connector.method.as_str())
        .uri(uri)
        .header(hyper::header::HOST, target.host.as_str())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header("idempotency-key", call.idempotency_key.as_str());
    for (name, value) in context(call) {
        request = request.header(name, value);
    }
    // Saved connectors cannot hold reserved or context headers; skip any a drifted
    // row holds rather than send two Hosts or a forged key.
    for (name, value) in &connector.headers {
        if !reserved(name) {
            request = request.header(name.as_str(), value.as_str());
        }
    }
    let Ok(request) = request.body(Full::new(Bytes::from(call.arguments.to_string()))) else {
        return failure("the connector's method or headers are not valid", false);
    };
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let response = match tokio::time::timeout(connector.timeout, client.request(request)).await {
        Err(_) => return failure("the connector timed out", true),
        Ok(Err(_)) => return failure("the connector could not be reached", true),
        Ok(Ok(response)) => response,
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
    let body = match tokio::time::timeout(
        connector.timeout,
        Limited::new(response.into_body(), MAX_RESPONSE_BYTES).collect(),
    )
    .await
    {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) => return failure("the connector's answer could not be read", true),
        Err(_) => return failure("the connector timed out", true),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_metadata_addresses_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(forbidden(ip.parse().expect("ip")), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!forbidden(ip.parse().expect("ip")), "{ip}");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_before_any_request() {
        let refused =
            |url: &'static str| async move { check_url(url, &[]).await.expect_err(url).0 };
        assert!(
            refused("http://127.0.0.1:9/x")
                .await
                .contains("allow-list it")
        );
        assert!(
            refused("http://169.254.169.254/latest")
                .await
                .contains("metadata address")
        );
        assert!(refused("https://example.com/").await.contains("https"));
        assert!(refused("ftp://example.com/").await.contains("http://"));
        let allowed = check_url(
            "http://127.0.0.1:9/hook?x=1",
            &["127.0.0.1".parse().expect("ip")],
        )
        .await
        .expect("allow-listed");
        assert_eq!(allowed.path_and_query, "/hook?x=1");
        assert_eq!(allowed.host, "127.0.0.1:9");
    }
}
