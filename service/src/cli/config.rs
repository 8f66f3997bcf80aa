//! `loadout export DIR`, `loadout plan DIR` and `loadout apply DIR`: configuration
//! as code (issue 27), on the database directly (or, for export, a running
//! instance's API). Header values come from the environment at apply time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use sea_orm::DatabaseConnection;

use crate::actions::ProposalSettings;
use crate::auth::Principal;
use crate::bundle::apply::{self, Applied, Base};
use crate::bundle::plan::{self, Action, Change, Plan, PlanFile};
use crate::bundle::{Bundle, HeaderValue, files, read};
use crate::cache::Generation;
use crate::db::Writer;
use crate::releases::diff::TextChange;
use crate::secrets::flags::SecretsArgs;
use crate::vocab::Tier;
use crate::vocab::{Clock, SystemClock};

/// `loadout plan` found changes: its exit status (as `terraform plan -detailed-exitcode`).
pub const CHANGES: u8 = 2;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The folder to write (made if absent; its agents/, tools/, channels/ and
    /// connectors/ folders and loadout.toml are replaced).
    pub dir: PathBuf,
    /// Export a running instance through its API instead of the database
    /// (`http://HOST:PORT`); needs --key.
    #[arg(long)]
    pub url: Option<String>,
    /// An admin or operator key for --url.
    #[arg(long, env = "LOADOUT_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// The folder to compare with the database.
    pub dir: PathBuf,
    /// Plan the removal (soft delete) of objects the folder leaves out.
    #[arg(long)]
    pub prune: bool,
    /// Also write the plan (JSON) to this file, for `loadout apply --plan`.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print the plan as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// The key that opens stored header values, to compare them with the environment's.
    #[command(flatten)]
    pub secrets: SecretsArgs,
    #[command(flatten)]
    pub header_env: HeaderEnv,
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The folder to apply.
    pub dir: PathBuf,
    /// The plan this apply carries out (`loadout plan --out`): refused if the
    /// instance or the folder changed since.
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// Soft-delete objects the folder leaves out (agents, tools, channels,
    /// connectors; links are switched off).
    #[arg(long)]
    pub prune: bool,
    /// Print the result as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Largest template accepted, in bytes.
    #[arg(long, env = "LOADOUT_MAX_TEMPLATE_BYTES", default_value_t = crate::app::settings::DEFAULT_MAX_TEMPLATE_BYTES)]
    pub max_template_bytes: usize,
    /// The key header values are sealed with.
    #[command(flatten)]
    pub secrets: SecretsArgs,
    #[command(flatten)]
    pub header_env: HeaderEnv,
    /// Which connector addresses are allowed (`serve`'s `--connector-allow`): a URL
    /// `serve` would refuse is refused by the apply too.
    #[command(flatten)]
    pub connectors: crate::app::settings::Connectors,
    /// How long a change request for a gated agent waits: `serve`'s `--proposal-ttl`.
    #[command(flatten)]
    pub proposals: ProposalSettings,
}

/// `loadout export DIR`.
pub async fn export(database_url: &str, args: ExportArgs) -> anyhow::Result<ExitCode> {
    let bundle = match &args.url {
        Some(url) => {
            let key = args
                .key
                .as_deref()
                .context("--url needs --key (or LOADOUT_KEY)")?;
            from_api(url, key).await?
        }
        None => {
            let db = connect(database_url).await?;
            let bundle = read::export(&db).await;
            db.close().await.ok();
            bundle?
        }
    };
    files::write(&args.dir, &bundle)?;
    eprintln!(
        "Exported {} agents, {} tools, {} channels, {} connectors to {} ({}).",
        bundle.agents.len(),
        bundle.tools.len(),
        bundle.channels.len(),
        bundle.connectors.len(),
        args.dir.display(),
        bundle.state.as_ref().map_or("", |s| s.instance.as_str())
    );
    Ok(ExitCode::SUCCESS)
}

/// The configuration as a running instance's `GET /v1/config` answers it.
async fn from_api(url: &str, key: &str) -> anyhow::Result<Bundle> {
    let endpoint = format!("{}/v1/config", url.trim_end_matches('/'));
    // reqwest is built without a default TLS provider; this process has only this client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .build()
        .context("cannot make an HTTP client")?;
    let answer = client
        .get(&endpoint)
        .bearer_auth(key)
        .send()
        .await
        .with_context(|| format!("cannot reach {endpoint}"))?;
    let status = answer.status();
    let text = answer.text().await.context("cannot read the answer")?;
    if !status.is_success() {
        bail!("{endpoint} answered {status}: {text}");
    }
    serde_json::from_str(&text)
        .with_context(|| format!("{endpoint} did not answer a configuration"))
}

