//! `loadout check`: does the database agree with the catalog and the code?
//!
//! Every rule below reads the database as it is (no migration, no write) and adds
//! problems to one report. Errors are drift that must block a deploy; warnings are
//! operator configuration or harmless leftovers. `serve` runs the same check at start,
//! `GET /v1/registry/check` returns it, and the admin tool endpoints refuse a change
//! that would add an error.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use entity::{agent_configurations, agent_tools, prompt_versions, tools};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use serde::Serialize;
use serde_json::Value;

use crate::registry::catalog::Catalog;
use crate::actions::executors::Executors;
use crate::prompt::lint;
use crate::registry::formats::strict_schema;

/// How bad a problem is: errors exit 1, warnings alone exit 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[schema(as = CheckSeverity)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem. `code` is stable: machines may match on it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[schema(as = CheckProblem)]
pub struct Problem {
    pub severity: Severity,
    /// `tool`, `agent`, `link` or `catalog`.
    pub kind: &'static str,
    /// The tool, agent or `agent/tool` the problem is about.
    pub subject: String,
    pub code: &'static str,
    pub message: String,
    /// What to do about it.
    pub hint: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(
            f,
            "{severity}: {} {}: {} [{}] (fix: {})",
            self.kind, self.subject, self.message, self.code, self.hint
        )
    }
}

/// What was looked at.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = CheckCounts)]
pub struct Counts {
    pub catalog_tools: usize,
    pub tools: usize,
    pub active_tools: usize,
    pub agents: usize,
    pub active_links: usize,
}

/// The whole report, as `--format json` prints it.
#[derive(Clone, Debug, Default, Serialize, utoipa::ToSchema)]
#[schema(as = CheckReport)]
pub struct Report {
    pub ok: bool,
    pub errors: usize,
    pub warnings: usize,
    pub checked: Counts,
    pub problems: Vec<Problem>,
}

impl Report {
    fn finish(mut problems: Vec<Problem>, checked: Counts) -> Self {
        problems.sort();
        problems.dedup();
        let errors = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        Report {
            ok: errors == 0,
            errors,
            warnings: problems.len() - errors,
            checked,
            problems,
        }
    }

    /// The text report: one line per problem, then a summary with the counts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for p in &self.problems {
            out.push_str(&p.to_string());
            out.push('\n');
        }
        let c = &self.checked;
        out.push_str(&format!(
            "checked {} catalog tools, {} tools ({} active), {} agents, {} active links: {} errors, {} warnings\n",
            c.catalog_tools, c.tools, c.active_tools, c.agents, c.active_links, self.errors, self.warnings
        ));
        out
    }
}

pub const VERBS: [&str; 7] = ["get", "create", "update", "delete", "search", "set", "link"];
pub const TIERS: [&str; 3] = ["auto", "user_configurable", "requires_approval"];

/// Why a tool name breaks the vocabulary (`verb_resource`, snake_case), or `None`.
pub fn name_problem(name: &str) -> Option<String> {
    let Some((verb, resource)) = name.split_once('_') else {
        return Some(format!(
            "{name:?} has no verb: names are verb_resource, the verb one of {}",
            VERBS.join(", ")
        ));
    };
    if !VERBS.contains(&verb) {
        return Some(format!(
            "{verb:?} is not a canonical verb; use one of {}",
            VERBS.join(", ")
        ));
    }
    let snake = resource.len() <= 60
        && resource
            .as_bytes()
            .first()
            .is_some_and(u8::is_ascii_lowercase)
        && resource.split('_').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if !snake {
        return Some(format!(
            "the resource {resource:?} must be snake_case: lowercase letters and digits in words joined by '_', starting with a letter"
        ));
    }
    None
}

