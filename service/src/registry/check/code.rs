//! The problem codes: stable, so machines may match on them.

crate::closed_set! {
    /// What a problem is. Serialises to its code (`"missing_tier"`); the README's
    /// `loadout check` table lists every code with its severity.
    ///
    /// Declared in the codes' alphabetical order: reports sort problems by code, and
    /// the derived order must be the order of the text.
    pub enum ProblemCode as "problem code" {
        /// An agent has no active link to an active tool.
        AgentWithoutTools = "agent_without_tools",
        /// A catalog tool is soft-deleted in the database.
        CatalogToolDeleted = "catalog_tool_deleted",
        /// A catalog tool is inactive in the database.
        CatalogToolInactive = "catalog_tool_inactive",
        /// Two active tool names differ only in case or word order.
        DuplicateName = "duplicate_name",
        /// A tool's parameters are not a JSON Schema object.
        InvalidSchema = "invalid_schema",
        /// An active link points at an inactive or deleted tool.
        LinkToInactiveTool = "link_to_inactive_tool",
        /// An active link points at a tool id that does not exist.
        LinkToMissingTool = "link_to_missing_tool",
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
        /// A soul, template or tool prompt section names an inactive or retired tool.
        PromptNamesInactiveTool = "prompt_names_inactive_tool",
        /// A name the catalog retired or renamed is still active.
        RetiredToolActive = "retired_tool_active",
        /// A create_/update_ tool does not take a list of items, or a delete_ tool a list of ids.
        SchemaNotAList = "schema_not_a_list",
        /// A tool's schema lacks `additionalProperties: false` or a full `required` somewhere.
        SchemaNotStrict = "schema_not_strict",
        /// An agent's prompt template has lint errors.
        TemplateLintError = "template_lint_error",
        /// A tool's type is not builtin, api or mcp.
        UnknownType = "unknown_type",
    }
}

#[cfg(test)]
mod tests {
    use super::ProblemCode;

    #[test]
    fn codes_are_declared_in_alphabetical_order() {
        let mut sorted = ProblemCode::NAMES.to_vec();
        sorted.sort_unstable();
        assert_eq!(ProblemCode::NAMES, sorted);
    }

    #[test]
    fn a_code_serialises_to_its_text() {
        let json = serde_json::to_value(ProblemCode::SchemaNotAList).expect("serialise");
        assert_eq!(json, "schema_not_a_list");
        assert_eq!(ProblemCode::SchemaNotAList.as_str(), "schema_not_a_list");
    }
}