async fn connect(database_url: &str) -> anyhow::Result<DatabaseConnection> {
    let db = crate::db::connect(database_url).await?;
    crate::db::migrate::ensure_current(&db).await?;
    Ok(db)
}

/// Which environment variables a bundle's headers may read: `LOADOUT_HEADER_…`
/// (the names `loadout export` writes) and the ones the operator names.
#[derive(Debug, Clone, clap::Args)]
pub struct HeaderEnv {
    /// Also let header values read this environment variable (repeatable); without
    /// it only `LOADOUT_HEADER_…` variables are read, so a bundle cannot send, say,
    /// `DATABASE_URL` or `LOADOUT_SECRETS_KEY` to a connector.
    #[arg(long = "allow-header-env", value_name = "VAR")]
    pub allowed: Vec<String>,
}

/// The prefix every header variable may have.
pub const HEADER_ENV_PREFIX: &str = "LOADOUT_HEADER_";

impl HeaderEnv {
    fn allows(&self, name: &str) -> bool {
        name.starts_with(HEADER_ENV_PREFIX) && name.len() > HEADER_ENV_PREFIX.len()
            || self.allowed.iter().any(|a| a == name)
    }
}

/// What reading the environment gave: the warnings (plan) and the variables read.
struct Resolved {
    warnings: Vec<String>,
    reads: Vec<String>,
}

/// Header values from the environment: every `env` reference becomes its value.
/// A variable outside [`HeaderEnv`] refuses; `strict`: a variable that is not set
/// refuses (apply); otherwise it stays a reference and is named in the warnings
/// (plan).
fn resolve(bundle: &mut Bundle, env: &HeaderEnv, strict: bool) -> anyhow::Result<Resolved> {
    let mut out = Resolved {
        warnings: Vec::new(),
        reads: Vec::new(),
    };
    for connector in &mut bundle.connectors {
        for (name, value) in &mut connector.headers {
            let HeaderValue::Env { env: var } = value else {
                continue;
            };
            if !env.allows(var) {
                bail!(
                    "connector {}: header {name} reads ${var}, which is not a header variable: name it {HEADER_ENV_PREFIX}…, or allow it with --allow-header-env {var}",
                    connector.name
                );
            }
            out.reads.push(format!(
                "connector/{} header {name} \u{2190} ${var}",
                connector.name
            ));
            match std::env::var(&*var) {
                Ok(text) => *value = HeaderValue::Value { value: text },
                Err(_) if strict => bail!(
                    "connector {}: header {name} reads ${var}, which is not set",
                    connector.name
                ),
                Err(_) => out.warnings.push(format!(
                    "connector/{}: ${var} is not set; the value of header {name} was not compared",
                    connector.name
                )),
            }
        }
    }
    Ok(out)
}

/// `loadout plan DIR`: exit 0 (nothing would change), 2 (something would), 1 (error).
pub async fn plan(database_url: &str, args: PlanArgs) -> anyhow::Result<ExitCode> {
    let mut target = files::read(&args.dir)?;
    let resolved = resolve(&mut target, &args.header_env, false)?;
    let (keyring, _) = args.secrets.keyring(database_url, false)?;
    let db = connect(database_url).await?;
    let current = read::current(&db).await;
    db.close().await.ok();
    let mut plan = plan::compute(&current?, &target, args.prune, Some(&keyring));
    plan.warnings.extend(resolved.warnings);
    plan.reads = resolved.reads;
    if let Some(out) = &args.out {
        let text = serde_json::to_string_pretty(&plan)? + "\n";
        std::fs::write(out, text).with_context(|| format!("cannot write {}", out.display()))?;
    }
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&plan)?),
        false => print!("{}", plan_text(&plan)),
    }
    Ok(match plan.changes_anything {
        true => ExitCode::from(CHANGES),
        false => ExitCode::SUCCESS,
    })
}

/// The author the command line's applies record (as `loadout promote`'s).
fn cli() -> Principal {
    Principal::database("cli")
}

fn read_plan(path: &Path) -> anyhow::Result<PlanFile> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a plan", path.display()))
}

