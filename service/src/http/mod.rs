//! The HTTP API (axum 0.8): agents read prompts and tools, admins edit them.
//!
//! Handlers validate at the edge (names, channels, sizes) before any query, answer
//! every failure with [`error::ApiError`]'s one JSON shape, and read through the
//! generation-stamped [`cache::Cache`], so an accepted write is visible to the very
//! next request on this process and within one poll interval on every other.

pub mod admin;
pub mod agent;
pub mod cache;
pub mod calls;
pub mod connectors;
pub mod error;
pub mod metrics;
pub mod registry;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, MatchedPath, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use sea_orm::DatabaseConnection;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::keys::{self, Principal, Role};
use crate::prompt::builder::Clock;
use cache::Cache;
use error::ApiError;

/// Request bodies larger than this get 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// How long an execution may run before the sweeper presumes its process dead (default).
pub const PROPOSAL_LEASE: chrono::TimeDelta = chrono::TimeDelta::minutes(5);
/// How long a proposal waits for a decision unless configured per tier.
pub const DEFAULT_PROPOSAL_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(24);
/// How often the proposal sweeper runs.
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(30);
/// How often a process checks the database generation for other processes' writes.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub db: DatabaseConnection,
    pub cache: Cache,
    pub metrics: metrics::Metrics,
    pub clock: Arc<dyn Clock>,
    pub max_template_bytes: usize,
    /// Private or loopback addresses connectors may reach (`--connector-allow`).
    pub connector_allow: Vec<std::net::IpAddr>,
    /// How long an execution may hold a proposal before the sweeper presumes it dead.
    pub proposal_lease: chrono::TimeDelta,
    /// How long a proposal waits for a decision, by approval tier (default 24 h).
    pub proposal_ttls: std::collections::BTreeMap<String, chrono::TimeDelta>,
}

impl std::ops::Deref for AppState {
    type Target = Inner;

    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Reads the current generation so the cache starts in step with the database.
    pub async fn new(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        max_template_bytes: usize,
    ) -> Result<Self, sea_orm::DbErr> {
        Self::with_connector_allow(db, clock, max_template_bytes, Vec::new()).await
    }

    /// Like [`AppState::new`], letting connectors reach the given private addresses.
    pub async fn with_connector_allow(
        db: DatabaseConnection,
        clock: Arc<dyn Clock>,
        max_template_bytes: usize,
        connector_allow: Vec<std::net::IpAddr>,
    ) -> Result<Self, sea_orm::DbErr> {
        let generation = crate::generation::current(&db).await?;
        Ok(Self(Arc::new(Inner {
            db,
            cache: Cache::new(generation),
            metrics: metrics::Metrics::default(),
            clock,
            max_template_bytes,
            connector_allow,
            proposal_lease: PROPOSAL_LEASE,
            proposal_ttls: std::collections::BTreeMap::new(),
        })))
    }

    /// The same state with per-tier proposal lifetimes (`serve --proposal-ttl TIER=SECONDS`).
    /// Call before the state is shared.
    pub fn with_proposal_ttls(
        mut self,
        ttls: std::collections::BTreeMap<String, chrono::TimeDelta>,
    ) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.proposal_ttls = ttls;
        }
        self
    }

    /// How long a proposal of a tool of `tier` waits for a decision.
    pub fn proposal_ttl(&self, tier: &str) -> chrono::TimeDelta {
        self.proposal_ttls
            .get(tier)
            .copied()
            .unwrap_or(DEFAULT_PROPOSAL_TTL)
    }

    /// The same state with another execution lease (`serve --proposal-lease-seconds`).
    /// Call before the state is shared.
    pub fn with_proposal_lease(mut self, lease: chrono::TimeDelta) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.0) {
            inner.proposal_lease = lease;
        }
        self
    }

    /// The executors as the database binds them now.
    pub async fn executors(&self) -> Result<crate::executors::Executors, sea_orm::DbErr> {
        crate::executors::Executors::load(&self.db, self.connector_allow.clone()).await
    }

    /// Sweeps the proposal ledger now and every [`SWEEP_INTERVAL`]: dead executions fail
    /// with outcome unknown, stuck approvals are counted, undecided proposals expire.
    pub fn spawn_proposal_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let now = state.clock.now();
                match crate::proposals::sweep(&state.db, now, state.proposal_lease).await {
                    Ok(found) => {
                        let m = &state.metrics;
                        m.orphans_failed
                            .fetch_add(found.failed.len() as u64, Ordering::Relaxed);
                        m.orphans_approved
                            .store(found.approved.len() as u64, Ordering::Relaxed);
                        m.proposals_expired
                            .fetch_add(found.expired.len() as u64, Ordering::Relaxed);
                        if !found.failed.is_empty() || !found.approved.is_empty() {
                            tracing::warn!(failed = ?found.failed, approved = ?found.approved, "orphaned proposals (`loadout proposals orphans` lists them)");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot sweep the proposal ledger"),
                }
            }
        })
    }

    /// Polls the database generation until the state is dropped everywhere else.
    pub fn spawn_generation_poller(&self) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(&self.0);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                match crate::generation::current(&state.db).await {
                    Ok(generation) => state.cache.observe(generation),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the configuration generation")
                    }
                }
            }
        })
    }
}

