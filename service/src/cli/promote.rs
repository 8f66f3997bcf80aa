//! `loadout promote AGENT LABEL REVISION` and `loadout rollback AGENT LABEL`,
//! directly on the database, through the same domain functions (and so the same
//! write guard and sign-off rules) as `PUT /v1/agents/{agent}/labels/{label}` and
//! its rollback. The author is `cli`: a protected label of a `gated` agent gets a
//! change request that someone else (any operator key, or an approver of the
//! default tenant) signs off, as from the API.

use anyhow::Context;
use sea_orm::DatabaseConnection;

use crate::actions::ProposalSettings;
use crate::auth::Principal;
use crate::cache::Generation;
use crate::db::Writer;
use crate::promotion::labels::{self, LabelMoved, LabelPut, Outcome, Rollback, Writing};
use crate::vocab::{Clock, SystemClock, Tier};

/// The author the command line's moves and requests record. Its key id is no
/// key's (ids start at 1), so every operator key may sign off its requests.
const CLI: &str = "cli";

#[derive(Debug, clap::Args)]
pub struct PromoteArgs {
    pub agent: String,
    /// The label to create or move (`production`, `staging`, ...; never `latest`).
    pub label: String,
    /// The revision's number it is to point at.
    pub revision: i32,
    /// Why, kept in the label's history (or the change request).
    #[arg(long)]
    pub reason: Option<String>,
    /// Require release checks to pass before a change request for the label is approved.
    #[arg(long)]
    pub require_checks: bool,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// How long a change request waits: `serve`'s `--proposal-ttl` for requires_approval.
    #[command(flatten)]
    pub proposals: ProposalSettings,
}

#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    pub agent: String,
    /// The label to move back to the revision it held just before.
    pub label: String,
    /// Why, kept in the label's history.
    #[arg(long)]
    pub reason: Option<String>,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ReleaseModeArgs {
    pub agent: String,
    /// `direct` (every save moves production) or `gated` (production moves by
    /// signed-off promotion). Only here can a gated agent go back to direct.
    pub mode: crate::releases::ReleaseMode,
}

/// `loadout release-mode AGENT MODE`: either way, recorded as by `cli`.
pub async fn release_mode(
    db: &DatabaseConnection,
    args: ReleaseModeArgs,
) -> anyhow::Result<String> {
    let generation = generation(db).await?;
    let writer = Writer {
        db,
        generation: &generation,
        now: SystemClock.now(),
        key: None,
    };
    let agent =
        crate::agents::definition::set_release_mode(&writer, CLI, &args.agent, args.mode).await?;
    Ok(format!(
        "{}: release mode {}\n",
        agent.name,
        agent.release_mode.as_str()
    ))
}

fn cli() -> Principal {
    Principal::database(CLI)
}

async fn generation(db: &DatabaseConnection) -> anyhow::Result<Generation> {
    let current = crate::db::generation::current(db)
        .await
        .context("cannot read the configuration generation")?;
    Ok(Generation::new(current))
}

/// What `promote` prints: the label as moved, or the change request it waits on.
pub async fn promote(db: &DatabaseConnection, args: PromoteArgs) -> anyhow::Result<String> {
    let generation = generation(db).await?;
    let writing = Writing {
        db,
        generation: &generation,
        request_ttl: args.proposals.ttl(Tier::RequiresApproval),
        now: SystemClock.now(),
        evals: &crate::evals::DEFAULTS,
    };
    let put = LabelPut {
        revision: args.revision,
        protected: None,
        require_checks: args.require_checks.then_some(true),
        require_evals: None,
        reason: args.reason,
    };
    let outcome = labels::put(&writing, &cli(), &args.agent, &args.label, put, None).await?;
    Ok(match (outcome, args.json) {
        (Outcome::Moved(moved), true) => json(&moved)?,
        (Outcome::Requested(request), true) => json(&request)?,
        (Outcome::Moved(moved), false) => moved_text(&moved),
        (Outcome::Requested(r), false) => format!(
            "{}/{}: change request {} to move it from revision {} to {} waits for a sign-off \
             (another operator, or an approver of the default tenant) until {}\n",
            r.agent,
            r.label,
            r.id,
            r.from_revision,
            r.to_revision,
            r.expires_at.to_rfc3339()
        ),
    })
}

/// What `rollback` prints: the label as moved back.
pub async fn rollback(db: &DatabaseConnection, args: RollbackArgs) -> anyhow::Result<String> {
    let generation = generation(db).await?;
    let writing = Writing {
        db,
        generation: &generation,
        // A rollback never makes a change request.
        request_ttl: chrono::TimeDelta::zero(),
        now: SystemClock.now(),
        evals: &crate::evals::DEFAULTS,
    };
    let body = Rollback {
        reason: args.reason,
    };
    let moved = labels::rollback(&writing, &cli(), &args.agent, &args.label, body, None).await?;
    match args.json {
        true => json(&moved),
        false => Ok(moved_text(&moved)),
    }
}

fn json(value: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

fn moved_text(moved: &LabelMoved) -> String {
    let (agent, label, to) = (&moved.agent, &moved.label, moved.revision);
    match (&moved.kind, moved.from_revision) {
        (None, _) => format!("{agent}/{label} already points at revision {to}\n"),
        (Some(kind), Some(from)) => format!("{agent}/{label}: revision {from} → {to} ({kind})\n"),
        (Some(kind), None) => format!("{agent}/{label}: created at revision {to} ({kind})\n"),
    }
}
