//! The Standard Webhooks signature: `webhook-id`, `webhook-timestamp` (Unix
//! seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`,
//! keyed by the secret's bytes (`whsec_` + base64).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{KeyInit, Mac};

/// Every secret starts with it.
pub const PREFIX: &str = "whsec_";
/// Bytes of a generated secret.
pub const SECRET_BYTES: usize = 32;

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn generate() -> Result<String, getrandom::Error> {
    let mut random = [0u8; SECRET_BYTES];
    getrandom::fill(&mut random)?;
    Ok(format!("{PREFIX}{}", BASE64.encode(random)))
}

/// The key bytes of `secret`, if it is `whsec_` and base64 of 24 to 64 bytes.
pub fn key(secret: &str) -> Option<Vec<u8>> {
    let bytes = BASE64.decode(secret.strip_prefix(PREFIX)?).ok()?;
    (24..=64).contains(&bytes.len()).then_some(bytes)
}

/// The `webhook-signature` value for one attempt.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's example (standard-webhooks, spec/standard-webhooks.md).
    #[test]
    fn the_specification_example_signs_the_same() {
        let key = key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_generated_secret_is_a_valid_key() {
        let secret = generate().unwrap();
        assert_eq!(key(&secret).map(|k| k.len()), Some(SECRET_BYTES));
        assert!(key("whsec_short").is_none());
        assert!(key("nope").is_none());
    }
}
