//! What the prompt service reads through: loaded agents (the working copy), the
//! revisions labels serve, the channels and users' instructions, each a
//! generation-stamped map bounded in bytes.

use std::sync::Arc;

use crate::cache::{Counts, Stamped, Weigh, share};
use crate::prompt::builder::Channels;
use crate::prompt::load::LoadedAgent;
use crate::releases::serve::Served;
use crate::releases::traffic::Running;

/// The prompt service's maps: agents by name, served revisions by agent and label
/// (or number), the channels, and users' instructions by (tenant, agent id, user).
pub struct PromptCache {
    agents: Stamped<String, Option<Arc<LoadedAgent>>>,
    /// By [`served_key`]: `None` when the agent has no such label or revision.
    served: Stamped<String, Option<Arc<Served>>>,
    /// By [`served_key`]: the label's running rollout (`None`: none runs).
    rollouts: Stamped<String, Option<Running>>,
    channels: Stamped<(), Arc<Channels>>,
    /// By (tenant, agent id, user): a user id names a person only inside a tenant.
    instructions: Stamped<(String, i32, String), Option<Arc<str>>>,
    counts: Counts,
}

impl PromptCache {
    /// Empty maps taking their shares of `budget` (agents and served revisions
    /// 1/16 each, instructions 3/16, channels 1/16 but at least 1 MiB), counting
    /// into `counts`.
    pub fn new(budget: usize, counts: Counts) -> Self {
        Self {
            agents: Stamped::new(share(budget, 1)),
            served: Stamped::new(share(budget, 1)),
            rollouts: Stamped::new(share(budget, 1) / 4),
            instructions: Stamped::new(share(budget, 3)),
            channels: Stamped::new(share(budget, 1).max(1024 * 1024)),
            counts,
        }
    }

    pub fn agent(&self, name: &str, generation: i64) -> Option<Option<Arc<LoadedAgent>>> {
        self.counts.count(self.agents.get(name, generation))
    }

    pub fn put_agent(&self, name: &str, stamp: i64, agent: Option<Arc<LoadedAgent>>) {
        self.agents.put(name.to_owned(), stamp, agent);
    }

    pub fn served(&self, key: &str, generation: i64) -> Option<Option<Arc<Served>>> {
        self.counts.count(self.served.get(key, generation))
    }

    pub fn put_served(&self, key: String, stamp: i64, served: Option<Arc<Served>>) {
        self.served.put(key, stamp, served);
    }

    pub fn rollout(&self, key: &str, generation: i64) -> Option<Option<Running>> {
        self.counts.count(self.rollouts.get(key, generation))
    }

    pub fn put_rollout(&self, key: String, stamp: i64, running: Option<Running>) {
        self.rollouts.put(key, stamp, running);
    }

    pub fn channels(&self, generation: i64) -> Option<Arc<Channels>> {
        self.counts.count(self.channels.get(&(), generation))
    }

    pub fn put_channels(&self, stamp: i64, channels: Arc<Channels>) {
        self.channels.put((), stamp, channels);
    }

    pub fn instructions(
        &self,
        tenant: &str,
        agent_id: i32,
        user: &str,
        generation: i64,
    ) -> Option<Option<Arc<str>>> {
        let key = (tenant.to_owned(), agent_id, user.to_owned());
        self.counts.count(self.instructions.get(&key, generation))
    }

    pub fn put_instructions(
        &self,
        tenant: &str,
        agent_id: i32,
        user: &str,
        stamp: i64,
        text: Option<Arc<str>>,
    ) {
        let key = (tenant.to_owned(), agent_id, user.to_owned());
        self.instructions.put(key, stamp, text);
    }
}

/// The key of what `agent`'s label `label` serves (`#3` for revision 3: no label
/// name starts with `#`).
pub fn served_key(agent: &str, label: &str) -> String {
    format!("{agent}\0{label}")
}

impl Weigh for Running {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Running>()
    }
}

impl Weigh for Arc<LoadedAgent> {
    fn bytes(&self) -> usize {
        loaded_bytes(self)
    }
}

impl Weigh for Arc<Served> {
    fn bytes(&self) -> usize {
        let channels: usize = self.channels.names().map(|n| n.len() + 64).sum();
        loaded_bytes(&self.agent) + channels + self.channels.guidance_bytes()
    }
}

fn loaded_bytes(loaded: &LoadedAgent) -> usize {
    let agent = &loaded.agent;
    let text = [
        &agent.name,
        &agent.soul,
        &agent.operating_model,
        &agent.interaction_learning,
    ]
    .iter()
    .map(|s| s.len())
    .sum::<usize>()
        + agent.prompt_template.as_ref().map_or(0, String::len)
        + agent.identity.to_string().len();
    let tools: usize = agent
        .tools
        .iter()
        .map(|t| {
            t.name.len() + t.description.len() + t.prompt_section.as_ref().map_or(0, String::len)
        })
        .sum();
    // The definitions repeat names and descriptions and add the schemas.
    let defs: usize = loaded
        .tools
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
        .sum();
    text + tools + defs
}

impl Weigh for Arc<Channels> {
    fn bytes(&self) -> usize {
        self.names().map(|n| n.len() + 64).sum::<usize>() + self.guidance_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{DEFAULT_BUDGET, Generation};

    fn cache(generation: i64) -> (PromptCache, Generation) {
        let generation = Generation::new(generation);
        (
            PromptCache::new(DEFAULT_BUDGET, generation.counts.clone()),
            generation,
        )
    }

    #[test]
    fn an_entry_older_than_the_generation_is_a_miss() {
        let (cache, generation) = cache(5);
        cache.put_instructions("t", 1, "u", 5, Some("hi".into()));
        assert_eq!(cache.instructions("t", 1, "u", 5), Some(Some("hi".into())));
        generation.observe(6);
        assert_eq!(cache.instructions("t", 1, "u", generation.current()), None);
    }

    #[test]
    fn a_late_writer_cannot_replace_a_newer_entry() {
        let (cache, _) = cache(7);
        cache.put_instructions("t", 1, "u", 7, Some("new".into()));
        cache.put_instructions("t", 1, "u", 6, Some("old".into()));
        assert_eq!(cache.instructions("t", 1, "u", 7), Some(Some("new".into())));
    }

    #[test]
    fn one_tenants_instructions_are_never_another_tenants() {
        let (cache, _) = cache(3);
        cache.put_instructions("acme", 1, "alice", 3, Some("acme's".into()));
        assert_eq!(cache.instructions("globex", 1, "alice", 3), None);
    }
}
