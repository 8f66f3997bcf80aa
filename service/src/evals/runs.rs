//! Evaluation runs as records: starting one (queued for [`super::runner`]), reading
//! its progress and cases, cancelling it, and comparing a candidate's run with its
//! base's on the same dataset version.
//!
//! A run belongs to the tenant whose key started it: its cases render with that
//! tenant's users' instructions, its tokens count against that tenant's bounds,
//! and another tenant's admin gets 404 for it. Operators see every run.

use chrono::{DateTime, TimeDelta, Utc};
use entity::{agent_labels, agent_revisions, eval_results, eval_runs};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::EvalSettings;
use super::assertions::{ToolCall, Verdict};
use super::compare::{self, AssertionCount, Comparison, Paired};
use super::{connections, datasets};
use crate::auth::{Principal, Role};
use crate::db::idempotency::{Pending, record_if};
use crate::error::{Error, Kind, Result};

crate::closed_set! {
    /// Where a run is.
    pub enum RunState as "run state" {
        Queued = "queued",
        Running = "running",
        Succeeded = "succeeded",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

impl RunState {
    /// Whether the run is over.
    pub fn ended(self) -> bool {
        matches!(
            self,
            RunState::Succeeded | RunState::Failed | RunState::Cancelled
        )
    }
}

/// The most runs one list answers.
pub const MAX_LIST: u64 = 200;

/// Starting a run.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRun {
    /// The agent's dataset.
    pub dataset: String,
    /// Its version (default: the latest).
    #[serde(default)]
    pub dataset_version: Option<i32>,
    /// The revision to evaluate, by number; default: what `label` serves.
    #[serde(default)]
    pub revision: Option<i32>,
    /// Default `latest`.
    #[serde(default)]
    pub label: Option<String>,
    /// The model connection asked.
    pub connection: String,
    /// One of the connection's models; default: the revision's model when the
    /// connection lists it, else the connection's first.
    #[serde(default)]
    pub model: Option<String>,
    /// Who judges `llm-rubric` assertions (default: `connection`).
    #[serde(default)]
    pub judge_connection: Option<String>,
    #[serde(default)]
    pub judge_model: Option<String>,
    /// Tokens the run may use (default and most: `--eval-token-budget`).
    #[serde(default)]
    pub token_budget: Option<i64>,
}

/// A run as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunView {
    pub id: i32,
    pub tenant: String,
    pub agent: String,
    /// The revision's number.
    pub revision: i32,
    pub dataset: String,
    pub dataset_version: i32,
    pub connection: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_connection: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_model: Option<String>,
    pub state: RunState,
    pub total: i32,
    pub done: i32,
    pub passed: i32,
    /// Cases whose model call failed (counted as not passed).
    pub errors: i32,
    /// `passed / total`, once the run has cases.
    pub pass_rate: f64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub token_budget: i64,
    /// From the connection's prices; absent without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub cancel_requested: bool,
    pub requested_by: String,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    pub deadline_at: DateTime<Utc>,
}

/// Runs, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunView>,
}

/// One case of a run.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CaseResult {
    /// The case's place in the dataset version.
    pub index: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub channel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    pub passed: bool,
    pub errored: bool,
    pub output: String,
    pub tool_calls: Vec<ToolCall>,
    pub verdicts: Vec<Verdict>,
    pub latency_ms: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A run with its cases so far.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunCases {
    pub run: RunView,
    pub cases: Vec<CaseResult>,
}

/// One case of a comparison: the base's and the candidate's result.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CasePair {
    pub index: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<CaseResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<CaseResult>,
    /// `regressed` (pass → fail), `fixed` (fail → pass), `same`, or `missing`.
    pub change: String,
}

/// A candidate's run against its base's.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunComparison {
    pub base: RunView,
    pub candidate: RunView,
    pub comparison: Comparison,
    pub assertions: Vec<AssertionCount>,
    pub cases: Vec<CasePair>,
}

/// The run `id` as `who` may see it; 404 for another tenant's (unless operator).
pub async fn find(db: &impl ConnectionTrait, who: &Principal, id: i32) -> Result<eval_runs::Model> {
    eval_runs::Entity::find_by_id(id)
        .one(db)
        .await?
        .filter(|r| who.role == Role::Operator || r.tenant_id == who.tenant())
        .ok_or_else(|| Error::not_found(format!("no evaluation run {id}")))
}

