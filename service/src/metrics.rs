//! Prometheus metrics through `prometheus-client`: a request counter and a latency
//! histogram by route, method and status, what the proposal sweeper found, and the
//! cache's hits, misses and generation.
//! Routes are axum's matched path templates (`/v1/agents/{agent}/prompt`), so label
//! cardinality is bounded by the route table, never by what clients send.

use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use axum::http;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::cache::Generation;

/// The exposition format served: OpenMetrics text, which is what prometheus-client
/// writes (counters are typed without `_total`, the text ends in `# EOF`), so
/// announcing the older Prometheus format would misdescribe it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

/// The labels of every request series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The matched route template, or `unmatched`: bounded by the route table.
    pub route: String,
    pub method: Method,
    pub status: u16,
}

/// A request method as a label: the standard ones, and `OTHER` for the rest, so a
/// client cannot create label values by inventing methods.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
    Options,
    Other,
}

impl Method {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
            Method::Head => "HEAD",
            Method::Options => "OPTIONS",
            Method::Other => "OTHER",
        }
    }
}

impl From<&http::Method> for Method {
    fn from(method: &http::Method) -> Self {
        match *method {
            http::Method::GET => Method::Get,
            http::Method::POST => Method::Post,
            http::Method::PUT => Method::Put,
            http::Method::PATCH => Method::Patch,
            http::Method::DELETE => Method::Delete,
            http::Method::HEAD => Method::Head,
            http::Method::OPTIONS => Method::Options,
            _ => Method::Other,
        }
    }
}

// By hand rather than derived: the derive writes the variant's Rust name (`Get`),
// and dashboards expect the HTTP spelling.
impl EncodeLabelValue for Method {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// The labels of the outcome counter. Bounded by the database, not by clients:
/// an outcome is counted only after it was stored, so `agent` is a live agent and
/// `revision` one of its revisions (made by operators' writes, never by an agent
/// key), and `outcome` is `success` or `failure`: at most agents x revisions x 2
/// series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub agent: String,
    pub revision: i64,
    pub outcome: &'static str,
}

/// Each request series gets its own histogram with [`BUCKETS`].
type LatencyFamily = Family<RequestLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The metrics of one process. Every metric is a typed handle registered once at
/// start; recording touches only the handle, never the registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: LatencyFamily,
    /// Executions found dead past their lease and failed with outcome unknown.
    pub orphans_failed: Counter,
    /// Approved proposals never claimed within a lease, at the last sweep.
    pub orphans_approved: Gauge<u64, AtomicU64>,
    /// Proposals expired undecided.
    pub proposals_expired: Counter,
    /// Outcome reports stored, by agent, revision and outcome.
    outcomes: Family<OutcomeLabels, Counter>,
}

