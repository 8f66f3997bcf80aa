//! What the hot path reads, cached by configuration generation.
//!
//! Every entry is stamped with the generation that was current *before* its rows
//! were read. A write bumps the generation in its own transaction and, on this
//! process, raises [`Cache::generation`] right after the commit; other processes
//! learn the new value from [`Cache::poll`] within one poll interval. An entry whose
//! stamp is older than the current generation is a miss, so no write can leave a
//! stale entry behind: at worst an entry read after a commit is stamped too old and
//! is read again.

mod front;

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
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
    /// Quoted, as sent in the `ETag` header (a header value: cloning it is a count).
    pub etag: axum::http::HeaderValue,
}

impl Encoded {
    pub fn new(body: &impl serde::Serialize) -> Result<Self, serde_json::Error> {
        let bytes = serde_json::to_vec(body)?;
        let digest = crate::auth::keys::hash_bytes(&bytes);
        Ok(Self {
            // Hex and quotes only: always a valid header value.
            etag: axum::http::HeaderValue::try_from(format!("\"{}\"", &digest[..32]))
                .unwrap_or_else(|_| axum::http::HeaderValue::from_static("\"\"")),
            body: bytes.into(),
        })
    }
}

/// A tool's compiled argument validator, with the schema it was compiled from.
pub struct ToolValidator {
    pub schema: serde_json::Value,
    pub validator: jsonschema::Validator,
}

/// How many bytes the cache may hold in all, unless configured (`serve --cache-mib`).
pub const DEFAULT_BUDGET: usize = 128 * 1024 * 1024;
/// Encoded responses larger than this are served but never cached: a few of them
/// would crowd out thousands of ordinary ones.
pub const MAX_CACHED_BODY: usize = 256 * 1024;
/// Authenticated keys cached at most (more are looked up each time).
pub const MAX_KEYS: usize = 65_536;
/// The largest response body a thread's front copies: at most
/// [`front::CAPACITY`] × 64 KiB (4 MiB) per worker thread.
pub const MAX_FRONT_BODY: usize = 64 * 1024;

thread_local! {
    static RESPONSES: RefCell<front::Front<Encoded>> = RefCell::new(front::Front::new());
    static KEYS: RefCell<front::Front<Principal>> = RefCell::new(front::Front::new());
}
/// What moka and the map spend per entry besides the key and value themselves.
const ENTRY_OVERHEAD: usize = 96;

/// The bytes an entry holds, as near as cheaply known: the cache's weigher.
trait Weigh {
    fn bytes(&self) -> usize;
}

impl Weigh for String {
    fn bytes(&self) -> usize {
        self.len()
    }
}

impl Weigh for () {
    fn bytes(&self) -> usize {
        0
    }
}

impl Weigh for i32 {
    fn bytes(&self) -> usize {
        4
    }
}

impl Weigh for (String, i32, String) {
    fn bytes(&self) -> usize {
        self.0.len() + 4 + self.2.len()
    }
}

impl<T: Weigh> Weigh for Option<T> {
    fn bytes(&self) -> usize {
        self.as_ref().map_or(0, Weigh::bytes)
    }
}

impl Weigh for Arc<str> {
    fn bytes(&self) -> usize {
        self.len()
    }
}

impl Weigh for Arc<LoadedAgent> {
    fn bytes(&self) -> usize {
        let agent = &self.agent;
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
                t.name.len()
                    + t.description.len()
                    + t.prompt_section.as_ref().map_or(0, String::len)
            })
            .sum();
        // The definitions repeat names and descriptions and add the schemas.
        let defs: usize = self
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum();
        text + tools + defs
    }
}

impl Weigh for Arc<Channels> {
    fn bytes(&self) -> usize {
        self.names().map(|n| n.len() + 64).sum::<usize>() + self.guidance_bytes()
    }
}

impl Weigh for Encoded {
    fn bytes(&self) -> usize {
        self.body.len() + self.etag.len()
    }
}

impl Weigh for Arc<ToolValidator> {
    fn bytes(&self) -> usize {
        // A compiled validator is a tree of nodes a few times the schema's text.
        self.schema.to_string().len() * 4
    }
}

/// One generation-stamped map, bounded in bytes: moka's TinyLFU admission keeps
/// frequently read entries when a stream of one-off keys (new users) arrives, and
/// its LRU eviction drops the least recently used; no map is ever cleared whole.
struct Stamped<K, V> {
    entries: moka::sync::Cache<K, (i64, V)>,
}

