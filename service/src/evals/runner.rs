//! The job that carries evaluation runs out.
//!
//! Every process (unless `--no-eval-runner`) looks for work every few seconds and
//! when a run is queued here: a queued run, or a running one whose lease lapsed
//! (its process died). It claims one with a conditional update, then works through
//! the cases that have no result yet, one at a time, renewing the lease before
//! each. A case's result and the run's counters commit together, and a case has at
//! most one result, so a run resumed after a crash neither repeats nor loses a
//! case. Before each case the run is read again: a cancel, the deadline, the token
//! budget or a deleted connection ends it there.
//!
//! A case: the revision's prompt rendered for the case's channel and user (at the
//! fixed moment render snapshots use, with the run's tenant's instructions for the
//! user), then the case's messages, the revision's tools in OpenAI's format and
//! its model settings for the channel, sent to the connection's model; each
//! assertion scored, `llm-rubric` by asking the judge with a forced `verdict` call.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use entity::{eval_results, eval_runs};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, DatabaseConnection, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};

use super::assertions::{self, JudgeAsk, JudgeVerdict, Reply, Scored, Tokens, ToolCall, Verdict};
use super::cases::MessageRole;
use super::cases::{self, Case};
use super::chat::{self, Answer, Ask, ChatMessage, Endpoint, Retry, Role};
use super::connections::{self, Opened};
use super::runs::{self, RunState};
use super::{EvalSettings, datasets};
use crate::connectors::client::Outbound;
use crate::error::{Error, Result};
use crate::registry::formats::OpenAiTool;
use crate::releases::content::Content;
use crate::releases::serve::Rendering;
use crate::secrets::Keyring;
use crate::vocab::Clock;

/// How long a claim lasts without renewal; renewed before every case.
pub const LEASE: TimeDelta = TimeDelta::seconds(60);
/// How often each process looks for runs.
pub const POLL: Duration = Duration::from_secs(3);
/// The largest rendered prompt a case sends.
pub const MAX_RENDER_BYTES: usize = 1024 * 1024;
/// The most output text a case keeps.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// This process as a lease names it: a random id, new at every start.
pub fn owner_id() -> String {
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    format!("runner-{}", crate::digest::hex(&random))
}

/// What the runner uses.
#[derive(Clone)]
pub struct Runner {
    pub db: DatabaseConnection,
    pub outbound: Outbound,
    pub keyring: Arc<Keyring>,
    pub clock: Arc<dyn Clock>,
    pub settings: EvalSettings,
    /// This process, as leases name it.
    pub owner: String,
    /// How the chat client retries (tests shorten the waits).
    pub retry: Retry,
}

