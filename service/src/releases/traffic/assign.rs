//! Which side of a rollout a subject is on: a pure function of the agent, the
//! label, the rollout's id and the subject (a user id, else a conversation id).
//!
//! The bucket is the first 8 bytes of SHA-256 over the four fields, each
//! prefixed with its length (so `("ab", "c")` and `("a", "bc")` never collide),
//! reduced to 0..10000. A cryptographic hash, never a process-seeded one: every
//! process, and every release of loadout, puts a subject in the same bucket. The
//! subject is on the candidate iff its bucket is below the share, so raising the
//! share only adds subjects, and a new rollout (a new id) draws afresh.

use sha2::{Digest, Sha256};

/// Basis points in a whole: shares and buckets are in 0..=10000.
pub const WHOLE: u16 = 10_000;

/// The subject's bucket in 0..10000 for this rollout.
pub fn bucket(agent: &str, label: &str, rollout_id: i32, subject: &str) -> u16 {
    let mut hash = Sha256::new();
    for field in [agent.as_bytes(), label.as_bytes()] {
        hash.update((field.len() as u64).to_be_bytes());
        hash.update(field);
    }
    let id = rollout_id.to_be_bytes();
    hash.update((id.len() as u64).to_be_bytes());
    hash.update(id);
    hash.update((subject.len() as u64).to_be_bytes());
    hash.update(subject.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    // 2^64 is not a multiple of 10,000: the bias is below 10^-15 per bucket.
    (u64::from_be_bytes(first) % u64::from(WHOLE)) as u16
}

/// Whether the subject gets the candidate at `share_bp` basis points.
pub fn candidate(agent: &str, label: &str, rollout_id: i32, subject: &str, share_bp: u16) -> bool {
    bucket(agent, label, rollout_id, subject) < share_bp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_is_the_same_on_every_call_and_below_the_whole() {
        let first = bucket("support", "production", 7, "alice");
        assert_eq!(first, bucket("support", "production", 7, "alice"));
        assert!(first < WHOLE);
    }

    #[test]
    fn length_prefixes_keep_shifted_fields_apart() {
        let a: Vec<u16> = (0..50).map(|i| bucket("ab", "c", i, "u")).collect();
        let b: Vec<u16> = (0..50).map(|i| bucket("a", "bc", i, "u")).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn raising_the_share_only_adds_subjects() {
        for i in 0..2_000 {
            let user = format!("user-{i}");
            if candidate("a", "production", 3, &user, 1_000) {
                assert!(candidate("a", "production", 3, &user, 2_000));
            }
        }
    }

    #[test]
    fn a_share_of_zero_is_nobody_and_a_whole_is_everybody() {
        for i in 0..500 {
            let user = format!("user-{i}");
            assert!(!candidate("a", "l", 1, &user, 0));
            assert!(candidate("a", "l", 1, &user, WHOLE));
        }
    }
}
