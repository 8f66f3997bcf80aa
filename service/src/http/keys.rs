//! Admin routes for API keys, in the admin key's tenant: list, create (the key is
//! in the answer once, and never again), revoke. Each handler parses the request
//! and calls [`crate::auth::keys`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath};
use crate::app::AppState;
use crate::auth::keys::{self, KeyError, KeyInfo, Role};
use crate::error::{Error, Kind};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_keys, create_key))
        .routes(routes!(revoke_key))
}

/// The keys of the caller's tenant.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyInfo>,
}

/// The body of `POST /v1/keys`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// 1 to 64 of a-z, 0-9, '-', '_', '.'; unique.
    pub name: String,
    /// `admin`, `agent` or `approver`.
    pub role: String,
    /// Scope an agent key to this agent; absent reaches every agent.
    pub agent: Option<String>,
}

/// A key just made: the only answer that holds the key itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedKey {
    pub name: String,
    pub role: String,
    pub tenant: String,
    pub agent: Option<String>,
    /// The key. Store it now: it is never shown again.
    pub key: String,
}

fn key_error(e: KeyError) -> Error {
    match e {
        KeyError::Db(e) => e.into(),
        KeyError::NameTaken(_) => Error::new(Kind::Conflict, "name_taken", e.to_string()),
        KeyError::NotFound(_) => Error::not_found(e.to_string()),
        KeyError::Random(_) => Error::internal(e.to_string()),
        _ => Error::refused("invalid_key", e.to_string()),
    }
}

#[utoipa::path(get, path = "/v1/keys", tag = "keys", summary = "The tenant's keys, never their secrets (admin)",
    responses((status = 200, body = KeyList, description = "Keys, oldest first"), E401, E403))]
async fn list_keys(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
) -> ApiResult<Json<KeyList>> {
    let listed = keys::list_in_tenant(&state.db, who.tenant()).await?;
    Ok(Json(KeyList { keys: listed }))
}

#[utoipa::path(post, path = "/v1/keys", tag = "keys", summary = "Create a key in the admin's tenant; the answer holds it once (admin)",
    request_body = NewKey,
    responses((status = 201, body = CreatedKey, description = "Created"), E400, E401, E403, E409, E413, E422))]
async fn create_key(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiJson(new): ApiJson<NewKey>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    let role: Role = new
        .role
        .parse()
        .map_err(|_| Error::refused("invalid_key", "role must be admin, agent or approver"))?;
    let tenant = who.tenant_id.as_deref();
    let agent = new.agent.as_deref();
    let key = keys::create_scoped(&state.db, &new.name, role, tenant, agent)
        .await
        .map_err(key_error)?;
    tracing::info!(key = %new.name, by = %who.key_name, "key created");
    let created = CreatedKey {
        name: new.name,
        role: role.as_str().to_owned(),
        tenant: who.tenant().to_owned(),
        agent: new.agent,
        key,
    };
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(delete, path = "/v1/keys/{key}", tag = "keys", summary = "Revoke a key of the tenant; it gets 401 at once, in every process (admin)",
    params(("key" = String, Path, description = "The key's name")),
    responses((status = 200, body = KeyInfo, description = "The key as revoked"), E400, E401, E403, E404))]
async fn revoke_key(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<KeyInfo>> {
    let ours = keys::list_in_tenant(&state.db, who.tenant()).await?;
    if !ours.iter().any(|k| k.name == name) {
        return Err(Error::not_found(format!("no key named {name:?}")));
    }
    let generation = keys::revoke_now(&state.db, &name)
        .await
        .map_err(key_error)?;
    state.cache.observe(generation);
    let revoked = keys::list_in_tenant(&state.db, who.tenant()).await?;
    let info = revoked.into_iter().find(|k| k.name == name);
    info.map(Json)
        .ok_or_else(|| Error::not_found(format!("no key named {name:?}")))
}
