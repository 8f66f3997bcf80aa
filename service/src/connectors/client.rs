//! Connectors: what carries out approved calls of `api` and `mcp` tools. An
//! `http` connector POSTs (or PUTs) the arguments to an HTTP API ([`http`]); an
//! `mcp` connector runs `tools/call` on an MCP server ([`mcp`]). Both go through
//! the one pooled client of [`outbound`], whose resolver (and a check of IP
//! literals before each call) lets connectors reach only globally routable
//! addresses, unless allow-listed (`--connector-allow`; the tests allow
//! 127.0.0.1). Redirects are never followed. Header values are sealed at rest and
//! opened per call ([`sealing`]); the nulls a strict schema made the model send
//! are dropped before an MCP call ([`nulls`]). Keeping connectors and bringing an
//! MCP server's tools into the registry is `connectors`'s.

pub mod address;
mod call;
pub mod http;
pub mod mcp;
pub mod nulls;
pub mod outbound;
pub mod sealing;
pub mod target;

pub use outbound::{Outbound, UrlRefused};

/// Whether two URLs reach the same place: scheme, host and port. A URL that does
/// not parse reaches nowhere known, so it is never the same. Header values given
/// for one place never go to another (a moved connector, a pinned one).
pub fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin() && a.origin().is_tuple(),
        _ => false,
    }
}

/// A connector as a revision pins it for one of its tools (issue 35): which
/// connector, and where and how calls go. Header values are not pinned (a
/// credential rotates without a release); they are sent only while the live
/// connector still has the pinned origin.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ConnectorPin {
    pub name: String,
    /// `http` or `mcp`.
    pub kind: String,
    pub url: String,
    pub method: String,
    pub timeout_ms: i32,
}
pub use target::{CONTEXT_PREFIX, Connector, Kind, RESERVED_HEADERS, reserved};

use crate::secrets::Keyring;
pub use call::{Call, Failure, Outcome};

/// Runs one attempt through the connector's protocol, its header values opened
/// with `keyring` for this attempt only.
pub async fn run(
    connector: &Connector,
    outbound: &Outbound,
    keyring: &Keyring,
    call: &Call,
) -> Outcome {
    let headers = match sealing::open(keyring, connector.id, &connector.headers) {
        Ok(headers) => headers,
        Err(e) => return Outcome::failure(format!("the connector's headers: {e}"), false),
    };
    match connector.kind {
        Kind::Http => http::call(connector, &headers, outbound, call).await,
        Kind::Mcp => mcp::call(connector, &headers, outbound, call).await,
    }
}

#[cfg(test)]
mod tests {
    use super::outbound::check_url;

    #[tokio::test]
    async fn urls_are_checked_before_any_request() {
        let refused =
            |url: &'static str| async move { check_url(url, &[]).await.expect_err(url).0 };
        for url in [
            "http://127.0.0.1:9/x",
            "http://169.254.169.254/latest",
            "http://[64:ff9b::a00:1]/",
            "http://[2002:a9fe:a9fe::]/",
            "http://[::7f00:1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[fec0::1]/",
            "http://198.18.0.1/",
            "http://240.0.0.1/",
            "http://192.0.0.1/",
            "https://10.0.0.1/",
        ] {
            let why = refused(url).await;
            assert!(why.contains("not publicly routable"), "{url}: {why}");
            assert!(
                !why.contains("10.0.0.1") && !why.contains("127."),
                "{url}: {why}"
            );
        }
        assert!(refused("ftp://example.com/").await.contains("https://"));
        assert!(
            refused("http://user:pw@127.0.0.1/")
                .await
                .contains("user or password")
        );
        let allowed = check_url(
            "http://127.0.0.1:9/hook?x=1",
            &["127.0.0.1".parse().expect("ip")],
        )
        .await
        .expect("allow-listed");
        assert_eq!(allowed.path(), "/hook");
    }
}
