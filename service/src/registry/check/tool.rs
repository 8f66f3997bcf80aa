//! Rules about tools: the catalog against the database, each active tool on its own,
//! and names that collide.

use std::collections::{BTreeMap, BTreeSet};

use super::code::ProblemCode;
use super::definition;
use super::report::Problems;
use super::rows::Rows;
use crate::registry::ToolType;

/// Every catalog tool is in the database, not soft-deleted, and active.
pub(super) fn catalog_in_database(rows: &Rows, out: &mut Problems) {
    for tool in &rows.catalog.tools {
        let deleted = rows
            .tools
            .iter()
            .any(|t| t.name == tool.name && t.deleted_at.is_some());
        match rows.by_name.get(tool.name.as_str()) {
            None if deleted => out.error(
                "tool",
                &tool.name,
                ProblemCode::CatalogToolDeleted,
                "is in the catalog but soft-deleted in the database",
                "restore the row (clear deleted_at), or retire the tool in the catalog",
            ),
            None => out.error(
                "tool",
                &tool.name,
                ProblemCode::MissingFromDatabase,
                "is in the catalog but not in the database",
                "run `loadout migrate up` and `loadout seed`",
            ),
            Some(row) if !row.is_active => out.error(
                "tool",
                &tool.name,
                ProblemCode::CatalogToolInactive,
                "is in the catalog but inactive in the database",
                format!(
                    "reactivate it (PATCH /v1/tools/{} {{\"is_active\": true}}) or retire it in the catalog",
                    tool.name
                ),
            ),
            Some(_) => {}
        }
    }
}

/// An active tool the catalog does not list: an error when the catalog retired or
/// renamed it, otherwise a warning.
///
/// A warning, not an error: admins add their own tools through the API (and the
/// canonicalization keeps custom tools such as get_weather). Every other rule still
/// applies to them, and a team that wants this strict keeps its own catalog
/// (`--catalog FILE`).
pub(super) fn outside_catalog(rows: &Rows, out: &mut Problems) {
    let catalog_names: BTreeSet<&str> =
        rows.catalog.tools.iter().map(|t| t.name.as_str()).collect();
    for tool in rows
        .active
        .iter()
        .filter(|t| !catalog_names.contains(t.name.as_str()))
    {
        let retired = rows.catalog.deactivated.contains(&tool.name)
            || rows.catalog.renamed.contains_key(&tool.name);
        if retired {
            out.error(
                "tool",
                &tool.name,
                ProblemCode::RetiredToolActive,
                "is active in the database but the catalog retired or renamed it",
                "run `loadout migrate up` (the canonicalization deactivates it)",
            );
        } else {
            out.warning(
                "tool",
                &tool.name,
                ProblemCode::NotInCatalog,
                "is active in the database but not in the catalog",
                "add it to the catalog (or to your own, --catalog FILE), or deactivate it",
            );
        }
    }
}

/// Each active tool's definition on its own: name, tier, schema (see
/// [`definition::definition_problems`]). A resource the catalog marks singular need not take a list.
/// A tool accepted loose on purpose (`strict` off, a sync's `allow_loose`) is a
/// warning instead of `schema_not_strict`: an admin chose it, and CI must stay green.
pub(super) fn definitions(rows: &Rows, out: &mut Problems) {
    let singular: BTreeSet<&str> = rows
        .catalog
        .tools
        .iter()
        .filter(|t| t.singular)
        .map(|t| t.name.as_str())
        .collect();
    for tool in &rows.active {
        for (code, message, hint) in definition::problems(
            &tool.name,
            &tool.approval_tier,
            &tool.parameters,
            singular.contains(tool.name.as_str()),
        ) {
            if code == ProblemCode::SchemaNotStrict && !tool.strict {
                continue;
            }
            out.error("tool", &tool.name, code, message, hint);
        }
        if !tool.strict {
            out.warning(
                "tool",
                &tool.name,
                ProblemCode::LooseSchema,
                "was accepted with a schema strict mode cannot express (allow_loose): it is exported with strict: false, so models are not held to its schema (loadout still validates every call's arguments)",
                "have the server publish a schema without open maps or unsupported keywords and sync again, or keep it knowingly",
            );
        }
    }
}

/// Each active tool can be carried out: a builtin has an executor in this build (an
/// error otherwise), an api or mcp tool has a connector (a warning otherwise), and
/// the type is one of those three.
pub(super) fn executors(rows: &Rows, out: &mut Problems) {
    for tool in &rows.active {
        match tool.tool_type.parse::<ToolType>() {
            Ok(ToolType::Builtin) if !rows.executors.has_builtin(&tool.name) => out.error(
                "tool",
                &tool.name,
                ProblemCode::NoExecutor,
                "is a builtin tool but no executor for it is registered in this build",
                "register its executor in the code, or deactivate the tool",
            ),
            Ok(ToolType::Builtin) => {}
            Ok(ToolType::Api | ToolType::Mcp) if !rows.executors.has_connector(&tool.name) => out
                .warning(
                    "tool",
                    &tool.name,
                    ProblemCode::NotConnected,
                    format!(
                        "is an {} tool with no connector configured; calling it gets a clear error",
                        tool.tool_type
                    ),
                    "connect it to a backend",
                ),
            Ok(ToolType::Api | ToolType::Mcp) => {}
            Err(_) => out.error(
                "tool",
                &tool.name,
                ProblemCode::UnknownType,
                format!("type {:?} is not builtin, api or mcp", tool.tool_type),
                "set type to builtin, api or mcp",
            ),
        }
    }
}

