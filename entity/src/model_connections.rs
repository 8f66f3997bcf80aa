//! `model_connections`: an OpenAI-compatible endpoint an operator registers for
//! evaluations (migration 26). Soft-deleted.

use sea_orm::entity::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, DeriveEntityModel, Serialize, Deserialize)]
#[sea_orm(table_name = "model_connections")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i32,
    /// Unique among live connections.
    pub name: String,
    /// `https://api.openai.com/v1`; `/chat/completions` is added.
    pub base_url: String,
    /// The model names it may be asked for (a JSON array).
    pub models: String,
    /// Sealed at rest; never returned, never logged.
    pub api_key: Option<String>,
    pub timeout_ms: i32,
    /// How a response schema is asked for: `json_schema` or `json_object_schema`.
    pub structured: String,
    /// Prices per million tokens, for `cost`.
    pub input_price: Option<f64>,
    pub output_price: Option<f64>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub deleted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
