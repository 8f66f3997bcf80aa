//! SeaORM entities: the shape of loadout's tables and nothing else.
//! Behaviour lives in the `loadout` service crate.

pub mod agent_configurations;
pub mod agent_tools;
pub mod channels;
pub mod tools;
pub mod user_agent_prompt_customizations;

pub mod prelude {
    pub use super::agent_configurations::Entity as AgentConfigurations;
    pub use super::agent_tools::Entity as AgentTools;
    pub use super::channels::Entity as Channels;
    pub use super::tools::Entity as Tools;
    pub use super::user_agent_prompt_customizations::Entity as UserAgentPromptCustomizations;
}
