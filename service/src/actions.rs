//! Write tools don't act, they propose: tool calls ([`call`]), the proposal ledger
//! ([`ledger`]), what an approver reads ([`describe`], [`views`]) and decides
//! ([`decide`]), users' preferences, and the connectors operators keep and sync
//! ([`connector`]). What carries out an approved call (the executors, connector
//! kinds, argument validation) is [`crate::execute`], below the registry.

pub mod call;
pub mod decide;
pub mod describe;
pub mod ledger;
pub mod preferences;
pub mod redecide;
pub mod requirements;
pub mod views;
pub mod withdrawn;

use crate::vocab::Clock;
use std::sync::Arc;

use sea_orm::{DatabaseConnection, DbErr};

use crate::cache::Generation;
use crate::connectors::client::Outbound;
use crate::execute::executors::{EXECUTION_TIMEOUT, Executors};
use crate::secrets::Keyring;
use crate::vocab::Tier;

/// How long an execution may run before the sweeper presumes its process dead,
/// unless configured (`serve --proposal-lease-seconds`).
pub const DEFAULT_PROPOSAL_LEASE_SECONDS: u32 = 300;
/// How long a proposal waits for a decision unless configured per tier.
pub const DEFAULT_PROPOSAL_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// How long proposals wait (`serve`'s flags; part of `app::Settings`).
#[derive(Clone, Debug, clap::Args)]
pub struct ProposalSettings {
    /// How long an approved proposal may wait unclaimed before the sweeper reports it.
    /// At least the longest call timeout (30 s): an executing call's own lease is its
    /// timeout plus a margin.
    #[arg(long = "proposal-lease-seconds", env = "LOADOUT_PROPOSAL_LEASE_SECONDS", default_value_t = DEFAULT_PROPOSAL_LEASE_SECONDS, value_parser = parse_lease)]
    pub lease_seconds: u32,
    /// How long a proposal of a tier waits for a decision, e.g. requires_approval=3600;
    /// repeatable; 86400 (24 h) for any tier not given.
    #[arg(long = "proposal-ttl", env = "LOADOUT_PROPOSAL_TTL", value_delimiter = ',', value_parser = parse_ttl)]
    pub ttls: Vec<(Tier, u32)>,
}

impl ProposalSettings {
    /// How long an execution may hold a proposal before the sweeper presumes it dead.
    pub fn lease(&self) -> chrono::TimeDelta {
        chrono::TimeDelta::seconds(i64::from(self.lease_seconds))
    }

    /// How long a proposal of a tool of `tier` waits for a decision: the last
    /// `--proposal-ttl` given for the tier, else the default.
    pub fn ttl(&self, tier: Tier) -> chrono::TimeDelta {
        self.ttls
            .iter()
            .rev()
            .find(|(t, _)| *t == tier)
            .map_or(DEFAULT_PROPOSAL_TTL, |(_, seconds)| {
                chrono::TimeDelta::seconds(i64::from(*seconds))
            })
    }
}

fn parse_lease(text: &str) -> Result<u32, String> {
    let longest = EXECUTION_TIMEOUT.as_secs();
    match text.parse::<u32>() {
        Ok(seconds) if u64::from(seconds) >= longest => Ok(seconds),
        Ok(_) => Err(format!(
            "a lease shorter than the longest call timeout ({longest} s) would fail live calls"
        )),
        Err(_) => Err(format!("{text:?} is not a number of seconds")),
    }
}

fn parse_ttl(text: &str) -> Result<(Tier, u32), String> {
    let (tier, seconds) = text
        .split_once('=')
        .ok_or_else(|| "expected TIER=SECONDS, e.g. requires_approval=3600".to_owned())?;
    let tier: Tier = tier
        .parse()
        .map_err(|e: crate::closed::UnknownValue| e.to_string())?;
    let seconds: u32 = seconds
        .parse()
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("{seconds:?} is not a positive number of seconds"))?;
    Ok((tier, seconds))
}

/// What running a tool takes, lent by the state: the database, the generation
/// (observed after a run, since a builtin may change what prompts render), and
/// the outbound client and secrets the executors use.
#[derive(Clone, Copy)]
pub struct Runner<'a> {
    pub db: &'a DatabaseConnection,
    /// Shared, so a run finished in its own task can still observe it.
    pub generation: &'a Arc<Generation>,
    pub outbound: &'a Outbound,
    pub secrets: &'a Keyring,
    /// Shared too: a run stamps its outcome when it ends.
    pub clock: &'a Arc<dyn Clock>,
}

impl Runner<'_> {
    /// The executors as the database binds them now.
    pub async fn executors(&self) -> Result<Executors, DbErr> {
        let executors = Executors::load(self.db, Some(self.outbound.clone())).await?;
        Ok(executors.with_keyring(self.secrets.clone()))
    }

    /// The executors for a call of `tool` served by a revision of agent `agent_id`
    /// with `pins`: a `gated` agent's call goes to the connector as its revision
    /// pins it (a connector's URL, kind, method or timeout, or a tool's binding,
    /// changed since reaches a gated production only through a signed-off
    /// promotion); a `direct` agent's, as bound now (its production follows every
    /// write at once anyway).
    pub async fn executors_for(
        &self,
        agent_id: i32,
        tool: &str,
        pins: &std::collections::BTreeMap<String, crate::connectors::client::ConnectorPin>,
    ) -> Result<Executors, DbErr> {
        use sea_orm::EntityTrait;
        let mut executors = self.executors().await?;
        let Some(pin) = pins.get(tool) else {
            return Ok(executors);
        };
        let gated = entity::agent_configurations::Entity::find_by_id(agent_id)
            .one(self.db)
            .await?
            .is_some_and(|a| a.release_mode == crate::releases::ReleaseMode::Gated.as_str());
        if gated {
            executors.pin(self.db, tool, pin).await?;
        }
        Ok(executors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_ttl_given_for_a_tier_wins_and_others_keep_the_default() {
        let settings = crate::app::settings::Settings::from_flags([
            "--proposal-ttl",
            "requires_approval=60,requires_approval=120",
        ])
        .expect("flags");
        assert_eq!(
            settings.proposals.ttl(Tier::RequiresApproval),
            chrono::TimeDelta::seconds(120)
        );
        assert_eq!(settings.proposals.ttl(Tier::Auto), DEFAULT_PROPOSAL_TTL);
    }

    #[test]
    fn a_lease_shorter_than_a_call_is_refused() {
        let error = crate::app::settings::Settings::from_flags(["--proposal-lease-seconds", "5"])
            .expect_err("short");
        assert!(
            error.to_string().contains("longest call timeout"),
            "{error}"
        );
    }
}
