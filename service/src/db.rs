//! Connecting to the database: SQLite (the embedded default) or Postgres.

pub mod generation;
pub mod migrate;

use std::time::Duration;

use anyhow::{Context, bail};
use sea_orm::{ConnectOptions, Database, DatabaseConnection};

/// The embedded default: a SQLite file in the working directory, created on first use.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://loadout.db?mode=rwc";

/// Opens a connection pool, failing with one line that names the problem but never the password.
pub async fn connect(url: &str) -> anyhow::Result<DatabaseConnection> {
    let shown = redact(url);
    let scheme = url.split_once(':').map(|(s, _)| s).unwrap_or("");
    if !matches!(scheme, "sqlite" | "postgres" | "postgresql") {
        bail!("unsupported database URL {shown}: use sqlite://FILE or postgres://USER@HOST/DB");
    }
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(5))
        // Statements can carry prompt bodies; never log them.
        .sqlx_logging(false);
    Database::connect(options)
        .await
        .map_err(|e| anyhow::anyhow!(redact_in(&e.to_string(), url)))
        .with_context(|| format!("cannot connect to database {shown}"))
}

/// `scheme://user:secret@host/db` → `scheme://user:***@host/db`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Removes the password from a driver message that might echo the URL.
fn redact_in(message: &str, url: &str) -> String {
    let redacted = redact(url);
    if redacted == url {
        message.to_owned()
    } else {
        message.replace(url, &redacted)
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_password_in_a_url_is_replaced() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/loadout"),
            "postgres://app:***@db:5432/loadout"
        );
    }

    #[test]
    fn a_url_without_a_password_is_unchanged() {
        assert_eq!(
            redact("postgres://app@db/loadout"),
            "postgres://app@db/loadout"
        );
        assert_eq!(
            redact("sqlite://loadout.db?mode=rwc"),
            "sqlite://loadout.db?mode=rwc"
        );
    }

    #[test]
    fn an_at_sign_in_the_password_does_not_leak_its_tail() {
        assert_eq!(
            redact("postgres://app:p@ss@db/x"),
            "postgres://app:***@db/x"
        );
    }
}
