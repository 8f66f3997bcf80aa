//! `loadout replay AGENT [--candidate N] [--base M] [--limit K] [--tenant T]`: a
//! tenant's recorded calls of each tool a candidate revision changes, checked
//! against it, from the database (as `GET /v1/agents/{agent}/replay` answers).

use std::fmt::Write as _;

use sea_orm::ConnectionTrait;

use crate::promotion::replay::{self, ReplayQuery, ReplayReport, Replayer};

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The agent's name.
    pub agent: String,
    /// The candidate revision; default: where `latest` points.
    #[arg(long)]
    pub candidate: Option<i32>,
    /// The revision compared against; default: where `production` points.
    #[arg(long)]
    pub base: Option<i32>,
    /// Recorded calls per tool, newest first: 1 to 1000.
    #[arg(long, default_value_t = replay::MAX_LIMIT)]
    pub limit: u64,
    /// Whose recorded calls.
    #[arg(long, default_value = crate::auth::members::DEFAULT_TENANT)]
    pub tenant: String,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the command prints.
pub async fn output(db: &impl ConnectionTrait, args: &ReplayArgs) -> anyhow::Result<String> {
    let query = ReplayQuery {
        candidate: args.candidate,
        base: args.base,
        limit: Some(args.limit),
    };
    let who = Replayer {
        tenant: &args.tenant,
        member: "cli",
    };
    let report = replay::run(db, who, &args.agent, query)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    Ok(match args.json {
        true => format!("{}\n", serde_json::to_string_pretty(&report)?),
        false => text(&report),
    })
}

fn text(report: &ReplayReport) -> String {
    let mut out = format!(
        "replay of {} revision {} against revision {}\n",
        report.agent, report.candidate, report.base
    );
    if report.tools.is_empty() {
        out.push_str("no tool changes\n");
    }
    for tool in &report.tools {
        if tool.recorded == 0 {
            let _ = writeln!(out, "{}: no recorded calls", tool.tool);
            continue;
        }
        let _ = writeln!(
            out,
            "of {} recorded calls to {}, {} would now be refused; {} decisions would change",
            tool.recorded, tool.tool, tool.refused, tool.decisions_changed
        );
        for r in &tool.refusals {
            let _ = writeln!(out, "  proposal {}: {} {}", r.proposal, r.code, r.message);
        }
        for c in &tool.changes {
            let _ = writeln!(
                out,
                "  proposal {}: {} -> {}",
                c.proposal,
                c.before.as_str(),
                c.after.as_str()
            );
        }
    }
    out
}
