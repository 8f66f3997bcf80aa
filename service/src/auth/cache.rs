//! Authenticated keys, cached per configuration generation: every request reads
//! its key here first.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::RwLock;

use super::keys::Principal;
use crate::cache::{Counts, Generation};

/// Authenticated keys cached at most (more are looked up each time).
pub const MAX_KEYS: usize = 65_536;

/// Successful authentications only: a failed lookup is never cached, so tokens
/// that match no key can neither evict good keys nor fill memory. Only keys an
/// admin created can enter, so a plain map (read on every request, the cheapest
/// lookup there is) is bounded by the keys table; past [`MAX_KEYS`] new ones are
/// simply not cached. Keys are cached by a keyed hash ([`Slot`]), never by the key
/// itself.
pub struct Keys {
    keys: RwLock<HashMap<Slot, (i64, Principal)>>,
    /// The process's random SipHash key behind every [`Slot`].
    seed: RandomState,
    counts: Counts,
}

/// A key's place in the cache: 128 bits of SipHash-1-3 under a random key of this
/// process (the key hashed twice, followed by 0 and by 1). Every request's key is
/// hashed here: SHA-256 and its hex string were 8 % of a cached fetch's instructions
/// (BENCHMARKS.md, issue 36), two SipHashes a few hundred. The map never holds a key,
/// and without the process's random key nobody can aim a token at another's slot;
/// the database, which compares SHA-256, decides every key the cache does not hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot(u64, u64);

impl Keys {
    /// An empty map counting into `counts`.
    pub fn new(counts: Counts) -> Self {
        Self {
            keys: RwLock::new(HashMap::new()),
            seed: RandomState::new(),
            counts,
        }
    }

    /// Where `key` (as presented) is cached.
    pub fn slot(&self, key: &str) -> Slot {
        Slot(
            self.seed.hash_one((key, 0u8)),
            self.seed.hash_one((key, 1u8)),
        )
    }

    /// The principal of a cached key, fresh at generation `at` (read from
    /// `generation` by the caller, who stamps a new entry with it). Nothing is found
    /// while the generation has not been read for longer than the key trust: the
    /// caller asks the database, which decides.
    pub fn get(&self, generation: &Generation, at: i64, slot: Slot) -> Option<Principal> {
        if !generation.keys_trusted() {
            return self.counts.count(None);
        }
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let found = keys
            .get(&slot)
            .filter(|(stamp, _)| *stamp >= at)
            .map(|(_, principal)| principal.clone());
        drop(keys);
        self.counts.count(found)
    }

    /// Caches a successful authentication (failures are never cached).
    pub fn put(&self, slot: Slot, stamp: i64, principal: Principal) {
        let mut keys = self.keys.write().unwrap_or_else(|e| e.into_inner());
        let room = keys.len() < MAX_KEYS || keys.contains_key(&slot);
        match keys.get(&slot) {
            Some((existing, _)) if *existing > stamp => {}
            _ if room => {
                keys.insert(slot, (stamp, principal));
            }
            _ => {}
        }
    }
}
