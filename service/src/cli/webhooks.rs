//! `loadout webhooks ...`: webhook subscriptions on the database, as an operator
//! (any tenant): list, create (the secret is printed once), enable, disable,
//! delete, rotate the secret, and a subscription's delivery log. `--json` prints
//! what the API answers.

use sea_orm::DatabaseConnection;
use serde::Serialize;

use crate::auth::Principal;
use crate::vocab::{Clock, SystemClock};
use crate::webhooks::subscriptions::{self, NewSubscription, Sealing, SubscriptionPatch};

#[derive(Debug, clap::Args)]
pub struct WebhooksArgs {
    #[command(subcommand)]
    pub command: WebhooksCommand,
    /// Print JSON (the API's shapes) instead of lines.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum WebhooksCommand {
    /// Subscriptions (every tenant's, or one's).
    List {
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Subscribe a URL; prints the signing secret once.
    Create {
        /// `https://...` (`http://` only to an address --connector-allow names).
        #[arg(long)]
        url: String,
        /// Event types, comma-separated (default: every type).
        #[arg(long, value_delimiter = ',')]
        events: Vec<String>,
        /// The tenant it belongs to (default: `default`).
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        description: Option<String>,
        /// Where the URL may point (as `serve` takes it).
        #[command(flatten)]
        connectors: crate::app::settings::Connectors,
        /// The key the secret is sealed with.
        #[command(flatten)]
        secrets: crate::cli::secrets::SecretsArgs,
    },
    /// Switch a subscription on again (its run of failures starts over).
    Enable { id: i32 },
    /// Switch a subscription off.
    Disable { id: i32 },
    /// Delete a subscription (softly).
    Delete { id: i32 },
    /// Replace the signing secret; prints the new one once.
    RotateSecret {
        id: i32,
        #[command(flatten)]
        secrets: crate::cli::secrets::SecretsArgs,
    },
    /// A subscription's delivery log, newest first.
    Deliveries {
        id: i32,
        #[arg(long, default_value_t = 50)]
        limit: u64,
    },
}

/// The command line acts as an operator named `cli`.
fn operator() -> Principal {
    Principal::database("cli")
}

fn show(
    json: bool,
    value: &impl Serialize,
    lines: impl FnOnce() -> String,
) -> anyhow::Result<String> {
    match json {
        true => Ok(format!("{}\n", serde_json::to_string_pretty(value)?)),
        false => Ok(lines()),
    }
}

fn refused(e: crate::error::Error) -> anyhow::Error {
    anyhow::anyhow!("{}", e.message)
}

/// Runs one command; what it prints.
pub async fn output(
    db: &DatabaseConnection,
    database_url: &str,
    args: WebhooksArgs,
) -> anyhow::Result<String> {
    let who = operator();
    let now = SystemClock.now();
    let json = args.json;
    let line = |s: &subscriptions::SubscriptionView| {
        format!(
            "{}\t{}\t{}\t{}\t{}{}\n",
            s.id,
            s.tenant,
            s.state,
            s.url,
            s.events.join(","),
            s.disabled_reason
                .as_deref()
                .map(|r| format!("\t{r}"))
                .unwrap_or_default()
        )
    };
    match args.command {
        WebhooksCommand::List { tenant } => {
            let list = subscriptions::list(db, &who, tenant.as_deref())
                .await
                .map_err(refused)?;
            let lines = list.iter().map(line).collect();
            let list = subscriptions::SubscriptionList {
                subscriptions: list,
            };
            show(json, &list, || lines)
        }
        WebhooksCommand::Create {
            url,
            events,
            tenant,
            description,
            connectors,
            secrets,
        } => {
            let (keyring, _) = secrets.keyring(database_url, false)?;
            let outbound = connectors.outbound()?;
            let new = NewSubscription {
                url,
                events: (!events.is_empty()).then_some(events),
                secret: None,
                description,
                tenant,
            };
            // The database's operator is not bounded, as with `keys create`.
            let sealing = Sealing {
                outbound: &outbound,
                keyring: &keyring,
                most: u32::MAX,
            };
            let created = subscriptions::create(db, &sealing, &who, new, now)
                .await
                .map_err(refused)?;
            show(json, &created, || {
                format!(
                    "{}secret\t{}\n",
                    line(&created.subscription),
                    created.secret
                )
            })
        }
        WebhooksCommand::Enable { id } | WebhooksCommand::Disable { id } => {
            let enabled = matches!(args.command, WebhooksCommand::Enable { .. });
            let patch = SubscriptionPatch {
                enabled: Some(enabled),
                ..Default::default()
            };
            let outbound = crate::connectors::client::Outbound::new(Vec::new(), None)?;
            let saved = subscriptions::update(db, &outbound, &who, id, patch, now, None)
                .await
                .map_err(refused)?;
            show(json, &saved, || line(&saved))
        }
        WebhooksCommand::Delete { id } => {
            let deleted = subscriptions::delete(db, &who, id, now, None)
                .await
                .map_err(refused)?;
            show(json, &deleted, || line(&deleted))
        }
        WebhooksCommand::RotateSecret { id, secrets } => {
            let (keyring, _) = secrets.keyring(database_url, false)?;
            let rotated = subscriptions::rotate(db, &keyring, &who, id, None, now)
                .await
                .map_err(refused)?;
            show(json, &rotated, || format!("secret\t{}\n", rotated.secret))
        }
        WebhooksCommand::Deliveries { id, limit } => {
            let limit = limit.clamp(1, crate::webhooks::deliver::LOG_ROWS);
            let log = subscriptions::attempts(db, &who, id, limit)
                .await
                .map_err(refused)?;
            let log = subscriptions::AttemptList { attempts: log };
            show(json, &log, || {
                log.attempts
                    .iter()
                    .map(|a| {
                        format!(
                            "{}\t{}\t{}\tattempt {}\t{}\t{} ms\t{}\n",
                            a.at.to_rfc3339(),
                            a.message_id,
                            a.event_type,
                            a.attempt,
                            a.status.map(|s| s.to_string()).unwrap_or("-".into()),
                            a.duration_ms,
                            a.error.as_deref().unwrap_or(&a.delivery_state)
                        )
                    })
                    .collect()
            })
        }
    }
}
