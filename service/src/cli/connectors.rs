//! `loadout connectors sync NAME`: the same sync as `POST /v1/connectors/{name}/sync`,
//! run from the command line against the database, printing the report as JSON.
//! `loadout connectors changes`, `accept ID` and `reject ID`: the synced tools'
//! remote definitions held for an operator (`/v1/tool-changes`).

use anyhow::Context;
use sea_orm::DatabaseConnection;

use std::fmt::Write as _;

use crate::auth::Principal;
use crate::connectors::pins::{self, ToolChangeList};
use crate::connectors::review;
use crate::connectors::sync::{self, SyncRequest};
use crate::db::Writer;
use crate::vocab::{Clock, SystemClock};

#[derive(Debug, clap::Subcommand)]
pub enum ConnectorsCommand {
    /// Read an MCP connector's tools/list and bring its tools into the registry.
    Sync {
        /// The connector's name.
        name: String,
        /// Print what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Replace admins' edits of synced descriptions and tiers with the server's.
        #[arg(long)]
        overwrite: bool,
        /// Also link the synced tools to this agent (a link switched off stays off).
        #[arg(long)]
        agent: Option<String>,
        /// Map a remote name the verb mapping cannot place: REMOTE=LOADOUT_NAME (repeatable).
        #[arg(long = "rename", value_parser = parse_rename)]
        renames: Vec<(String, String)>,
        /// Take this remote tool as it is when strict mode cannot express its schema
        /// (exported with strict: false; `loadout check` warns). Repeatable.
        #[arg(long = "allow-loose")]
        allow_loose: Vec<String>,
        /// Where the server may be and how much of it to read (as `serve` takes them).
        #[command(flatten)]
        connectors: crate::app::settings::Connectors,
        /// The key the connector's header values are sealed with.
        #[command(flatten)]
        secrets: crate::cli::secrets::SecretsArgs,
    },
    /// List the new or changed remote tools held for an operator (pending ones
    /// unless --state says otherwise), with the served and proposed descriptions.
    Changes {
        /// `pending` (default), `accepted`, `rejected`, `superseded` or `all`.
        #[arg(long)]
        state: Option<String>,
        /// Only this connector's.
        #[arg(long)]
        connector: Option<String>,
        /// Print the API's JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Accept a held change: the tool serves it (a gated agent gets a revision to sign off).
    Accept {
        id: i32,
        /// Who accepts, as the change records it.
        #[arg(long, default_value = "cli")]
        by: String,
    },
    /// Reject a held change: the tool keeps its pinned definition.
    Reject {
        id: i32,
        /// Who rejects, as the change records it.
        #[arg(long, default_value = "cli")]
        by: String,
    },
}

fn parse_rename(text: &str) -> Result<(String, String), String> {
    let (remote, name) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not REMOTE=LOADOUT_NAME"))?;
    Ok((remote.to_owned(), name.to_owned()))
}

pub async fn run(
    db: &DatabaseConnection,
    database_url: &str,
    command: ConnectorsCommand,
) -> anyhow::Result<()> {
    let (name, dry_run, overwrite, agent, renames, allow_loose, connectors, secrets) = match command
    {
        ConnectorsCommand::Sync {
            name,
            dry_run,
            overwrite,
            agent,
            renames,
            allow_loose,
            connectors,
            secrets,
        } => (
            name,
            dry_run,
            overwrite,
            agent,
            renames,
            allow_loose,
            connectors,
            secrets,
        ),
        ConnectorsCommand::Changes {
            state,
            connector,
            json,
        } => {
            let filter = pins::ChangeFilter { state, connector };
            let list = pins::list(db, filter)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            match json {
                true => println!("{}", serde_json::to_string_pretty(&list)?),
                false => print!("{}", changes_text(&list)),
            }
            return Ok(());
        }
        ConnectorsCommand::Accept { id, by } => return decide(db, id, &by, true).await,
        ConnectorsCommand::Reject { id, by } => return decide(db, id, &by, false).await,
    };
    let (keyring, _) = secrets.keyring(database_url, false)?;
    let outbound = connectors.outbound()?;
    let generation = crate::db::generation::current(db)
        .await
        .context("cannot read the configuration generation")?;
    let generation = std::sync::Arc::new(crate::cache::Generation::new(generation));
    let remote = sync::Remote {
        outbound: &outbound,
        secrets: &keyring,
        limits: connectors.list_limits(),
    };
    let request = SyncRequest {
        dry_run,
        overwrite,
        rename: renames.into_iter().collect(),
        allow_loose: allow_loose.into_iter().collect(),
        agent,
    };
    let writer = Writer {
        db,
        generation: &generation,
        now: SystemClock.now(),
        key: None,
    };
    let report = sync::run(&writer, &remote, &name, request)
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// Accepts or rejects a held change as `by`, printing the change as JSON.
async fn decide(db: &DatabaseConnection, id: i32, by: &str, accept: bool) -> anyhow::Result<()> {
    let generation = crate::db::generation::current(db)
        .await
        .context("cannot read the configuration generation")?;
    let generation = std::sync::Arc::new(crate::cache::Generation::new(generation));
    let writer = Writer {
        db,
        generation: &generation,
        now: SystemClock.now(),
        key: None,
    };
    let who = Principal::database(by);
    let decided = match accept {
        true => review::accept(&writer, &who, id).await,
        false => review::reject(&writer, &who, id).await,
    }
    .map_err(|e| anyhow::anyhow!("{}", e.message))?;
    println!("{}", serde_json::to_string_pretty(&decided)?);
    Ok(())
}

/// The held changes for people: one block per change, with the description diff.
fn changes_text(list: &ToolChangeList) -> String {
    let mut out = String::new();
    if list.changes.is_empty() {
        out.push_str("no held changes\n");
    }
    for c in &list.changes {
        let _ = writeln!(
            out,
            "change {} ({}, {}): tool {} of connector {}",
            c.id,
            c.kind.as_str(),
            c.state.as_str(),
            c.tool,
            c.connector
        );
        for hunk in &c.description_diff.hunks {
            for line in &hunk.lines {
                let _ = writeln!(out, "  {}{}", line.kind.sign(), line.text);
            }
        }
        for change in &c.contract {
            let _ = writeln!(
                out,
                "  {} {} {}: {}",
                change.compat.as_str(),
                change.kind.as_str(),
                change.path,
                change.detail
            );
        }
    }
    out
}
