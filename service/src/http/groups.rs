//! Admin routes for groups of users, which policies name (`principal in
//! Group::"ops"`). The tenant is the key's. Each handler calls
//! [`crate::policies::groups`].

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E409, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath};
use super::idempotent::{Idempotency, key};
use crate::app::AppState;
use crate::policies::groups::{self, GroupList, GroupView, NewGroup};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_groups, create_group))
        .routes(routes!(get_group, delete_group))
        .routes(routes!(add_member, remove_member))
}

#[utoipa::path(get, path = "/v1/groups", tag = "groups",
    summary = "The tenant's groups of users and their members (admin)",
    responses((status = 200, body = GroupList, description = "The groups, by name"), E401, E403))]
async fn list_groups(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
) -> ApiResult<Json<GroupList>> {
    Ok(Json(groups::list(&state.db, who.tenant()).await?))
}

#[utoipa::path(post, path = "/v1/groups", tag = "groups",
    summary = "Create a group, with members to start with (admin)",
    request_body = NewGroup,
    responses((status = 200, body = GroupView, description = "The group"), E400, E401, E403, E409, E413, E422))]
async fn create_group(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    idempotency: Idempotency,
    ApiJson(new): ApiJson<NewGroup>,
) -> ApiResult<Json<GroupView>> {
    let w = state.writer(key(&idempotency));
    Ok(Json(
        crate::agents::groups::create(&w, &who.member, who.tenant(), new).await?,
    ))
}

#[utoipa::path(get, path = "/v1/groups/{group}", tag = "groups",
    summary = "A group and its members (admin)",
    params(("group" = String, Path)),
    responses((status = 200, body = GroupView, description = "The group"), E400, E401, E403, E404))]
async fn get_group(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<GroupView>> {
    Ok(Json(groups::get(&state.db, who.tenant(), &name).await?))
}

#[utoipa::path(delete, path = "/v1/groups/{group}", tag = "groups",
    summary = "Delete a group and its memberships (soft; admin)",
    params(("group" = String, Path)),
    responses((status = 200, body = GroupView, description = "The group as it was"), E400, E401, E403, E404))]
async fn delete_group(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    idempotency: Idempotency,
) -> ApiResult<Json<GroupView>> {
    let w = state.writer(key(&idempotency));
    Ok(Json(
        crate::agents::groups::delete(&w, &who.member, who.tenant(), &name).await?,
    ))
}

#[utoipa::path(put, path = "/v1/groups/{group}/members/{user_id}", tag = "groups",
    summary = "Add a user to a group (admin)",
    params(("group" = String, Path), ("user_id" = String, Path)),
    responses((status = 200, body = GroupView, description = "The group"), E400, E401, E403, E404, E422))]
async fn add_member(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath((name, user)): ApiPath<(String, String)>,
    idempotency: Idempotency,
) -> ApiResult<Json<GroupView>> {
    let w = state.writer(key(&idempotency));
    Ok(Json(
        crate::agents::groups::add(&w, &who.member, who.tenant(), &name, &user).await?,
    ))
}

#[utoipa::path(delete, path = "/v1/groups/{group}/members/{user_id}", tag = "groups",
    summary = "Remove a user from a group (admin)",
    params(("group" = String, Path), ("user_id" = String, Path)),
    responses((status = 200, body = GroupView, description = "The group"), E400, E401, E403, E404))]
async fn remove_member(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath((name, user)): ApiPath<(String, String)>,
    idempotency: Idempotency,
) -> ApiResult<Json<GroupView>> {
    let w = state.writer(key(&idempotency));
    Ok(Json(
        crate::agents::groups::remove(&w, &who.member, who.tenant(), &name, &user).await?,
    ))
}
