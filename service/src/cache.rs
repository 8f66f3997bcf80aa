//! What the hot path reads, cached by configuration generation.
//!
//! Every entry is stamped with the generation that was current *before* its rows
//! were read. A write bumps the generation in its own transaction and, on this
//! process, raises [`Cache::generation`] right after the commit; other processes
//! learn the new value from [`Cache::poll`] within one poll interval. An entry whose
//! stamp is older than the current generation is a miss, so no write can leave a
//! stale entry behind: at worst an entry read after a commit is stamped too old and
//! is read again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::auth::keys::Principal;
use crate::prompt::builder::{Agent, Channels};

/// An agent with its database id, as loaded for rendering.
#[derive(Debug)]
pub struct LoadedAgent {
    pub id: i32,
    pub agent: Agent,
    /// The agent's active tools with their schemas, sorted by name.
    pub tools: Vec<crate::registry::formats::ToolDef>,
}

impl LoadedAgent {
    /// A copy whose prompt template is `template`, for previews.
    pub fn clone_with_template(&self, template: Option<String>) -> LoadedAgent {
        let mut agent = self.agent.clone();
        agent.prompt_template = template;
        LoadedAgent {
            id: self.id,
            agent,
            tools: self.tools.clone(),
        }
    }
}

/// A response body serialised once, with its strong ETag (the first 128 bits of
/// its SHA-256), ready to send again.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub body: axum::body::Bytes,
    /// Quoted, as sent in the `ETag` header.
    pub etag: String,
}

impl Encoded {
    pub fn new(body: &impl serde::Serialize) -> Result<Self, serde_json::Error> {
        let bytes = serde_json::to_vec(body)?;
        let digest = crate::auth::keys::hash_bytes(&bytes);
        Ok(Self {
            etag: format!("\"{}\"", &digest[..32]),
            body: bytes.into(),
        })
    }
}

/// A tool's compiled argument validator, with the schema it was compiled from.
pub struct ToolValidator {
    pub schema: serde_json::Value,
    pub validator: jsonschema::Validator,
}

/// Entries per map before it is pruned.
const CAPACITY: usize = 4096;

/// One generation-stamped map.
struct Stamped<K, V> {
    entries: RwLock<HashMap<K, (i64, V)>>,
}

impl<K: Eq + Hash, V: Clone> Stamped<K, V> {
    fn new() -> Self {
        Self {
            entries: RwLock::new(HashMap::new()),
        }
    }

    fn get<Q>(&self, key: &Q, generation: i64) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let entries = self.entries.read().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(stamp, _)| *stamp >= generation)
            .map(|(_, v)| v.clone())
    }

    fn put(&self, key: K, stamp: i64, value: V) {
        let mut entries = self.entries.write().unwrap_or_else(|e| e.into_inner());
        // Old generations are dead weight; drop them when the map grows, and start
        // over if it is still full (old minutes, many users): memory stays bounded.
        if entries.len() >= CAPACITY {
            entries.retain(|_, (s, _)| *s >= stamp);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        match entries.get(&key) {
            Some((existing, _)) if *existing > stamp => {}
            _ => {
                entries.insert(key, (stamp, value));
            }
        }
    }
}

/// Per-process cache of agents, channels, user instructions, keys and tools'
/// argument validators.
/// Its counters and generation are prometheus-client handles, so [`crate::metrics`]
/// exposes them as they are, with no copy at scrape time.
pub struct Cache {
    generation: Gauge<i64, AtomicI64>,
    agents: Stamped<String, Option<Arc<LoadedAgent>>>,
    channels: Stamped<(), Arc<Channels>>,
    /// By (tenant, agent id, user): a user id names a person only inside a tenant.
    instructions: Stamped<(String, i32, String), Option<Arc<str>>>,
    keys: Stamped<String, Option<Principal>>,
    responses: Stamped<String, Encoded>,
    /// Argument validators by tool id, compiled once per generation.
    validators: Stamped<i32, Arc<ToolValidator>>,
    /// Lookups answered from memory.
    pub hits: Counter,
    /// Lookups that found nothing fresh, so the caller went to the database.
    pub misses: Counter,
}

impl Cache {
    /// An empty cache at `generation`.
    pub fn new(generation: i64) -> Self {
        let gauge = Gauge::<i64, AtomicI64>::default();
        gauge.set(generation);
        Self {
            generation: gauge,
            agents: Stamped::new(),
            channels: Stamped::new(),
            instructions: Stamped::new(),
            keys: Stamped::new(),
            responses: Stamped::new(),
            validators: Stamped::new(),
            hits: Counter::default(),
            misses: Counter::default(),
        }
    }