/// Problems with one tool definition on its own (name, tier, schema shape and strictness),
/// as `(code, message, hint)`. Used by the check and by the admin tool endpoints.
/// `singular`: the catalog marks the resource as one per user (update_instructions),
/// so create_/update_ need not take a list.
pub fn definition_problems(
    name: &str,
    tier: &str,
    schema: &Value,
    singular: bool,
) -> Vec<(&'static str, String, String)> {
    let mut out = Vec::new();
    if let Some(why) = name_problem(name) {
        out.push((
            "name_outside_vocabulary",
            why,
            "rename the tool to verb_resource with a canonical verb".to_owned(),
        ));
    }
    if !TIERS.contains(&tier) {
        out.push((
            "missing_tier",
            format!("approval tier {tier:?} is not one of {}", TIERS.join(", ")),
            "set an explicit approval_tier; nothing may fall through to a default".to_owned(),
        ));
    }
    if let Some(why) = schema_problem(schema) {
        out.push((
            "invalid_schema",
            why,
            "make parameters a JSON Schema object".to_owned(),
        ));
        return out;
    }
    if strict_schema(schema) != *schema {
        out.push((
            "schema_not_strict",
            "the schema is not strict: some object level lacks \"additionalProperties\": false or does not list every property in \"required\"".to_owned(),
            "add \"additionalProperties\": false and a full \"required\" list at every object level; make optional values nullable".to_owned(),
        ));
    }
    let verb = name.split('_').next().unwrap_or_default();
    match verb {
        "create" | "update"
            if !singular
                && !takes_list(schema, |items| {
                    items.get("type") == Some(&Value::from("object"))
                }) =>
        {
            out.push((
                "schema_not_a_list",
                format!("a {verb}_ tool must take a list of items (an array of objects)"),
                "wrap the item in an array property, e.g. {\"items\": [...]}".to_owned(),
            ));
        }
        "delete" if !takes_list(schema, is_id_schema) => {
            out.push((
                "schema_not_a_list",
                "a delete_ tool must take a list of ids (an array of strings or integers)"
                    .to_owned(),
                "take {\"ids\": [\"...\"]}".to_owned(),
            ));
        }
        _ => {}
    }
    out
}

fn is_id_schema(items: &Value) -> bool {
    let ok = |t: &Value| matches!(t.as_str(), Some("string" | "integer"));
    match items.get("type") {
        Some(Value::Array(types)) => types.iter().any(ok),
        Some(t) => ok(t),
        None => false,
    }
}

/// Whether a top-level property is an array whose `items` pass `item_ok`.
fn takes_list(schema: &Value, item_ok: impl Fn(&Value) -> bool) -> bool {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return false;
    };
    properties.values().any(|p| {
        let is_array = match p.get("type") {
            Some(Value::String(t)) => t == "array",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
            _ => false,
        };
        is_array && p.get("items").is_some_and(&item_ok)
    })
}

const TYPE_NAMES: [&str; 7] = [
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Why a value is not a usable JSON Schema object, or `None`. Checks the root shape
/// and, recursively, that `type`, `properties`, `required` and `items` are well formed.
pub fn schema_problem(schema: &Value) -> Option<String> {
    let Some(root) = schema.as_object() else {
        return Some("not a JSON object".to_owned());
    };
    if root.get("type") != Some(&Value::from("object")) {
        return Some("the root must have \"type\": \"object\"".to_owned());
    }
    fn walk(path: &str, node: &Value) -> Option<String> {
        let Some(object) = node.as_object() else {
            return if node.is_boolean() {
                None
            } else {
                Some(format!("{path}: a schema must be an object"))
            };
        };
        if let Some(t) = object.get("type") {
            let names: Vec<&Value> = match t {
                Value::Array(ts) => ts.iter().collect(),
                other => vec![other],
            };
            if names
                .iter()
                .any(|n| !n.as_str().is_some_and(|n| TYPE_NAMES.contains(&n)))
            {
                return Some(format!("{path}: \"type\" {t} is not a JSON Schema type"));
            }
        }
        if let Some(required) = object.get("required") {
            let names = required
                .as_array()
                .is_some_and(|r| r.iter().all(Value::is_string));
            if !names {
                return Some(format!(
                    "{path}: \"required\" must be a list of property names"
                ));
            }
        }
        if let Some(properties) = object.get("properties") {
            let Some(properties) = properties.as_object() else {
                return Some(format!("{path}: \"properties\" must be an object"));
            };
            for (name, child) in properties {
                if let Some(why) = walk(&format!("{path}.{name}"), child) {
                    return Some(why);
                }
            }
        }
        if let Some(items) = object.get("items")
            && let Some(why) = walk(&format!("{path}[]"), items)
        {
            return Some(why);
        }
        None
    }
    walk("parameters", schema)
}

/// Lowercased, with the words sorted: `gmail_search` and `Search_Gmail` collide.
fn collision_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut words: Vec<&str> = lower.split('_').filter(|w| !w.is_empty()).collect();
    words.sort_unstable();
    words.join("_")
}

