//! Secrets sealed at rest: an authenticated cipher (XChaCha20-Poly1305, RustCrypto's
//! `chacha20poly1305`) under a key that is never stored in the database.
//!
//! A sealed value is text, so it lives where the plain value lived (a connector's
//! `headers` JSON) and needs no migration:
//! `lo-sealed:v1:<key id>:<base64 of nonce ‖ ciphertext ‖ tag>`. The nonce is 24
//! random bytes per value (XChaCha's nonce is long enough to pick at random). The
//! key id is the first 8 bytes of the key's SHA-256, in hex: a value names the key
//! that sealed it, so a process holding another key says so instead of failing
//! vaguely, and a rotation can find what still needs it. The caller's context (for
//! a header: the connector's id and the header's name) is the associated data, so a
//! sealed value copied to another header or connector does not open.
//!
//! [`source`] reads a key from the environment or a file, or makes one beside an
//! embedded SQLite database.

pub mod flags;
pub mod source;

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

/// How every sealed value starts.
pub const PREFIX: &str = "lo-sealed:v1:";

/// A key's length in bytes.
pub const KEY_BYTES: usize = 32;

const NONCE_BYTES: usize = 24;

/// What to do without a key, for messages that send people to it.
pub const HOW_TO_CONFIGURE: &str = "set LOADOUT_SECRETS_KEY to 32 random bytes in base64 (`openssl rand -base64 32`) or give --secrets-key-file, then restart (an embedded SQLite database gets a key file beside it on start)";

/// The first 8 bytes of a key's SHA-256: names a key without revealing it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId([u8; 8]);

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

impl std::str::FromStr for KeyId {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        let bytes = text.as_bytes();
        if bytes.len() != 16 {
            return Err(());
        }
        let mut id = [0u8; 8];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let pair = std::str::from_utf8(pair).map_err(drop)?;
            id[i] = u8::from_str_radix(pair, 16).map_err(drop)?;
        }
        Ok(KeyId(id))
    }
}

/// A sealing key. Its `Debug` shows the id only.
#[derive(Clone)]
pub struct Key {
    cipher: XChaCha20Poly1305,
    bytes: [u8; KEY_BYTES],
    id: KeyId,
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({}, redacted)", self.id)
    }
}

/// Why a key could not be taken. The messages never hold the key's text.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "a secrets key must be 32 bytes in base64 (44 characters, e.g. `openssl rand -base64 32`)"
    )]
    Malformed,
    #[error("the system's random source failed: {0}")]
    Random(String),
}

impl Key {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, KeyError> {
        let bytes: [u8; KEY_BYTES] = bytes.try_into().map_err(|_| KeyError::Malformed)?;
        let cipher = XChaCha20Poly1305::new_from_slice(&bytes).map_err(|_| KeyError::Malformed)?;
        let digest = Sha256::digest(bytes);
        let mut id = [0u8; 8];
        id.copy_from_slice(&digest[..8]);
        Ok(Key {
            cipher,
            bytes,
            id: KeyId(id),
        })
    }

    /// A key from its base64 text (surrounding whitespace ignored).
    pub fn from_base64(text: &str) -> Result<Key, KeyError> {
        let bytes = BASE64
            .decode(text.trim())
            .map_err(|_| KeyError::Malformed)?;
        Key::from_bytes(&bytes)
    }