impl Runner {
    /// Runs forever: claims runs into free slots and carries each out in its own task.
    pub async fn serve(self) {
        let slots = Arc::new(tokio::sync::Semaphore::new(
            self.settings.eval_concurrency as usize,
        ));
        loop {
            while let Ok(permit) = slots.clone().try_acquire_owned() {
                match self.claim().await {
                    Ok(Some(run)) => {
                        let me = self.clone();
                        tokio::spawn(async move {
                            let id = run.id;
                            if let Err(e) = me.carry_out(run).await {
                                tracing::warn!(run = id, error = %e.message, "an evaluation run stopped; it resumes when its lease lapses");
                            }
                            drop(permit);
                            runs::nudge();
                        });
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e.message, "cannot look for evaluation runs");
                        break;
                    }
                }
            }
            tokio::select! {
                () = runs::queued().notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Claims the oldest run that is queued, or running under a lapsed lease, whose
    /// tenant has a free slot (`--eval-runs-per-tenant`).
    pub async fn claim(&self) -> Result<Option<eval_runs::Model>> {
        let now = self.clock.now();
        let candidates = eval_runs::Entity::find()
            .filter(
                Condition::any()
                    .add(eval_runs::Column::State.eq(RunState::Queued.as_str()))
                    .add(
                        Condition::all()
                            .add(eval_runs::Column::State.eq(RunState::Running.as_str()))
                            .add(eval_runs::Column::LeaseUntil.lt(now)),
                    ),
            )
            .order_by_asc(eval_runs::Column::Id)
            .limit(50)
            .all(&self.db)
            .await?;
        for run in candidates {
            let busy = eval_runs::Entity::find()
                .filter(eval_runs::Column::TenantId.eq(&run.tenant_id))
                .filter(eval_runs::Column::State.eq(RunState::Running.as_str()))
                .filter(eval_runs::Column::LeaseUntil.gte(now))
                .count(&self.db)
                .await?;
            if busy >= u64::from(self.settings.eval_runs_per_tenant) {
                continue;
            }
            let claimed = eval_runs::Entity::update_many()
                .col_expr(
                    eval_runs::Column::State,
                    Expr::value(RunState::Running.as_str()),
                )
                .col_expr(
                    eval_runs::Column::LeaseOwner,
                    Expr::value(self.owner.clone()),
                )
                .col_expr(eval_runs::Column::LeaseUntil, Expr::value(now + LEASE))
                .col_expr(
                    eval_runs::Column::StartedAt,
                    Expr::value(run.started_at.unwrap_or(now)),
                )
                .filter(eval_runs::Column::Id.eq(run.id))
                .filter(eval_runs::Column::State.eq(run.state.clone()))
                .filter(match run.lease_until {
                    Some(at) => eval_runs::Column::LeaseUntil.eq(at),
                    None => eval_runs::Column::LeaseUntil.is_null(),
                })
                .exec(&self.db)
                .await?;
            if claimed.rows_affected == 1 {
                return Ok(eval_runs::Entity::find_by_id(run.id).one(&self.db).await?);
            }
        }
        Ok(None)
    }

    /// Renews the lease and reads the run again; `None` when another process holds it.
    async fn renew(&self, id: i32) -> Result<Option<eval_runs::Model>> {
        let now = self.clock.now();
        let renewed = eval_runs::Entity::update_many()
            .col_expr(eval_runs::Column::LeaseUntil, Expr::value(now + LEASE))
            .filter(eval_runs::Column::Id.eq(id))
            .filter(eval_runs::Column::State.eq(RunState::Running.as_str()))
            .filter(eval_runs::Column::LeaseOwner.eq(self.owner.clone()))
            .exec(&self.db)
            .await?;
        if renewed.rows_affected != 1 {
            return Ok(None);
        }
        Ok(eval_runs::Entity::find_by_id(id).one(&self.db).await?)
    }

    /// Works through `run`'s remaining cases, then ends it.
    pub async fn carry_out(&self, run: eval_runs::Model) -> Result<()> {
        let dataset = entity::eval_datasets::Entity::find_by_id(run.dataset_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| Error::not_found("the run's dataset is gone"))?;
        let cases = datasets::cases_of(&dataset)?;
        let content = runs::revision_content(&self.db, run.revision_id).await?;
        let agent = crate::events::agent_name(&self.db, run.agent_id).await?;
        let done: Vec<i32> = eval_results::Entity::find()
            .select_only()
            .column(eval_results::Column::CaseIndex)
            .filter(eval_results::Column::RunId.eq(run.id))
            .into_tuple()
            .all(&self.db)
            .await?;
        for (index, case) in cases.iter().enumerate() {
            let index = index as i32;
            if done.contains(&index) {
                continue;
            }
            let Some(now_run) = self.renew(run.id).await? else {
                return Ok(());
            };
            if let Some(end) = self.should_end(&now_run).await? {
                return self.end(now_run, end.0, end.1).await;
            }
            let model = connections::open(
                &self.keyring,
                connections::by_id(&self.db, now_run.connection_id).await?,
            )?;
            let judge = match now_run.judge_connection_id {
                Some(id) => Some(connections::open(
                    &self.keyring,
                    connections::by_id(&self.db, id).await?,
                )?),
                None => None,
            };
            let subject = Subject {
                run: &now_run,
                agent: &agent,
                content: &content,
                model: &model,
                judge: judge.as_ref().unwrap_or(&model),
            };
            let outcome = self.one_case(&subject, case).await;
            self.record(&now_run, index, outcome, &model).await?;
        }
        let Some(last) = self.renew(run.id).await? else {
            return Ok(());
        };
        match last.cancel_requested {
            true => self.end(last, RunState::Cancelled, None).await,
            false => self.end(last, RunState::Succeeded, None).await,
        }
    }

    /// Why the run must end before its next case, if it must.
    async fn should_end(
        &self,
        run: &eval_runs::Model,
    ) -> Result<Option<(RunState, Option<String>)>> {
        if run.cancel_requested {
            return Ok(Some((RunState::Cancelled, None)));
        }
        if self.clock.now() >= run.deadline_at {
            let why = format!(
                "the run passed its deadline ({} minutes, --eval-max-minutes)",
                self.settings.eval_max_minutes
            );
            return Ok(Some((RunState::Failed, Some(why))));
        }
        if run.prompt_tokens + run.completion_tokens >= run.token_budget {
            let why = format!(
                "the run used its token budget ({} tokens)",
                run.token_budget
            );
            return Ok(Some((RunState::Failed, Some(why))));
        }
        let connection = connections::by_id(&self.db, run.connection_id).await?;
        if connection.deleted_at.is_some() {
            let why = format!("the model connection {} was deleted", connection.name);
            return Ok(Some((RunState::Failed, Some(why))));
        }
        Ok(None)
    }

    /// Ends the run in `state`, with its event; only while this process holds it.
    async fn end(
        &self,
        run: eval_runs::Model,
        state: RunState,
        error: Option<String>,
    ) -> Result<()> {
        let now = self.clock.now();
        let txn = crate::db::begin_write(&self.db).await?;
        let ended = eval_runs::Entity::update_many()
            .col_expr(eval_runs::Column::State, Expr::value(state.as_str()))
            .col_expr(eval_runs::Column::FinishedAt, Expr::value(now))
            .col_expr(eval_runs::Column::Error, Expr::value(error))
            .col_expr(
                eval_runs::Column::LeaseOwner,
                Expr::value(Option::<String>::None),
            )
            .col_expr(
                eval_runs::Column::LeaseUntil,
                Expr::value(Option::<DateTime<Utc>>::None),
            )
            .filter(eval_runs::Column::Id.eq(run.id))
            .filter(eval_runs::Column::State.eq(RunState::Running.as_str()))
            .filter(eval_runs::Column::LeaseOwner.eq(self.owner.clone()))
            .exec(&txn)
            .await?;
        if ended.rows_affected == 1
            && let Some(row) = eval_runs::Entity::find_by_id(run.id).one(&txn).await?
        {
            runs::record_finished(&txn, &row, now).await?;
        }
        txn.commit().await?;
        Ok(())
    }

    /// Asks the model for one case and scores it.
    async fn one_case(&self, subject: &Subject<'_>, case: &Case) -> Outcome {
        let case = cases::substitute(case);
        let ask = match self.ask(subject, &case).await {
            Ok(ask) => ask,
            Err(e) => return Outcome::failed(&case, e.message, Usage::default()),
        };
        let endpoint = endpoint(subject.model);
        let answer =
            match chat::complete_with_retries(&self.outbound, &endpoint, &ask, self.retry).await {
                Ok(answer) => answer,
                Err(e) => return Outcome::failed(&case, e.to_string(), Usage::default()),
            };
        let tool_calls: Vec<ToolCall> = answer.tool_calls.clone();
        let mut usage = Usage {
            prompt: answer.usage.prompt_tokens as i64,
            completion: answer.usage.completion_tokens as i64,
            latency_ms: answer.latency.as_millis() as i64,
        };
        let tools: Vec<(String, serde_json::Value)> = subject
            .content
            .tools
            .iter()
            .map(|t| (t.name.clone(), t.parameters.clone()))
            .collect();
        let cost = subject.model.cost(usage.prompt, usage.completion);
        let reply = Reply {
            content: &answer.content,
            tool_calls: &tool_calls,
            finish_reason: answer.finish_reason.as_deref(),
            latency_ms: usage.latency_ms as u64,
            cost,
            tokens: Tokens {
                prompt: usage.prompt as u64,
                completion: usage.completion as u64,
            },
        };
        let mut verdicts = Vec::with_capacity(case.assert.len());
        for assertion in &case.assert {
            match assertions::score(assertion, &reply, &tools) {
                Scored::Done(verdict) => verdicts.push(verdict),
                Scored::Judge(ask) => {
                    let (verdict, judged) = self.judge(subject, &ask).await;
                    usage.prompt += judged.prompt;
                    usage.completion += judged.completion;
                    verdicts.push(verdict);
                }
            }
        }
        Outcome {
            passed: assertions::case_passes(&verdicts),
            errored: false,
            output: clip(&answer.content),
            tool_calls,
            verdicts,
            usage,
            error: None,
        }
    }

    /// The request for a case: the rendered prompt, the case's turns, the tools, the settings.
    async fn ask(&self, subject: &Subject<'_>, case: &Case) -> Result<Ask> {
        let at = Rendering {
            tenant: &subject.run.tenant_id,
            agent_id: subject.run.agent_id,
            name: subject.agent,
            now: crate::releases::serve::fixed_moment(),
            max_bytes: MAX_RENDER_BYTES,
        };
        let system = crate::releases::serve::render(
            &self.db,
            &at,
            subject.content,
            &case.channel,
            case.user_id.as_deref(),
        )
        .await?;
        let mut messages = vec![ChatMessage {
            role: Role::System,
            content: system,
        }];
        messages.extend(case.messages.iter().map(|m| ChatMessage {
            role: match m.role {
                MessageRole::User => Role::User,
                MessageRole::Assistant => Role::Assistant,
            },
            content: m.content.clone(),
        }));
        let settings = subject
            .content
            .model
            .clone()
            .unwrap_or_default()
            .resolve(Some(&case.channel));
        let defs: Vec<crate::vocab::ToolDef> = subject
            .content
            .tools
            .iter()
            .map(|t| crate::vocab::ToolDef {
                name: t.name.clone(),
                description: t.description.clone(),
                approval_tier: t.approval_tier.clone(),
                parameters: t.parameters.clone(),
                strict: t.strict,
            })
            .collect();
        Ok(Ask {
            model: subject.run.model.clone(),
            messages,
            tools: openai_tools(&defs)?,
            tool_choice: case.tool_choice.clone(),
            parameters: settings.parameters,
            response_schema: settings.response_schema,
        })
    }

    /// Asks the judge for a verdict on `ask`; a judge that cannot answer fails the
    /// assertion with the reason.
    async fn judge(&self, subject: &Subject<'_>, ask: &JudgeAsk) -> (Verdict, Usage) {
        let model = subject
            .run
            .judge_model
            .clone()
            .unwrap_or_else(|| subject.run.model.clone());
        let request = Ask {
            model,
            messages: assertions::judge_messages(ask)
                .into_iter()
                .map(|m| ChatMessage {
                    role: m.role.parse().unwrap_or(Role::User),
                    content: m.content,
                })
                .collect(),
            tools: vec![verdict_tool()],
            tool_choice: Some(verdict_choice()),
            parameters: judge_parameters(),
            response_schema: None,
        };
        let endpoint = endpoint(subject.judge);
        let failed = |reason: String| Verdict {
            kind: "llm-rubric".to_owned(),
            metric: ask.metric.clone(),
            pass: false,
            score: 0.0,
            reason,
        };
        let answer: Answer = match chat::complete_with_retries(
            &self.outbound,
            &endpoint,
            &request,
            self.retry,
        )
        .await
        {
            Ok(answer) => answer,
            Err(e) => {
                return (
                    failed(format!("the judge could not be asked: {e}")),
                    Usage::default(),
                );
            }
        };
        let usage = Usage {
            prompt: answer.usage.prompt_tokens as i64,
            completion: answer.usage.completion_tokens as i64,
            latency_ms: 0,
        };
        let parsed = answer
            .tool_calls
            .first()
            .and_then(|c| serde_json::from_str::<JudgeVerdict>(&c.arguments).ok());
        match parsed {
            Some(verdict) => (assertions::judged(ask, verdict), usage),
            None => (
                failed("the judge's answer was not a verdict (a `verdict` call with pass, score and reason)".to_owned()),
                usage,
            ),
        }
    }

    /// Stores a case's result and adds it to the run's counters, in one
    /// transaction; a case already stored (by a process that lost its lease) is
    /// left as it is.
    async fn record(
        &self,
        run: &eval_runs::Model,
        index: i32,
        outcome: Outcome,
        model: &Opened,
    ) -> Result<()> {
        let now = self.clock.now();
        let txn = crate::db::begin_write(&self.db).await?;
        let row = eval_results::ActiveModel {
            run_id: Set(run.id),
            case_index: Set(index),
            passed: Set(outcome.passed),
            errored: Set(outcome.errored),
            output: Set(outcome.output),
            tool_calls: Set(serde_json::to_string(&outcome.tool_calls).map_err(Error::internal)?),
            verdicts: Set(serde_json::to_string(&outcome.verdicts).map_err(Error::internal)?),
            latency_ms: Set(outcome.usage.latency_ms),
            prompt_tokens: Set(outcome.usage.prompt),
            completion_tokens: Set(outcome.usage.completion),
            error: Set(outcome.error),
            created_at: Set(now),
            ..Default::default()
        };
        let inserted = eval_results::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([eval_results::Column::RunId, eval_results::Column::CaseIndex])
                    .do_nothing()
                    .to_owned(),
            )
            .exec_without_returning(&txn)
            .await?;
        if inserted == 1 {
            let prompt = run.prompt_tokens + outcome.usage.prompt;
            let completion = run.completion_tokens + outcome.usage.completion;
            let mut active: eval_runs::ActiveModel = run.clone().into();
            active.done = Set(run.done + 1);
            active.passed = Set(run.passed + i32::from(outcome.passed));
            active.errors = Set(run.errors + i32::from(outcome.errored));
            active.prompt_tokens = Set(prompt);
            active.completion_tokens = Set(completion);
            active.cost = Set(model.cost(prompt, completion));
            active.update(&txn).await?;
        }
        txn.commit().await?;
        Ok(())
    }
}

/// What a case is asked of.
struct Subject<'a> {
    run: &'a eval_runs::Model,
    agent: &'a str,
    content: &'a Content,
    model: &'a Opened,
    judge: &'a Opened,
}

