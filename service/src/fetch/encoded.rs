//! Whole GET responses, encoded once with their ETag, cached per generation: what
//! the HTTP fetch path (`http::fetch::cached`) serves again. They live here, under
//! the prompt service that produces the views, rather than in `http/`, because the
//! state (`app`) holds the map and `app` sits below `http`.

use axum::body::Bytes;
use axum::http::HeaderValue;

use crate::cache::{Counts, Stamped, Weigh, share};

/// Encoded responses larger than this are served but never cached: a few of them
/// would crowd out thousands of ordinary ones.
pub const MAX_CACHED_BODY: usize = 256 * 1024;

/// A response body serialised once, with its strong ETag (the first 128 bits of
/// its SHA-256), ready to send again.
#[derive(Clone, Debug)]
pub struct Encoded {
    pub body: Bytes,
    /// Quoted, as sent in the `ETag` header (a header value: cloning it is a count).
    pub etag: HeaderValue,
    /// The revision served, as sent in the `Loadout-Revision` header.
    pub revision: Option<HeaderValue>,
}

impl Encoded {
    pub fn new(body: &impl serde::Serialize) -> Result<Self, serde_json::Error> {
        let bytes = serde_json::to_vec(body)?;
        let digest = crate::digest::sha256_hex(&bytes);
        Ok(Self {
            // Hex and quotes only: always a valid header value.
            etag: HeaderValue::try_from(format!("\"{}\"", &digest[..32]))
                .unwrap_or_else(|_| HeaderValue::from_static("\"\"")),
            body: bytes.into(),
            revision: None,
        })
    }

    /// The same, naming the revision it serves (`Loadout-Revision`).
    pub fn with_revision(mut self, number: i32) -> Self {
        self.revision = Some(HeaderValue::from(number));
        self
    }
}

impl Weigh for Encoded {
    fn bytes(&self) -> usize {
        self.body.len() + self.etag.len()
    }
}

/// Encoded responses by a key naming everything they depend on.
pub struct Responses {
    responses: Stamped<String, Encoded>,
    counts: Counts,
}

impl Responses {
    /// An empty map taking half of `budget`, counting into `counts`.
    pub fn new(budget: usize, counts: Counts) -> Self {
        Self {
            responses: Stamped::new(share(budget, 8)),
            counts,
        }
    }

    /// A whole encoded GET response, keyed by everything it depends on.
    pub fn get(&self, key: &str, generation: i64) -> Option<Encoded> {
        self.counts.count(self.responses.get(key, generation))
    }

    /// Caches a response unless its body is over [`MAX_CACHED_BODY`].
    pub fn put(&self, key: String, stamp: i64, response: Encoded) {
        if response.body.len() <= MAX_CACHED_BODY {
            self.responses.put(key, stamp, response);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_over_the_size_limit_is_served_but_not_cached() {
        let cache = Responses::new(crate::cache::DEFAULT_BUDGET, Counts::default());
        let big = Encoded::new(&"x".repeat(MAX_CACHED_BODY)).expect("encode");
        cache.put("big".to_owned(), 1, big);
        assert!(cache.get("big", 1).is_none());
        let small = Encoded::new(&"x").expect("encode");
        cache.put("small".to_owned(), 1, small);
        assert!(cache.get("small", 1).is_some());
    }
}
