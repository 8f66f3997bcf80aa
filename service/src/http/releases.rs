//! An agent's revisions, labels and label history (issue 25). Reads: whoever may
//! read an agent's configuration (admins and operators). Each handler parses the
//! request and calls [`crate::releases::read`].

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404};
use super::extract::{AdminKey, ApiPath, ApiQuery};
use crate::app::AppState;
use crate::db::page;
use crate::releases::diff::{self, RevisionDiff};
use crate::releases::read::{self, LabelHistory, LabelList, RevisionList, RevisionView};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_revisions))
        .routes(routes!(get_revision))
        .routes(routes!(diff_revisions))
        .routes(routes!(list_labels))
        .routes(routes!(label_history))
}

/// A page of revisions: `limit` (1 to 1,000; 100 unless given) newest first,
/// numbered below `before` (the previous page's `next_before`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RevisionPage {
    pub limit: Option<u64>,
    pub before: Option<i32>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/revisions", tag = "admin", summary = "An agent's revisions, newest first, a page at a time (admin)",
    params(("agent" = String, Path), RevisionPage),
    responses((status = 200, body = RevisionList, description = "A page of revisions, newest first"), E400, E401, E403, E404))]
async fn list_revisions(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(page): ApiQuery<RevisionPage>,
) -> ApiResult<Json<RevisionList>> {
    let page = read::Page {
        limit: page.limit.unwrap_or(read::DEFAULT_PAGE),
        before: page.before,
    };
    Ok(Json(read::revisions(&state.db, &name, page).await?))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/revisions/{number}", tag = "admin", summary = "One revision with what it serves (admin)",
    params(("agent" = String, Path), ("number" = i32, Path)),
    responses((status = 200, body = RevisionView, description = "The revision"), E400, E401, E403, E404))]
async fn get_revision(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath((name, number)): ApiPath<(String, i32)>,
) -> ApiResult<Json<RevisionView>> {
    Ok(Json(read::revision(&state.db, &name, number).await?))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/revisions/{from}/diff/{to}", tag = "admin", summary = "What changed from one revision to another (admin)",
    params(("agent" = String, Path), ("from" = i32, Path), ("to" = i32, Path)),
    responses((status = 200, body = RevisionDiff, description = "Line diffs of the texts; tools, identity and channels added, removed and changed"), E400, E401, E403, E404))]
async fn diff_revisions(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath((name, from, to)): ApiPath<(String, i32, i32)>,
) -> ApiResult<Json<RevisionDiff>> {
    Ok(Json(diff::between(&state.db, &name, from, to).await?))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/labels", tag = "admin", summary = "An agent's labels and the revision each points at (admin)",
    params(("agent" = String, Path)),
    responses((status = 200, body = LabelList, description = "The labels, by name"), E400, E401, E403, E404))]
async fn list_labels(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<LabelList>> {
    Ok(Json(read::labels(&state.db, &name).await?))
}

/// A page of a label's moves: `limit` (1 to 1,000; 100 unless given) newest first,
/// older than the move `before` (the previous page's `next_before`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryPage {
    pub limit: Option<u64>,
    pub before: Option<i32>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/labels/{label}/history", tag = "admin", summary = "A label's moves, newest first, a page at a time (admin)",
    params(("agent" = String, Path), ("label" = String, Path), HistoryPage),
    responses((status = 200, body = LabelHistory, description = "A page of moves, newest first"), E400, E401, E403, E404))]
async fn label_history(
    State(state): State<AppState>,
    _key: AdminKey,
    ApiPath((name, label)): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<HistoryPage>,
) -> ApiResult<Json<LabelHistory>> {
    let page = page::ByNumber {
        limit: q.limit,
        cursor: q.before,
    };
    Ok(Json(read::history(&state.db, &name, &label, page).await?))
}
