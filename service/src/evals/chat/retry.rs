//! Asking again when a model server is unavailable: a rate limit, a timeout, a 5xx.
//!
//! The wait is the server's `Retry-After` when it sends one, else exponential
//! backoff from [`Retry::first_wait`] (1 s, 2 s, 4 s, …), both capped at
//! [`Retry::max_wait`]. A server asking for more than `max_wait` is taken at its
//! word: the evaluation gives up at once rather than wait longer than it was told
//! it may, and the error says so.

use std::future::Future;
use std::time::Duration;

use super::send::complete;
use super::types::{Answer, Ask, ChatError, Endpoint, words};
use crate::connectors::client::outbound::Outbound;

/// How persistent to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all, the first included; 0 counts as 1.
    pub attempts: u32,
    /// The longest wait between two attempts.
    pub max_wait: Duration,
    /// The backoff's first wait, doubled after each attempt; tests shorten it.
    pub first_wait: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 3,
            max_wait: Duration::from_secs(30),
            first_wait: Duration::from_secs(1),
        }
    }
}

/// [`complete`] until an answer, an error that is not [`ChatError::Unavailable`],
/// or `retry.attempts` attempts. The answer counts its attempts; the last error
/// says how many were made.
pub async fn complete_with_retries(
    outbound: &Outbound,
    endpoint: &Endpoint<'_>,
    ask: &Ask,
    retry: Retry,
) -> Result<Answer, ChatError> {
    retrying(
        retry,
        || complete(outbound, endpoint, ask),
        tokio::time::sleep,
    )
    .await
}

/// The loop, with the attempt and the sleep given, so tests can count the waits
/// without spending them.
pub(super) async fn retrying<A, AF, S, SF>(
    retry: Retry,
    mut attempt: A,
    mut sleep: S,
) -> Result<Answer, ChatError>
where
    A: FnMut() -> AF,
    AF: Future<Output = Result<Answer, ChatError>>,
    S: FnMut(Duration) -> SF,
    SF: Future<Output = ()>,
{
    let attempts = retry.attempts.max(1);
    let mut backoff = retry.first_wait;
    let mut made = 0;
    loop {
        made += 1;
        let error = match attempt().await {
            Ok(mut answer) => {
                answer.attempts = made;
                return Ok(answer);
            }
            Err(error) => error,
        };
        let ChatError::Unavailable {
            message,
            retry_after,
        } = error
        else {
            return Err(error);
        };
        let wait = match retry_after {
            Some(asked) if asked > retry.max_wait && made < attempts => {
                return Err(ChatError::Unavailable {
                    message: format!(
                        "{message}; it asked to wait {}, longer than the {} allowed",
                        words(asked),
                        words(retry.max_wait)
                    ),
                    retry_after,
                });
            }
            Some(asked) => asked,
            None => backoff.min(retry.max_wait),
        };
        if made >= attempts {
            let message = if made > 1 {
                format!("{message} (gave up after {made} attempts)")
            } else {
                message
            };
            return Err(ChatError::Unavailable {
                message,
                retry_after,
            });
        }
        sleep(wait).await;
        backoff = backoff.saturating_mul(2);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::future::ready;

    use super::*;

    fn unavailable(retry_after: Option<Duration>) -> Result<Answer, ChatError> {
        Err(ChatError::Unavailable {
            message: "busy".into(),
            retry_after,
        })
    }

    fn answer() -> Result<Answer, ChatError> {
        super::super::wire::answer(br#"{"choices":[{"message":{"content":"hi"}}]}"#)
    }

    /// Runs `retrying` over `results`, one per attempt; returns the outcome and the waits.
    fn run(
        retry: Retry,
        results: Vec<Result<Answer, ChatError>>,
    ) -> (Result<Answer, ChatError>, Vec<Duration>) {
        let results = RefCell::new(results.into_iter());
        let mut waits = Vec::new();
        let outcome = futures_util::FutureExt::now_or_never(retrying(
            retry,
            || ready(results.borrow_mut().next().unwrap_or_else(answer)),
            |d| {
                waits.push(d);
                ready(())
            },
        ))
        .expect("nothing pends");
        (outcome, waits)
    }

    #[test]
    fn the_backoff_doubles_from_the_first_wait_and_stops_at_the_cap() {
        let retry = Retry {
            attempts: 5,
            max_wait: Duration::from_secs(3),
            first_wait: Duration::from_secs(1),
        };
        let (outcome, waits) = run(retry, vec![unavailable(None); 5]);
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 3, 3]);
        let error = outcome.expect_err("gave up").to_string();
        assert_eq!(error, "busy (gave up after 5 attempts)");
    }

    #[test]
    fn a_retry_after_within_the_cap_is_waited_and_the_answer_counts_its_attempts() {
        let asked = Some(Duration::from_secs(7));
        let (outcome, waits) = run(Retry::default(), vec![unavailable(asked)]);
        assert_eq!(waits, [Duration::from_secs(7)]);
        assert_eq!(outcome.expect("answer").attempts, 2);
    }

    #[test]
    fn a_retry_after_past_the_cap_gives_up_at_once_and_says_why() {
        let asked = Some(Duration::from_secs(120));
        let (outcome, waits) = run(Retry::default(), vec![unavailable(asked)]);
        assert!(waits.is_empty());
        let error = outcome.expect_err("gave up").to_string();
        assert_eq!(
            error,
            "busy; it asked to wait 120 s, longer than the 30 s allowed"
        );
    }

    #[test]
    fn errors_that_are_not_unavailable_are_not_retried() {
        let refused = Err(ChatError::Refused("no".into()));
        let (outcome, waits) = run(Retry::default(), vec![refused.clone()]);
        assert!(waits.is_empty());
        assert_eq!(outcome, refused);
    }
}
