//! A small map per thread in front of a shared cache, for the entries every request
//! reads (its key, its response). Two workers reading one shared map still write to
//! the same memory: reader counts, reference counts, hit recording. Each such write
//! moves a cache line between cores, and on a 2-core machine that cost the cached
//! fetch a large share of its time. A front is read and written by its own thread
//! only, so a hit touches nothing another core touches.
//!
//! The map is generic; the thread-locals are declared by the owner of the map a
//! front stands before (`auth::cache` for keys, `fetch::encoded` for responses).
//!
//! A front belongs to one cache (its `owner`) at one generation: a lookup for
//! another owner or generation empties it first, so it can never answer from an
//! older configuration than the shared map would.

use std::collections::HashMap;

/// Entries per front; past it, an arbitrary entry makes room.
pub const CAPACITY: usize = 64;

pub struct Front<V> {
    owner: u64,
    generation: i64,
    entries: HashMap<String, V>,
}

impl<V: Clone> Default for Front<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone> Front<V> {
    pub fn new() -> Self {
        Self {
            owner: 0,
            generation: i64::MIN,
            entries: HashMap::new(),
        }
    }

    fn align(&mut self, owner: u64, generation: i64) {
        if self.owner != owner || self.generation != generation {
            self.entries.clear();
            self.owner = owner;
            self.generation = generation;
        }
    }

    pub fn get(&mut self, owner: u64, generation: i64, key: &str) -> Option<V> {
        self.align(owner, generation);
        self.entries.get(key).cloned()
    }

    pub fn put(&mut self, owner: u64, generation: i64, key: &str, value: V) {
        self.align(owner, generation);
        if self.entries.len() >= CAPACITY && !self.entries.contains_key(key) {
            let any = self.entries.keys().next().cloned();
            if let Some(any) = any {
                self.entries.remove(&any);
            }
        }
        self.entries.insert(key.to_owned(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_generation_or_owner_empties_the_front() {
        let mut front = Front::new();
        front.put(1, 5, "k", "v");
        assert_eq!(front.get(1, 5, "k"), Some("v"));
        assert_eq!(front.get(1, 6, "k"), None, "a new generation");
        front.put(1, 6, "k", "v");
        assert_eq!(front.get(2, 6, "k"), None, "another cache");
    }

    #[test]
    fn a_full_front_stays_at_its_capacity() {
        let mut front = Front::new();
        for i in 0..CAPACITY * 3 {
            front.put(1, 1, &i.to_string(), i);
        }
        assert_eq!(front.entries.len(), CAPACITY);
        let last = (CAPACITY * 3 - 1).to_string();
        assert_eq!(front.get(1, 1, &last), Some(CAPACITY * 3 - 1));
    }
}
