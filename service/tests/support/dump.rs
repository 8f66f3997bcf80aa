//! Database state as JSON, for snapshots and before/after comparisons.

use entity::prelude::*;
use entity::{agent_configurations, tools};
use sea_orm::{
    DatabaseConnection, EntityTrait, FromQueryResult, JsonValue, QueryOrder, QuerySelect, Statement,
};
use serde_json::{Value, json};

/// Every row of the four base tables and, where it exists, `channels`, timestamps included, ordered by id. Raw SQL, so it
/// reads any schema version (before canonicalization, after it, after its `down`).
/// It reads through its own short-lived connection: a pooled prepared `SELECT *`
/// would outlive the `ALTER TABLE` of a migration and misread the rows.
pub async fn rows(test_db: &crate::support::TestDb) -> Value {
    let db = &test_db.reconnect().await;
    let mut out = serde_json::Map::new();
    for table in [
        "tools",
        "agent_configurations",
        "agent_tools",
        "user_agent_prompt_customizations",
        "channels",
    ] {
        if !table_exists(db, table).await {
            continue;
        }
        let sql = format!("SELECT * FROM {table} ORDER BY id");
        let rows =
            JsonValue::find_by_statement(Statement::from_string(db.get_database_backend(), sql))
                .all(db)
                .await
                .unwrap_or_else(|e| panic!("dump {table}: {e}"));
        out.insert(table.to_owned(), Value::Array(rows));
    }
    db.clone().close().await.ok();
    Value::Object(out)
}

async fn table_exists(db: &DatabaseConnection, table: &str) -> bool {
    let sql = match db.get_database_backend() {
        sea_orm::DbBackend::Sqlite => {
            format!("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{table}'")
        }
        _ => format!(
            "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = '{table}'"
        ),
    };
    !JsonValue::find_by_statement(Statement::from_string(db.get_database_backend(), sql))
        .all(db)
        .await
        .unwrap_or_else(|e| panic!("look for table {table}: {e}"))
        .is_empty()
}

/// Panics naming the first path at which `left` and `right` differ.
pub fn assert_same(left: &Value, right: &Value) {
    fn walk(path: &str, l: &Value, r: &Value) -> Option<String> {
        match (l, r) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                keys.into_iter().find_map(|k| {
                    walk(
                        &format!("{path}.{k}"),
                        a.get(k).unwrap_or(&Value::Null),
                        b.get(k).unwrap_or(&Value::Null),
                    )
                })
            }
            (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
                .iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| walk(&format!("{path}[{i}]"), x, y)),
            _ if l == r => None,
            _ => Some(format!("{path}: {l} != {r}")),
        }
    }
    if let Some(diff) = walk("$", left, right) {
        panic!("states differ at {diff}");
    }
}

/// The registry as a person reads it: by name, without ids or timestamps.
pub async fn registry(db: &DatabaseConnection) -> Value {
    // Only the columns every schema since the canonicalization has (later
    // migrations add others that a migrated-down database lacks).
    #[derive(FromQueryResult)]
    struct Tool {
        id: i32,
        name: String,
        tool_type: String,
        approval_tier: String,
        is_active: bool,
        deleted_at: Option<sea_orm::prelude::DateTimeUtc>,
    }
    use tools::Column as C;
    let tools = Tools::find()
        .select_only()
        .columns([C::Id, C::Name, C::ApprovalTier, C::IsActive, C::DeletedAt])
        .column_as(C::ToolType, "tool_type")
        .order_by_asc(C::Name)
        .into_model::<Tool>()
        .all(db)
        .await
        .expect("tools");
    #[derive(FromQueryResult)]
    struct Agent {
        id: i32,
        name: String,
        soul: String,
        prompt_template: Option<String>,
    }
    use agent_configurations::Column as A;
    let agents = AgentConfigurations::find()
        .select_only()
        .columns([A::Id, A::Name, A::Soul, A::PromptTemplate])
        .order_by_asc(A::Name)
        .into_model::<Agent>()
        .all(db)
        .await
        .expect("agents");
    let links = AgentTools::find().all(db).await.expect("links");
    let tool_name = |id: i32| {
        tools
            .iter()
            .find(|t| t.id == id)
            .map(|t| t.name.clone())
            .unwrap_or_default()
    };
    let agent_json = |a: &Agent| {
        let mut linked: Vec<(String, bool)> = links
            .iter()
            .filter(|l| l.agent_id == a.id)
            .map(|l| (tool_name(l.tool_id), l.is_active && l.deleted_at.is_none()))
            .collect();
        linked.sort();
        json!({
            "name": a.name,
            "soul": a.soul,
            "prompt_template": a.prompt_template.is_some(),
            "active_tools": linked.iter().filter(|(_, on)| *on).map(|(n, _)| n).collect::<Vec<_>>(),
            "inactive_tools": linked.iter().filter(|(_, on)| !*on).map(|(n, _)| n).collect::<Vec<_>>(),
        })
    };
    json!({
        "active_tools": tools.iter().filter(|t| t.is_active && t.deleted_at.is_none())
            .map(|t| format!("{} ({}, {})", t.name, t.tool_type, t.approval_tier)).collect::<Vec<_>>(),
        "inactive_tools": tools.iter().filter(|t| !t.is_active || t.deleted_at.is_some())
            .map(|t| t.name.clone()).collect::<Vec<_>>(),
        "agents": agents.iter().map(agent_json).collect::<Vec<_>>(),
    })
}
