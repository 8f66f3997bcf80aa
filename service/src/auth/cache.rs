//! Authenticated keys, cached per configuration generation: every request reads
//! its key here first.

use std::collections::HashMap;
use std::sync::RwLock;

use super::keys::Principal;
use crate::cache::{Counts, Generation};

/// Authenticated keys cached at most (more are looked up each time).
pub const MAX_KEYS: usize = 65_536;

/// Successful authentications only: a failed lookup is never cached, so tokens
/// that match no key can neither evict good keys nor fill memory. Only keys an
/// admin created can enter, so a plain map (read on every request, the cheapest
/// lookup there is) is bounded by the keys table; past [`MAX_KEYS`] new ones are
/// simply not cached. Keys are cached by their hash, never by the key itself.
pub struct Keys {
    keys: RwLock<HashMap<String, (i64, Principal)>>,
    counts: Counts,
}

impl Keys {
    /// An empty map counting into `counts`.
    pub fn new(counts: Counts) -> Self {
        Self {
            keys: RwLock::new(HashMap::new()),
            counts,
        }
    }

    /// The principal of a cached key, fresh at generation `at` (read from
    /// `generation` by the caller, who stamps a new entry with it). Nothing is found
    /// while the generation has not been read for longer than the key trust: the
    /// caller asks the database, which decides.
    pub fn get(&self, generation: &Generation, at: i64, key_hash: &str) -> Option<Principal> {
        if !generation.keys_trusted() {
            return self.counts.count(None);
        }
        let keys = self.keys.read().unwrap_or_else(|e| e.into_inner());
        let found = keys
            .get(key_hash)
            .filter(|(stamp, _)| *stamp >= at)
            .map(|(_, principal)| principal.clone());
        drop(keys);
        self.counts.count(found)
    }

    /// Caches a successful authentication (failures are never cached).
    pub fn put(&self, key_hash: String, stamp: i64, principal: Principal) {
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
