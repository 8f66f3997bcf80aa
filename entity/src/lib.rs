//! SeaORM entities: the shape of loadout's tables and nothing else.
//! Behaviour lives in the `loadout` service crate.

pub mod agent_configurations;
pub mod agent_labels;
pub mod agent_revisions;
pub mod agent_tools;
pub mod api_keys;
pub mod change_requests;
pub mod channels;
pub mod connectors;
pub mod console_sessions;
pub mod eval_datasets;
pub mod eval_results;
pub mod eval_runs;
pub mod idempotency_records;
pub mod label_moves;
pub mod loadout_state;
pub mod members;
pub mod model_connections;
pub mod oidc_logins;
pub mod outcomes;
pub mod prompt_versions;
pub mod proposal_events;
pub mod proposals;
pub mod render_snapshots;
pub mod revision_signals;
pub mod rollout_events;
pub mod rollouts;
pub mod signer_grants;
pub mod tool_changes;
pub mod tools;
pub mod user_agent_prompt_customizations;
pub mod user_group_members;
pub mod user_groups;
pub mod user_tool_preferences;
pub mod webhook_attempts;
pub mod webhook_deliveries;
pub mod webhook_events;
pub mod webhook_subscriptions;

pub mod prelude {
    pub use super::agent_configurations::Entity as AgentConfigurations;
    pub use super::agent_labels::Entity as AgentLabels;
    pub use super::agent_revisions::Entity as AgentRevisions;
    pub use super::agent_tools::Entity as AgentTools;
    pub use super::api_keys::Entity as ApiKeys;
    pub use super::change_requests::Entity as ChangeRequests;
    pub use super::channels::Entity as Channels;
    pub use super::console_sessions::Entity as ConsoleSessions;
    pub use super::idempotency_records::Entity as IdempotencyRecords;
    pub use super::label_moves::Entity as LabelMoves;
    pub use super::loadout_state::Entity as LoadoutState;
    pub use super::outcomes::Entity as Outcomes;
    pub use super::prompt_versions::Entity as PromptVersions;
    pub use super::proposal_events::Entity as ProposalEvents;
    pub use super::proposals::Entity as Proposals;
    pub use super::revision_signals::Entity as RevisionSignals;
    pub use super::rollout_events::Entity as RolloutEvents;
    pub use super::rollouts::Entity as Rollouts;
    pub use super::tools::Entity as Tools;
    pub use super::user_agent_prompt_customizations::Entity as UserAgentPromptCustomizations;
    pub use super::user_tool_preferences::Entity as UserToolPreferences;
    pub use super::webhook_attempts::Entity as WebhookAttempts;
    pub use super::webhook_deliveries::Entity as WebhookDeliveries;
    pub use super::webhook_events::Entity as WebhookEvents;
    pub use super::webhook_subscriptions::Entity as WebhookSubscriptions;
}
