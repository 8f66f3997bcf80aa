//! Connectors, in one room: what a tool's call is sent to and how.
//!
//! - [`client`] carries out a call: the kinds (`http`, `mcp`), the one outbound
//!   client with its address check, header values sealed at rest, what a call is
//!   given and answers ([`client::Call`], [`client::Outcome`]). It sits low (layer 3,
//!   beside `execute`), since the registry asks what is runnable and single sign-on
//!   uses the outbound client.
//! - [`store`] keeps them as operators edit them (create, edit, bind to tools,
//!   header values sealed on save); [`sync`] brings an MCP server's tools into the
//!   registry through the write guard, with their schemas made strict by [`schema`].
//!   These sit above the registry (layer 8). [`pins`] holds a server's new or
//!   changed tools for an operator when the connector is not `trusted`;
//!   [`review`] is the operator's accept or reject.

pub mod client;
pub mod pins;
pub mod review;
pub mod schema;
pub mod store;
pub mod sync;
