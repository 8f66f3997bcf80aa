//! Where a process's secrets key comes from: the environment, a file, or, for an
//! embedded SQLite database only, a file made beside the database on first start.
//!
//! SQLite gets a made key because its database is a file on this host: the key
//! beside it (owner-only) protects a copied or backed-up database file, and no
//! other host needs it. A Postgres database is shared by replicas on other hosts,
//! which a key made on one host would lock out; there the key is configured or
//! there is none.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Key, KeyError};

/// Why no key could be taken from where it was asked for. Never holds key text.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("LOADOUT_SECRETS_KEY is not usable: {0}")]
    Env(KeyError),
    #[error("the secrets key file {path} is not usable: {why}")]
    File { path: String, why: String },
}

fn file_error(path: &Path, why: impl std::fmt::Display) -> SourceError {
    SourceError::File {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// A key given as base64 text (`LOADOUT_SECRETS_KEY`).
pub fn from_text(text: &str) -> Result<Key, SourceError> {
    Key::from_base64(text).map_err(SourceError::Env)
}

/// A key read from a file holding its base64 text.
pub fn read_file(path: &Path) -> Result<Key, SourceError> {
    let text = std::fs::read_to_string(path).map_err(|e| file_error(path, e))?;
    parse_file(path, &text)
}

fn parse_file(path: &Path, text: &str) -> Result<Key, SourceError> {
    warn_if_readable_by_others(path);
    Key::from_base64(text).map_err(|e| file_error(path, e))
}

/// Where an embedded SQLite database's key file is: `<database file>.secrets-key`.
/// `None` for Postgres and for in-memory SQLite.
pub fn beside_sqlite(database_url: &str) -> Option<PathBuf> {
    let rest = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let memory =
        path.is_empty() || path == ":memory:" || query.split('&').any(|pair| pair == "mode=memory");
    if memory {
        return None;
    }
    Some(PathBuf::from(format!("{path}.secrets-key")))
}

/// The key in `path`, made there first if there is none: written owner-only (0600)
/// to a file of its own, then linked into place, which fails if the file appeared
/// meanwhile; so two processes starting together both end up with the one key
/// that was linked first, and nobody reads a half-written file. `true` when made.
pub fn read_or_create(path: &Path) -> Result<(Key, bool), SourceError> {
    // Judged by the read's own error, never by a second look: a file another
    // process links in between would turn this read's NotFound into a failure.
    match std::fs::read_to_string(path) {
        Ok(text) => return Ok((parse_file(path, &text)?, false)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(file_error(path, e)),
    }
    let key = Key::generate().map_err(|e| file_error(path, e))?;
    let draft = draft_beside(path)?;
    write_owner_only(&draft, &key).map_err(|e| file_error(&draft, e))?;
    let linked = std::fs::hard_link(&draft, path);
    std::fs::remove_file(&draft).ok();
    match linked {
        Ok(()) => Ok((key, true)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok((read_file(path)?, false)),
        Err(e) => Err(file_error(path, e)),
    }
}

/// Replaces the key in `path` with `key`, owner-only, in one rename.
pub fn replace(path: &Path, key: &Key) -> Result<(), SourceError> {
    let draft = draft_beside(path)?;
    write_owner_only(&draft, key).map_err(|e| file_error(&draft, e))?;
    std::fs::rename(&draft, path).map_err(|e| {
        std::fs::remove_file(&draft).ok();
        file_error(path, e)
    })
}

/// A name beside `path` that no other writer picks: `<path>.<random>.new`.
fn draft_beside(path: &Path) -> Result<PathBuf, SourceError> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| file_error(path, e))?;
    Ok(PathBuf::from(format!(
        "{}.{:016x}.new",
        path.display(),
        u64::from_le_bytes(random)
    )))
}

/// Creates `path` (it must not exist: `O_EXCL`) with mode 0600 and the key's text.
fn write_owner_only(path: &Path, key: &Key) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    writeln!(file, "{}", key.to_base64())?;
    file.sync_all()
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                path = %path.display(),
                "the secrets key file can be read by others than its owner; chmod 600 it"
            );
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::{beside_sqlite, read_or_create};

    /// Eight starts at once on a missing key file, 200 times: every one gets the
    /// one key that was linked first, and exactly one made it. (A reader that
    /// re-checked `exists()` after its NotFound failed when another process linked
    /// the file in between: seen in CI with four threads.)
    #[test]
    fn starts_racing_on_a_missing_key_file_all_read_the_one_key_made() {
        let dir = std::env::temp_dir().join(format!("loadout-keyrace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        for round in 0..200 {
            let path = dir.join(format!("db{round}.secrets-key"));
            let barrier = std::sync::Barrier::new(8);
            let got: Vec<(String, bool)> = std::thread::scope(|s| {
                let runs: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let (key, made) = read_or_create(&path).expect("a key");
                            (key.to_base64(), made)
                        })
                    })
                    .collect();
                runs.into_iter().map(|r| r.join().expect("join")).collect()
            });
            assert_eq!(
                got.iter().filter(|(_, made)| *made).count(),
                1,
                "round {round}"
            );
            assert!(got.iter().all(|(key, _)| *key == got[0].0), "round {round}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn only_a_sqlite_file_has_a_key_file_beside_it() {
        assert_eq!(
            beside_sqlite("sqlite://loadout.db?mode=rwc").as_deref(),
            Some(std::path::Path::new("loadout.db.secrets-key"))
        );
        assert_eq!(
            beside_sqlite("sqlite:///var/lib/l.db").as_deref(),
            Some(std::path::Path::new("/var/lib/l.db.secrets-key"))
        );
        assert_eq!(beside_sqlite("sqlite::memory:"), None);
        assert_eq!(beside_sqlite("sqlite://x.db?mode=memory"), None);
        assert_eq!(beside_sqlite("postgres://u@h/db"), None);
    }
}
