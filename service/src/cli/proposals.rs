//! `loadout proposals orphans`: the ledger's stuck rows, changing nothing.

use crate::vocab::{Clock, SystemClock};
use sea_orm::DatabaseConnection;

#[derive(Debug, clap::Subcommand)]
pub enum ProposalsCommand {
    /// List orphans: `executing` past their lease, `approved` but never claimed. Changes nothing.
    Orphans {
        /// Judge both states by their last change against this many seconds instead
        /// of the executing calls' own leases (and 300 s for approved ones).
        #[arg(long)]
        lease_seconds: Option<i64>,
    },
}

pub async fn run(db: &DatabaseConnection, command: ProposalsCommand) -> anyhow::Result<()> {
    let ProposalsCommand::Orphans { lease_seconds } = command;
    let override_lease = match lease_seconds {
        None => None,
        Some(seconds) => Some(
            chrono::TimeDelta::try_seconds(seconds)
                .filter(|l| *l > chrono::TimeDelta::zero())
                .ok_or_else(|| {
                    anyhow::anyhow!("--lease-seconds must be a positive number of seconds")
                })?,
        ),
    };
    let (now, lease) = (
        SystemClock.now(),
        chrono::TimeDelta::seconds(i64::from(crate::actions::DEFAULT_PROPOSAL_LEASE_SECONDS)),
    );
    let found = crate::actions::ledger::orphans(db, now, lease, override_lease).await?;
    if found.is_empty() {
        eprintln!("no orphaned proposals");
    }
    for p in found {
        let updated = p.updated_at.to_rfc3339();
        println!(
            "{}\t{}\t{}\t{}\tattempt {}\t{updated}",
            p.id, p.tenant_id, p.state, p.tool_name, p.attempts
        );
    }
    Ok(())
}
