//! `loadout rollout AGENT LABEL start|set|pause|resume|complete|abort|show`,
//! directly on the database, through the same domain functions (and so the same
//! write guard and sign-off rules) as the rollout routes. The author is `cli`: in
//! `gated` mode a protected label's start and completion open a change request
//! that any operator key (or an approver of the default tenant) signs off.

use anyhow::Context;
use sea_orm::DatabaseConnection;

use crate::actions::ProposalSettings;
use crate::auth::Principal;
use crate::cache::Generation;
use crate::promotion::labels::Writing;
use crate::promotion::rollouts::{self, Outcome, RolloutEnd, RolloutPatch, RolloutStart};
use crate::releases::traffic::{Guard, RolloutView};
use crate::vocab::{Clock, SystemClock, Tier};

#[derive(Debug, clap::Args)]
pub struct RolloutArgs {
    pub agent: String,
    /// The label (`production`, `staging`, ...; never `latest`).
    pub label: String,
    #[command(subcommand)]
    pub action: Action,
    /// Why, kept in the history (or the change request).
    #[arg(long, global = true)]
    pub reason: Option<String>,
    /// Print the API's JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// How long a change request waits: `serve`'s `--proposal-ttl` for requires_approval.
    #[command(flatten)]
    pub proposals: ProposalSettings,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Start a rollout of CANDIDATE (a revision number) for PERCENT of users.
    Start {
        candidate: i32,
        /// 0 to 100, in steps of 0.01.
        percent: f64,
        /// A guard: outcomes each side needs before it judges.
        #[arg(long, requires = "guard_alpha")]
        guard_min_outcomes: Option<i32>,
        /// A guard: its false-alarm rate.
        #[arg(long, requires = "guard_min_outcomes")]
        guard_alpha: Option<f64>,
    },
    /// Change the candidate's share.
    Set {
        /// 0 to 100, in steps of 0.01.
        percent: f64,
    },
    /// Serve the base to everyone, keeping the rollout.
    Pause,
    /// Bring the same users back to the candidate.
    Resume,
    /// Move the label to the candidate.
    Complete,
    /// Serve the base to everyone and end the rollout.
    Abort,
    /// The running rollout and the past ones.
    Show,
}

const CLI: &str = "cli";

fn cli() -> Principal {
    Principal::database(CLI)
}

/// What the command prints.
pub async fn run(db: &DatabaseConnection, args: RolloutArgs) -> anyhow::Result<String> {
    let current = crate::db::generation::current(db)
        .await
        .context("cannot read the configuration generation")?;
    let generation = Generation::new(current);
    let writing = Writing {
        db,
        generation: &generation,
        request_ttl: args.proposals.ttl(Tier::RequiresApproval),
        now: SystemClock.now(),
        evals: &crate::evals::DEFAULTS,
    };
    let (who, agent, label, reason) = (cli(), &args.agent, &args.label, args.reason);
    let patch = |percent: Option<f64>, paused: Option<bool>| RolloutPatch {
        percent,
        paused,
        reason: reason.clone(),
    };
    let end = RolloutEnd {
        reason: reason.clone(),
    };
    let outcome = match args.action {
        Action::Start {
            candidate,
            percent,
            guard_min_outcomes,
            guard_alpha,
        } => {
            let guard = guard_min_outcomes
                .zip(guard_alpha)
                .map(|(min_outcomes, alpha)| Guard {
                    min_outcomes,
                    alpha,
                });
            let body = RolloutStart {
                candidate,
                percent,
                guard,
                reason: reason.clone(),
            };
            rollouts::start(&writing, &who, agent, label, body, None).await?
        }
        Action::Set { percent } => {
            let body = patch(Some(percent), None);
            rollouts::patch(&writing, &who, agent, label, body, None).await?
        }
        Action::Pause | Action::Resume => {
            let body = patch(None, Some(matches!(args.action, Action::Pause)));
            rollouts::patch(&writing, &who, agent, label, body, None).await?
        }
        Action::Complete => rollouts::complete(&writing, &who, agent, label, end, None).await?,
        Action::Abort => {
            Outcome::Done(rollouts::abort(&writing, &who, agent, label, end, None).await?)
        }
        Action::Show => {
            let status = rollouts::status(db, agent, label).await?;
            return match args.json {
                true => json(&status),
                false => Ok(match status.current {
                    Some(view) => text(&view),
                    None => format!("{agent}/{label}: no rollout runs\n"),
                }),
            };
        }
    };
    Ok(match (outcome, args.json) {
        (Outcome::Done(view), true) => json(&view)?,
        (Outcome::Requested(request), true) => json(&request)?,
        (Outcome::Done(view), false) => text(&view),
        (Outcome::Requested(r), false) => format!(
            "{}/{}: change request {} ({}) waits for a sign-off (another operator, or an \
             approver of the default tenant) until {}\n",
            r.agent,
            r.label,
            r.id,
            r.kind,
            r.expires_at.to_rfc3339()
        ),
    })
}

fn json(value: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

fn text(view: &RolloutView) -> String {
    format!(
        "{}/{}: rollout {} {}: revision {} for {}% of users, revision {} for the rest\n",
        view.agent,
        view.label,
        view.id,
        view.state,
        view.candidate_revision,
        view.percent,
        view.base_revision
    )
}