impl<K, V> Stamped<K, V>
where
    K: Eq + Hash + Weigh + Send + Sync + 'static,
    V: Clone + Weigh + Send + Sync + 'static,
{
    fn new(max_bytes: usize) -> Self {
        let entries = moka::sync::Cache::builder()
            .max_capacity(max_bytes as u64)
            .weigher(|key: &K, (_, value): &(i64, V)| {
                u32::try_from(key.bytes() + value.bytes() + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
            })
            .build();
        Self { entries }
    }

    fn get<Q>(&self, key: &Q, generation: i64) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.entries
            .get(key)
            .filter(|(stamp, _)| *stamp >= generation)
            .map(|(_, v)| v)
    }

    fn put(&self, key: K, stamp: i64, value: V) {
        use moka::ops::compute::Op;
        // A late writer (stamped before a newer entry was read) must not replace it.
        self.entries
            .entry(key)
            .and_compute_with(|existing| match existing {
                Some(entry) if entry.value().0 > stamp => Op::Nop,
                _ => Op::Put((stamp, value)),
            });
    }

    /// Bytes held, as the weigher counts them (after pending evictions run).
    #[cfg(test)]
    fn weight(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }
}

/// How long cached keys are trusted without a generation read (see
/// [`Cache::key_trust`]). The poll reads the generation every 0.25 s to 1 s, so only
/// a database that has not answered for this long trips it.
pub const KEY_TRUST: std::time::Duration = std::time::Duration::from_secs(15);

/// The process's reference instant for [`Cache::confirmed_at`].
static EPOCH: std::sync::LazyLock<std::time::Instant> =
    std::sync::LazyLock::new(std::time::Instant::now);