/// The whole API, and its OpenAPI description: every route is registered through
/// `utoipa_axum::routes!`, so a route cannot exist without being in the spec.
/// `/metrics` needs an admin key here; see [`metrics_router`].
pub fn router(state: AppState) -> Router {
    let (router, _spec) = api_routes().split_for_parts();
    router
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), trace))
        .with_state(state)
}

/// The OpenAPI description of every route (what `/openapi.json` serves).
pub fn openapi() -> utoipa::openapi::OpenApi {
    api_routes().split_for_parts().1
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "loadout", description = "Each LLM agent's tools and prompt, served from a database."),
    components(schemas()),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

/// Declares the `Authorization: Bearer lo_...` scheme.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(<ApiDoc as utoipa::OpenApi>::openapi())
        .routes(routes!(health))
        .routes(routes!(ready))
        .routes(routes!(metrics))
        .routes(routes!(openapi_json))
        .merge(agent::routes())
        .merge(admin::routes())
        .merge(registry::routes())
        .merge(calls::routes())
        .merge(connectors::routes())
}

static SPEC: std::sync::LazyLock<utoipa::openapi::OpenApi> = std::sync::LazyLock::new(openapi);

#[utoipa::path(get, path = "/openapi.json", tag = "operations", summary = "This OpenAPI description (no key)", security(()), responses((status = 200, description = "OpenAPI 3.1 JSON")))]
async fn openapi_json() -> Response {
    axum::Json(&*SPEC).into_response()
}

#[utoipa::path(get, path = "/metrics", tag = "operations", summary = "Prometheus metrics (admin key, or open on --metrics-bind)", responses((status = 200, description = "Prometheus text")))]
async fn metrics(State(state): State<AppState>, _key: AdminKey) -> Response {
    metrics_text(&state)
}

/// `/metrics` alone and open, for a separate `--metrics-bind` address that only
/// the scraper can reach.
pub fn metrics_router(state: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            axum::routing::get(|State(state): State<AppState>| async move { metrics_text(&state) }),
        )
        .with_state(state)
}

fn metrics_text(state: &AppState) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4"),
        )],
        state.metrics.render(&state.cache),
    )
        .into_response()
}

#[utoipa::path(get, path = "/health", tag = "operations", summary = "Liveness (no key)", security(()), responses((status = 200, description = "ok")))]
async fn health() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

/// Ready when the database answers and every migration is applied.
#[utoipa::path(get, path = "/ready", tag = "operations", summary = "Readiness: database reachable, migrations current (no key)", security(()), responses((status = 200, description = "ready"), (status = 503, description = "not ready")))]
async fn ready(State(state): State<AppState>) -> Response {
    match crate::migrate::ensure_current(&state.db).await {
        Ok(()) => axum::Json(serde_json::json!({"status": "ready"})).into_response(),
        Err(e) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!("{e:#}"),
        )
        .into_response(),
    }
}

static REQUEST_SEQ: AtomicU64 = AtomicU64::new(1);

/// One span per request with an id (echoed as `x-request-id`), and one log line with
/// the status and latency. Never the body: prompts and keys stay out of logs.
async fn trace(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let id = REQUEST_SEQ.fetch_add(1, Ordering::Relaxed);
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_owned();
    let span = tracing::info_span!("request", id, %method, %path);
    let started = Instant::now();
    let mut response = {
        let _enter = span.enter();
        next.run(request).await
    };
    let elapsed = started.elapsed();
    state
        .metrics
        .record(&route, method.as_str(), response.status().as_u16(), elapsed);
    let micros = elapsed.as_micros();
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            latency_us = micros as u64,
            "served"
        );
    });
    if let Ok(value) = HeaderValue::from_str(&id.to_string()) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// The caller, holding an agent or admin key (approver keys read proposals only).
pub struct AgentKey(pub Principal);

/// The caller, holding an approver or admin key.
pub struct ApproverKey(pub Principal);

/// The caller, who must hold an admin key.
pub struct AdminKey(pub Principal);

async fn principal(parts: &Parts, state: &AppState) -> Result<Principal, ApiError> {
    let presented = parts
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(ApiError::unauthorized)?;
    let key_hash = keys::hash(presented);
    let generation = state.cache.generation();
    let found = match state.cache.key(&key_hash, generation) {
        Some(found) => found,
        None => {
            let found = keys::authenticate(&state.db, presented).await?;
            state.cache.put_key(key_hash, generation, found.clone());
            found
        }
    };
    found.ok_or_else(ApiError::unauthorized)
}

impl FromRequestParts<AppState> for AgentKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let principal = principal(parts, state).await?;
        if !matches!(principal.role, Role::Agent | Role::Admin) {
            return Err(ApiError::forbidden());
        }
        Ok(AgentKey(principal))
    }
}

impl FromRequestParts<AppState> for ApproverKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let principal = principal(parts, state).await?;
        if !matches!(principal.role, Role::Approver | Role::Admin) {
            return Err(ApiError::forbidden());
        }
        Ok(ApproverKey(principal))
    }
}

impl FromRequestParts<AppState> for AdminKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let principal = principal(parts, state).await?;
        if principal.role != Role::Admin {
            return Err(ApiError::forbidden());
        }
        Ok(AdminKey(principal))
    }
}

/// Waits for SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {},
        () = terminate => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