/// Runs every rule against the database.
pub async fn run(
    db: &impl ConnectionTrait,
    catalog: &Catalog,
    executors: &Executors,
) -> Result<Report, DbErr> {
    let tools = tools::Entity::find().all(db).await?;
    let agents = agent_configurations::Entity::find().all(db).await?;
    let links = agent_tools::Entity::find().all(db).await?;
    let forced: BTreeSet<(i32, i32)> = prompt_versions::Entity::find()
        .filter(prompt_versions::Column::Kind.eq("template"))
        .filter(prompt_versions::Column::Forced.eq(true))
        .all(db)
        .await?
        .into_iter()
        .map(|v| (v.agent_id, v.version))
        .collect();
    Ok(check(catalog, executors, &tools, &agents, &links, &forced))
}

/// The rules, on rows already read. `forced_templates` holds `(agent id, version)` of
/// template versions an admin saved with `force: true`: the current one's problems
/// are reported as warnings, because forcing was an explicit, recorded decision.
pub fn check(
    catalog: &Catalog,
    executors: &Executors,
    tools: &[tools::Model],
    agents: &[agent_configurations::Model],
    links: &[agent_tools::Model],
    forced_templates: &BTreeSet<(i32, i32)>,
) -> Report {
    let mut problems = Vec::new();
    let mut problem = |severity, kind, subject: &str, code, message: String, hint: String| {
        problems.push(Problem {
            severity,
            kind,
            subject: subject.to_owned(),
            code,
            message,
            hint,
        });
    };
    let live = |t: &&tools::Model| t.deleted_at.is_none();
    let is_active = |t: &tools::Model| t.is_active && t.deleted_at.is_none();
    let by_name: BTreeMap<&str, &tools::Model> = tools
        .iter()
        .filter(live)
        .map(|t| (t.name.as_str(), t))
        .collect();
    let catalog_names: BTreeSet<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
    let singular: BTreeSet<&str> = catalog
        .tools
        .iter()
        .filter(|t| t.singular)
        .map(|t| t.name.as_str())
        .collect();

    // The catalog against the database.
    for tool in &catalog.tools {
        let deleted = tools
            .iter()
            .any(|t| t.name == tool.name && t.deleted_at.is_some());
        match by_name.get(tool.name.as_str()) {
            None if deleted => problem(
                Severity::Error,
                "tool",
                &tool.name,
                "catalog_tool_deleted",
                "is in the catalog but soft-deleted in the database".into(),
                "restore the row (clear deleted_at), or retire the tool in the catalog".into(),
            ),
            None => problem(
                Severity::Error,
                "tool",
                &tool.name,
                "missing_from_database",
                "is in the catalog but not in the database".into(),
                "run `loadout migrate up` and `loadout seed`".into(),
            ),
            Some(row) if !row.is_active => problem(
                Severity::Error,
                "tool",
                &tool.name,
                "catalog_tool_inactive",
                "is in the catalog but inactive in the database".into(),
                format!(
                    "reactivate it (PATCH /v1/tools/{} {{\"is_active\": true}}) or retire it in the catalog",
                    tool.name
                ),
            ),
            Some(_) => {}
        }
    }

    // Each active tool on its own.
    let active: Vec<&tools::Model> = tools.iter().filter(|t| is_active(t)).collect();
    for tool in &active {
        // A warning, not an error: admins add their own tools through the API (and the
        // canonicalization keeps custom tools such as get_weather). Every other rule
        // still applies to them, and a team that wants this strict keeps its own
        // catalog (`--catalog FILE`).
        if !catalog_names.contains(tool.name.as_str()) {
            let retired = catalog.deactivated.contains(&tool.name)
                || catalog.renamed.contains_key(&tool.name);
            if retired {
                problem(
                    Severity::Error,
                    "tool",
                    &tool.name,
                    "retired_tool_active",
                    "is active in the database but the catalog retired or renamed it".into(),
                    "run `loadout migrate up` (the canonicalization deactivates it)".into(),
                );
            } else {
                problem(
                    Severity::Warning,
                    "tool",
                    &tool.name,
                    "not_in_catalog",
                    "is active in the database but not in the catalog".into(),
                    "add it to the catalog (or to your own, --catalog FILE), or deactivate it"
                        .into(),
                );
            }
        }
        for (code, message, hint) in definition_problems(
            &tool.name,
            &tool.approval_tier,
            &tool.parameters,
            singular.contains(tool.name.as_str()),
        ) {
            problem(Severity::Error, "tool", &tool.name, code, message, hint);
        }
        match tool.tool_type.as_str() {
            "builtin" if !executors.has_builtin(&tool.name) => problem(
                Severity::Error,
                "tool",
                &tool.name,
                "no_executor",
                "is a builtin tool but no executor for it is registered in this build".into(),
                "register its executor in the code, or deactivate the tool".into(),
            ),
            "builtin" => {}
            "api" | "mcp" if !executors.has_connector(&tool.name) => problem(
                Severity::Warning,
                "tool",
                &tool.name,
                "not_connected",
                format!(
                    "is an {} tool with no connector configured; calling it gets a clear error",
                    tool.tool_type
                ),
                "connect it to a backend".into(),
            ),
            "api" | "mcp" => {}
            other => problem(
                Severity::Error,
                "tool",
                &tool.name,
                "unknown_type",
                format!("type {other:?} is not builtin, api or mcp"),
                "set type to builtin, api or mcp".into(),
            ),
        }
    }

    // Names that collide once case and word order are ignored.
    let mut keys: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for tool in &active {
        keys.entry(collision_key(&tool.name))
            .or_default()
            .push(&tool.name);
    }
    for names in keys.values().filter(|names| names.len() > 1) {
        for name in names {
            let others: Vec<&str> = names.iter().copied().filter(|n| n != name).collect();
            problem(
                Severity::Error,
                "tool",
                name,
                "duplicate_name",
                format!(
                    "differs only in case or word order from {}",
                    others.join(", ")
                ),
                "keep the verb_resource name and deactivate the other".into(),
            );
        }
    }

    // Tool names that must not appear in prompts: inactive ones, and every name the
    // catalog retired or renamed, even where the database still has it active.
    let retired: BTreeSet<String> = catalog
        .deactivated
        .iter()
        .chain(catalog.renamed.keys())
        .cloned()
        .collect();
    let active_names: BTreeSet<String> = active
        .iter()
        .map(|t| t.name.clone())
        .filter(|n| !retired.contains(n))
        .collect();
    let names = lint::ToolNames {
        inactive: tools
            .iter()
            .filter(|t| !is_active(t))
            .map(|t| t.name.clone())
            .filter(|n| !active_names.contains(n))
            .chain(retired.iter().cloned())
            .collect(),
        active: active_names,
    };
    let stale_mentions = |text: &str| -> BTreeSet<String> {
        lint::inactive_mentions(text, &names)
            .map(|(_, word)| word.to_owned())
            .collect()
    };
    for tool in &active {
        if let Some(section) = &tool.prompt_section {
            for name in stale_mentions(section) {
                problem(
                    Severity::Error,
                    "tool",
                    &tool.name,
                    "prompt_names_inactive_tool",
                    format!(
                        "its prompt section names {name}, which is not an active tool (or is retired in the catalog)"
                    ),
                    "rewrite the prompt section with the canonical tool name".into(),
                );
            }
        }
    }

    // Agents: soul, template and links.
    let tool_by_id: BTreeMap<i32, &tools::Model> = tools.iter().map(|t| (t.id, t)).collect();
    for agent in agents.iter().filter(|a| a.deleted_at.is_none()) {
        for name in stale_mentions(&agent.soul) {
            problem(
                Severity::Error,
                "agent",
                &agent.name,
                "prompt_names_inactive_tool",
                format!(
                    "its soul names {name}, which is not an active tool (or is retired in the catalog)"
                ),
                format!(
                    "edit the soul (PATCH /v1/agents/{}) to use the canonical name",
                    agent.name
                ),
            );
        }
        if let Some(template) = &agent.prompt_template {
            let severity = if forced_templates.contains(&(agent.id, agent.template_version)) {
                Severity::Warning
            } else {
                Severity::Error
            };
            for name in stale_mentions(template) {
                problem(
                    severity,
                    "agent",
                    &agent.name,
                    "prompt_names_inactive_tool",
                    format!(
                        "its prompt template names {name}, which is not an active tool (or is retired in the catalog)"
                    ),
                    "edit the template to use the canonical name".into(),
                );
            }
            for p in lint::lint(template, &names)
                .into_iter()
                .filter(|p| p.severity == lint::Severity::Error)
            {
                problem(
                    severity,
                    "agent",
                    &agent.name,
                    "template_lint_error",
                    format!(
                        "its prompt template, line {} column {}: {}",
                        p.line, p.column, p.message
                    ),
                    "fix the template (the lint runs on PUT /v1/agents/{agent}/prompt-template)"
                        .into(),
                );
            }
        }
        let mut active_links = 0;
        for link in links
            .iter()
            .filter(|l| l.agent_id == agent.id && l.is_active && l.deleted_at.is_none())
        {
            match tool_by_id.get(&link.tool_id) {
                Some(tool) if is_active(tool) => active_links += 1,
                Some(tool) => problem(
                    Severity::Warning,
                    "link",
                    &format!("{}/{}", agent.name, tool.name),
                    "link_to_inactive_tool",
                    format!(
                        "is an active link to {}, which is inactive or deleted",
                        tool.name
                    ),
                    format!(
                        "detach it: DELETE /v1/agents/{}/links/{}",
                        agent.name, tool.name
                    ),
                ),
                None => problem(
                    Severity::Error,
                    "link",
                    &format!("{}/#{}", agent.name, link.tool_id),
                    "link_to_missing_tool",
                    format!(
                        "is an active link to tool id {}, which does not exist",
                        link.tool_id
                    ),
                    "remove the link row".into(),
                ),
            }
        }
        if active_links == 0 {
            problem(
                Severity::Warning,
                "agent",
                &agent.name,
                "agent_without_tools",
                "has no active tools".into(),
                format!("attach tools: PUT /v1/agents/{}/links/{{tool}}", agent.name),
            );
        }
    }

    let checked = Counts {
        catalog_tools: catalog.tools.len(),
        tools: tools.iter().filter(live).count(),
        active_tools: active.len(),
        agents: agents.iter().filter(|a| a.deleted_at.is_none()).count(),
        active_links: links
            .iter()
            .filter(|l| l.is_active && l.deleted_at.is_none())
            .count(),
    };
    Report::finish(problems, checked)
}

