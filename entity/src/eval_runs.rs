//! `eval_runs`: a revision evaluated on a dataset version against a model, for a
//! tenant (migration 26): a job that survives a restart.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "eval_runs")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub tenant_id: String,
    pub agent_id: i32,
    pub revision_id: i32,
    /// The dataset version's row.
    pub dataset_id: i32,
    pub connection_id: i32,
    pub model: String,
    /// Who judges `llm-rubric` assertions (default: the run's connection and model).
    pub judge_connection_id: Option<i32>,
    pub judge_model: Option<String>,
    /// `queued`, `running`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    pub total: i32,
    pub done: i32,
    pub passed: i32,
    /// Cases whose model call failed (they count as not passed).
    pub errors: i32,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// The run stops when its tokens reach this.
    pub token_budget: i64,
    pub cost: Option<f64>,
    pub requested_by: String,
    /// The process running it, until `lease_until`.
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTimeUtc>,
    pub cancel_requested: bool,
    pub error: Option<String>,
    pub created_at: DateTimeUtc,
    pub started_at: Option<DateTimeUtc>,
    pub finished_at: Option<DateTimeUtc>,
    /// A run still going at this time fails.
    pub deadline_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
