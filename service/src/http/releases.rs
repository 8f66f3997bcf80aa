//! An agent's revisions, labels and label history (issue 25). Reads: whoever may
//! read an agent's configuration (admins and operators). Each handler parses the
//! request and calls [`crate::releases::read`].

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiResult, E400, E401, E403, E404, E413, E422};
use super::extract::{AdminKey, ApiJson, ApiPath, ApiQuery};
use crate::app::AppState;
use crate::db::page;
use crate::promotion::replay::{self, ReplayQuery, ReplayReport, Replayer};
use crate::promotion::snapshots::{self, RenderCheck, SnapshotList, SnapshotPut, SnapshotView};
use crate::releases::diff::{self, RevisionDiff};
use crate::releases::read::{self, LabelHistory, LabelList, RevisionList, RevisionView};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_revisions))
        .routes(routes!(get_revision))
        .routes(routes!(diff_revisions))
        .routes(routes!(replay))
        .routes(routes!(list_snapshots, put_snapshot, delete_snapshot))
        .routes(routes!(compare_snapshots))
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

#[utoipa::path(get, path = "/v1/agents/{agent}/replay", tag = "admin", summary = "The key's tenant's recorded calls of each tool a candidate revision changes, checked against it: refusals and changed decisions; arguments never in the answer (admin)",
    params(("agent" = String, Path), ReplayQuery),
    responses((status = 200, body = ReplayReport, description = "Per changed tool: calls replayed, refused (with the refusal a call would get) and decided differently"), E400, E401, E403, E404))]
async fn replay(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<ReplayQuery>,
) -> ApiResult<Json<ReplayReport>> {
    let replayer = Replayer {
        tenant: who.tenant(),
        member: &who.member,
    };
    Ok(Json(replay::run(&state.db, replayer, &name, query).await?))
}

#[utoipa::path(get, path = "/v1/agents/{agent}/snapshots", tag = "admin", summary = "The key's tenant's render snapshots of the agent: expected renders per channel and user (admin)",
    params(("agent" = String, Path)),
    responses((status = 200, body = SnapshotList, description = "The snapshots"), E400, E401, E403, E404))]
async fn list_snapshots(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<SnapshotList>> {
    Ok(Json(snapshots::list(&state.db, who.tenant(), &name).await?))
}

#[utoipa::path(put, path = "/v1/agents/{agent}/snapshots", tag = "admin", summary = "Record a revision's render (production's by default) as the expected one for a channel and user; accepting a change request's difference is recording its candidate (admin)",
    params(("agent" = String, Path)), request_body = SnapshotPut,
    responses((status = 200, body = SnapshotView, description = "The snapshot as recorded"), E400, E401, E403, E404, E413, E422))]
async fn put_snapshot(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiJson(put): ApiJson<SnapshotPut>,
) -> ApiResult<Json<SnapshotView>> {
    let now = state.clock.now();
    Ok(Json(
        snapshots::record(&state.db, who.tenant(), &name, put, now).await?,
    ))
}

/// Which snapshot: its channel and user.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct SnapshotKey {
    pub channel: String,
    pub user_id: Option<String>,
}

#[utoipa::path(delete, path = "/v1/agents/{agent}/snapshots", tag = "admin", summary = "Delete the key's tenant's snapshot of a channel and user (admin)",
    params(("agent" = String, Path), SnapshotKey),
    responses((status = 200, body = SnapshotView, description = "The snapshot as deleted"), E400, E401, E403, E404))]
async fn delete_snapshot(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(which): ApiQuery<SnapshotKey>,
) -> ApiResult<Json<SnapshotView>> {
    let now = state.clock.now();
    let user = which.user_id.as_deref();
    Ok(Json(
        snapshots::delete(&state.db, who.tenant(), &name, &which.channel, user, now).await?,
    ))
}

/// The revision whose renders are compared.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CompareQuery {
    pub revision: i32,
}

/// Each snapshot compared with a revision's render.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct SnapshotComparison {
    pub agent: String,
    pub revision: i32,
    pub renders: Vec<RenderCheck>,
}

#[utoipa::path(get, path = "/v1/agents/{agent}/snapshots/compare", tag = "admin", summary = "The key's tenant's snapshots compared with a revision's renders, each difference as a line diff (admin)",
    params(("agent" = String, Path), CompareQuery),
    responses((status = 200, body = SnapshotComparison, description = "Each snapshot: matches, or its diff"), E400, E401, E403, E404))]
async fn compare_snapshots(
    State(state): State<AppState>,
    AdminKey(who): AdminKey,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<CompareQuery>,
) -> ApiResult<Json<SnapshotComparison>> {
    let revision = read::revision(&state.db, &name, query.revision).await?;
    let agent_id = crate::registry::links::agent(&state.db, &name).await?.id;
    let renders =
        snapshots::compare(&state.db, who.tenant(), agent_id, &name, &revision.content).await?;
    Ok(Json(SnapshotComparison {
        agent: revision.agent,
        revision: query.revision,
        renders,
    }))
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
