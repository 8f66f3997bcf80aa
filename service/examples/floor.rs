//! The per-user fetch benchmark's yardstick, the "database floor": what a prompt
//! costs when a request does only what no cache can skip for a new user — one
//! indexed SELECT of the user's instructions through a raw sqlx pool, one
//! `safe_substitute` render, and a JSON body about the size loadout serves. No
//! auth, no cache, no ORM, no per-request logging. It reads a database that
//! `loadout serve` has already migrated and seeded; the agent row is read once.
//! `cargo run --release -p loadout --example floor -- 127.0.0.1:18091 sqlite:///tmp/x.db 7300`
//! (the optional last argument pads the body of a user without instructions to that many bytes).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use loadout::prompt::template::safe_substitute;
use sea_orm::sqlx::{self, PgPool, SqlitePool, postgres::PgPoolOptions, sqlite};

const AGENT: &str = "assistant";
const NO_INSTRUCTIONS: &str = "The user has not given any standing instructions.";
/// Used when the agent's `prompt_template` is empty (loadout would use its built-in layout).
const FALLBACK: &str = "$identity\n\n$soul\n\n## Current time\n$current_time\n\n## User instructions\n$user_instructions\n$tool_guidance";
/// Read once at start-up: id, prompt_template, soul and identity (JSON, as text).
const AGENT_ROW: &str = "SELECT id, prompt_template, soul, CAST(identity AS TEXT) FROM agent_configurations WHERE name = 'assistant' AND deleted_at IS NULL";
/// The one query per request, on the (tenant_id, agent_id, user_id) unique index.
const SELECT_PG: &str = "SELECT instructions FROM user_agent_prompt_customizations WHERE tenant_id = $1 AND agent_id = $2 AND user_id = $3 AND is_active = TRUE AND deleted_at IS NULL";
const SELECT_LITE: &str = "SELECT instructions FROM user_agent_prompt_customizations WHERE tenant_id = ? AND agent_id = ? AND user_id = ? AND is_active = TRUE AND deleted_at IS NULL";

enum Db {
    Sqlite(SqlitePool),
    Pg(PgPool),
}

struct Floor {
    db: Db,
    agent_id: i32,
    template: String,
    identity: String,
    soul: String,
    /// Stands in for the tool guidance, so the body is about loadout's size.
    padding: String,
}

impl Floor {
    async fn instructions(&self, user: &str) -> sqlx::Result<Option<String>> {
        let (tenant, agent) = ("default", self.agent_id);
        match &self.db {
            Db::Sqlite(pool) => {
                let query = sqlx::query_scalar(SELECT_LITE).bind(tenant).bind(agent);
                query.bind(user).fetch_optional(pool).await
            }
            Db::Pg(pool) => {
                let query = sqlx::query_scalar(SELECT_PG).bind(tenant).bind(agent);
                query.bind(user).fetch_optional(pool).await
            }
        }
    }

    fn render(&self, instructions: &str) -> String {
        let now = chrono::Utc::now().format("%A %-d %B %Y, %H:%M (UTC, UTC+00:00)");
        let now = now.to_string();
        let values = HashMap::from([
            ("identity", self.identity.as_str()),
            ("soul", &self.soul),
            ("channel_guidance", ""),
            ("current_time", &now),
            ("user_instructions", instructions),
            ("memory_notes", ""),
            ("tool_guidance", &self.padding),
            ("operating_model", ""),
            ("interaction_learning", ""),
            ("session_section", ""),
        ]);
        safe_substitute(&self.template, &values)
    }
}

async fn prompt(
    State(floor): State<Arc<Floor>>,
    Path(agent): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, StatusCode> {
    if agent != AGENT {
        return Err(StatusCode::NOT_FOUND);
    }
    // Every request pays the SELECT, with or without a user_id (no row has "").
    let user = query.get("user_id").map_or("", String::as_str);
    let found = floor.instructions(user).await;
    let instructions = found.map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
    let text = floor.render(instructions.as_deref().unwrap_or(NO_INSTRUCTIONS));
    Ok(Json(serde_json::json!({ "agent": AGENT, "text": text })))
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let bind = args.next().unwrap_or_else(|| "127.0.0.1:18091".to_owned());
    let url = args
        .next()
        .expect("usage: floor BIND DATABASE_URL [BODY_BYTES]");
    let size: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(7300);
    let db = if url.starts_with("postgres") {
        let pool = PgPoolOptions::new().max_connections(8).connect(&url).await;
        Db::Pg(pool.expect("cannot connect to Postgres"))
    } else {
        // Only ever reads; loadout has made the file and its schema.
        let options: sqlite::SqliteConnectOptions = url.parse().expect("a sqlite:// URL");
        let options = options
            .journal_mode(sqlite::SqliteJournalMode::Wal)
            .synchronous(sqlite::SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        let pool = sqlite::SqlitePoolOptions::new().max_connections(4);
        Db::Sqlite(
            pool.connect_with(options)
                .await
                .expect("cannot open the SQLite file"),
        )
    };
    let row: (i32, Option<String>, String, String) = match &db {
        Db::Sqlite(pool) => sqlx::query_as(AGENT_ROW).fetch_one(pool).await,
        Db::Pg(pool) => sqlx::query_as(AGENT_ROW).fetch_one(pool).await,
    }
    .expect("no agent named assistant: run loadout serve on this database first");
    let (agent_id, template, soul, identity) = row;
    let identity: serde_json::Value = serde_json::from_str(&identity).expect("identity is JSON");
    let field = |key: &str| identity[key].as_str().unwrap_or_default().to_owned();
    let mut floor = Floor {
        db,
        agent_id,
        template: template
            .filter(|t| !t.trim().is_empty())
            .unwrap_or(FALLBACK.to_owned()),
        identity: format!("You are {}, {}.\n", field("display_name"), field("role")),
        soul,
        padding: "\n## Tools\n".to_owned(),
    };
    floor.identity.push_str(&field("description"));
    let unpadded = serde_json::json!({ "agent": AGENT, "text": floor.render(NO_INSTRUCTIONS) });
    let missing = size.saturating_sub(unpadded.to_string().len());
    let mut filler =
        "Call a tool only when it helps the user; say what it did. ".repeat(missing / 58 + 1);
    filler.truncate(missing);
    floor.padding.push_str(&filler);

    let app = Router::new()
        .route("/v1/agents/{agent}/prompt", get(prompt))
        .with_state(Arc::new(floor));
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    eprintln!("floor listening on http://{bind}");
    axum::serve(listener, app).await
}
