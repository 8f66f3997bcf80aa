//! `loadout import langfuse DIR [--apply]`: prompts exported from Langfuse become
//! agents' templates, revisions and labels ([`crate::bundle::langfuse`]). Without
//! `--apply` it prints the plan and exits 0 (nothing would change) or 2 (something
//! would), as `loadout plan` does; with it, it carries the plan out.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::config::CHANGES;
use crate::actions::ProposalSettings;
use crate::auth::Principal;
use crate::bundle::langfuse::{self, ImportPlan, Imported, LabelStep, Step};
use crate::cache::Generation;
use crate::db::Writer;
use crate::vocab::{Clock, SystemClock, Tier};

#[derive(Debug, clap::Subcommand)]
pub enum ImportCommand {
    /// Prompts exported from Langfuse (its API's JSON): plan, or apply with --apply.
    Langfuse(LangfuseArgs),
}

#[derive(Debug, clap::Args)]
pub struct LangfuseArgs {
    /// The folder of `.json` files (a prompt, an array of prompts, or `{"data": [...]}` each).
    pub dir: PathBuf,
    /// Carry the plan out (without it, only the plan is printed).
    #[arg(long)]
    pub apply: bool,
    /// Print the plan (and the result) as JSON.
    #[arg(long)]
    pub json: bool,
    /// Largest template accepted, in bytes.
    #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", default_value_t = crate::app::settings::DEFAULT_MAX_TEMPLATE_BYTES)]
    pub max_template_bytes: usize,
    /// How long a change request for a gated agent waits: `serve`'s `--proposal-ttl`.
    #[command(flatten)]
    pub proposals: ProposalSettings,
}

pub async fn run(database_url: &str, command: ImportCommand) -> anyhow::Result<ExitCode> {
    let ImportCommand::Langfuse(args) = command;
    let exported = langfuse::read_dir(&args.dir)?;
    let db = crate::db::connect(database_url).await?;
    crate::db::migrate::ensure_current(&db).await?;
    let result = plan_and_apply(&db, &args, &exported).await;
    db.close().await.ok();
    let (plan, imported) = result?;
    if args.json {
        #[derive(serde::Serialize)]
        struct Output<'a> {
            plan: &'a ImportPlan,
            applied: Option<&'a Imported>,
        }
        let output = Output {
            plan: &plan,
            applied: imported.as_ref(),
        };
        println!("{}", serde_json::to_string_pretty(&output)?);
    } else {
        print!("{}", plan_text(&plan));
        if let Some(done) = &imported {
            print!("{}", applied_text(done));
        }
    }
    Ok(match (plan.changes_anything, args.apply) {
        (true, false) => ExitCode::from(CHANGES),
        _ => ExitCode::SUCCESS,
    })
}

async fn plan_and_apply(
    db: &sea_orm::DatabaseConnection,
    args: &LangfuseArgs,
    exported: &[langfuse::Exported],
) -> anyhow::Result<(ImportPlan, Option<Imported>)> {
    let now = SystemClock.now();
    let fail = |e: crate::error::Error| anyhow::anyhow!("{} ({})", e.message, e.code);
    let plan = langfuse::plan(db, exported, now).await.map_err(fail)?;
    if !args.apply || !plan.changes_anything {
        return Ok((plan, args.apply.then(Imported::default)));
    }
    let generation = Generation::new(
        crate::db::generation::current(db)
            .await
            .context("cannot read the configuration generation")?,
    );
    let writer = Writer {
        db,
        generation: &generation,
        now,
        key: None,
    };
    let who = Principal::database("cli");
    let ttl = args.proposals.ttl(Tier::RequiresApproval);
    let done = langfuse::apply(&writer, &plan, &who, args.max_template_bytes, ttl)
        .await
        .map_err(fail)?;
    Ok((plan, Some(done)))
}

fn plan_text(plan: &ImportPlan) -> String {
    let mut out = String::new();
    for p in &plan.prompts {
        match &p.agent {
            Some(agent) if p.create_agent => {
                let _ = writeln!(
                    out,
                    "+ agent {agent} (new) \u{2190} Langfuse {:?}",
                    p.langfuse
                );
            }
            Some(agent) => {
                let _ = writeln!(out, "  agent {agent} \u{2190} Langfuse {:?}", p.langfuse);
            }
            None => {
                let _ = writeln!(out, "! Langfuse {:?}: not imported", p.langfuse);
            }
        }
        for note in &p.notes {
            let _ = writeln!(out, "    note: {note}");
        }
        for v in &p.versions {
            let what = match (v.step, v.revision) {
                (Step::Save, _) => "saved as a new revision".to_owned(),
                (Step::Repeat, Some(n)) => {
                    format!("saved again for `latest`: it repeats revision {n}'s template")
                }
                (Step::Repeat, None) => {
                    "saved again for `latest`: it repeats an earlier version's template".to_owned()
                }
                (Step::Exists, Some(n)) => format!("already revision {n}"),
                (Step::Exists, None) => "same template as an earlier version".to_owned(),
                (Step::Skip, _) => "not imported".to_owned(),
            };
            let sign = match v.step {
                Step::Save | Step::Repeat => '+',
                Step::Exists => '=',
                Step::Skip => '!',
            };
            let _ = writeln!(out, "  {sign} version {}: {what}", v.version);
            if !v.placeholders.is_empty() {
                let _ = writeln!(
                    out,
                    "      {{{{variables}}}} made placeholders: {}",
                    v.placeholders.join(", ")
                );
            }
            if !v.kept.is_empty() {
                let _ = writeln!(
                    out,
                    "      kept as written (loadout does not fill them; a Langfuse client's compile does): {}",
                    v.kept.join(", ")
                );
            }
            if let Some(note) = &v.note {
                let _ = writeln!(out, "      {note}");
            }
        }
        for l in &p.labels {
            let (sign, what) = match l.step {
                LabelStep::Unchanged => ('=', "already there"),
                LabelStep::Move => ('~', "moves there"),
                LabelStep::Request => ('?', "a change request is opened (sign-off needed)"),
                LabelStep::Skip => ('!', "left alone"),
            };
            let _ = writeln!(
                out,
                "  {sign} label {} \u{2192} version {}: {what}",
                l.label, l.version
            );
            if let Some(note) = &l.note {
                let _ = writeln!(out, "      {note}");
            }
        }
    }
    let _ = writeln!(
        out,
        "{}",
        match plan.changes_anything {
            true => "Plan: changes above.",
            false => "No changes: the export is imported.",
        }
    );
    out
}

fn applied_text(done: &Imported) -> String {
    let mut out = String::new();
    for (agent, version, revision) in &done.saved {
        let _ = writeln!(
            out,
            "saved {agent} version {version} as revision {revision}"
        );
    }
    for (agent, label, revision) in &done.moved {
        let _ = writeln!(out, "moved {agent} label {label} to revision {revision}");
    }
    for (agent, label, id) in &done.requested {
        let _ = writeln!(out, "opened change request #{id} for {agent} label {label}");
    }
    let _ = writeln!(
        out,
        "Applied: {} saved, {} labels moved, {} change requests opened.",
        done.saved.len(),
        done.moved.len(),
        done.requested.len()
    );
    out
}
