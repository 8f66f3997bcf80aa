//! The world SPEC-019 starts from: ghost tools, both digest tools, the legacy
//! names, two agents linked to assorted old tools and to an unaffected custom
//! tool, a soul with `##` headers that names `read_memory`, and user customizations.
//! Load it on a database at the base migration (before canonicalization).

use sea_orm::{ConnectionTrait, DatabaseConnection};

/// Legacy tools: (name, type, approval tier). An empty tier is a tool that shipped without one.
pub const TOOLS: &[(&str, &str, &str)] = &[
    // ghosts
    (
        "delete_agent_long_term_memory",
        "builtin",
        "requires_approval",
    ),
    ("fetch_agent_long_term_memory", "builtin", "auto"),
    ("fetch_tasks", "builtin", "auto"),
    ("save_memory", "builtin", "requires_approval"),
    ("read_memory", "builtin", "auto"),
    // digests
    ("email_digest", "builtin", "auto"),
    ("gmail_digest", "api", ""),
    // names that a canonical tool replaces
    ("get_task", "api", "auto"),
    ("create_task", "api", "requires_approval"),
    ("update_task", "api", "requires_approval"),
    ("delete_task", "api", "requires_approval"),
    ("list_reminders", "api", "auto"),
    ("create_reminder", "api", "requires_approval"),
    ("list_schedules", "api", "auto"),
    ("create_schedule", "api", "requires_approval"),
    ("delete_schedule", "api", "requires_approval"),
    ("gmail_search", "api", "auto"),
    ("gmail_get_message", "api", "auto"),
    ("store_memory", "api", "requires_approval"),
    ("recall", "api", "auto"),
    ("search_memory", "api", "auto"),
    ("fetch_memory", "api", "auto"),
    ("update_memory", "api", "requires_approval"),
    ("delete_memory", "api", "requires_approval"),
    ("list_entities", "api", "auto"),
    ("get_context_info", "api", "auto"),
    // canonical names that already existed, with legacy descriptions
    ("get_tasks", "api", "auto"),
    ("update_instructions", "builtin", "requires_approval"),
    ("search_entities", "api", "auto"),
    ("set_project", "api", "requires_approval"),
    ("link_memories", "api", "requires_approval"),
    // a team's own tool that canonicalization must leave alone
    ("get_weather", "api", "auto"),
];

/// Agent links: (agent, tool, active).
pub const LINKS: &[(&str, &str, bool)] = &[
    ("assistant", "get_tasks", true),
    ("assistant", "get_task", true),
    ("assistant", "create_task", true),
    ("assistant", "update_task", true),
    ("assistant", "delete_task", true),
    ("assistant", "list_reminders", true),
    ("assistant", "create_reminder", true),
    ("assistant", "recall", true),
    ("assistant", "search_memory", true),
    ("assistant", "store_memory", true),
    ("assistant", "fetch_memory", true),
    ("assistant", "gmail_search", true),
    ("assistant", "email_digest", true),
    ("assistant", "gmail_digest", true),
    ("assistant", "read_memory", true),
    ("assistant", "save_memory", true),
    ("assistant", "update_instructions", true),
    ("assistant", "get_weather", true),
    ("researcher", "recall", true),
    ("researcher", "get_task", true),
    ("researcher", "gmail_get_message", true),
    ("researcher", "list_entities", true),
    ("researcher", "get_context_info", true),
    ("researcher", "fetch_tasks", true),
    ("researcher", "set_project", true),
    ("researcher", "get_weather", true),
    // switched off by an admin before the migration: must not earn create_memories
    ("researcher", "store_memory", false),
];

pub const OLD_SOUL: &str = "## Personality\nYou are a diligent assistant.\n\n## Memory\nAlways call read_memory before answering, and save_memory when you learn something.\n\n## Tasks\nUse get_task to look up a task.";

const STAMP: &str = "'2026-01-15T09:30:00Z'";

