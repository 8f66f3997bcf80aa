//! One attempt at a chat completion: the address check, the request, the status
//! read into an answer or an error, and the answer's body read within its cap.

use std::time::{Duration, Instant};

use reqwest::header::{DATE, HeaderMap, RETRY_AFTER};

use super::types::{Answer, Ask, ChatError, Endpoint, words};
use super::wire;
use crate::connectors::client::outbound::{self, Outbound};
use crate::secrets::Secret;

/// The largest answer read: a chat completion is text and a few tool calls, so
/// anything bigger is a server gone wrong, not an answer to score.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// The largest error answer read for its message; past it the status alone is told.
const MAX_ERROR_BYTES: usize = 64 * 1024;

/// One attempt: checks the URL, sends the request, reads and parses the answer.
/// `attempts` is 1; [`complete_with_retries`](super::complete_with_retries) counts more.
pub async fn complete(
    outbound: &Outbound,
    endpoint: &Endpoint<'_>,
    ask: &Ask,
) -> Result<Answer, ChatError> {
    let url = completions_url(outbound, endpoint.base_url).await?;
    let body = wire::body(ask, endpoint.structured)?;
    let mut request = outbound
        .client()
        .post(url)
        .timeout(endpoint.timeout)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "application/json");
    if let Some(key) = endpoint.api_key {
        request = request.header(reqwest::header::AUTHORIZATION, bearer(key)?);
    }
    let started = Instant::now();
    let response = request
        .body(body)
        .send()
        .await
        .map_err(|e| sent_failure(&e, endpoint.timeout))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(response, endpoint).await);
    }
    let body = read_body(response, MAX_ANSWER_BYTES, endpoint.timeout)
        .await?
        .ok_or_else(|| {
            ChatError::Malformed(format!(
                "the model server's answer is larger than {} MiB",
                MAX_ANSWER_BYTES / (1024 * 1024)
            ))
        })?;
    let mut answer = wire::answer(&body)?;
    answer.latency = started.elapsed();
    Ok(answer)
}

/// `{base_url}/chat/completions`, after the address check: the segments are
/// appended to the base's path, so a trailing slash or a query string (Azure's
/// `api-version`) makes no difference.
async fn completions_url(outbound: &Outbound, base_url: &str) -> Result<reqwest::Url, ChatError> {
    let mut url = outbound
        .check_url(base_url)
        .await
        .map_err(|e| ChatError::Refused(format!("the model server's base URL is refused: {e}")))?;
    url.set_fragment(None);
    url.path_segments_mut()
        .map_err(|()| ChatError::Refused("the model server's base URL is not valid".into()))?
        .pop_if_empty()
        .extend(["chat", "completions"]);
    Ok(url)
}

/// The `Authorization` value, marked sensitive so the client's `Debug` hides it.
fn bearer(key: &Secret) -> Result<reqwest::header::HeaderValue, ChatError> {
    let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", key.expose()))
        .map_err(|_| {
            ChatError::Refused(
                "the model connection's API key cannot be sent in a header (it holds control characters or non-ASCII)"
                    .into(),
            )
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// A request that got no answer, in words without URLs or addresses.
fn sent_failure(error: &reqwest::Error, timeout: Duration) -> ChatError {
    if let Some(refused) = outbound::refused_by_check(error) {
        return ChatError::Refused(format!("the model server's base URL is refused: {refused}"));
    }
    if error.is_builder() {
        return ChatError::Refused("the request to the model server could not be built".into());
    }
    if error.is_timeout() {
        return timed_out(timeout);
    }
    ChatError::unavailable("the model server could not be reached".into())
}

fn timed_out(timeout: Duration) -> ChatError {
    ChatError::unavailable(format!(
        "the model server did not answer within {}",
        words(timeout)
    ))
}

/// The error a non-2xx answer is: retryable for 408, 429 and 5xx (with the wait
/// the server asked for), refused otherwise. A 3xx is refused without its
/// `Location`, which would be a URL in an error.
async fn failed(response: reqwest::Response, endpoint: &Endpoint<'_>) -> ChatError {
    let status = response.status();
    let code = status.as_u16();
    if status.is_redirection() {
        return ChatError::Refused(format!(
            "the model server redirected the request (HTTP {code}); redirects are not followed: set the base URL to where it points"
        ));
    }
    let retry_after = retry_after(response.headers());
    let said = match read_body(response, MAX_ERROR_BYTES, endpoint.timeout).await {
        Ok(Some(body)) => wire::provider_message(&body, endpoint.api_key)
            .map(|m| format!(": {m}"))
            .unwrap_or_default(),
        _ => String::new(),
    };
    let retryable = status.is_server_error()
        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
        || status == reqwest::StatusCode::REQUEST_TIMEOUT;
    if !retryable {
        return ChatError::Refused(format!(
            "the model server refused the request (HTTP {code}){said}"
        ));
    }
    let what = match status {
        reqwest::StatusCode::TOO_MANY_REQUESTS => "is rate limiting",
        reqwest::StatusCode::REQUEST_TIMEOUT => "timed out reading the request",
        _ => "failed",
    };
    ChatError::Unavailable {
        message: format!("the model server {what} (HTTP {code}){said}"),
        retry_after,
    }
}

/// The body, at most `limit` bytes (`None` past it). The request's timeout covers
/// the read.
async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
    timeout: Duration,
) -> Result<Option<Vec<u8>>, ChatError> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Ok(None);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(Some(body)),
            Err(e) if e.is_timeout() => return Err(timed_out(timeout)),
            Err(_) => {
                return Err(ChatError::unavailable(
                    "the model server's answer could not be read".into(),
                ));
            }
        }
    }
}

/// The wait a `Retry-After` header asks for: seconds, or an HTTP date measured
/// against the answer's own `Date` header, so loadout's clock is not consulted and
/// the two clocks' skew does not matter. A date without a `Date` to measure it
/// against, or a value that is neither, counts as no header.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let until = http_date(value)?;
    let now = http_date(headers.get(DATE)?.to_str().ok()?.trim())?;
    let seconds = u64::try_from((until - now).num_seconds()).unwrap_or(0);
    Some(Duration::from_secs(seconds))
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP servers send;
/// RFC 2822 parsing reads it.
fn http_date(text: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    chrono::DateTime::parse_from_rfc2822(text).ok()
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_dates_against_the_servers_date() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("12"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(12)));
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:40 GMT"),
        );
        assert_eq!(retry_after(&headers), None, "no Date to measure against");
        headers.insert(
            DATE,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(40)));
        headers.insert(
            DATE,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:30:00 GMT"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO), "already past");
        headers.insert(RETRY_AFTER, HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }
}
