//! The generic parts of the caches: a generation-stamped map bounded in bytes
//! ([`Stamped`]), the configuration generation every entry is stamped with
//! ([`Generation`]), and the hit and miss counters every map counts into. Each map
//! lives with the code that owns what it holds: keys in `auth::cache`, loaded
//! agents, channels, users' instructions and encoded responses in `fetch`, argument
//! validators in `execute::arguments`.
//!
//! Every entry is stamped with the generation that was current *before* its rows
//! were read. A write bumps the generation in its own transaction and, on this
//! process, raises [`Generation::current`] right after the commit; other processes
//! learn the new value from the poller or the listener within one poll interval. An
//! entry whose stamp is older than the current generation is a miss, so no write
//! can leave a stale entry behind: at worst an entry read after a commit is stamped
//! too old and is read again.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

/// How many bytes the caches may hold in all, unless configured (`serve --cache-mib`).
pub const DEFAULT_BUDGET: usize = 128 * 1024 * 1024;

/// `n` sixteenths of `budget`: how the owners split the one budget (encoded
/// responses 8, users' instructions 3, validators 2, agents 1, served revisions 1,
/// channels 1).
pub fn share(budget: usize, n: usize) -> usize {
    budget / 16 * n
}

/// What moka and the map spend per entry besides the key and value themselves.
const ENTRY_OVERHEAD: usize = 96;

/// The bytes an entry holds, as near as cheaply known: the cache's weigher.
/// The owners implement it for what they cache.
pub trait Weigh {
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

/// One generation-stamped map, bounded in bytes: moka's TinyLFU admission keeps
/// frequently read entries when a stream of one-off keys (new users) arrives, and
/// its LRU eviction drops the least recently used; no map is ever cleared whole.
pub struct Stamped<K, V> {
    entries: moka::sync::Cache<K, (i64, V)>,
}

impl<K, V> Stamped<K, V>
where
    K: Eq + Hash + Weigh + Send + Sync + 'static,
    V: Clone + Weigh + Send + Sync + 'static,
{
    pub fn new(max_bytes: usize) -> Self {
        let entries = moka::sync::Cache::builder()
            .max_capacity(max_bytes as u64)
            .weigher(|key: &K, (_, value): &(i64, V)| {
                u32::try_from(key.bytes() + value.bytes() + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
            })
            .build();
        Self { entries }
    }

    pub fn get<Q>(&self, key: &Q, generation: i64) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.entries
            .get(key)
            .filter(|(stamp, _)| *stamp >= generation)
            .map(|(_, v)| v)
    }

    pub fn put(&self, key: K, stamp: i64, value: V) {
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
    pub fn weight(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }
}

/// Lookups answered from memory and lookups that went to the database, over every
/// map of a state: prometheus-client handles (a clone shares the count), so
/// [`crate::metrics`] exposes them as they are, with no copy at scrape time.
#[derive(Clone, Debug, Default)]
pub struct Counts {
    /// Lookups answered from memory.
    pub hits: Counter,
    /// Lookups that found nothing fresh, so the caller went to the database.
    pub misses: Counter,
}

impl Counts {
    /// Counts a lookup as a hit or a miss and passes its answer on.
    pub fn count<T>(&self, found: Option<T>) -> Option<T> {
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.inc();
        found
    }
}

/// How long cached keys are trusted without a generation read (see
/// [`Generation::confirmed_within`]). The poll reads the generation every 0.25 s
/// to 1 s, so only a database that has not answered for this long trips it.
pub const KEY_TRUST: std::time::Duration = std::time::Duration::from_secs(15);

/// The process's reference instant for [`Generation::confirmed_at`].
static EPOCH: std::sync::LazyLock<std::time::Instant> =
    std::sync::LazyLock::new(std::time::Instant::now);

fn since_epoch() -> u64 {
    u64::try_from(EPOCH.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The newest configuration generation this process knows of, when it was last
/// confirmed by the database, and the counters every map counts into.
/// The generation is a prometheus-client gauge, exposed as it is.
pub struct Generation {
    generation: Gauge<i64, AtomicI64>,
    /// When the generation was last read from the database (or heard from it), in
    /// nanoseconds since [`EPOCH`]: cached keys are trusted only for
    /// [`Generation::key_trust`] after it.
    confirmed_at: AtomicU64,
    /// How long a cached key is trusted without a generation read: a replica cut off
    /// from the database cannot hear of a revocation, so after this its keys go back
    /// to the database (and fail closed, 503, while it is away).
    key_trust: std::time::Duration,
    /// Told of every rise, so nothing needs to poll the generation.
    changes: tokio::sync::watch::Sender<i64>,
    /// Every map's hits and misses.
    pub counts: Counts,
}

impl Generation {
    /// At `generation`, confirmed now, trusting keys for [`KEY_TRUST`].
    pub fn new(generation: i64) -> Self {
        let gauge = Gauge::<i64, AtomicI64>::default();
        gauge.set(generation);
        Self {
            generation: gauge,
            confirmed_at: AtomicU64::new(since_epoch()),
            key_trust: KEY_TRUST,
            changes: tokio::sync::watch::Sender::new(generation),
            counts: Counts::default(),
        }
    }

    /// The newest generation this process knows of.
    pub fn current(&self) -> i64 {
        self.generation.inner().load(Ordering::Acquire)
    }

    /// Trusts cached keys for `trust` after a generation read.
    pub fn set_key_trust(&mut self, trust: std::time::Duration) {
        self.key_trust = trust;
    }

    /// Whether the generation was read recently enough to trust cached keys.
    pub fn keys_trusted(&self) -> bool {
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
        let before = self
            .generation
            .inner()
            .fetch_max(generation, Ordering::AcqRel);
        if generation > before {
            self.changes.send_replace(generation);
        }
    }

    /// Wakes on every rise of the generation (the MCP server's `list_changed` and
    /// `subscriptions/listen`); ends when this is dropped.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<i64> {
        self.changes.subscribe()
    }

    /// The generation as a metric, for registering.
    pub fn generation_gauge(&self) -> &Gauge<i64, AtomicI64> {
        &self.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_older_than_the_generation_is_a_miss() {
        let generation = Generation::new(5);
        let map: Stamped<String, Arc<str>> = Stamped::new(64 * 1024);
        map.put("k".to_owned(), 5, Arc::from("hi"));
        assert_eq!(map.get("k", generation.current()), Some(Arc::from("hi")));
        generation.observe(6);
        assert_eq!(map.get("k", generation.current()), None);
    }

    #[test]
    fn a_late_writer_cannot_replace_a_newer_entry() {
        let map: Stamped<String, Arc<str>> = Stamped::new(64 * 1024);
        map.put("k".to_owned(), 7, Arc::from("new"));
        map.put("k".to_owned(), 6, Arc::from("old"));
        assert_eq!(map.get("k", 7), Some(Arc::from("new")));
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
    fn the_generation_never_goes_back() {
        let generation = Generation::new(3);
        generation.observe(9);
        generation.observe(4);
        assert_eq!(generation.current(), 9);
    }
}
