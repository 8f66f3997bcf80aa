//! `loadout proposals orphans`: the ledger's stuck rows, changing nothing.

use sea_orm::DatabaseConnection;

#[derive(Debug, clap::Subcommand)]
pub enum ProposalsCommand {
    /// List orphans: `executing` past their lease, `approved` but never claimed. Changes nothing.
    Orphans {
        /// How long an execution may hold its lease, in seconds.
        #[arg(long, default_value_t = 300)]
        lease_seconds: i64,
    },
}

pub async fn run(db: &DatabaseConnection, command: ProposalsCommand) -> anyhow::Result<()> {
    let ProposalsCommand::Orphans { lease_seconds } = command;
    let lease = chrono::TimeDelta::try_seconds(lease_seconds)
        .filter(|l| *l > chrono::TimeDelta::zero())
        .ok_or_else(|| anyhow::anyhow!("--lease-seconds must be a positive number of seconds"))?;
    let found = crate::actions::ledger::orphans(db, chrono::Utc::now(), lease).await?;
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
