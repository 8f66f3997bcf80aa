//! Where a process's secrets key comes from: the flags `serve`, `check`,
//! `connectors sync` and `secrets` share. The key is read from
//! `LOADOUT_SECRETS_KEY` or `--secrets-key-file`; an embedded SQLite database
//! without either has its key in a file beside it (made by `serve` or
//! `secrets seal` on first use). Never printed.

use std::path::PathBuf;

use crate::secrets::{Key, Keyring, source};

/// Key text as typed or read from the environment; its `Debug` hides it, and clap
/// never rejects it (a parse error would echo it), so it is checked after parsing.
#[derive(Clone)]
pub struct KeyText(String);

impl std::fmt::Debug for KeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyText(redacted)")
    }
}

impl std::str::FromStr for KeyText {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(KeyText(text.to_owned()))
    }
}

/// Where a process's secrets key comes from.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct SecretsArgs {
    /// The key connectors' header values are sealed with: 32 random bytes in base64
    /// (`openssl rand -base64 32`). Prefer the environment variable: a flag shows in `ps`.
    #[arg(long, env = "LOADOUT_SECRETS_KEY", hide_env_values = true)]
    pub secrets_key: Option<KeyText>,
    /// A file holding the key (base64 text), instead of LOADOUT_SECRETS_KEY.
    #[arg(long, env = "LOADOUT_SECRETS_KEY_FILE", conflicts_with = "secrets_key")]
    pub secrets_key_file: Option<PathBuf>,
    /// A key rotated out: values still sealed with it keep opening (new values are
    /// sealed with the current key). For replicas started before `secrets rotate`.
    #[arg(long, env = "LOADOUT_SECRETS_PREVIOUS_KEY_FILE")]
    pub secrets_previous_key_file: Option<PathBuf>,
}

/// Where the current key came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// `LOADOUT_SECRETS_KEY` or `--secrets-key-file`.
    Given,
    /// The file beside an embedded SQLite database; `true` when made just now.
    BesideDatabase(PathBuf, bool),
    /// No key: plain values still work, new header values are refused.
    None,
}

impl SecretsArgs {
    /// The keys for the database at `database_url`. `make`: for an embedded SQLite
    /// database without a configured key, make its key file when there is none.
    pub fn keyring(&self, database_url: &str, make: bool) -> anyhow::Result<(Keyring, KeySource)> {
        let (current, source) = self.current(database_url, make)?;
        let previous = match &self.secrets_previous_key_file {
            Some(path) => vec![source::read_file(path)?],
            None => Vec::new(),
        };
        match current {
            Some(key) => Ok((Keyring::new(key, previous), source)),
            None if previous.is_empty() => Ok((Keyring::none(), source)),
            None => anyhow::bail!(
                "--secrets-previous-key-file needs a current key too (LOADOUT_SECRETS_KEY or --secrets-key-file)"
            ),
        }
    }

    fn current(&self, database_url: &str, make: bool) -> anyhow::Result<(Option<Key>, KeySource)> {
        if let Some(KeyText(text)) = &self.secrets_key {
            return Ok((Some(source::from_text(text)?), KeySource::Given));
        }
        if let Some(path) = &self.secrets_key_file {
            return Ok((Some(source::read_file(path)?), KeySource::Given));
        }
        let Some(path) = source::beside_sqlite(database_url) else {
            return Ok((None, KeySource::None));
        };
        if make {
            let (key, made) = source::read_or_create(&path)?;
            return Ok((Some(key), KeySource::BesideDatabase(path, made)));
        }
        match path.exists() {
            true => Ok((
                Some(source::read_file(&path)?),
                KeySource::BesideDatabase(path, false),
            )),
            false => Ok((None, KeySource::None)),
        }
    }
}

/// Says (on stderr and in the log) which key a process seals with; never the key.
pub fn announce(keyring: &Keyring, source: &KeySource) {
    match (keyring.sealing(), source) {
        (Some(id), KeySource::BesideDatabase(path, true)) => {
            eprintln!(
                "A secrets key (id {id}) was made in {} (owner-only); back it up with the database.",
                path.display()
            );
        }
        (Some(id), _) => tracing::info!(secrets.key_id = %id, "connector header values are sealed"),
        (None, _) => tracing::warn!(
            "no secrets key: new connector header values are refused and existing ones stay in plain text; `loadout check` says how to configure one"
        ),
    }
}
