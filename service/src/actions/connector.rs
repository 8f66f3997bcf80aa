//! Connectors as operators keep them: [`store`] creates, edits and binds them to
//! tools (header values sealed on save), [`sync`] brings an MCP server's tools into
//! the registry through the write guard, their schemas made strict by [`schema`].
//! What calls a connector (its kinds, the outbound client, the sealing) is
//! `crate::execute::connector`, below the registry.

pub mod schema;
pub mod store;
pub mod sync;