    /// A new key from the system's random source.
    pub fn generate() -> Result<Key, KeyError> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| KeyError::Random(e.to_string()))?;
        Key::from_bytes(&bytes)
    }

    pub fn id(&self) -> KeyId {
        self.id
    }

    /// [`Keyring::tag`] under this key.
    fn tag(&self, context: &[u8], data: &[u8]) -> String {
        use hmac::Mac;
        let mut mac = <hmac::Hmac<Sha256> as hmac::KeyInit>::new_from_slice(&self.bytes)
            .expect("HMAC takes a key of any length");
        mac.update(context);
        mac.update(b"\0");
        mac.update(data);
        let digest = mac.finalize().into_bytes();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The key as base64 text, for writing a key file.
    pub(crate) fn to_base64(&self) -> String {
        BASE64.encode(self.bytes)
    }

    fn seal(&self, plain: &str, context: &[u8]) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_BYTES];
        getrandom::fill(&mut nonce).map_err(|_| SealError::Random)?;
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: plain.as_bytes(),
                    aad: context,
                },
            )
            .map_err(|_| SealError::Random)?;
        let mut body = Vec::with_capacity(NONCE_BYTES + sealed.len());
        body.extend_from_slice(&nonce);
        body.extend_from_slice(&sealed);
        Ok(format!("{PREFIX}{}:{}", self.id, BASE64.encode(body)))
    }

    fn open(&self, body: &[u8], context: &[u8]) -> Result<Secret, SealError> {
        let (nonce, sealed) = body
            .split_at_checked(NONCE_BYTES)
            .ok_or(SealError::Malformed)?;
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| SealError::Malformed)?;
        let plain = self
            .cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: context,
                },
            )
            .map_err(|_| SealError::DoesNotOpen(self.id))?;
        String::from_utf8(plain)
            .map(Secret)
            .map_err(|_| SealError::DoesNotOpen(self.id))
    }
}

/// A value opened for use. Its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(redacted)")
    }
}

/// Why a value could not be sealed or opened. The messages name keys by id, never
/// a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("no secrets key is configured, so header values cannot be sealed: {HOW_TO_CONFIGURE}")]
    NoKey,
    #[error(
        "a stored secret was sealed with key {sealed_with}, which this process does not hold ({held}); start it with that key (during a rotation, as --secrets-previous-key-file)"
    )]
    UnknownKey { sealed_with: KeyId, held: String },
    #[error(
        "a stored secret does not open with key {0}: it was altered, or copied from another header or connector"
    )]
    DoesNotOpen(KeyId),
    #[error("a stored secret is not in the {PREFIX}<key id>:<base64> form")]
    Malformed,
    #[error("the system's random source failed")]
    Random,
}

/// The associated data of a webhook subscription's sealed signing secret (its id),
/// so a secret copied to another subscription does not open. Here rather than in
/// `webhooks`, so `loadout secrets seal | rotate` reseals them with the header values.
pub fn webhook_secret_context(subscription_id: i32) -> Vec<u8> {
    format!("loadout webhook secret\0{subscription_id}").into_bytes()
}

/// What a change stream's token is tagged for (`changes::token`).
pub const STREAM_TOKEN_CONTEXT: &[u8] = b"loadout stream token";

/// The associated data of a model connection's sealed API key (its id), so a key
/// copied to another connection does not open; here for the same reason.
pub fn model_key_context(connection_id: i32) -> Vec<u8> {
    format!("loadout model connection key\0{connection_id}").into_bytes()
}

/// Whether a stored value is sealed (as opposed to a plain value saved before keys).
pub fn is_sealed(stored: &str) -> bool {
    stored.starts_with(PREFIX)
}

/// The id of the key that sealed `stored`; `None` for a plain or malformed value.
pub fn sealed_with(stored: &str) -> Option<KeyId> {
    let rest = stored.strip_prefix(PREFIX)?;
    let (id, _) = rest.split_once(':')?;
    id.parse().ok()
}

/// The keys a process holds: the first seals, every one opens. Cloning shares them.
#[derive(Clone, Default)]
pub struct Keyring {
    keys: Arc<[Key]>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(Key::id))
            .finish()
    }
}

impl Keyring {
    /// No key: plain values still open, nothing can be sealed.
    pub fn none() -> Keyring {
        Keyring::default()
    }

    /// `current` seals; `previous` keys only open (values sealed before a rotation).
    pub fn new(current: Key, previous: Vec<Key>) -> Keyring {
        let keys: Vec<Key> = std::iter::once(current).chain(previous).collect();
        Keyring { keys: keys.into() }
    }

    /// The key new values are sealed with.
    pub fn sealing(&self) -> Option<KeyId> {
        self.keys.first().map(Key::id)
    }