#[derive(Default, Clone, Copy)]
struct Usage {
    prompt: i64,
    completion: i64,
    latency_ms: i64,
}

/// One case's result, before it is stored.
struct Outcome {
    passed: bool,
    errored: bool,
    output: String,
    tool_calls: Vec<ToolCall>,
    verdicts: Vec<Verdict>,
    usage: Usage,
    error: Option<String>,
}

impl Outcome {
    /// A case whose model call failed: every assertion fails with the reason.
    fn failed(case: &Case, error: String, usage: Usage) -> Outcome {
        let verdicts = case
            .assert
            .iter()
            .map(|a| Verdict {
                kind: a.kind.clone(),
                metric: a.metric.clone(),
                pass: false,
                score: 0.0,
                reason: "not scored: the model could not be asked".to_owned(),
            })
            .collect();
        Outcome {
            passed: false,
            errored: true,
            output: String::new(),
            tool_calls: Vec::new(),
            verdicts,
            usage,
            error: Some(error),
        }
    }
}

fn clip(text: &str) -> String {
    if text.len() <= MAX_OUTPUT_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_OUTPUT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

fn endpoint(connection: &Opened) -> Endpoint<'_> {
    Endpoint {
        base_url: &connection.row.base_url,
        api_key: connection.api_key.as_ref(),
        timeout: Duration::from_millis(u64::try_from(connection.row.timeout_ms).unwrap_or(120_000)),
        structured: connection.structured,
    }
}