fn since_epoch() -> u64 {
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Per-process cache of agents, channels, user instructions, keys, encoded
/// responses and tools' argument validators, each map bounded in bytes.
/// Its counters and generation are prometheus-client handles, so [`crate::metrics`]
/// exposes them as they are, with no copy at scrape time.
pub struct Cache {
    /// This cache among others in the process (tests run many): what a thread's
    /// [`front`] belongs to.
    id: u64,
    generation: Gauge<i64, AtomicI64>,
    agents: Stamped<String, Option<Arc<LoadedAgent>>>,
    channels: Stamped<(), Arc<Channels>>,
    /// By (tenant, agent id, user): a user id names a person only inside a tenant.
    instructions: Stamped<(String, i32, String), Option<Arc<str>>>,
    /// Successful authentications only: a failed lookup is never cached, so tokens
    /// that match no key can neither evict good keys nor fill memory. Only keys an
    /// admin created can enter, so a plain map (read on every request, the cheapest
    /// lookup there is) is bounded by the keys table; past [`MAX_KEYS`] new ones are
    /// simply not cached.
    keys: RwLock<HashMap<String, (i64, Principal)>>,
    responses: Stamped<String, Encoded>,
    /// Argument validators by tool id, compiled once per generation.
    validators: Stamped<i32, Arc<ToolValidator>>,
    /// When the generation was last read from the database (or heard from it), in
    /// nanoseconds since [`EPOCH`]: cached keys are trusted only for
    /// [`Cache::key_trust`] after it.
    confirmed_at: AtomicU64,
    /// How long a cached key is trusted without a generation read: a replica cut off
    /// from the database cannot hear of a revocation, so after this its keys go back
    /// to the database (and fail closed, 503, while it is away).
    key_trust: std::time::Duration,
    /// Lookups answered from memory.
    pub hits: Counter,
    /// Lookups that found nothing fresh, so the caller went to the database.
    pub misses: Counter,
}

impl Cache {
    /// An empty cache at `generation` with the default budget.
    pub fn new(generation: i64) -> Self {
        Self::with_budget(generation, DEFAULT_BUDGET)
    }

    /// An empty cache at `generation` holding at most about `bytes`: half for
    /// encoded responses, the rest split between agents, users' instructions and
    /// validators.
    pub fn with_budget(generation: i64, bytes: usize) -> Self {
        let gauge = Gauge::<i64, AtomicI64>::default();
        gauge.set(generation);
        let share = |n: usize| bytes / 16 * n;
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            generation: gauge,
            responses: Stamped::new(share(8)),
            agents: Stamped::new(share(2)),
            instructions: Stamped::new(share(3)),
            validators: Stamped::new(share(2)),
            keys: RwLock::new(HashMap::new()),
            confirmed_at: AtomicU64::new(since_epoch()),
            key_trust: KEY_TRUST,
            channels: Stamped::new(share(1).max(1024 * 1024)),
            hits: Counter::default(),
            misses: Counter::default(),
        }
    }
    /// The newest generation this process knows of.
    pub fn generation(&self) -> i64 {
        self.generation.inner().load(Ordering::Acquire)
    }

    /// Trusts cached keys for `trust` after a generation read.
    pub fn set_key_trust(&mut self, trust: std::time::Duration) {
        self.key_trust = trust;
    }

    /// Whether the generation was read recently enough to trust cached keys.
    fn keys_trusted(&self) -> bool {
        let age = since_epoch().saturating_sub(self.confirmed_at.load(Ordering::Relaxed));
        u128::from(age) <= self.key_trust.as_nanos()
    }

    /// Records a generation seen in the database (after a local commit, or by the
    /// poller or the listener), which also confirms the database answers.
    pub fn observe(&self, generation: i64) {
        self.confirmed_at
            .fetch_max(since_epoch(), Ordering::Relaxed);
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

    /// A whole encoded GET response, keyed by everything it depends on. The
    /// thread's front is asked first; a small body found in the shared map is
    /// copied into it, so later hits on this thread share no memory with others.
    pub fn response(&self, key: &str, generation: i64) -> Option<Encoded> {
        let local = RESPONSES.with_borrow_mut(|front| front.get(self.id, generation, key));
        if local.is_some() {
            return self.count(local);
        }
        let found = self.responses.get(key, generation);
        if let Some(shared) = found.as_ref().filter(|e| e.body.len() <= MAX_FRONT_BODY) {
            let own = Encoded {
                body: axum::body::Bytes::copy_from_slice(&shared.body),
                etag: axum::http::HeaderValue::from_bytes(shared.etag.as_bytes())
                    .unwrap_or_else(|_| shared.etag.clone()),
            };
            RESPONSES.with_borrow_mut(|front| front.put(self.id, generation, key, own));
        }
        self.count(found)
    }

    /// Caches a response unless its body is over [`MAX_CACHED_BODY`].
    pub fn put_response(&self, key: String, stamp: i64, response: Encoded) {
        if response.body.len() <= MAX_CACHED_BODY {
            self.responses.put(key, stamp, response);
        }
    }

    /// The argument validator of the tool with this id.
    pub fn validator(&self, tool_id: i32, generation: i64) -> Option<Arc<ToolValidator>> {
        self.count(self.validators.get(&tool_id, generation))
    }

    pub fn put_validator(&self, tool_id: i32, stamp: i64, validator: Arc<ToolValidator>) {
        self.validators.put(tool_id, stamp, validator);
    }

    /// Keys are cached by their hash, never by the key itself.
    /// The thread's front is asked first, as for responses.
    /// Nothing is found while the generation has not been read for longer than the
    /// key trust: the caller asks the database, which decides.
    pub fn key(&self, key_hash: &str, generation: i64) -> Option<Principal> {
        if !self.keys_trusted() {
            return self.count(None);
        }
        let local = KEYS.with_borrow_mut(|front| front.get(self.id, generation, key_hash));
        if local.is_some() {
            return self.count(local);
        }
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let found = keys
            .get(key_hash)
            .filter(|(stamp, _)| *stamp >= generation)
            .map(|(_, principal)| principal.clone());
        drop(keys);
        if let Some(principal) = &found {
            KEYS.with_borrow_mut(|front| {
                front.put(self.id, generation, key_hash, principal.clone());
            });
        }
        self.count(found)
    }

    /// Caches a successful authentication (failures are never cached).
    pub fn put_key(&self, key_hash: String, stamp: i64, principal: Principal) {
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        let room = keys.len() < MAX_KEYS || keys.contains_key(&key_hash);
        match keys.get(&key_hash) {
            Some((existing, _)) if *existing > stamp => {}
            _ if room => {
                keys.insert(key_hash, (stamp, principal));
            }
            _ => {}
        }
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
    fn a_map_never_holds_more_bytes_than_its_budget() {
        let map: Stamped<String, Arc<str>> = Stamped::new(64 * 1024);
        for i in 0..10_000 {
            map.put(format!("user-{i}"), 1, Arc::from("x".repeat(1000)));
        }
        let held = map.weight();
        assert!(held <= 64 * 1024, "{held}");
        assert!(held > 0);
    }

    #[test]
    fn a_stream_of_new_keys_does_not_flush_a_frequently_read_one() {
        let map: Stamped<String, Arc<str>> = Stamped::new(64 * 1024);
        map.put("hot".to_owned(), 1, Arc::from("value"));
        for i in 0..20_000 {
            assert!(map.get("hot", 1).is_some(), "evicted after {i} new keys");
            map.put(format!("user-{i}"), 1, Arc::from("x".repeat(500)));
        }
    }

    #[test]
    fn a_body_over_the_size_limit_is_served_but_not_cached() {
        let cache = Cache::new(1);
        let big = Encoded::new(&"x".repeat(MAX_CACHED_BODY)).expect("encode");
        cache.put_response("big".to_owned(), 1, big);
        assert!(cache.response("big", 1).is_none());
        let small = Encoded::new(&"x").expect("encode");
        cache.put_response("small".to_owned(), 1, small);
        assert!(cache.response("small", 1).is_some());
    }

    #[test]
    fn the_generation_never_goes_back() {
        let cache = Cache::new(3);
        cache.observe(9);
        cache.observe(4);
        assert_eq!(cache.generation(), 9);
    }
}
