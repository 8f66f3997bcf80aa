//! `loadout secrets seal | rotate`. The key flags are `secrets::flags`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use sea_orm::DatabaseConnection;

use crate::connectors::client::sealing;
pub use crate::secrets::flags::{KeySource, KeyText, SecretsArgs, announce};
use crate::secrets::{Key, source};

#[derive(Debug, clap::Subcommand)]
pub enum SecretsCommand {
    /// Seal every connector header value still in plain text with the current key
    /// (and erase the values deleted connectors still hold); one transaction.
    Seal {
        #[command(flatten)]
        key: SecretsArgs,
    },
    /// Seal every connector header value again with a new key, in one transaction.
    /// The current key (and --secrets-previous-key-file) must open them.
    Rotate {
        /// The file holding the new key (base64 of 32 bytes).
        #[arg(long)]
        new_key_file: PathBuf,
        #[command(flatten)]
        key: SecretsArgs,
    },
}

pub async fn run(
    db: &DatabaseConnection,
    database_url: &str,
    command: SecretsCommand,
) -> anyhow::Result<()> {
    let report = match command {
        SecretsCommand::Seal { key } => {
            let (keyring, source) = key.keyring(database_url, true)?;
            announce(&keyring, &source);
            if keyring.sealing().is_none() {
                anyhow::bail!(
                    "no secrets key to seal with: {}",
                    crate::secrets::HOW_TO_CONFIGURE
                );
            }
            sealing::seal_all(db, &keyring)
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message))?
        }
        SecretsCommand::Rotate { new_key_file, key } => {
            let (old, source) = key.keyring(database_url, false)?;
            let new = source::read_file(&new_key_file)?;
            let report = sealing::rotate(db, &old, new.clone())
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.message))?;
            after_rotation(database_url, &source, &new, &new_key_file)?;
            report
        }
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// A key kept beside the database is replaced by the new one (every value is now
/// sealed with it); a configured key is the operator's to change.
fn after_rotation(
    database_url: &str,
    source: &KeySource,
    new: &Key,
    new_key_file: &Path,
) -> anyhow::Result<()> {
    let beside = match source {
        KeySource::BesideDatabase(path, _) => Some(path.clone()),
        KeySource::None => source::beside_sqlite(database_url),
        KeySource::Given => None,
    };
    match beside {
        Some(path) => {
            source::replace(&path, new).with_context(|| {
                format!(
                    "every value is sealed with the new key, but {} could not be replaced: copy {} there",
                    path.display(),
                    new_key_file.display()
                )
            })?;
            eprintln!(
                "The key in {} is now the new key (id {}).",
                path.display(),
                new.id()
            );
        }
        None => eprintln!(
            "Every value is sealed with the new key (id {}): start loadout with it (LOADOUT_SECRETS_KEY or --secrets-key-file {}).",
            new.id(),
            new_key_file.display()
        ),
    }
    Ok(())
}