    /// Whether a key with this id is held.
    pub fn holds(&self, id: KeyId) -> bool {
        self.keys.iter().any(|k| k.id == id)
    }

    /// A tag of `data` under the current key, bound to `context`: the first 128
    /// bits of HMAC-SHA256, in hex; the same for the same input (so an answer that
    /// carries it keeps its ETag). `None` without a key.
    pub fn tag(&self, context: &[u8], data: &[u8]) -> Option<String> {
        self.keys.first().map(|key| key.tag(context, data))
    }

    /// Whether `tag` is [`Keyring::tag`]'s for `data` under any key held (a value
    /// tagged before a rotation still verifies), compared in constant time.
    pub fn verify_tag(&self, context: &[u8], data: &[u8], tag: &str) -> bool {
        self.keys.iter().any(|key| {
            let wanted = key.tag(context, data);
            wanted.len() == tag.len()
                && wanted
                    .bytes()
                    .zip(tag.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })
    }

    /// `plain` sealed under the current key, bound to `context`.
    pub fn seal(&self, plain: &str, context: &[u8]) -> Result<String, SealError> {
        self.keys
            .first()
            .ok_or(SealError::NoKey)?
            .seal(plain, context)
    }

    /// A stored value opened: a sealed one with the key it names, a plain one as it is.
    pub fn open(&self, stored: &str, context: &[u8]) -> Result<Secret, SealError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(Secret(stored.to_owned()));
        };
        let (id, body) = rest.split_once(':').ok_or(SealError::Malformed)?;
        let id: KeyId = id.parse().map_err(|()| SealError::Malformed)?;
        let body = BASE64.decode(body).map_err(|_| SealError::Malformed)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id == id)
            .ok_or_else(|| SealError::UnknownKey {
                sealed_with: id,
                held: self.held(),
            })?;
        key.open(&body, context)
    }

    fn held(&self) -> String {
        match self.keys.len() {
            0 => "it holds no key".to_owned(),
            _ => {
                let ids: Vec<String> = self.keys.iter().map(|k| k.id.to_string()).collect();
                format!("it holds {}", ids.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_with_its_key_and_its_context() {
        let key = Key::generate().expect("key");
        let id = key.id();
        let ring = Keyring::new(key, Vec::new());
        let sealed = ring
            .seal("Bearer s3cret", b"1\0authorization")
            .expect("seal");
        assert!(is_sealed(&sealed) && !sealed.contains("s3cret"), "{sealed}");
        assert_eq!(sealed_with(&sealed), Some(id));
        let opened = ring.open(&sealed, b"1\0authorization").expect("open");
        assert_eq!(opened.expose(), "Bearer s3cret");
        assert_eq!(format!("{opened:?}"), "Secret(redacted)");
        assert_eq!(
            ring.open(&sealed, b"2\0authorization"),
            Err(SealError::DoesNotOpen(id))
        );
        let other = Keyring::new(Key::generate().expect("key"), Vec::new());
        let wrong = other
            .open(&sealed, b"1\0authorization")
            .expect_err("wrong key");
        assert!(wrong.to_string().contains(&id.to_string()), "{wrong}");
        assert_eq!(
            Keyring::none().seal("x", b""),
            Err(SealError::NoKey),
            "no key seals nothing"
        );
        assert_eq!(
            Keyring::none().open("plain", b"").expect("plain").expose(),
            "plain"
        );
    }

    #[test]
    fn a_key_is_32_bytes_of_base64_and_its_debug_shows_only_its_id() {
        let key = Key::from_base64(&format!("{}=", "A".repeat(43))).expect("key");
        assert_eq!(format!("{key:?}"), format!("Key({}, redacted)", key.id()));
        assert!(Key::from_base64("c2hvcnQ=").is_err());
        assert!(Key::from_base64("not base64!").is_err());
        let text = key.to_base64();
        assert_eq!(Key::from_base64(&text).expect("again").id(), key.id());
    }
}
