//! `loadout check`: the registry against the catalog and the code; exit 1 on errors.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::db::{self, migrate};
use crate::execute::executors::Executors;
use crate::registry::catalog::{Catalog, Seeds};

/// `loadout check --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A catalog file of the `seeds/catalog.toml` format instead of the embedded one.
    #[arg(long)]
    catalog: Option<PathBuf>,
    /// Report format: lines for people, or the JSON report for machines.
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    format: CheckFormat,
    /// The key `serve` seals with: the check warns about header values it cannot open.
    #[command(flatten)]
    secrets: crate::cli::secrets::SecretsArgs,
}

/// Reads a catalog file, or the embedded one.
pub fn load_catalog(path: Option<&Path>) -> anyhow::Result<Catalog> {
    match path {
        None => Ok(Seeds::embedded()?.catalog),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the catalog {}", path.display()))?;
            Catalog::parse(&text)
                .with_context(|| format!("the catalog {} is not valid", path.display()))
        }
    }
}

pub async fn run(database_url: &str, args: CheckArgs) -> anyhow::Result<ExitCode> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let (keyring, _) = args.secrets.keyring(database_url, false)?;
    let db = db::connect(database_url).await?;
    migrate::ensure_current(&db).await?;
    let executors = Executors::load(&db, None).await?.with_keyring(keyring);
    let report = crate::registry::check::run(&db, &catalog, &executors).await;
    db.close().await.ok();
    let report = report?;
    match args.format {
        CheckFormat::Text => print!("{}", report.text()),
        CheckFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
