//! Authenticated keys, cached per configuration generation: every request reads
//! its key here first.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::RwLock;

use super::keys::Principal;
use crate::cache::front::Front;
use crate::cache::{Counts, Generation, next_owner};

/// Authenticated keys cached at most (more are looked up each time).
pub const MAX_KEYS: usize = 65_536;

thread_local! {
    static KEYS: RefCell<Front<Principal>> = RefCell::new(Front::new());
}

/// Successful authentications only: a failed lookup is never cached, so tokens
/// that match no key can neither evict good keys nor fill memory. Only keys an
/// admin created can enter, so a plain map (read on every request, the cheapest
/// lookup there is) is bounded by the keys table; past [`MAX_KEYS`] new ones are
/// simply not cached. Keys are cached by their hash, never by the key itself.
pub struct Keys {
    /// This map among others in the process: what a thread's front belongs to.
    id: u64,
    keys: RwLock<HashMap<String, (i64, Principal)>>,
    counts: Counts,
}

impl Keys {
    /// An empty map counting into `counts`.
    pub fn new(counts: Counts) -> Self {
        Self {
            id: next_owner(),
            keys: RwLock::new(HashMap::new()),
            counts,
        }
    }

    /// The principal of a cached key, fresh at generation `at` (read from
    /// `generation` by the caller, who stamps a new entry with it). The thread's front is asked first; a key found in the shared map is copied
    /// into it. Nothing is found while the generation has not been read for longer
    /// than the key trust: the caller asks the database, which decides.
    pub fn get(&self, generation: &Generation, at: i64, key_hash: &str) -> Option<Principal> {
        if !generation.keys_trusted() {
            return self.counts.count(None);
        }
        let generation = at;
        let local = KEYS.with_borrow_mut(|front| front.get(self.id, generation, key_hash));
        if local.is_some() {
            return self.counts.count(local);
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
