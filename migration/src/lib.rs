//! loadout's schema history. Migrations that have landed are never edited:
//! a change is a new migration appended to [`Migrator::migrations`].

pub use sea_orm_migration::MigrationStatus;
pub use sea_orm_migration::prelude::*;

mod m20260224_000001_create_base_schema;
pub mod m20260224_000002_canonicalize_tool_registry;
pub mod m20260301_000003_channels_and_prompt_sections;
mod m20260310_000004_keys_versions_generation;
mod m20260320_000005_proposal_ledger;
mod m20260401_000006_connectors;
mod m20260410_000007_tenant_user_instructions;
pub mod m20260410_000008_link_delete_reminders;
mod m20261124_000009_console_sessions;
mod m20261124_000010_mcp_connectors;
mod m20261124_000011_agent_scoped_keys;
mod m20261125_000012_synced_tool_schemas;
mod m20261125_000013_idempotency_records;
mod m20261125_000014_operator_role;
mod m20261125_000015_key_names_per_tenant;
mod m20261125_000016_agent_revisions;
mod m20261125_000017_label_promotion;
mod m20261126_000018_rollouts;
mod m20261126_000019_outcomes;
mod m20261126_000020_webhooks;
mod m20261127_000021_members;
mod m20261127_000022_tenant_bounds;
mod m20261128_000023_policies;
mod m20261128_000024_tool_contracts;
mod m20261207_000025_guard_holds;
mod m20261207_000026_evaluations;

/// Every migration, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20260224_000001_create_base_schema::Migration),
            Box::new(m20260224_000002_canonicalize_tool_registry::Migration),
            Box::new(m20260301_000003_channels_and_prompt_sections::Migration),
            Box::new(m20260310_000004_keys_versions_generation::Migration),
            Box::new(m20260320_000005_proposal_ledger::Migration),
            Box::new(m20260401_000006_connectors::Migration),
            Box::new(m20260410_000007_tenant_user_instructions::Migration),
            Box::new(m20260410_000008_link_delete_reminders::Migration),
            Box::new(m20261124_000009_console_sessions::Migration),
            Box::new(m20261124_000010_mcp_connectors::Migration),
            Box::new(m20261124_000011_agent_scoped_keys::Migration),
            Box::new(m20261125_000012_synced_tool_schemas::Migration),
            Box::new(m20261125_000013_idempotency_records::Migration),
            Box::new(m20261125_000014_operator_role::Migration),
            Box::new(m20261125_000015_key_names_per_tenant::Migration),
            Box::new(m20261125_000016_agent_revisions::Migration),
            Box::new(m20261125_000017_label_promotion::Migration),
            Box::new(m20261126_000018_rollouts::Migration),
            Box::new(m20261126_000019_outcomes::Migration),
            Box::new(m20261126_000020_webhooks::Migration),
            Box::new(m20261127_000021_members::Migration),
            Box::new(m20261127_000022_tenant_bounds::Migration),
            Box::new(m20261128_000023_policies::Migration),
            Box::new(m20261128_000024_tool_contracts::Migration),
            Box::new(m20261207_000025_guard_holds::Migration),
            Box::new(m20261207_000026_evaluations::Migration),
        ]
    }
}