/// A synced tool whose remote tool a sync found gone (the sync switched it off).
pub(super) fn remote_gone(rows: &Rows, out: &mut Problems) {
    let gone = rows
        .tools
        .iter()
        .filter(|t| t.deleted_at.is_none())
        .filter_map(|t| Some((t, t.remote_gone_at?)));
    for (tool, when) in gone {
        out.warning(
            "tool",
            &tool.name,
            ProblemCode::RemoteToolGone,
            format!(
                "its remote tool {:?} was gone from its connector's server at the sync of {}; the tool is switched off",
                tool.remote_name.as_deref().unwrap_or(&tool.name),
                when.format("%Y-%m-%d %H:%M UTC")
            ),
            "bring the tool back on the server and sync again, or delete the tool",
        );
    }
}

/// Active tool names that collide once case and word order are ignored.
pub(super) fn duplicates(rows: &Rows, out: &mut Problems) {
    let mut keys: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for tool in &rows.active {
        keys.entry(collision_key(&tool.name))
            .or_default()
            .push(&tool.name);
    }
    for names in keys.values().filter(|names| names.len() > 1) {
        for name in names {
            let others: Vec<&str> = names.iter().copied().filter(|n| n != name).collect();
            out.error(
                "tool",
                name,
                ProblemCode::DuplicateName,
                format!(
                    "differs only in case or word order from {}",
                    others.join(", ")
                ),
                "keep the verb_resource name and deactivate the other",
            );
        }
    }
}

/// Lowercased, with the words sorted: `gmail_search` and `Search_Gmail` collide.
fn collision_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let mut words: Vec<&str> = lower.split('_').filter(|w| !w.is_empty()).collect();
    words.sort_unstable();
    words.join("_")
}

#[cfg(test)]
mod tests {
    use entity::tools;
    use serde_json::json;

    use super::*;
    use crate::execute::executors::Executors;
    use crate::registry::catalog::Seeds;
    use crate::registry::check::{Problem, Severity, check};

    /// The problems about one planted tool, `get_weather`, checked alone.
    fn problems_of(tool_type: &str, tier: &str) -> Vec<Problem> {
        problems_of_tool(planted(tool_type, tier))
    }

    fn planted(tool_type: &str, tier: &str) -> tools::Model {
        let now = chrono::Utc::now();
        tools::Model {
            id: 1,
            name: "get_weather".into(),
            tool_type: tool_type.into(),
            description: "Planted.".into(),
            approval_tier: tier.into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}),
            prompt_section: None,
            connector_id: None,
            remote_name: None,
            synced_description: None,
            synced_tier: None,
            remote_gone_at: None,
            remote_schema: None,
            strict: true,
            pinned_fingerprint: None,
            is_active: true,
            created_at: now,
            updated_at: now,
            deleted_at: None,
        }
    }

    fn problems_of_tool(tool: tools::Model) -> Vec<Problem> {
        let catalog = Seeds::embedded().expect("seeds").catalog;
        let report = check(
            &catalog,
            &Executors::compiled_in(),
            &[tool],
            &[],
            &[],
            &Default::default(),
        );
        report
            .problems
            .into_iter()
            .filter(|p| p.subject == "get_weather")
            .collect()
    }

    fn lines(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_drifted_tool_type_is_reported_as_an_unknown_type() {
        let problems = problems_of("grpc", "auto");
        let expected = "error: tool get_weather: type \"grpc\" is not builtin, api or mcp [unknown_type] (fix: set type to builtin, api or mcp)";
        assert!(
            lines(&problems).contains(&expected.to_owned()),
            "{problems:#?}"
        );
    }

    #[test]
    fn a_drifted_tier_is_reported_as_a_missing_tier() {
        let problems = problems_of("api", "AUTO");
        let expected = "error: tool get_weather: approval tier \"AUTO\" is not one of auto, user_configurable, requires_approval [missing_tier] (fix: set an explicit approval_tier; nothing may fall through to a default)";
        assert!(
            lines(&problems).contains(&expected.to_owned()),
            "{problems:#?}"
        );
    }

    fn codes(problems: &[Problem]) -> Vec<(Severity, &str)> {
        problems
            .iter()
            .map(|p| (p.severity, p.code.as_str()))
            .collect()
    }

    #[test]
    fn a_tool_taken_loose_on_purpose_is_a_warning_not_a_strictness_error() {
        let open_map = json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
        let mut loose = planted("mcp", "auto");
        loose.parameters = open_map.clone();
        loose.strict = false;
        let problems = problems_of_tool(loose);
        let found = codes(&problems);
        assert!(
            found.contains(&(Severity::Warning, "loose_schema")),
            "{problems:#?}"
        );
        assert!(
            !found
                .iter()
                .any(|(severity, _)| *severity == Severity::Error),
            "{problems:#?}"
        );

        let mut strict = planted("mcp", "auto");
        strict.parameters = open_map;
        let problems = problems_of_tool(strict);
        assert!(
            codes(&problems).contains(&(Severity::Error, "schema_not_strict")),
            "the same schema without the flag is an error: {problems:#?}"
        );
    }

    #[test]
    fn names_in_another_word_order_collide() {
        assert_eq!(collision_key("gmail_search"), collision_key("search_gmail"));
    }

    #[test]
    fn names_in_another_case_collide() {
        assert_eq!(collision_key("Get_Tasks"), collision_key("get_tasks"));
    }

    #[test]
    fn a_singular_and_a_plural_name_do_not_collide() {
        assert_ne!(collision_key("get_tasks"), collision_key("get_task"));
    }
}