/// `tool_choice` naming one function.
#[derive(serde::Serialize)]
struct Choice {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Named,
}

#[derive(serde::Serialize)]
struct Named {
    name: &'static str,
}

/// The revision's tools in OpenAI's format, as the fetch API serves them.
fn openai_tools(defs: &[crate::vocab::ToolDef]) -> Result<Vec<OpenAiTool>> {
    use crate::registry::formats::{Format, Tools, render};
    match render(defs, Format::Openai) {
        Tools::Openai(tools) => Ok(tools),
        _ => Ok(Vec::new()),
    }
}

/// The judge's one tool: its verdict, by the schema [`assertions::verdict_schema`].
fn verdict_tool() -> OpenAiTool {
    OpenAiTool {
        kind: "function",
        function: crate::registry::formats::OpenAiFunction {
            name: "verdict".to_owned(),
            description: "Record whether the output meets the rubric.".to_owned(),
            parameters: assertions::verdict_schema(),
            strict: true,
        },
    }
}

/// `tool_choice` forcing the `verdict` call (OpenAI and llama.cpp alike).
fn verdict_choice() -> serde_json::Value {
    serde_json::to_value(Choice {
        kind: "function",
        function: Named { name: "verdict" },
    })
    .unwrap_or_default()
}

/// A judge answers deterministically where the server allows it.
fn judge_parameters() -> crate::releases::model::Parameters {
    let mut options = serde_json::Map::new();
    options.insert("seed".to_owned(), serde_json::Value::from(1));
    crate::releases::model::Parameters {
        temperature: Some(0.0),
        max_tokens: Some(400),
        top_p: None,
        provider_options: options,
    }
}
