//! Prometheus text metrics, kept by hand: a request counter and a latency histogram
//! by route, method and status, and the cache's hits and misses.
//! Routes are axum's matched path templates (`/v1/agents/{agent}/prompt`), so label
//! cardinality is bounded by the route table, never by what clients send.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::cache::Cache;

/// The exposition format served.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Per route: requests and a latency histogram by (method, status).
#[derive(Default)]
struct RouteSeries {
    requests: BTreeMap<(&'static str, u16), u64>,
    latency: BTreeMap<(&'static str, u16), Histogram>,
}

/// Routes are looked up by `&str`, so recording a request allocates only the
/// first time a route is seen.
#[derive(Default)]
struct Series {
    routes: BTreeMap<String, RouteSeries>,
}

/// Standard methods as static strings; anything else is `OTHER`.
fn method_label(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    }
}

/// Request metrics for one process, and what its proposal sweeper found.
#[derive(Default)]
pub struct Metrics {
    series: Mutex<Series>,
    /// Executions found dead past their lease and failed with outcome unknown.
    pub orphans_failed: std::sync::atomic::AtomicU64,
    /// Approved proposals never claimed within a lease, at the last sweep.
    pub orphans_approved: std::sync::atomic::AtomicU64,
    /// Proposals expired undecided.
    pub proposals_expired: std::sync::atomic::AtomicU64,
}

impl Metrics {
    pub fn record(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let method = method_label(method);
        let mut series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        if !series.routes.contains_key(route) {
            series
                .routes
                .insert(route.to_owned(), RouteSeries::default());
        }
        let Some(route) = series.routes.get_mut(route) else {
            return;
        };
        *route.requests.entry((method, status)).or_default() += 1;
        let histogram = route.latency.entry((method, status)).or_default();
        histogram.count += 1;
        histogram.sum += seconds;
        for (bound, count) in BUCKETS.iter().zip(histogram.counts.iter_mut()) {
            if seconds <= *bound {
                *count += 1;
            }
        }
    }

    /// The exposition text (format 0.0.4).
    pub fn render(&self, cache: &Cache) -> String {
        let series = self.series.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        out.push_str("# HELP loadout_http_requests_total HTTP requests served.\n");
        out.push_str("# TYPE loadout_http_requests_total counter\n");
        for (route, stats) in &series.routes {
            for ((method, status), n) in &stats.requests {
                _ = writeln!(
                    out,
                    "loadout_http_requests_total{{route=\"{}\",method=\"{method}\",status=\"{status}\"}} {n}",
                    escape(route)
                );
            }
        }
        out.push_str("# HELP loadout_http_request_duration_seconds Time to serve a request.\n");
        out.push_str("# TYPE loadout_http_request_duration_seconds histogram\n");
        let latencies = series
            .routes
            .iter()
            .flat_map(|(route, stats)| stats.latency.iter().map(move |(k, h)| (route, k, h)));
        for (route, (method, status), h) in latencies {
            let labels = format!(
                "route=\"{}\",method=\"{method}\",status=\"{status}\"",
                escape(route)
            );
            for (bound, count) in BUCKETS.iter().zip(h.counts) {
                _ = writeln!(
                    out,
                    "loadout_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
                );
            }
            _ = writeln!(
                out,
                "loadout_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                h.count
            );
            _ = writeln!(
                out,
                "loadout_http_request_duration_seconds_sum{{{labels}}} {}",
                h.sum
            );
            _ = writeln!(
                out,
                "loadout_http_request_duration_seconds_count{{{labels}}} {}",
                h.count
            );
        }
        for (name, help, value) in [
            (
                "loadout_cache_hits_total",
                "Cache lookups answered from memory.",
                cache.hits.load(Ordering::Relaxed),
            ),
            (
                "loadout_cache_misses_total",
                "Cache lookups that went to the database.",
                cache.misses.load(Ordering::Relaxed),
            ),
        ] {
            _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        for (name, kind, help, value) in [
            (
                "loadout_proposal_orphans_failed_total",
                "counter",
                "Executions found dead past their lease and failed with outcome unknown.",
                &self.orphans_failed,
            ),
            (
                "loadout_proposal_orphans_approved",
                "gauge",
                "Approved proposals never claimed within a lease, at the last sweep.",
                &self.orphans_approved,
            ),
            (
                "loadout_proposals_expired_total",
                "counter",
                "Proposals that expired undecided.",
                &self.proposals_expired,
            ),
        ] {
            _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
        _ = writeln!(
            out,
            "# HELP loadout_config_generation The configuration generation this process serves.\n# TYPE loadout_config_generation gauge\nloadout_config_generation {}",
            cache.generation()
        );
        out
    }
}

/// Label values escape `\`, `"` and newlines.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_latencies_are_exposed_by_route() {
        let metrics = Metrics::default();
        let cache = Cache::new(3);
        metrics.record(
            "/v1/agents/{agent}/prompt",
            "GET",
            200,
            Duration::from_micros(700),
        );
        metrics.record(
            "/v1/agents/{agent}/prompt",
            "GET",
            200,
            Duration::from_millis(30),
        );
        metrics.record(
            "/v1/agents/{agent}/prompt",
            "GET",
            404,
            Duration::from_micros(100),
        );
        let text = metrics.render(&cache);
        assert!(text.contains("loadout_http_requests_total{route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"200\"} 2\n"), "{text}");
        assert!(text.contains("status=\"404\"} 1\n"));
        let ok = "route=\"/v1/agents/{agent}/prompt\",method=\"GET\",status=\"200\"";
        assert!(
            text.contains(&format!("_bucket{{{ok},le=\"0.0005\"}} 0\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("_bucket{{{ok},le=\"0.001\"}} 1\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("_bucket{{{ok},le=\"0.05\"}} 2\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!("_bucket{{{ok},le=\"+Inf\"}} 2\n")),
            "{text}"
        );
        assert!(text.contains("status=\"404\",le=\"0.0005\"} 1\n"), "{text}");
        assert!(text.contains("loadout_config_generation 3\n"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
