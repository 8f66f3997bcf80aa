//! Evaluations: a revision run against a real model on a dataset of cases, as a
//! release check and in the console.
//!
//! - `cases`: a dataset's cases (loadout's shape), and `promptfoo`: promptfoo's
//!   test format read into it; `kinds`: the assertion types scored and their
//!   values' shapes; `yaml`: YAML read with budgets; `assertions`: scoring a reply;
//!   `compare`: a candidate against its base on the same cases (pass rates,
//!   McNemar's exact test).
//! - `chat`: the OpenAI-compatible Chat Completions client, over the one outbound
//!   client and its address check.
//! - `connections`: model connections (operators register them; keys sealed).
//! - `datasets`: an agent's datasets, versioned.
//! - `gate`: a label's required evaluation, the `evals` release check.
//! - `runs`: a run's record (start, read, cancel, compare); `runner`: the job that
//!   carries runs out, one case at a time, resuming after a restart.

pub mod assertions;
pub mod cases;
pub mod chat;
pub mod compare;
pub mod connections;
pub mod datasets;
pub mod gate;
pub mod kinds;
pub mod promptfoo;
pub mod runner;
pub mod runs;
pub mod yaml;

/// How evaluation runs are bounded: `serve`'s flags.
#[derive(Clone, Debug, clap::Args)]
pub struct EvalSettings {
    /// Runs one tenant may have going at once (the rest wait, queued).
    #[arg(long, env = "LOADOUT_EVAL_RUNS_PER_TENANT", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub eval_runs_per_tenant: u32,
    /// Runs this process carries out at once, in all.
    #[arg(long, env = "LOADOUT_EVAL_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub eval_concurrency: u32,
    /// Runs one tenant may have queued or running.
    #[arg(long, env = "LOADOUT_EVAL_MAX_QUEUED", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub eval_max_queued: u32,
    /// Tokens (prompt and completion, judges included) one run may use unless it asks for fewer.
    #[arg(long, env = "LOADOUT_EVAL_TOKEN_BUDGET", default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub eval_token_budget: u64,
    /// How long a run may take, in minutes, before it fails.
    #[arg(long, env = "LOADOUT_EVAL_MAX_MINUTES", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=1440))]
    pub eval_max_minutes: u32,
    /// Do not carry out runs in this process (another replica does); runs are still
    /// recorded and read here.
    #[arg(long, env = "LOADOUT_NO_EVAL_RUNNER")]
    pub no_eval_runner: bool,
}

impl Default for EvalSettings {
    fn default() -> Self {
        EvalSettings {
            eval_runs_per_tenant: 2,
            eval_concurrency: 4,
            eval_max_queued: 20,
            eval_token_budget: 500_000,
            eval_max_minutes: 60,
            no_eval_runner: false,
        }
    }
}

/// The default bounds: what a change request opened from the command line (which
/// has no `serve` flags) starts its runs with; the serving process carries them out.
pub static DEFAULTS: std::sync::LazyLock<EvalSettings> =
    std::sync::LazyLock::new(EvalSettings::default);