/// Problems with the catalog file itself: unique names, vocabulary, tiers, strict schemas,
/// list-shaped create/update/delete, and renamed targets that exist.
pub fn catalog_problems(catalog: &Catalog) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for tool in &catalog.tools {
        if !seen.insert(tool.name.as_str()) {
            out.push(format!("{}: listed twice", tool.name));
        }
        if name_problem(&tool.name).is_some() || !tool.name.starts_with(&format!("{}_", tool.verb))
        {
            out.push(format!(
                "{}: name does not match verb {:?} and the vocabulary",
                tool.name, tool.verb
            ));
        }
        for (code, message, _) in
            definition_problems(&tool.name, &tool.tier, &tool.schema_json(), tool.singular)
        {
            out.push(format!("{}: {message} [{code}]", tool.name));
        }
    }
    for (old, new) in &catalog.renamed {
        if !seen.contains(new.as_str()) {
            out.push(format!(
                "renamed {old} -> {new}: {new} is not a catalog tool"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::catalog::Seeds;

    #[test]
    fn the_embedded_catalog_is_clean() {
        let seeds = Seeds::embedded().expect("seeds");
        assert_eq!(catalog_problems(&seeds.catalog), Vec::<String>::new());
        assert_eq!(seeds.catalog.vocabulary, VERBS);
    }

    #[test]
    fn tool_names_follow_the_vocabulary() {
        for good in [
            "get_tasks",
            "link_memories",
            "search_gmail_threads",
            "set_project2",
        ] {
            assert_eq!(name_problem(good), None, "{good}");
        }
        for (bad, why) in [
            ("tasks", "has no verb"),
            ("fetch_tasks", "not a canonical verb"),
            ("get_", "snake_case"),
            ("get_Tasks", "snake_case"),
            ("get_tasks__x", "snake_case"),
            ("get_2tasks", "snake_case"),
        ] {
            let problem = name_problem(bad).unwrap_or_default();
            assert!(problem.contains(why), "{bad}: {problem}");
        }
    }

    fn codes(name: &str, tier: &str, schema: Value) -> Vec<&'static str> {
        definition_problems(name, tier, &schema, false)
            .into_iter()
            .map(|(code, _, _)| code)
            .collect()
    }

    #[test]
    fn definitions_are_checked_for_tier_schema_strictness_and_list_shape() {
        let strict_ids = json!({"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ids"], "additionalProperties": false});
        assert_eq!(
            codes("delete_tasks", "requires_approval", strict_ids.clone()),
            Vec::<&str>::new()
        );
        assert_eq!(codes("delete_tasks", "", strict_ids), ["missing_tier"]);
        let one_id = json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false});
        assert_eq!(
            codes("delete_tasks", "auto", one_id.clone()),
            ["schema_not_a_list"]
        );
        assert_eq!(
            codes("create_tasks", "auto", one_id.clone()),
            ["schema_not_a_list"]
        );
        assert_eq!(codes("get_tasks", "auto", one_id), Vec::<&str>::new());
        let loose = json!({"type": "object", "properties": {"id": {"type": "string"}}});
        assert_eq!(codes("get_tasks", "auto", loose), ["schema_not_strict"]);
        assert_eq!(
            codes(
                "get_tasks",
                "auto",
                json!({"type": "object", "properties": {"x": {"type": "text"}}})
            ),
            ["invalid_schema"]
        );
        assert_eq!(
            codes("fetch_tasks", "auto", json!([])),
            ["name_outside_vocabulary", "invalid_schema"]
        );
    }

    #[test]
    fn collisions_ignore_case_and_word_order() {
        assert_eq!(collision_key("gmail_search"), collision_key("search_gmail"));
        assert_eq!(collision_key("Get_Tasks"), collision_key("get_tasks"));
        assert_ne!(collision_key("get_tasks"), collision_key("get_task"));
    }
}