/// The names a view shows, read once per call.
pub async fn view(db: &impl ConnectionTrait, row: eval_runs::Model) -> Result<RunView> {
    let agent = crate::events::agent_name(db, row.agent_id).await?;
    let revision = crate::events::revision_number(db, row.revision_id).await?;
    let dataset = entity::eval_datasets::Entity::find_by_id(row.dataset_id)
        .one(db)
        .await?;
    let connection = connections::by_id(db, row.connection_id).await?;
    let judge = match row.judge_connection_id {
        Some(id) => Some(connections::by_id(db, id).await?.name),
        None => None,
    };
    Ok(RunView {
        id: row.id,
        tenant: row.tenant_id,
        agent,
        revision,
        dataset: dataset.as_ref().map(|d| d.name.clone()).unwrap_or_default(),
        dataset_version: dataset.map_or(0, |d| d.version),
        connection: connection.name,
        model: row.model,
        judge_connection: judge,
        judge_model: row.judge_model,
        state: row.state.parse::<RunState>().unwrap_or(RunState::Failed),
        total: row.total,
        done: row.done,
        passed: row.passed,
        errors: row.errors,
        pass_rate: rate(row.passed, row.total),
        prompt_tokens: row.prompt_tokens,
        completion_tokens: row.completion_tokens,
        token_budget: row.token_budget,
        cost: row.cost,
        error: row.error,
        cancel_requested: row.cancel_requested,
        requested_by: row.requested_by,
        created_at: row.created_at,
        started_at: row.started_at,
        finished_at: row.finished_at,
        deadline_at: row.deadline_at,
    })
}

fn rate(passed: i32, total: i32) -> f64 {
    match total {
        0 => 0.0,
        n => f64::from(passed) / f64::from(n),
    }
}

/// The revision `number` of the agent, or the one `label` serves.
async fn revision_id(
    db: &impl ConnectionTrait,
    agent_id: i32,
    number: Option<i32>,
    label: Option<&str>,
) -> Result<i32> {
    if let Some(number) = number {
        return agent_revisions::Entity::find()
            .filter(agent_revisions::Column::AgentId.eq(agent_id))
            .filter(agent_revisions::Column::Number.eq(number))
            .one(db)
            .await?
            .map(|r| r.id)
            .ok_or_else(|| Error::not_found(format!("no revision {number}")));
    }
    let label = label.unwrap_or("latest");
    agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent_id))
        .filter(agent_labels::Column::Name.eq(label))
        .one(db)
        .await?
        .map(|l| l.revision_id)
        .ok_or_else(|| Error::not_found(format!("no label {label:?}")))
}

/// What a run is of: the agent, the dataset version, the revision, the models.
pub struct Planned {
    pub agent_id: i32,
    pub dataset_id: i32,
    pub total: i32,
    pub revision_id: i32,
    pub connection_id: i32,
    pub model: String,
    pub judge_connection_id: Option<i32>,
    pub judge_model: Option<String>,
}

/// Resolves `new` for agent `agent` (404s and 422s as a start would answer).
pub async fn plan(db: &impl ConnectionTrait, agent: &str, new: &NewRun) -> Result<Planned> {
    let found = crate::registry::links::agent(db, agent).await?;
    let dataset = datasets::find(db, found.id, &new.dataset, new.dataset_version).await?;
    let revision_id = revision_id(db, found.id, new.revision, new.label.as_deref()).await?;
    let connection = connections::unopened(connections::find(db, &new.connection).await?);
    let wanted = match &new.model {
        Some(model) => Some(model.clone()),
        None => revision_model(db, revision_id)
            .await?
            .filter(|m| connection.models.contains(m)),
    };
    let model = connection.model(wanted.as_deref())?;
    let (judge_connection_id, judge_model) = match &new.judge_connection {
        Some(name) => {
            let judge = connections::unopened(connections::find(db, name).await?);
            (
                Some(judge.row.id),
                Some(judge.model(new.judge_model.as_deref())?),
            )
        }
        None => match &new.judge_model {
            Some(m) => (None, Some(connection.model(Some(m))?)),
            None => (None, None),
        },
    };
    Ok(Planned {
        agent_id: found.id,
        dataset_id: dataset.id,
        total: dataset.case_count,
        revision_id,
        connection_id: connection.row.id,
        model,
        judge_connection_id,
        judge_model,
    })
}

