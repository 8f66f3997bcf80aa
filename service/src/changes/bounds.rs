//! How many change streams this process holds: per tenant, so that one tenant
//! never takes another's share, and in all, so that streams never take every
//! connection (`serve --max-streams-per-tenant`, `--max-streams`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The default `--max-streams`: half the default `--max-connections`.
pub const DEFAULT_TOTAL: usize = 512;
/// The default `--max-streams-per-tenant`.
pub const DEFAULT_PER_TENANT: usize = 256;

/// The book of open streams.
pub struct Streams {
    per_tenant: usize,
    total: usize,
    book: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    tenants: HashMap<Arc<str>, usize>,
    total: usize,
}

/// Which bound a refused stream is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    Tenant(usize),
    Process(usize),
}

/// A stream's place in the book, given back when dropped.
pub struct Slot {
    streams: Arc<Streams>,
    tenant: Arc<str>,
}

impl Streams {
    pub fn new(per_tenant: usize, total: usize) -> Arc<Self> {
        Arc::new(Self {
            per_tenant,
            total,
            book: Mutex::new(Book::default()),
        })
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for one more stream of `tenant`, unless either bound is reached.
    pub fn reserve(self: &Arc<Self>, tenant: &str) -> Result<Slot, Full> {
        let mut book = self.book();
        if book.total >= self.total {
            return Err(Full::Process(self.total));
        }
        let held = book.tenants.get(tenant).copied().unwrap_or(0);
        if held >= self.per_tenant {
            return Err(Full::Tenant(self.per_tenant));
        }
        let tenant: Arc<str> = Arc::from(tenant);
        book.tenants.insert(tenant.clone(), held + 1);
        book.total += 1;
        Ok(Slot {
            streams: self.clone(),
            tenant,
        })
    }

    /// Streams open now.
    pub fn open(&self) -> usize {
        self.book().total
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut book = self.streams.book();
        book.total = book.total.saturating_sub(1);
        if let Some(held) = book.tenants.get_mut(&self.tenant) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                book.tenants.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_cannot_take_another_tenants_share_and_slots_come_back() {
        let streams = Streams::new(2, 3);
        let a1 = streams.reserve("a").unwrap();
        let _a2 = streams.reserve("a").unwrap();
        assert_eq!(streams.reserve("a").err(), Some(Full::Tenant(2)));
        let _b1 = streams.reserve("b").unwrap();
        assert_eq!(streams.reserve("b").err(), Some(Full::Process(3)));
        drop(a1);
        assert_eq!(streams.open(), 2);
        assert!(streams.reserve("b").is_ok());
    }
}
