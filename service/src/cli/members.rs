//! `loadout members list|grant-signoff|revoke-signoff|merge`, directly on the
//! database (whoever holds it decides; recorded as by `database`).

use sea_orm::DatabaseConnection;

use crate::auth::keys::DEFAULT_TENANT;
use crate::auth::{members, signers};
use crate::vocab::{Clock, SystemClock};

#[derive(Debug, clap::Subcommand)]
pub enum MembersCommand {
    /// One tab-separated line per live member: name, kind, tenant, signer (`signer`
    /// or `-`), its live keys (comma-separated).
    List,
    /// Let a member sign off change requests (through its operator or approver keys).
    GrantSignoff {
        name: String,
        #[arg(long, default_value = DEFAULT_TENANT)]
        tenant: String,
        /// Why, kept in the history of grants.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Take sign-off power away from a member.
    RevokeSignoff {
        name: String,
        #[arg(long, default_value = DEFAULT_TENANT)]
        tenant: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Join member FROM into INTO (one person with two members): FROM's keys
    /// become INTO's and FROM is removed. INTO signs off if either did.
    Merge {
        into: String,
        from: String,
        #[arg(long, default_value = DEFAULT_TENANT)]
        tenant: String,
    },
}

pub async fn run(db: &DatabaseConnection, command: MembersCommand) -> anyhow::Result<()> {
    match command {
        MembersCommand::List => {
            let mut page = crate::db::page::ByNumber::default();
            loop {
                let listed = members::list(db, None, page)
                    .await
                    .map_err(|e| anyhow::anyhow!("{} ({})", e.message, e.code))?;
                for m in listed.members {
                    let signer = if m.signer { "signer" } else { "-" };
                    let keys = m.keys.join(",");
                    println!("{}\t{}\t{}\t{signer}\t{keys}", m.name, m.kind, m.tenant);
                }
                match listed.next_after {
                    Some(after) => page.cursor = Some(after),
                    None => break,
                }
            }
        }
        MembersCommand::GrantSignoff {
            name,
            tenant,
            reason,
        } => {
            signers::set_signer_on_database(
                db,
                &tenant,
                &name,
                true,
                reason.as_deref(),
                SystemClock.now(),
            )
            .await?;
            println!("{name:?} may sign off");
        }
        MembersCommand::RevokeSignoff {
            name,
            tenant,
            reason,
        } => {
            signers::set_signer_on_database(
                db,
                &tenant,
                &name,
                false,
                reason.as_deref(),
                SystemClock.now(),
            )
            .await?;
            println!("{name:?} no longer signs off");
        }
        MembersCommand::Merge { into, from, tenant } => {
            let moved = signers::merge(db, &tenant, &into, &from, SystemClock.now()).await?;
            println!("merged {from:?} into {into:?} ({moved} keys moved)");
        }
    }
    Ok(())
}