impl Metrics {
    /// Registers every metric, including the cache's own counters and generation,
    /// which the cache updates where they change.
    pub fn new(cache: &Generation) -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = LatencyFamily::new_with_constructor(latency_histogram);
        let orphans_failed = Counter::default();
        let orphans_approved = Gauge::<u64, AtomicU64>::default();
        let proposals_expired = Counter::default();
        let outcomes = Family::<OutcomeLabels, Counter>::default();
        // Names without the suffixes prometheus-client adds (`_total` on counters,
        // the unit), so the exposed names stay the ones dashboards already use.
        let mut registry = Registry::default();
        registry.register(
            "loadout_http_requests",
            "HTTP requests served",
            requests.clone(),
        );
        registry.register_with_unit(
            "loadout_http_request_duration",
            "Time to serve a request",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "loadout_cache_hits",
            "Cache lookups answered from memory",
            cache.counts.hits.clone(),
        );
        registry.register(
            "loadout_cache_misses",
            "Cache lookups that went to the database",
            cache.counts.misses.clone(),
        );
        registry.register(
            "loadout_proposal_orphans_failed",
            "Executions found dead past their lease and failed with outcome unknown",
            orphans_failed.clone(),
        );
        registry.register(
            "loadout_proposal_orphans_approved",
            "Approved proposals never claimed within a lease, at the last sweep",
            orphans_approved.clone(),
        );
        registry.register(
            "loadout_proposals_expired",
            "Proposals that expired undecided",
            proposals_expired.clone(),
        );
        registry.register(
            "loadout_outcomes",
            "Outcome reports stored, by agent, revision and outcome (a repeated report for a conversation counts again)",
            outcomes.clone(),
        );
        registry.register(
            "loadout_config_generation",
            "The configuration generation this process serves",
            cache.generation_gauge().clone(),
        );
        Self {
            registry,
            requests,
            latency,
            orphans_failed,
            orphans_approved,
            proposals_expired,
            outcomes,
        }
    }

    /// Counts a stored outcome report (see [`OutcomeLabels`] for why the labels
    /// stay bounded).
    pub fn outcome(&self, agent: &str, revision: i32, outcome: &'static str) {
        let labels = OutcomeLabels {
            agent: agent.to_owned(),
            revision: i64::from(revision),
            outcome,
        };
        self.outcomes.get_or_create(&labels).inc();
    }

    /// Counts a request and its latency. The families take their lock for reading
    /// once a series exists, which is every request but the first of its series.
    pub fn record(&self, route: String, method: &http::Method, status: u16, elapsed: Duration) {
        let labels = RequestLabels {
            route,
            method: Method::from(method),
            status,
        };
        self.requests.get_or_create(&labels).inc();
        self.latency
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// The exposition text (OpenMetrics 1.0). Fails only if a value cannot be
    /// encoded, which none of ours can.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "/v1/agents/{agent}/prompt";

    fn record(metrics: &Metrics, status: u16, elapsed: Duration) {
        metrics.record(PROMPT.to_owned(), &http::Method::GET, status, elapsed);
    }

    #[test]
    fn requests_and_latencies_are_exposed_by_route() {
        let cache = Generation::new(3);
        let metrics = Metrics::new(&cache);
        record(&metrics, 200, Duration::from_micros(700));
        record(&metrics, 200, Duration::from_millis(30));
        record(&metrics, 404, Duration::from_micros(100));
        let text = metrics.render().expect("encodes");
        let ok = "route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"200\"";
        assert!(
            text.contains(&format!("loadout_http_requests_total{{{ok}}} 2\n")),
            "{text}"
        );
        assert!(text.contains("status=\"404\"} 1\n"), "{text}");
        for (le, count) in [("0.0005", 0), ("0.001", 1), ("0.05", 2), ("+Inf", 2)] {
            let line = format!(
                "loadout_http_request_duration_seconds_bucket{{le=\"{le}\",{ok}}} {count}\n"
            );
            assert!(text.contains(&line), "{line}{text}");
        }
        assert!(
            text.contains(&format!(
                "loadout_http_request_duration_seconds_count{{{ok}}} 2\n"
            )),
            "{text}"
        );
        let not_found = "route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"404\"";
        assert!(
            text.contains(&format!("{{le=\"0.0005\",{not_found}}} 1\n")),
            "{text}"
        );
        assert!(text.contains("loadout_config_generation 3\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn the_cache_and_the_sweeper_are_exposed_under_their_old_names() {
        let cache = Generation::new(3);
        let metrics = Metrics::new(&cache);
        cache.observe(7);
        metrics.orphans_failed.inc_by(2);
        metrics.orphans_approved.set(4);
        metrics.proposals_expired.inc();
        metrics.outcome("support", 3, "failure");
        metrics.outcome("support", 3, "failure");
        let _ = cache.counts.count::<()>(None);
        let text = metrics.render().expect("encodes");
        for line in [
            "loadout_cache_hits_total 0\n",
            "loadout_cache_misses_total 1\n",
            "loadout_proposal_orphans_failed_total 2\n",
            "loadout_proposal_orphans_approved 4\n",
            "loadout_proposals_expired_total 1\n",
            "loadout_outcomes_total{agent=\"support\",revision=\"3\",outcome=\"failure\"} 2\n",
            "loadout_config_generation 7\n",
        ] {
            assert!(text.contains(line), "{line}{text}");
        }
    }

    #[test]
    fn unknown_methods_share_one_label_value() {
        let metrics = Metrics::new(&Generation::new(0));
        for method in ["PROPFIND", "BREW"] {
            let method = http::Method::from_bytes(method.as_bytes()).expect("method");
            metrics.record(PROMPT.to_owned(), &method, 405, Duration::ZERO);
        }
        let text = metrics.render().expect("encodes");
        assert!(
            text.contains("method=\"OTHER\",status=\"405\"} 2\n"),
            "{text}"
        );
    }

    // Route templates come from our route table, but the text must stay parseable
    // whatever a label holds; prometheus-client escapes from 0.25.2 on.
    #[test]
    fn label_values_are_escaped() {
        let metrics = Metrics::new(&Generation::new(0));
        metrics.record(
            "a\"b\\c\nd".to_owned(),
            &http::Method::GET,
            200,
            Duration::ZERO,
        );
        let text = metrics.render().expect("encodes");
        assert!(text.contains("route=\"a\\\"b\\\\c\\nd\""), "{text}");
    }
}
