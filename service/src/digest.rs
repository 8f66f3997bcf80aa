//! SHA-256 as lowercase hex, the one digest loadout stores and compares: key,
//! session and login-state hashes, request and argument fingerprints, ETags,
//! revision content hashes. Below every domain, so none borrows it from another.
//!
//! And canonical JSON: object keys sorted at every depth. serde_json keeps keys in
//! the order they came in (a dependency, cedar-policy-core, switches its
//! `preserve_order` on, and PostgreSQL's `jsonb` returns its own order), so whatever
//! is hashed or compared as JSON text goes through [`sorted`] first.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex(&Sha256::digest(bytes.as_ref()))
}

/// `value` with object keys sorted at every depth (nulls kept).
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The canonical JSON text of `value`: its keys sorted at every depth.
pub fn canonical(value: &impl serde::Serialize) -> Result<String, serde_json::Error> {
    Ok(sorted(&serde_json::to_value(value)?).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_sorts_keys_at_every_depth_whatever_order_they_came_in() {
        let value: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"d": 2, "c": [{"f": 3, "e": 4}]}}"#)
                .expect("json");
        assert_eq!(
            canonical(&value).expect("text"),
            r#"{"a":{"c":[{"e":4,"f":3}],"d":2},"b":1}"#
        );
    }

    #[test]
    fn the_digest_is_lowercase_hex_sha256() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(hex(&[0, 15, 255]), "000fff");
    }
}