    /// The newest generation this process knows of.
    pub fn generation(&self) -> i64 {
        self.generation.inner().load(Ordering::Acquire)
    }

    /// Records a generation seen in the database (after a local commit, or by the poller).
    pub fn observe(&self, generation: i64) {
        // On the atomic itself: the gauge has no `fetch_max`, and the generation must
        // never go back when a slow poll lands after a local commit.
        self.generation
            .inner()
            .fetch_max(generation, Ordering::AcqRel);
    }

    /// The generation as a metric, for registering.
    pub fn generation_gauge(&self) -> &Gauge<i64, AtomicI64> {
        &self.generation
    }

    fn count<T>(&self, found: Option<T>) -> Option<T> {
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.inc();
        found
    }

    pub fn agent(&self, name: &str, generation: i64) -> Option<Option<Arc<LoadedAgent>>> {
        self.count(self.agents.get(name, generation))
    }

    pub fn put_agent(&self, name: &str, stamp: i64, agent: Option<Arc<LoadedAgent>>) {
        self.agents.put(name.to_owned(), stamp, agent);
    }

    pub fn channels(&self, generation: i64) -> Option<Arc<Channels>> {
        self.count(self.channels.get(&(), generation))
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
        self.count(self.instructions.get(&key, generation))
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

    /// A whole encoded GET response, keyed by everything it depends on.
    pub fn response(&self, key: &str, generation: i64) -> Option<Encoded> {
        self.count(self.responses.get(key, generation))
    }

    pub fn put_response(&self, key: String, stamp: i64, response: Encoded) {
        self.responses.put(key, stamp, response);
    }

    /// The argument validator of the tool with this id.
    pub fn validator(&self, tool_id: i32, generation: i64) -> Option<Arc<ToolValidator>> {
        self.count(self.validators.get(&tool_id, generation))
    }

    pub fn put_validator(&self, tool_id: i32, stamp: i64, validator: Arc<ToolValidator>) {
        self.validators.put(tool_id, stamp, validator);
    }

    /// Keys are cached by their hash, never by the key itself.
    pub fn key(&self, key_hash: &str, generation: i64) -> Option<Option<Principal>> {
        self.count(self.keys.get(key_hash, generation))
    }

    pub fn put_key(&self, key_hash: String, stamp: i64, principal: Option<Principal>) {
        self.keys.put(key_hash, stamp, principal);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_older_than_the_generation_is_a_miss() {
        let cache = Cache::new(5);
        cache.put_instructions("t", 1, "u", 5, Some("hi".into()));
        assert_eq!(cache.instructions("t", 1, "u", 5), Some(Some("hi".into())));
        cache.observe(6);
        assert_eq!(cache.instructions("t", 1, "u", cache.generation()), None);
    }

    #[test]
    fn a_late_writer_cannot_replace_a_newer_entry() {
        let cache = Cache::new(7);
        cache.put_instructions("t", 1, "u", 7, Some("new".into()));
        cache.put_instructions("t", 1, "u", 6, Some("old".into()));
        assert_eq!(cache.instructions("t", 1, "u", 7), Some(Some("new".into())));
    }

    #[test]
    fn one_tenants_instructions_are_never_another_tenants() {
        let cache = Cache::new(3);
        cache.put_instructions("acme", 1, "alice", 3, Some("acme's".into()));
        assert_eq!(cache.instructions("globex", 1, "alice", 3), None);
    }

    #[test]
    fn a_map_never_grows_past_its_capacity() {
        let map: Stamped<u32, u32> = Stamped::new();
        for i in 0..(CAPACITY as u32 * 3) {
            map.put(i, 1, i);
        }
        let len = map.entries.read().map(|e| e.len()).unwrap_or(usize::MAX);
        assert!(len <= CAPACITY, "{len}");
        assert_eq!(
            map.get(&(CAPACITY as u32 * 3 - 1), 1),
            Some(CAPACITY as u32 * 3 - 1)
        );
    }

    #[test]
    fn the_generation_never_goes_back() {
        let cache = Cache::new(3);
        cache.observe(9);
        cache.observe(4);
        assert_eq!(cache.generation(), 9);
    }
}
