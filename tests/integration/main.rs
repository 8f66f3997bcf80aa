//! Integration tests: one binary, so the workspace links once.

mod abuse;
mod api_contract;
mod calls;
mod canonicalization;
mod check;
mod connectors;
mod console;
mod disk_full;
mod hardening;
mod http;
mod https;
mod idempotency;
mod limits;
mod mcp_connectors;
mod mcp_server;
mod migrate;
mod operator;
mod outage;
mod prompt;
mod proposals;
mod races;
mod releases;
mod scoped_keys;
mod sealed_secrets;
mod seed;
mod template_parity;
