//! `loadout labels AGENT [--history LABEL] [--json]`: where an agent's labels point,
//! or every move of one label, read directly from the database.

use std::fmt::Write as _;

use sea_orm::ConnectionTrait;

use crate::releases::read;

#[derive(Debug, clap::Args)]
pub struct LabelsArgs {
    /// The agent's name.
    pub agent: String,
    /// Every move of this label, newest first, instead of the labels.
    #[arg(long, value_name = "LABEL")]
    pub history: Option<String>,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the command prints: one tab-separated line per label (name, revision,
/// moved at) or per move (at, kind, from → to, by, signed off by, why).
pub async fn output(db: &impl ConnectionTrait, args: &LabelsArgs) -> anyhow::Result<String> {
    let mut out = String::new();
    match &args.history {
        None => {
            let list = read::labels(db, &args.agent).await?;
            if args.json {
                return Ok(serde_json::to_string_pretty(&list)? + "\n");
            }
            for l in &list.labels {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}",
                    l.name,
                    l.revision,
                    l.updated_at.to_rfc3339()
                );
            }
        }
        Some(label) => {
            let history = read::history(db, &args.agent, label, newest_moves()).await?;
            if args.json {
                return Ok(serde_json::to_string_pretty(&history)? + "\n");
            }
            for m in &history.moves {
                let from = m
                    .from_revision
                    .map_or_else(|| "-".to_owned(), |n| n.to_string());
                let _ = writeln!(
                    out,
                    "{}\t{}\t{from} → {}\t{}\t{}\t{}",
                    m.created_at.to_rfc3339(),
                    m.kind,
                    m.to_revision,
                    m.actor.as_deref().unwrap_or("-"),
                    m.approver.as_deref().unwrap_or("-"),
                    m.reason.as_deref().unwrap_or("-"),
                );
            }
        }
    }
    Ok(out)
}

/// The CLI shows a label's newest moves, as many as one page holds.
fn newest_moves() -> crate::db::page::ByNumber {
    crate::db::page::ByNumber {
        limit: Some(crate::db::page::MAX),
        cursor: None,
    }
}
