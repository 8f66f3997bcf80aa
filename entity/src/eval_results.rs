//! `eval_results`: one case of an evaluation run (migration 26); one per case.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "eval_results")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    pub run_id: i32,
    /// The case's place in the dataset version (0-based).
    pub case_index: i32,
    pub passed: bool,
    /// The model could not be asked (the reason is in `error`).
    pub errored: bool,
    pub output: String,
    /// JSON array of `{name, arguments}`.
    pub tool_calls: String,
    /// JSON array of verdicts, one per assertion.
    pub verdicts: String,
    pub latency_ms: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub error: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