/// Inserts the legacy world. Works on SQLite and Postgres alike, on the base schema
/// and on today's (where user instructions belong to the `default` tenant).
pub async fn load(db: &DatabaseConnection) {
    let tenanted = db
        .execute_unprepared("SELECT tenant_id FROM user_agent_prompt_customizations WHERE 1 = 0")
        .await
        .is_ok();
    let (tenant_column, tenant_value) = if tenanted {
        ("tenant_id, ", "'default', ")
    } else {
        ("", "")
    };
    let mut sql = Vec::new();
    for (name, kind, tier) in TOOLS {
        sql.push(format!(
            "INSERT INTO tools (name, type, description, approval_tier, parameters, prompt_section, is_active, created_at, updated_at) \
             VALUES ('{name}', '{kind}', 'Legacy {name}.', '{tier}', '{{\"type\":\"object\",\"properties\":{{}}}}', 'Use {name} when needed.', TRUE, {STAMP}, {STAMP})"
        ));
    }
    for (name, soul) in [
        ("assistant", OLD_SOUL.replace('\'', "''")),
        ("researcher", "You dig into questions carefully.".into()),
    ] {
        sql.push(format!(
            "INSERT INTO agent_configurations (name, identity, soul, created_at, updated_at) \
             VALUES ('{name}', '{{\"display_name\":\"{name}\",\"role\":\"legacy\",\"description\":\"\"}}', '{soul}', {STAMP}, {STAMP})"
        ));
    }
    for (agent, tool, active) in LINKS {
        sql.push(format!(
            "INSERT INTO agent_tools (agent_id, tool_id, is_active, created_at, updated_at) \
             SELECT a.id, t.id, {}, {STAMP}, {STAMP} FROM agent_configurations a, tools t WHERE a.name = '{agent}' AND t.name = '{tool}'",
            if *active { "TRUE" } else { "FALSE" }
        ));
    }
    for (user, agent, text, active) in [
        (
            "user-1",
            "assistant",
            "Call me Sam. Keep answers short.",
            "TRUE",
        ),
        (
            "user-2",
            "assistant",
            "I work nights; never schedule before noon.",
            "TRUE",
        ),
        ("user-1", "researcher", "Cite your sources.", "FALSE"),
    ] {
        sql.push(format!(
            "INSERT INTO user_agent_prompt_customizations ({tenant_column}user_id, agent_id, instructions, is_active, created_at, updated_at) \
             SELECT {tenant_value}'{user}', id, '{text}', {active}, {STAMP}, {STAMP} FROM agent_configurations WHERE name = '{agent}'"
        ));
    }
    for statement in sql {
        db.execute_unprepared(&statement)
            .await
            .unwrap_or_else(|e| panic!("legacy fixture: {e}\n{statement}"));
    }
}

/// Gives the legacy assistant an active link to every legacy tool it lacks (so that
/// every canonical tool has a predecessor it used) and switches off its link to the
/// team's own tool: the assistant as UAT 1 of SPEC-019 imagines it.
pub async fn link_assistant_to_every_predecessor(db: &DatabaseConnection) {
    let statements = [
        format!(
            "INSERT INTO agent_tools (agent_id, tool_id, is_active, created_at, updated_at) \
             SELECT a.id, t.id, TRUE, {STAMP}, {STAMP} FROM agent_configurations a, tools t \
             WHERE a.name = 'assistant' AND t.name <> 'get_weather' \
             AND NOT EXISTS (SELECT 1 FROM agent_tools l WHERE l.agent_id = a.id AND l.tool_id = t.id)"
        ),
        "UPDATE agent_tools SET is_active = FALSE WHERE tool_id = (SELECT id FROM tools WHERE name = 'get_weather') \
         AND agent_id = (SELECT id FROM agent_configurations WHERE name = 'assistant')"
            .to_owned(),
    ];
    for statement in statements {
        db.execute_unprepared(&statement)
            .await
            .unwrap_or_else(|e| panic!("legacy fixture: {e}\n{statement}"));
    }
}

/// A key as loadout wrote it before members (migration 21), on an older schema:
/// the same format and hash, no member. For upgrade tests that roll back first.
pub async fn key(db: &DatabaseConnection, name: &str, role: &str, tenant: Option<&str>) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let prefix = format!("{:012x}", n % (1 << 48));
    let key = format!("lo_{prefix}_{:064x}", n ^ 0x5eed);
    let tenant = tenant.map_or("NULL".to_owned(), |t| format!("'{t}'"));
    let hash = loadout::auth::keys::hash(&key);
    db.execute_unprepared(&format!(
        "INSERT INTO api_keys (name, role, prefix, key_hash, tenant_id, created_at, updated_at) \
         VALUES ('{name}', '{role}', '{prefix}', '{hash}', {tenant}, {STAMP}, {STAMP})"
    ))
    .await
    .expect("an old key");
    key
}

/// Revokes keys named `name` in the default tenant, as SQL on any schema.
pub async fn revoke(db: &DatabaseConnection, name: &str) {
    db.execute_unprepared(&format!(
        "UPDATE api_keys SET revoked_at = {STAMP} WHERE name = '{name}' AND tenant_id IS NULL"
    ))
    .await
    .expect("revoke");
}

/// `(name, role, tenant)` of every key, oldest first, as SQL on any schema.
pub async fn keys(db: &DatabaseConnection) -> Vec<(String, String, String)> {
    let rows = db
        .query_all_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT name, role, tenant_id FROM api_keys ORDER BY id",
        ))
        .await
        .expect("keys");
    rows.iter()
        .map(|r| {
            let tenant: Option<String> = r.try_get("", "tenant_id").expect("tenant");
            (
                r.try_get("", "name").expect("name"),
                r.try_get("", "role").expect("role"),
                tenant.unwrap_or_else(|| "default".to_owned()),
            )
        })
        .collect()
}
