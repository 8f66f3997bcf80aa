//! `connectors`: an HTTP API or MCP server that carries out `api` and `mcp` tool calls.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "connectors")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    #[sea_orm(unique)]
    pub name: String,
    /// `http` (an HTTP API; calls POST or PUT the arguments) or `mcp` (a Streamable
    /// HTTP MCP server; calls are `tools/call`).
    pub kind: String,
    pub url: String,
    /// `POST` or `PUT`.
    pub method: String,
    /// Header name → value. Secrets: never returned by the API, never logged.
    pub headers: Json,
    pub timeout_ms: i32,
    /// `true`: a sync applies the server's changes at once; `false`: a changed or
    /// new remote tool is held for an operator (migration 24).
    pub trusted: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
