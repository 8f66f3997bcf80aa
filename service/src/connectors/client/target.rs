//! What every kind of connector shares: the kinds, a connector as an executor
//! needs it, the headers a connector may not set, and the answer size limit.

use std::time::Duration;

/// Largest answer read from a connector.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

crate::closed_set! {
    /// The protocol a connector speaks.
    pub enum Kind as "connector kind" {
        /// An HTTP API: a call POSTs (or PUTs) the arguments as JSON.
        Http = "http",
        /// An MCP server over Streamable HTTP: a call is `tools/call`.
        Mcp = "mcp",
    }
}

impl Kind {
    /// The tool type whose calls this kind of connector carries.
    pub fn tool_type(self) -> crate::vocab::ToolType {
        match self {
            Kind::Http => crate::vocab::ToolType::Api,
            Kind::Mcp => crate::vocab::ToolType::Mcp,
        }
    }
}

/// A connector as the executor needs it, for one bound tool. Its header values
/// are as stored (sealed, or plain from before sealing): opened only for the
/// request that sends them ([`super::sealing::open`]); `Debug` shows their names.
#[derive(Clone)]
pub struct Connector {
    /// The connector's row id: sealed header values are bound to it.
    pub id: i32,
    pub name: String,
    pub kind: Kind,
    /// The bound tool's name at the server (`tools/call`); its own name by default.
    pub remote_tool: String,
    pub url: String,
    pub method: String,
    /// (name, value as stored).
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    /// A synced tool's schema as its server published it, when loadout normalized
    /// it: a call drops the nulls sent for the properties it left optional
    /// ([`super::nulls::drop_nulls`]). `None` for tools an admin made and tools
    /// accepted loose (their arguments are checked against the remote's own schema).
    pub remote_schema: Option<serde_json::Value>,
    /// The input schema an operator accepted for a synced tool of a connector that
    /// is not `trusted` (`connectors::pins`): the call runs only while the server's
    /// `tools/list` still gives it. `None`: the connector is trusted, or the tool
    /// is not synced.
    pub accepted_schema: Option<serde_json::Value>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Connector")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("remote_tool", &self.remote_tool)
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Whether a connector may not set this header (case-insensitive).
pub fn reserved(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    RESERVED_HEADERS.contains(&name.as_str()) || name.starts_with(CONTEXT_PREFIX)
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
