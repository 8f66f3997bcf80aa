//! Evaluations (issue 52).
//!
//! - `model_connections`: OpenAI-compatible endpoints an operator registers: base
//!   URL, the models it may be asked for, an API key sealed at rest, a timeout, how a
//!   response schema is asked for, optional prices per million tokens. Soft-deleted;
//!   a live name is unique.
//! - `eval_datasets`: an agent's datasets, one row per version (cases as JSON);
//!   soft-deleted as a whole.
//! - `eval_runs`: a revision run on a dataset version against a connection's model,
//!   per tenant: a job with a state, progress, token use, a lease (the process
//!   running it) and a deadline, so a run survives a restart and resumes.
//! - `eval_results`: each case's output, tool calls, verdicts, latency and tokens;
//!   one per case and run, so a resumed run skips what is done.
//! - `agent_labels.require_evals`: the evaluation a change request to the label
//!   must pass (JSON: dataset, connection, model, minimum pass rate, not worse).
//!
//! `down` drops what `up` added.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m20261207_000026_evaluations"
    }
}

#[derive(DeriveIden)]
enum AgentConfigurations {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum AgentLabels {
    Table,
    RequireEvals,
}

#[derive(DeriveIden)]
enum ModelConnections {
    Table,
    Id,
    Name,
    BaseUrl,
    Models,
    ApiKey,
    TimeoutMs,
    Structured,
    InputPrice,
    OutputPrice,
    CreatedAt,
    UpdatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum EvalDatasets {
    Table,
    Id,
    AgentId,
    Name,
    Version,
    Cases,
    CaseCount,
    Hash,
    CreatedBy,
    CreatedAt,
    DeletedAt,
}

#[derive(DeriveIden)]
enum EvalRuns {
    Table,
    Id,
    TenantId,
    AgentId,
    RevisionId,
    DatasetId,
    ConnectionId,
    Model,
    JudgeConnectionId,
    JudgeModel,
    State,
    Total,
    Done,
    Passed,
    Errors,
    PromptTokens,
    CompletionTokens,
    TokenBudget,
    Cost,
    RequestedBy,
    LeaseOwner,
    LeaseUntil,
    CancelRequested,
    Error,
    CreatedAt,
    StartedAt,
    FinishedAt,
    DeadlineAt,
}

#[derive(DeriveIden)]
enum EvalResults {
    Table,
    Id,
    RunId,
    CaseIndex,
    Passed,
    Errored,
    Output,
    ToolCalls,
    Verdicts,
    LatencyMs,
    PromptTokens,
    CompletionTokens,
    Error,
    CreatedAt,
}

fn id<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .integer()
        .not_null()
        .auto_increment()
        .primary_key()
        .to_owned()
}

fn stamp<T: IntoIden>(column: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.timestamp_with_time_zone();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
}

fn text<T: IntoIden>(column: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.text();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
}

fn string<T: IntoIden>(column: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.string();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
}

fn int<T: IntoIden>(column: T, null: bool) -> ColumnDef {
    let mut def = ColumnDef::new(column);
    def.integer();
    if null {
        def.null();
    } else {
        def.not_null();
    }
    def.to_owned()
}

fn count<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column)
        .big_integer()
        .not_null()
        .default(0)
        .to_owned()
}

fn price<T: IntoIden>(column: T) -> ColumnDef {
    ColumnDef::new(column).double().null().to_owned()
}

const CONNECTIONS_LIVE: &str = "CREATE UNIQUE INDEX model_connections_live \
     ON model_connections (name) WHERE deleted_at IS NULL";
const DATASET_VERSIONS: &str = "CREATE UNIQUE INDEX eval_datasets_version \
     ON eval_datasets (agent_id, name, version)";
const RUNS_STATE: &str = "CREATE INDEX eval_runs_state ON eval_runs (state)";
const RUNS_REUSE: &str =
    "CREATE INDEX eval_runs_reuse ON eval_runs (agent_id, dataset_id, revision_id)";
