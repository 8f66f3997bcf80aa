//! loadout's reqwest client as rmcp's Streamable HTTP client, noting when rmcp
//! stopped reading an answer at the size cap.
//!
//! rmcp bounds each SSE event (`max_sse_event_size`), but then ends the stream and
//! closes the transport, so the request fails as `TransportClosed`, exactly like a
//! server that went away (retryable). This wrapper sees the stream's error on its
//! way to rmcp and records it, so the failure can say the answer was too large and
//! is not worth retrying. Everything else is reqwest's own implementation.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

type Posted = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;
type Streamed = Result<BoxedSseResponse, StreamableHttpError<reqwest::Error>>;

/// The client, and whether an SSE event of one of its answers passed the cap.
#[derive(Clone, Debug)]
pub(super) struct Capped {
    client: reqwest::Client,
    over: Arc<AtomicBool>,
}

impl Capped {
    pub(super) fn new(client: reqwest::Client) -> Self {
        Self {
            client,
            over: Arc::default(),
        }
    }

    /// Whether rmcp stopped reading an SSE event at `max_sse_event_size`.
    pub(super) fn hit(&self) -> bool {
        self.over.load(Ordering::Relaxed)
    }

    fn watch(&self, stream: BoxedSseResponse) -> BoxedSseResponse {
        let over = self.over.clone();
        stream
            .inspect(move |item| {
                if let Err(error) = item
                    && too_large(error)
                {
                    over.store(true, Ordering::Relaxed);
                }
            })
            .boxed()
    }

    fn watch_post(&self, posted: Posted) -> Posted {
        match posted {
            Ok(StreamableHttpPostResponse::Sse(stream, session)) => {
                Ok(StreamableHttpPostResponse::Sse(self.watch(stream), session))
            }
            other => other,
        }
    }

    fn watch_stream(&self, streamed: Streamed) -> Streamed {
        streamed.map(|stream| self.watch(stream))
    }
}

/// rmcp's event-size error, which it does not export: its message is the one mark.
/// The SSE tests of `mcp_connectors` fail if a new rmcp words it otherwise.
fn too_large(error: &SseError) -> bool {
    matches!(error, SseError::Body(inner)
        if inner.to_string().starts_with("SSE event exceeded the maximum size"))
}

impl StreamableHttpClient for Capped {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Posted {
        let posted = self
            .client
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.watch_post(posted)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Posted {
        let posted = self
            .client
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.watch_post(posted)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Posted {
        let posted = self
            .client
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.watch_post(posted)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<reqwest::Error>> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Streamed {
        let streamed = self
            .client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.watch_stream(streamed)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Streamed {
        let streamed = self
            .client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.watch_stream(streamed)
    }
}
