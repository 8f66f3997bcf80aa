//! Integration tests: one binary, so the workspace links once.

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../support/mod.rs"]
mod support;

mod abuse;
mod api_contract;
mod at_size;
mod calls;
mod canonicalization;
mod changes;
mod check;
mod config_as_code;
mod connectors;
mod console;
mod contracts;
mod disk_full;
mod evals;
mod evals_model;
mod hardening;
mod http;
mod https;
mod idempotency;
mod langfuse;
mod limits;
mod mcp_connectors;
mod mcp_server;
mod members;
mod migrate;
mod ofrep;
mod operator;
mod outage;
mod outcomes;
mod pins;
mod policies;
mod policy_bounds;
mod promotion;
mod prompt;
mod proposals;
mod races;
mod releases;
mod revision_diff;
mod revisions_cli;
mod roles;
mod rollout_guard;
mod rollouts;
mod scoped_keys;
mod scripted_model;
mod sealed_secrets;
mod seed;
mod sso;
mod template_parity;
mod tenant_bounds;
mod webhooks;
