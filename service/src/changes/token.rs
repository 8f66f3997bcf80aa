//! A change stream's token, for a client that cannot send a header: a browser's
//! `EventSource` (OFREP's web provider) opens the URL it is given, nothing more.
//! The OFREP bulk answer's `eventStreams` carries one for the key that asked.
//!
//! `KEY:EXPIRES:AGENT:TAG`: the key's row id, when it stops opening streams (Unix
//! seconds), the agent the stream is scoped to (empty: none), and a tag over the
//! rest under the secrets key (`secrets::Keyring::tag`), which every replica holds.
//! It opens the change stream only; the key it names must still be live when the
//! stream opens, and a revocation ends the stream as it ends any other. Tokens last
//! to the end of the next hour, so the same one is issued all hour (an OFREP bulk
//! answer keeps its ETag) and a provider that reconnects later fetches a new one.

use chrono::{DateTime, Utc};

use crate::secrets::{Keyring, STREAM_TOKEN_CONTEXT};

/// The longest token read; longer text is refused unread.
const MAX_TOKEN: usize = 256;

/// What a token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub key_id: i32,
    pub agent: Option<String>,
}

/// A token for key `key_id`'s streams of `agent` (every agent it reaches: `None`);
/// `None` without a secrets key.
pub fn issue(
    keyring: &Keyring,
    key_id: i32,
    agent: Option<&str>,
    now: DateTime<Utc>,
) -> Option<String> {
    let expires = (now.timestamp().div_euclid(3600) + 2) * 3600;
    let payload = format!("{key_id}:{expires}:{}", agent.unwrap_or(""));
    let tag = keyring.tag(STREAM_TOKEN_CONTEXT, payload.as_bytes())?;
    Some(format!("{payload}:{tag}"))
}

/// The claims of a token this instance issued that has not expired; `None` for
/// anything else.
pub fn read(keyring: &Keyring, token: &str, now: DateTime<Utc>) -> Option<Claims> {
    if token.len() > MAX_TOKEN {
        return None;
    }
    let (payload, tag) = token.rsplit_once(':')?;
    if !keyring.verify_tag(STREAM_TOKEN_CONTEXT, payload.as_bytes(), tag) {
        return None;
    }
    let mut parts = payload.splitn(3, ':');
    let key_id = parts.next()?.parse().ok()?;
    let expires: i64 = parts.next()?.parse().ok()?;
    let agent = parts.next()?;
    (expires > now.timestamp()).then(|| Claims {
        key_id,
        agent: (!agent.is_empty()).then(|| agent.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::Key;

    fn keyring() -> Keyring {
        Keyring::new(Key::from_bytes(&[7u8; 32]).unwrap(), Vec::new())
    }

    #[test]
    fn a_token_reads_back_until_it_expires_and_is_the_same_all_hour() {
        let now = DateTime::from_timestamp(1_796_670_000, 0).unwrap();
        let token = issue(&keyring(), 42, Some("assistant"), now).unwrap();
        let later = now + chrono::Duration::minutes(20);
        assert_eq!(
            issue(&keyring(), 42, Some("assistant"), later).as_deref(),
            Some(token.as_str())
        );
        let claims = read(&keyring(), &token, later).unwrap();
        assert_eq!(
            claims,
            Claims {
                key_id: 42,
                agent: Some("assistant".into())
            }
        );
        assert_eq!(
            read(&keyring(), &token, now + chrono::Duration::hours(3)),
            None
        );
        let every = issue(&keyring(), 7, None, now).unwrap();
        assert_eq!(read(&keyring(), &every, now).unwrap().agent, None);
    }

    #[test]
    fn a_changed_or_foreign_token_is_refused() {
        let now = DateTime::from_timestamp(1_796_670_000, 0).unwrap();
        let token = issue(&keyring(), 42, None, now).unwrap();
        let other_key = token.replacen("42:", "43:", 1);
        assert_eq!(read(&keyring(), &other_key, now), None);
        let foreign = Keyring::new(Key::from_bytes(&[8u8; 32]).unwrap(), Vec::new());
        assert_eq!(read(&foreign, &token, now), None);
        assert_eq!(issue(&Keyring::none(), 42, None, now), None);
        assert_eq!(read(&Keyring::none(), &token, now), None);
        assert_eq!(read(&keyring(), &"9".repeat(300), now), None);
        // Rotated: a token tagged under the previous key still opens.
        let rotated = Keyring::new(
            Key::from_bytes(&[8u8; 32]).unwrap(),
            vec![Key::from_bytes(&[7u8; 32]).unwrap()],
        );
        assert!(read(&rotated, &token, now).is_some());
    }
}
