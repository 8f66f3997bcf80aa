//! The problem codes: stable, so machines may match on them.

crate::closed_set! {
    /// What a problem is. Serialises to its code (`"missing_tier"`); the guide's
    /// `loadout check` table lists every code with its severity.
    ///
    /// Declared in the codes' alphabetical order: reports sort problems by code, and
    /// the derived order must be the order of the text.
    pub enum ProblemCode as "problem code" {
        /// An agent has no active link to an active tool.
        AgentWithoutTools = "agent_without_tools",
        /// A revision waiting to be released (`latest` ahead of `production`, a
        /// running rollout's candidate) changes a tool in a way that breaks callers.
        BreakingChange = "breaking_change",
        /// A catalog tool is soft-deleted in the database.
        CatalogToolDeleted = "catalog_tool_deleted",
        /// A catalog tool is inactive in the database.
        CatalogToolInactive = "catalog_tool_inactive",
        /// Two active tool names differ only in case or word order.
        DuplicateName = "duplicate_name",
        /// A tool's parameters are not a JSON Schema object.
        InvalidSchema = "invalid_schema",
        /// A label serves a revision with tools since deleted or switched off.
        LabelToolsMissing = "label_tools_missing",
        /// A label serves a revision with `api` or `mcp` tools that have no connector.
        LabelToolsUnconnected = "label_tools_unconnected",
        /// An active link points at an inactive or deleted tool.
        LinkToInactiveTool = "link_to_inactive_tool",
        /// An active link points at a tool id that does not exist.
        LinkToMissingTool = "link_to_missing_tool",
        /// A synced tool an admin accepted with a schema strict mode cannot express.
        LooseSchema = "loose_schema",
        /// A catalog tool is not in the database.
        MissingFromDatabase = "missing_from_database",
        /// A tool's approval tier is not one of the known tiers.
        MissingTier = "missing_tier",
        /// A tool name is not a canonical verb + snake_case resource.
        NameOutsideVocabulary = "name_outside_vocabulary",
        /// A builtin tool has no executor in this build.
        NoExecutor = "no_executor",
        /// An api or mcp tool has no connector configured.
        NotConnected = "not_connected",
        /// An active tool is not in the catalog.
        NotInCatalog = "not_in_catalog",
        /// An agent's policy does not compile against its tools' schemas.
        PolicyInvalid = "policy_invalid",
        /// An agent's policy test does not give its expected decision.
        PolicyTestFailed = "policy_test_failed",
        /// A soul, template or tool prompt section names an inactive or retired tool.
        PromptNamesInactiveTool = "prompt_names_inactive_tool",
        /// A sync found a synced tool's remote tool gone from its server.
        RemoteToolGone = "remote_tool_gone",
        /// A name the catalog retired or renamed is still active.
        RetiredToolActive = "retired_tool_active",
        /// A create_/update_ tool does not take a list of items, or a delete_ tool a list of ids.
        SchemaNotAList = "schema_not_a_list",
        /// A tool's schema lacks `additionalProperties: false` or a full `required` somewhere.
        SchemaNotStrict = "schema_not_strict",
        /// A connector's header values are stored in plain text (or no secrets key
        /// is configured while connectors have headers).
        SecretsNotSealed = "secrets_not_sealed",
        /// A connector's header values are sealed with a key this process does not hold.
        SecretsUnreadable = "secrets_unreadable",
        /// An agent's prompt template has lint errors.
        TemplateLintError = "template_lint_error",
        /// A tool's type is not builtin, api or mcp.
        UnknownType = "unknown_type",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::ProblemCode;

    const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/commands.md"));

    /// The rows of the `loadout check` table in the guide (docs/commands.md): code → severity cell.
    fn readme_rows() -> Vec<(String, String)> {
        let section = README
            .split("\n## ")
            .find(|s| s.starts_with("`loadout check`"))
            .expect("docs/commands.md has a `loadout check` section");
        section
            .lines()
            .filter(|line| line.starts_with("| `"))
            .map(|line| {
                let cells: Vec<&str> = line.split(" | ").collect();
                let code = cells[0].trim_start_matches("| ").trim_matches('`');
                (
                    code.to_owned(),
                    cells.get(1).copied().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    #[test]
    fn the_readme_table_lists_every_code_once_and_nothing_else() {
        let rows = readme_rows();
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (code, _) in &rows {
            *seen.entry(code.as_str()).or_default() += 1;
        }
        let twice: Vec<&str> = seen
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|(c, _)| *c)
            .collect();
        assert_eq!(twice, Vec::<&str>::new(), "codes listed more than once");
        let listed: Vec<&str> = seen.keys().copied().collect();
        let mut known = ProblemCode::NAMES.to_vec();
        known.sort_unstable();
        assert_eq!(
            listed, known,
            "the table in docs/commands.md and ProblemCode differ"
        );
    }

    #[test]
    fn the_readme_table_gives_each_code_a_severity() {
        for (code, severity) in readme_rows() {
            assert!(
                severity.starts_with("error") || severity.starts_with("warning"),
                "{code}: severity {severity:?}"
            );
        }
    }

    #[test]
    fn codes_are_declared_in_alphabetical_order() {
        let mut sorted = ProblemCode::NAMES.to_vec();
        sorted.sort_unstable();
        assert_eq!(ProblemCode::NAMES, sorted);
    }

    #[test]
    fn a_code_serialises_to_its_text() {
        for code in ProblemCode::ALL {
            let json = serde_json::to_value(code).expect("serialise");
            assert_eq!(json, code.as_str());
        }
    }
}
