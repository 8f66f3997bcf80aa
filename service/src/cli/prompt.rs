//! `loadout prompt render`: an agent's prompt for one channel, from the database.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sea_orm::DatabaseConnection;

use crate::auth::keys::DEFAULT_TENANT;
use crate::prompt::builder::{self, Clock, FixedClock, SystemClock};
use crate::prompt::load;

#[derive(Debug, clap::Subcommand)]
pub enum PromptCommand {
    /// Print an agent's rendered prompt for a channel.
    Render(RenderArgs),
}

#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Agent name.
    #[arg(long)]
    agent: String,
    /// Channel name (web, telegram, scheduled, heartbeat, session_open, or one an admin added).
    #[arg(long)]
    channel: String,
    /// User id whose instructions to include.
    #[arg(long)]
    user: Option<String>,
    /// The tenant the user belongs to (instructions are per tenant).
    #[arg(long, default_value = DEFAULT_TENANT)]
    tenant: String,
    /// The user's IANA time zone, e.g. Europe/Berlin.
    #[arg(long, default_value = "UTC", value_parser = parse_zone)]
    tz: Tz,
    /// Render as of this instant (RFC 3339) instead of now.
    #[arg(long, value_parser = parse_instant)]
    at: Option<DateTime<Utc>>,
    /// When the user last wrote (RFC 3339); drives the welcome-back section.
    #[arg(long, value_parser = parse_instant)]
    last_message_at: Option<DateTime<Utc>>,
    /// A memory note to include; repeat for several.
    #[arg(long = "memory-note")]
    memory_notes: Vec<String>,
    /// Print `{"text", "provenance"}` as JSON instead of the bare text.
    #[arg(long)]
    json: bool,
}

fn parse_zone(text: &str) -> Result<Tz, String> {
    text.parse()
        .map_err(|_| format!("unknown time zone {text:?}; use an IANA name such as Europe/Berlin"))
}

fn parse_instant(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 instant ({e}), e.g. 2026-11-21T09:30:00Z"))
}

pub async fn run(db: &DatabaseConnection, command: PromptCommand) -> anyhow::Result<ExitCode> {
    let PromptCommand::Render(args) = command;
    let (agent_id, agent) = load::agent(db, &args.agent)
        .await
        .context("cannot read the agent")?
        .ok_or_else(|| anyhow!("no agent named {:?}", args.agent))?;
    let channels = load::channels(db)
        .await
        .context("cannot read the channels")?;
    let channel = channels.get(&args.channel)?;
    let user_instructions = match &args.user {
        Some(user) => load::user_instructions(db, &args.tenant, agent_id, user)
            .await
            .context("cannot read the user's instructions")?,
        None => None,
    };
    let clock: &dyn Clock = match &args.at {
        Some(at) => &FixedClock(*at),
        None => &SystemClock,
    };
    let context = builder::Context {
        now: clock.now(),
        time_zone: args.tz,
        memory_notes: args.memory_notes,
        user_instructions,
        last_message_at: args.last_message_at,
    };
    let rendered = builder::build_agent_prompt(&agent, channel, &context)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &rendered)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(rendered.text.as_bytes())?;
    }
    out.flush().context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}