/// The model a revision's settings name, if any.
async fn revision_model(db: &impl ConnectionTrait, revision_id: i32) -> Result<Option<String>> {
    let content = revision_content(db, revision_id).await?;
    Ok(content.model.and_then(|m| m.model))
}

/// What revision `id` holds.
pub async fn revision_content(
    db: &impl ConnectionTrait,
    id: i32,
) -> Result<crate::releases::content::Content> {
    let row = agent_revisions::Entity::find_by_id(id)
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found(format!("no revision {id}")))?;
    crate::releases::content::Content::parse(&row.content)
}

/// Queues a run of `planned` for `who`'s tenant.
pub async fn start(
    db: &DatabaseConnection,
    limits: &EvalSettings,
    who: &Principal,
    planned: Planned,
    token_budget: Option<i64>,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<RunView> {
    let txn = crate::db::begin_write(db).await?;
    let row = start_in(
        &txn,
        limits,
        who.tenant(),
        &who.member,
        planned,
        token_budget,
        now,
    )
    .await?;
    record_if(&txn, key).await?;
    let answer = view(&txn, row).await?;
    txn.commit().await?;
    nudge();
    Ok(answer)
}

/// [`start`] inside the caller's transaction (a release check starts two).
pub async fn start_in(
    txn: &impl ConnectionTrait,
    settings: &EvalSettings,
    tenant: &str,
    member: &str,
    planned: Planned,
    token_budget: Option<i64>,
    now: DateTime<Utc>,
) -> Result<eval_runs::Model> {
    let most = settings.eval_token_budget as i64;
    let budget = match token_budget {
        None => most,
        Some(b) if (1..=most).contains(&b) => b,
        Some(_) => {
            return Err(Error::refused(
                "invalid_run",
                format!("token_budget must be 1 to {most} (--eval-token-budget)"),
            ));
        }
    };
    crate::db::bounds::serialize(txn, "eval_runs", tenant).await?;
    let open = eval_runs::Entity::find()
        .filter(eval_runs::Column::TenantId.eq(tenant))
        .filter(
            eval_runs::Column::State.is_in([RunState::Queued.as_str(), RunState::Running.as_str()]),
        )
        .count(txn)
        .await?;
    if open >= u64::from(settings.eval_max_queued) {
        return Err(Error::limit_reached(
            "queued or running evaluation runs",
            u64::from(settings.eval_max_queued),
            "--eval-max-queued",
        ));
    }
    let deadline = now + TimeDelta::minutes(i64::from(settings.eval_max_minutes));
    Ok(eval_runs::ActiveModel {
        tenant_id: Set(tenant.to_owned()),
        agent_id: Set(planned.agent_id),
        revision_id: Set(planned.revision_id),
        dataset_id: Set(planned.dataset_id),
        connection_id: Set(planned.connection_id),
        model: Set(planned.model),
        judge_connection_id: Set(planned.judge_connection_id),
        judge_model: Set(planned.judge_model),
        state: Set(RunState::Queued.as_str().to_owned()),
        total: Set(planned.total),
        done: Set(0),
        passed: Set(0),
        errors: Set(0),
        prompt_tokens: Set(0),
        completion_tokens: Set(0),
        token_budget: Set(budget),
        cost: Set(None),
        requested_by: Set(member.to_owned()),
        lease_owner: Set(None),
        lease_until: Set(None),
        cancel_requested: Set(false),
        error: Set(None),
        created_at: Set(now),
        started_at: Set(None),
        finished_at: Set(None),
        deadline_at: Set(deadline),
        ..Default::default()
    }
    .insert(txn)
    .await?)
}

/// The newest runs `who` may see, of `agent` when given.
pub async fn list(
    db: &DatabaseConnection,
    who: &Principal,
    agent: Option<&str>,
    limit: u64,
) -> Result<RunList> {
    let mut query = eval_runs::Entity::find();
    if who.role != Role::Operator {
        query = query.filter(eval_runs::Column::TenantId.eq(who.tenant()));
    }
    if let Some(agent) = agent {
        let found = crate::registry::links::agent(db, agent).await?;
        query = query.filter(eval_runs::Column::AgentId.eq(found.id));
    }
    let rows = query
        .order_by_desc(eval_runs::Column::Id)
        .limit(limit.clamp(1, MAX_LIST))
        .all(db)
        .await?;
    let mut runs = Vec::with_capacity(rows.len());
    for row in rows {
        runs.push(view(db, row).await?);
    }
    Ok(RunList { runs })
}

/// One run.
pub async fn get(db: &DatabaseConnection, who: &Principal, id: i32) -> Result<RunView> {
    view(db, find(db, who, id).await?).await
}

/// The results of run `row`, by case, with each case's description and channel.
async fn results(db: &impl ConnectionTrait, row: &eval_runs::Model) -> Result<Vec<CaseResult>> {
    let dataset = entity::eval_datasets::Entity::find_by_id(row.dataset_id)
        .one(db)
        .await?
        .ok_or_else(|| Error::not_found("the run's dataset is gone"))?;
    let cases = datasets::cases_of(&dataset)?;
    let stored = eval_results::Entity::find()
        .filter(eval_results::Column::RunId.eq(row.id))
        .order_by_asc(eval_results::Column::CaseIndex)
        .all(db)
        .await?;
    Ok(stored
        .into_iter()
        .map(|r| {
            let case = usize::try_from(r.case_index)
                .ok()
                .and_then(|i| cases.get(i));
            CaseResult {
                index: r.case_index,
                description: case.and_then(|c| c.description.clone()),
                channel: case.map(|c| c.channel.clone()).unwrap_or_default(),
                user_id: case.and_then(|c| c.user_id.clone()),
                passed: r.passed,
                errored: r.errored,
                output: r.output,
                tool_calls: serde_json::from_str(&r.tool_calls).unwrap_or_default(),
                verdicts: serde_json::from_str(&r.verdicts).unwrap_or_default(),
                latency_ms: r.latency_ms,
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
                error: r.error,
            }
        })
        .collect())
}

/// A run with its cases so far.
pub async fn cases(db: &DatabaseConnection, who: &Principal, id: i32) -> Result<RunCases> {
    let row = find(db, who, id).await?;
    let cases = results(db, &row).await?;
    Ok(RunCases {
        run: view(db, row).await?,
        cases,
    })
}

/// Cancels a run: a queued one at once, a running one at its next case.
pub async fn cancel(
    db: &DatabaseConnection,
    who: &Principal,
    id: i32,
    now: DateTime<Utc>,
    key: Option<&Pending>,
) -> Result<RunView> {
    let txn = crate::db::begin_write(db).await?;
    let row = find(&txn, who, id).await?;
    let state = row.state.parse::<RunState>().unwrap_or(RunState::Failed);
    if state.ended() {
        return Err(Error::new(
            Kind::Conflict,
            "run_ended",
            format!("evaluation run {id} is already {}", state.as_str()),
        ));
    }
    let mut active: eval_runs::ActiveModel = row.into();
    active.cancel_requested = Set(true);
    if state == RunState::Queued {
        active.state = Set(RunState::Cancelled.as_str().to_owned());
        active.finished_at = Set(Some(now));
    }
    let row = active.update(&txn).await?;
    if state == RunState::Queued {
        record_finished(&txn, &row, now).await?;
    }
    record_if(&txn, key).await?;
    let answer = view(&txn, row).await?;
    txn.commit().await?;
    Ok(answer)
}

/// Compares run `candidate` with run `base` (the same dataset version), case by case.
pub async fn compare_runs(
    db: &DatabaseConnection,
    who: &Principal,
    candidate: i32,
    base: i32,
    alpha: f64,
) -> Result<RunComparison> {
    let (c, b) = (find(db, who, candidate).await?, find(db, who, base).await?);
    if c.dataset_id != b.dataset_id {
        return Err(Error::refused(
            "not_comparable",
            "the two runs ran different datasets or dataset versions; compare runs of the same version",
        ));
    }
    let (c_cases, b_cases) = (results(db, &c).await?, results(db, &b).await?);
    let compared = pair(&b_cases, &c_cases, alpha);
    Ok(RunComparison {
        base: view(db, b).await?,
        candidate: view(db, c).await?,
        comparison: compared.0,
        assertions: compared.1,
        cases: compared.2,
    })
}

/// Pairs two runs' cases by index (only cases both have count in the test).
pub fn pair(
    base: &[CaseResult],
    candidate: &[CaseResult],
    alpha: f64,
) -> (Comparison, Vec<AssertionCount>, Vec<CasePair>) {
    let mut pairs = Vec::new();
    let mut cases = Vec::new();
    let (mut b_verdicts, mut c_verdicts) = (Vec::new(), Vec::new());
    let last = base
        .iter()
        .chain(candidate)
        .map(|c| c.index)
        .max()
        .unwrap_or(-1);
    for index in 0..=last {
        let b = base.iter().find(|c| c.index == index);
        let c = candidate.iter().find(|c| c.index == index);
        let change = match (b, c) {
            (Some(b), Some(c)) => {
                pairs.push(Paired {
                    base_pass: b.passed,
                    candidate_pass: c.passed,
                });
                b_verdicts.push(b.verdicts.clone());
                c_verdicts.push(c.verdicts.clone());
                match (b.passed, c.passed) {
                    (true, false) => "regressed",
                    (false, true) => "fixed",
                    _ => "same",
                }
            }
            _ => "missing",
        };
        cases.push(CasePair {
            index,
            description: b.or(c).and_then(|x| x.description.clone()),
            base: b.cloned(),
            candidate: c.cloned(),
            change: change.to_owned(),
        });
    }
    (
        compare::compare(&pairs, alpha),
        compare::by_assertion(&b_verdicts, &c_verdicts),
        cases,
    )
}

/// The latest run of exactly this (tenant, revision, dataset version, connection,
/// model, judge) that did not fail or get cancelled: a release check reuses it.
pub async fn reusable(
    db: &impl ConnectionTrait,
    tenant: &str,
    planned: &Planned,
) -> Result<Option<eval_runs::Model>> {
    Ok(eval_runs::Entity::find()
        .filter(eval_runs::Column::TenantId.eq(tenant))
        .filter(eval_runs::Column::AgentId.eq(planned.agent_id))
        .filter(eval_runs::Column::RevisionId.eq(planned.revision_id))
        .filter(eval_runs::Column::DatasetId.eq(planned.dataset_id))
        .filter(eval_runs::Column::ConnectionId.eq(planned.connection_id))
        .filter(eval_runs::Column::Model.eq(&planned.model))
        .filter(eval_runs::Column::State.is_in([
            RunState::Queued.as_str(),
            RunState::Running.as_str(),
            RunState::Succeeded.as_str(),
        ]))
        .order_by_desc(eval_runs::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .find(|r| {
            r.judge_connection_id == planned.judge_connection_id
                && r.judge_model == planned.judge_model
        }))
}

/// The results of a run (for the release check).
pub async fn results_of(
    db: &impl ConnectionTrait,
    row: &eval_runs::Model,
) -> Result<Vec<CaseResult>> {
    results(db, row).await
}

static QUEUED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Wakes this process's runner: a run was queued.
pub fn nudge() {
    QUEUED.notify_one();
}

/// What the runner waits on besides its poll.
pub fn queued() -> &'static tokio::sync::Notify {
    &QUEUED
}

/// Records `eval_run.finished` for an ended run, in the caller's transaction.
pub async fn record_finished(
    db: &impl ConnectionTrait,
    run: &eval_runs::Model,
    now: DateTime<Utc>,
) -> Result<()> {
    let dataset = entity::eval_datasets::Entity::find_by_id(run.dataset_id)
        .one(db)
        .await?;
    let event = crate::events::EvalRun {
        run: run.id,
        tenant: run.tenant_id.clone(),
        agent: crate::events::agent_name(db, run.agent_id).await?,
        revision: crate::events::revision_number(db, run.revision_id).await?,
        dataset: dataset.as_ref().map(|d| d.name.clone()).unwrap_or_default(),
        dataset_version: dataset.map_or(0, |d| d.version),
        state: run.state.clone(),
        total: run.total,
        passed: run.passed,
        errors: run.errors,
        prompt_tokens: run.prompt_tokens,
        completion_tokens: run.completion_tokens,
    };
    crate::events::record(db, now, crate::events::Event::EvalRunFinished(event)).await?;
    Ok(())
}
