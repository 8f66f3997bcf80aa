//! The HTTP transport under the API, the MCP endpoint and the console: the
//! connection loop with its header-read and idle timeouts and connection limits
//! ([`server`]), each request body's deadline and minimum rate ([`deadline`]),
//! and the per-address counts ([`limits`]).

pub mod deadline;
pub mod limits;
pub mod server;
