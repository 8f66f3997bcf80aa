//! Connectors' header values: sealed at rest, and openable by this process.

use entity::connectors;

use super::code::ProblemCode;
use super::report::{Problem, Problems, Severity};
use crate::connectors::client::sealing;
use crate::secrets::{HOW_TO_CONFIGURE, Keyring};

/// `secrets_not_sealed` for a connector holding plain header values (a deleted one
/// holding any), or for one with headers where this process has no key;
/// `secrets_unreadable` for values sealed with a key this process does not hold.
pub(super) fn problems(rows: &[connectors::Model], keyring: &Keyring) -> Vec<Problem> {
    let mut out = Problems::default();
    let keyless = keyring.sealing().is_none();
    for row in rows {
        let stored = sealing::stored(row);
        if stored.is_empty() {
            continue;
        }
        let plain = sealing::plain_values(row);
        let warn = |out: &mut Problems, code, message: String, hint: String| {
            out.add(
                Severity::Warning,
                "connector",
                &row.name,
                code,
                message,
                hint,
            );
        };
        if row.deleted_at.is_some() {
            warn(
                &mut out,
                ProblemCode::SecretsNotSealed,
                format!(
                    "the deleted connector still holds {} header values",
                    stored.len()
                ),
                "run `loadout secrets seal`, which erases them".to_owned(),
            );
            continue;
        }
        if keyless {
            warn(
                &mut out,
                ProblemCode::SecretsNotSealed,
                match plain {
                    0 => "no secrets key is configured here, so new header values are refused"
                        .to_owned(),
                    _ => format!(
                        "no secrets key is configured: {plain} of its {} header values are stored in plain text, and new ones are refused",
                        stored.len()
                    ),
                },
                format!("{HOW_TO_CONFIGURE}; then run `loadout secrets seal`"),
            );
        } else if plain > 0 {
            warn(
                &mut out,
                ProblemCode::SecretsNotSealed,
                format!("{plain} header values are stored in plain text"),
                "run `loadout secrets seal`".to_owned(),
            );
        }
        let unheld = sealing::unheld_keys(row, keyring);
        if !unheld.is_empty() {
            warn(
                &mut out,
                ProblemCode::SecretsUnreadable,
                format!(
                    "header values are sealed with key {}, which this process does not hold: its calls fail",
                    unheld.join(", ")
                ),
                "start with that key (LOADOUT_SECRETS_KEY or --secrets-key-file), or give the connector its headers again".to_owned(),
            );
        }
    }
    out.0
}