const ONE_RESULT: &str =
    "CREATE UNIQUE INDEX eval_results_case ON eval_results (run_id, case_index)";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(AgentLabels::Table)
                    .add_column(text(AgentLabels::RequireEvals, true))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ModelConnections::Table)
                    .col(id(ModelConnections::Id))
                    .col(string(ModelConnections::Name, false))
                    .col(text(ModelConnections::BaseUrl, false))
                    .col(text(ModelConnections::Models, false))
                    .col(text(ModelConnections::ApiKey, true))
                    .col(int(ModelConnections::TimeoutMs, false))
                    .col(string(ModelConnections::Structured, false))
                    .col(price(ModelConnections::InputPrice))
                    .col(price(ModelConnections::OutputPrice))
                    .col(stamp(ModelConnections::CreatedAt, false))
                    .col(stamp(ModelConnections::UpdatedAt, false))
                    .col(stamp(ModelConnections::DeletedAt, true))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(EvalDatasets::Table)
                    .col(id(EvalDatasets::Id))
                    .col(int(EvalDatasets::AgentId, false))
                    .col(string(EvalDatasets::Name, false))
                    .col(int(EvalDatasets::Version, false))
                    .col(text(EvalDatasets::Cases, false))
                    .col(int(EvalDatasets::CaseCount, false))
                    .col(string(EvalDatasets::Hash, false))
                    .col(string(EvalDatasets::CreatedBy, false))
                    .col(stamp(EvalDatasets::CreatedAt, false))
                    .col(stamp(EvalDatasets::DeletedAt, true))
                    .foreign_key(
                        ForeignKey::create()
                            .from(EvalDatasets::Table, EvalDatasets::AgentId)
                            .to(AgentConfigurations::Table, AgentConfigurations::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(EvalRuns::Table)
                    .col(id(EvalRuns::Id))
                    .col(string(EvalRuns::TenantId, false))
                    .col(int(EvalRuns::AgentId, false))
                    .col(int(EvalRuns::RevisionId, false))
                    .col(int(EvalRuns::DatasetId, false))
                    .col(int(EvalRuns::ConnectionId, false))
                    .col(string(EvalRuns::Model, false))
                    .col(int(EvalRuns::JudgeConnectionId, true))
                    .col(string(EvalRuns::JudgeModel, true))
                    .col(string(EvalRuns::State, false))
                    .col(int(EvalRuns::Total, false))
                    .col(int(EvalRuns::Done, false))
                    .col(int(EvalRuns::Passed, false))
                    .col(int(EvalRuns::Errors, false))
                    .col(count(EvalRuns::PromptTokens))
                    .col(count(EvalRuns::CompletionTokens))
                    .col(count(EvalRuns::TokenBudget))
                    .col(price(EvalRuns::Cost))
                    .col(string(EvalRuns::RequestedBy, false))
                    .col(string(EvalRuns::LeaseOwner, true))
                    .col(stamp(EvalRuns::LeaseUntil, true))
                    .col(
                        ColumnDef::new(EvalRuns::CancelRequested)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(text(EvalRuns::Error, true))
                    .col(stamp(EvalRuns::CreatedAt, false))
                    .col(stamp(EvalRuns::StartedAt, true))
                    .col(stamp(EvalRuns::FinishedAt, true))
                    .col(stamp(EvalRuns::DeadlineAt, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(EvalRuns::Table, EvalRuns::DatasetId)
                            .to(EvalDatasets::Table, EvalDatasets::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(EvalRuns::Table, EvalRuns::ConnectionId)
                            .to(ModelConnections::Table, ModelConnections::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(EvalResults::Table)
                    .col(id(EvalResults::Id))
                    .col(int(EvalResults::RunId, false))
                    .col(int(EvalResults::CaseIndex, false))
                    .col(ColumnDef::new(EvalResults::Passed).boolean().not_null())
                    .col(ColumnDef::new(EvalResults::Errored).boolean().not_null())
                    .col(text(EvalResults::Output, false))
                    .col(text(EvalResults::ToolCalls, false))
                    .col(text(EvalResults::Verdicts, false))
                    .col(count(EvalResults::LatencyMs))
                    .col(count(EvalResults::PromptTokens))
                    .col(count(EvalResults::CompletionTokens))
                    .col(text(EvalResults::Error, true))
                    .col(stamp(EvalResults::CreatedAt, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(EvalResults::Table, EvalResults::RunId)
                            .to(EvalRuns::Table, EvalRuns::Id),
                    )
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        for statement in [
            CONNECTIONS_LIVE,
            DATASET_VERSIONS,
            RUNS_STATE,
            RUNS_REUSE,
            ONE_RESULT,
        ] {
            db.execute_unprepared(statement).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            EvalResults::Table.into_iden(),
            EvalRuns::Table.into_iden(),
            EvalDatasets::Table.into_iden(),
            ModelConnections::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(AgentLabels::Table)
                    .drop_column(AgentLabels::RequireEvals)
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
