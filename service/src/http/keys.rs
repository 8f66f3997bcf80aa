//! Routes for API keys: list, create (the key is in the answer once, and never
//! again), revoke. An admin works in its own tenant; an operator in the default
//! tenant, or in the one it names (`tenant`), which is how tenants get their first
//! admin. Only an operator creates or revokes an operator key: an admin could
//! otherwise make itself one. Each handler parses the request and calls
//! [`crate::auth::keys`].

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery};
use crate::app::AppState;
use crate::auth::Principal;
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
    /// 1 to 64 of a-z, 0-9, '-', '_', '.'; unique in its tenant.
    pub name: String,
    /// `agent`, `approver`, `admin` or (by an operator only) `operator`.
    pub role: String,
    /// Scope an agent key to this agent; absent reaches every agent.
    pub agent: Option<String>,
    /// The tenant (operators only; an admin's keys are always in its own tenant).
    /// Operator keys have none.
    pub tenant: Option<String>,
}

/// Which tenant's keys (operators only; absent: the default tenant).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct InTenant {
    pub tenant: Option<String>,
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

/// The tenant a request works in: the caller's own, or for an operator the one it
/// names. An admin naming another tenant is refused.
fn tenant_for<'a>(who: &'a Principal, named: Option<&'a str>) -> Result<&'a str, Error> {
    match named {
        Some(tenant) if tenant != who.tenant() && who.role != Role::Operator => Err(
            Error::forbidden("an operator key (an admin works in its own tenant only)"),
        ),
        Some(tenant) => Ok(tenant),
        None => Ok(who.tenant()),
    }
}

/// Only an operator creates or revokes operator keys.
fn may_touch(who: &Principal, role: Role) -> Result<(), Error> {
    if role == Role::Operator && who.role != Role::Operator {
        return Err(Error::forbidden("an operator key (for an operator's key)"));
    }
    Ok(())
}

fn key_error(e: KeyError) -> Error {
    match e {
        KeyError::Db(e) => e.into(),
        KeyError::NameTaken(_) => Error::new(Kind::Conflict, "name_taken", e.to_string()),
        KeyError::NotFound(_) => Error::not_found(e.to_string()),
        KeyError::Random(_) => Error::internal(e.to_string()),
        KeyError::LimitReached(most) => {
            Error::limit_reached("live keys", most, "--max-keys-per-tenant")
        }
        _ => Error::refused("invalid_key", e.to_string()),
    }
}

#[utoipa::path(get, path = "/v1/keys", tag = "keys", summary = "The tenant's keys, never their secrets (admin, or operator for any tenant)",
    params(InTenant),
    responses((status = 200, body = KeyList, description = "Keys, oldest first"), E400, E401, E403))]
async fn list_keys(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiQuery(query): ApiQuery<InTenant>,
) -> ApiResult<Json<KeyList>> {
    let tenant = tenant_for(&who, query.tenant.as_deref())?;
    let listed = keys::list_in_tenant(&state.db, tenant).await?;
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
    let role: Role = new.role.parse().map_err(|_| {
        Error::refused(
            "invalid_key",
            "role must be agent, approver, admin or operator",
        )
    })?;
    may_touch(&who, role)?;
    let tenant = tenant_for(&who, new.tenant.as_deref())?;
    let agent = new.agent.as_deref();
    let most = state.settings.tenants.max_keys_per_tenant;
    let key = keys::create_by(
        &state.db,
        &who,
        (&new.name, role),
        Some(tenant),
        agent,
        most,
        state.clock.now(),
    )
    .await
    .map_err(key_error)?;
    tracing::info!(key = %new.name, by = %who.key_name, "key created");
    let tenant = match role {
        Role::Operator => keys::DEFAULT_TENANT,
        _ => tenant,
    };
    let created = CreatedKey {
        name: new.name,
        role: role.as_str().to_owned(),
        tenant: tenant.to_owned(),
        agent: new.agent,
        key,
    };
    Ok((StatusCode::CREATED, Json(created)))
}

#[utoipa::path(delete, path = "/v1/keys/{key}", tag = "keys", summary = "Revoke a key of the tenant; it gets 401 at once, in every process (admin)",
    params(("key" = String, Path, description = "The key's name"), InTenant),
    responses((status = 200, body = KeyInfo, description = "The key as revoked"), E400, E401, E403, E404))]
async fn revoke_key(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<InTenant>,
) -> ApiResult<Json<KeyInfo>> {
    let tenant = tenant_for(&who, query.tenant.as_deref())?;
    let role = keys::role_of(&state.db, tenant, &name)
        .await
        .map_err(key_error)?;
    may_touch(&who, role.unwrap_or(Role::Operator))?;
    let generation = keys::revoke_now(&state.db, tenant, &name, state.clock.now())
        .await
        .map_err(key_error)?;
    state.generation.observe(generation);
    let revoked = keys::list_in_tenant(&state.db, tenant).await?;
    let info = revoked.into_iter().find(|k| k.name == name);
    info.map(Json)
        .ok_or_else(|| Error::not_found(format!("no key named {name:?}")))
}