/// `loadout apply DIR`.
pub async fn apply(database_url: &str, args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let mut target = files::read(&args.dir)?;
    resolve(&mut target, &args.header_env, true)?;
    let base = match &args.plan {
        Some(path) => Base::Plan(read_plan(path)?),
        None => match target.state.take() {
            Some(state) => Base::Export(state),
            None => Base::Nothing,
        },
    };
    let (keyring, _) = args.secrets.keyring(database_url, false)?;
    let db = connect(database_url).await?;
    let result = run_apply(&db, &keyring, &args, target, base).await;
    db.close().await.ok();
    let applied = result?;
    match args.json {
        true => println!("{}", serde_json::to_string_pretty(&applied)?),
        false => print!("{}", applied_text(&applied)),
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_apply(
    db: &DatabaseConnection,
    keyring: &crate::secrets::Keyring,
    args: &ApplyArgs,
    mut target: Bundle,
    base: Base,
) -> anyhow::Result<Applied> {
    target.state = None;
    let generation = Generation::new(
        crate::db::generation::current(db)
            .await
            .context("cannot read the configuration generation")?,
    );
    let who = cli();
    let outbound = args.connectors.outbound()?;
    let input = apply::Apply {
        target,
        base,
        prune: args.prune,
        who: &who,
        keyring,
        outbound: &outbound,
        max_template_bytes: args.max_template_bytes,
        request_ttl: args.proposals.ttl(Tier::RequiresApproval),
        evals: &crate::evals::DEFAULTS,
    };
    let writer = Writer {
        db,
        generation: &generation,
        now: SystemClock.now(),
        key: None,
    };
    apply::apply(&writer, input)
        .await
        .map_err(|e| anyhow::anyhow!("{} ({})", e.message, e.code))
}

fn sign(action: Action) -> char {
    match action {
        Action::Create => '+',
        Action::Update => '~',
        Action::Remove => '-',
        Action::Keep => '!',
    }
}

fn change_text(out: &mut String, change: &Change) {
    let note = match change.action {
        Action::Keep => " (left out of the folder: kept; --prune would remove it)",
        Action::Remove => " (removed: soft delete)",
        _ => "",
    };
    let _ = writeln!(out, "{} {}{note}", sign(change.action), change.object);
    for field in &change.fields {
        let _ = writeln!(
            out,
            "    {}: {} → {}",
            field.field, field.before, field.after
        );
    }
    for text in &change.texts {
        let _ = writeln!(out, "    {}:", text.field);
        hunks(out, &text.diff);
    }
}

fn hunks(out: &mut String, change: &TextChange) {
    if change.too_large {
        let _ = writeln!(
            out,
            "      (too large to compare line by line: {} lines before, {} after)",
            change.deleted, change.inserted
        );
    }
    for h in &change.hunks {
        let _ = writeln!(
            out,
            "      @@ -{},{} +{},{} @@",
            h.old_start, h.old_lines, h.new_start, h.new_lines
        );
        for line in &h.lines {
            let _ = writeln!(out, "      {}{}", line.kind.sign(), line.text);
        }
    }
}

/// A plan as `loadout plan` prints it.
pub fn plan_text(plan: &Plan) -> String {
    let mut out = format!(
        "Plan against {} ({} objects)\n",
        plan.against,
        plan.objects.len()
    );
    for change in &plan.changes {
        change_text(&mut out, change);
    }
    for read in &plan.reads {
        let _ = writeln!(out, "reads {read}");
    }
    for warning in &plan.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    let count = |a: Action| plan.changes.iter().filter(|c| c.action == a).count();
    let _ = writeln!(
        out,
        "{} to create, {} to update, {} to remove, {} kept although left out, {} unchanged.",
        count(Action::Create),
        count(Action::Update),
        count(Action::Remove),
        count(Action::Keep),
        plan.unchanged
    );
    out
}

fn applied_text(applied: &Applied) -> String {
    let mut out = String::new();
    for change in &applied.changes {
        change_text(&mut out, change);
    }
    for r in &applied.change_requests {
        let _ = writeln!(
            out,
            "{}/{}: change request {} to move it from revision {} to {} waits for a sign-off",
            r.agent, r.label, r.id, r.from_revision, r.to_revision
        );
    }
    let changed = applied
        .changes
        .iter()
        .filter(|c| c.action != Action::Keep)
        .count();
    let _ = writeln!(
        out,
        "Applied: {changed} changed, {} unchanged; the instance is now {}.",
        applied.unchanged, applied.after
    );
    out
}
