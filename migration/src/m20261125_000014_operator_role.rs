//! The `operator` role (issue 23, item 1). Configuration (agents, souls, templates,
//! tools and tiers, links, channels, connectors) is shared by every tenant, and any
//! admin key could change it, whatever its tenant. From now on only an operator
//! writes it; an `admin` manages its own tenant.
//!
//! `up` makes every admin key of the default tenant (`tenant_id` NULL or
//! `default`) an operator, so nobody who configured the instance before is locked
//! out: those keys were, in effect, the instance's operators. Admin keys of other
//! tenants stay admins and lose configuration writes (the README's upgrade notes
//! say so). Operator keys belong to no tenant, so the migrated rows lose a
//! `default` they may have carried.
//!
//! `down` makes every operator an admin of the default tenant again, which is what
//! each of them could do before `up`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261125_000014_operator_role"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared(
                "UPDATE api_keys SET role = 'operator', tenant_id = NULL \
                 WHERE role = 'admin' AND (tenant_id IS NULL OR tenant_id = 'default')",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("UPDATE api_keys SET role = 'admin' WHERE role = 'operator'")
            .await?;
        Ok(())
    }
}
