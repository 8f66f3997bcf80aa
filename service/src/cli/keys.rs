//! `loadout keys create|list|revoke`, directly on the database.

use sea_orm::DatabaseConnection;

use crate::auth::keys::{self, Role};
use crate::auth::signers;
use crate::vocab::{Clock, SystemClock};

#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key; it is printed once, alone on the last line of stdout.
    Create {
        #[arg(long, value_enum)]
        role: Role,
        /// A name unique in its tenant: 1 to 64 of a-z, 0-9, '-', '_', '.'.
        #[arg(long)]
        name: String,
        /// The tenant whose data (proposals, users' instructions, keys) the key works
        /// on; `default` if omitted. Operator keys have none.
        #[arg(long)]
        tenant: Option<String>,
        /// Scope an agent key to this agent: every other agent answers 404 to it.
        /// Without it an agent key reaches every agent.
        #[arg(long)]
        agent: Option<String>,
        /// Give the key to this existing member of its tenant (a second key of the
        /// same person); without it the key gets a member of its own, named as it.
        #[arg(long)]
        member: Option<String>,
        /// Grant the key's member sign-off power (as `members grant-signoff`).
        #[arg(long)]
        signer: bool,
    },
    /// One tab-separated line per key: name, role, prefix, tenant, created, revoked,
    /// agent scope (`*` for every agent; never the key).
    List,
    /// Revoke a key by name; requests with it get 401 from then on.
    Revoke {
        name: String,
        /// The key's tenant (names are unique per tenant); `default` if omitted.
        #[arg(long, default_value = keys::DEFAULT_TENANT)]
        tenant: String,
    },
}

pub async fn run(db: &DatabaseConnection, command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create {
            role,
            name,
            tenant,
            agent,
            member,
            signer,
        } => {
            let owner = match &member {
                Some(member) => keys::Owner::Member(member),
                None => keys::Owner::Own,
            };
            let (tenant, agent) = (tenant.as_deref(), agent.as_deref());
            let txn = crate::db::begin_write(db).await?;
            let made =
                keys::create_owned(&txn, &name, role, tenant, agent, owner, SystemClock.now())
                    .await;
            let key = match made {
                Ok(key) => key,
                Err(e) => {
                    // Ended here, not left for the pool to find open.
                    txn.rollback().await.ok();
                    return Err(e.into());
                }
            };
            txn.commit().await?;
            if signer {
                let member = member.as_deref().unwrap_or(&name);
                let tenant = tenant.unwrap_or(keys::DEFAULT_TENANT);
                let reason = format!("keys create --signer ({name})");
                signers::set_signer_on_database(
                    db,
                    tenant,
                    member,
                    true,
                    Some(&reason),
                    SystemClock.now(),
                )
                .await?;
            }
            println!("created {role} key {name:?}; it is shown once, store it now:");
            println!("{key}");
        }
        KeysCommand::List => {
            for k in keys::list(db).await? {
                let revoked = k
                    .revoked_at
                    .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339());
                let created = k.created_at.to_rfc3339();
                let scope = k.agent.as_deref().unwrap_or("*");
                println!(
                    "{}\t{}\tlo_{}\t{}\t{created}\t{revoked}\t{scope}",
                    k.name, k.role, k.prefix, k.tenant
                );
            }
        }
        KeysCommand::Revoke { name, tenant } => {
            let txn = crate::db::begin_write(db).await?;
            keys::revoke(&txn, &tenant, &name, SystemClock.now()).await?;
            crate::db::generation::bump(&txn).await?;
            txn.commit().await?;
            println!("revoked key {name:?}");
        }
    }
    Ok(())
}
