//! Routes for webhook subscriptions (`/v1/webhooks`): create, list, get, change,
//! delete (softly), rotate the secret, read the delivery log. An admin works in
//! its own tenant (another tenant's subscription is 404); an operator in any.
//! Each handler parses the request and calls [`crate::webhooks::subscriptions`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::webhooks::subscriptions::{
    self, AttemptList, NewSubscription, Sealing, SubscriptionList, SubscriptionPatch,
    SubscriptionView, WithSecret,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(rotate_secret))
        .routes(routes!(list_deliveries))
}

/// Which tenant's subscriptions (operators only; absent: every tenant's).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InTenant {
    pub tenant: Option<String>,
}

/// How many attempts of the log (1 to 200, default 50).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    pub limit: Option<u64>,
}

/// The body of a rotation: a secret of your own, or none to have one made.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rotation {
    pub secret: Option<String>,
}

#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks", summary = "Webhook subscriptions, never their secrets (admin: its tenant; operator: any)",
    params(InTenant),
    responses((status = 200, body = SubscriptionList, description = "Subscriptions, oldest first"), E400, E401, E403))]
async fn list_webhooks(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiQuery(query): ApiQuery<InTenant>,
) -> ApiResult<Json<SubscriptionList>> {
    let subscriptions = subscriptions::list(&state.db, &who, query.tenant.as_deref()).await?;
    Ok(Json(SubscriptionList { subscriptions }))
}

#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks", summary = "Subscribe a URL to events; the answer holds the signing secret once (admin)",
    request_body = NewSubscription,
    responses((status = 201, body = WithSecret, description = "Created"), E400, E401, E403, E413, E422))]
async fn create_webhook(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiJson(new): ApiJson<NewSubscription>,
) -> ApiResult<(StatusCode, Json<WithSecret>)> {
    let sealing = Sealing {
        outbound: &state.outbound,
        keyring: &state.secrets,
        most: state.settings.webhooks.webhook_max_subscriptions,
    };
    let created = subscriptions::create(&state.db, &sealing, &who, new, state.clock.now()).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(get, path = "/v1/webhooks/{id}", tag = "webhooks", summary = "One subscription (admin of its tenant, or operator)",
    params(("id" = i32, Path)),
    responses((status = 200, body = SubscriptionView, description = "The subscription"), E400, E401, E403, E404))]
async fn get_webhook(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
) -> ApiResult<Json<SubscriptionView>> {
    Ok(Json(subscriptions::find(&state.db, &who, id).await?.into()))
}

#[utoipa::path(patch, path = "/v1/webhooks/{id}", tag = "webhooks", summary = "Change a subscription's URL, events or description; enable or disable it",
    params(("id" = i32, Path)), request_body = SubscriptionPatch,
    responses((status = 200, body = SubscriptionView, description = "The subscription as saved"), E400, E401, E403, E404, E413, E422))]
async fn update_webhook(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
    ApiJson(patch): ApiJson<SubscriptionPatch>,
) -> ApiResult<Json<SubscriptionView>> {
    let now = state.clock.now();
    let saved = subscriptions::update(
        &state.db,
        &state.outbound,
        &who,
        id,
        patch,
        now,
        key(&idempotency),
    )
    .await?;
    Ok(Json(saved))
}

#[utoipa::path(delete, path = "/v1/webhooks/{id}", tag = "webhooks", summary = "Delete a subscription (softly): it receives nothing more",
    params(("id" = i32, Path)),
    responses((status = 200, body = SubscriptionView, description = "The subscription as deleted"), E400, E401, E403, E404))]
async fn delete_webhook(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
    idempotency: Idempotency,
) -> ApiResult<Json<SubscriptionView>> {
    Ok(Json(
        subscriptions::delete(&state.db, &who, id, state.clock.now(), key(&idempotency)).await?,
    ))
}

#[utoipa::path(post, path = "/v1/webhooks/{id}/rotate-secret", tag = "webhooks", summary = "Replace the signing secret; the answer holds the new one once",
    params(("id" = i32, Path)), request_body = Rotation,
    responses((status = 200, body = WithSecret, description = "The new secret"), E400, E401, E403, E404, E413, E422))]
async fn rotate_secret(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
    ApiJson(rotation): ApiJson<Rotation>,
) -> ApiResult<Json<WithSecret>> {
    let now = state.clock.now();
    let rotated =
        subscriptions::rotate(&state.db, &state.secrets, &who, id, rotation.secret, now).await?;
    Ok(Json(rotated))
}

#[utoipa::path(get, path = "/v1/webhooks/{id}/deliveries", tag = "webhooks", summary = "The subscription's delivery log: each attempt, newest first",
    params(("id" = i32, Path), LogQuery),
    responses((status = 200, body = AttemptList, description = "Attempts, newest first"), E400, E401, E403, E404))]
async fn list_deliveries(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(id): ApiPath<i32>,
    ApiQuery(query): ApiQuery<LogQuery>,
) -> ApiResult<Json<AttemptList>> {
    let limit = query
        .limit
        .unwrap_or(50)
        .clamp(1, crate::webhooks::deliver::LOG_ROWS);
    let attempts = subscriptions::attempts(&state.db, &who, id, limit).await?;
    Ok(Json(AttemptList { attempts }))
}
