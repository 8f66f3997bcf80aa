//! Lint for prompt templates: what an author should fix before saving.

use std::collections::BTreeSet;

use serde::Serialize;

use super::template::{self, PlaceholderKind};

/// Every placeholder the prompt builder fills in.
pub const KNOWN_PLACEHOLDERS: [&str; 10] = [
    "identity",
    "soul",
    "channel_guidance",
    "current_time",
    "memory_notes",
    "user_instructions",
    "tool_guidance",
    "interaction_learning",
    "operating_model",
    "session_section",
];

/// How bad a problem is: errors block a save, warnings are reported with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[schema(as = LintSeverity)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

/// One problem, located by 1-based line and column (code points).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = LintProblem)]
pub struct Problem {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Tool names the lint should know about: mentioning an inactive one is a warning.
#[derive(Clone, Debug, Default)]
pub struct ToolNames {
    pub active: BTreeSet<String>,
    /// Names known not to be active: inactive rows, retired or renamed catalog names.
    pub inactive: BTreeSet<String>,
}

/// Lints a template: unknown placeholders are errors; invalid `$`, a placeholder
/// used twice, and inactive tool names in the text are warnings.
pub fn lint(text: &str, tools: &ToolNames) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for found in template::placeholders(text) {
        let (line, column) = template::line_col(text, found.start);
        let at = |severity, code, message| Problem {
            severity,
            code,
            message,
            line,
            column,
        };
        match found.kind {
            PlaceholderKind::Escaped => {}
            PlaceholderKind::Invalid => problems.push(at(
                Severity::Warning,
                "invalid_placeholder",
                "`$` not followed by a name, `{name}` or `$` is kept verbatim; write `$$` for a literal dollar".into(),
            )),
            PlaceholderKind::Named | PlaceholderKind::Braced => {
                if !KNOWN_PLACEHOLDERS.contains(&found.name) {
                    problems.push(at(
                        Severity::Error,
                        "unknown_placeholder",
                        format!("unknown placeholder ${}; known: {}", found.name, KNOWN_PLACEHOLDERS.join(", ")),
                    ));
                } else if !seen.insert(found.name) {
                    problems.push(at(
                        Severity::Warning,
                        "duplicate_placeholder",
                        format!("${} appears more than once; its text will be repeated", found.name),
                    ));
                }
            }
        }
    }
    for (offset, word) in inactive_mentions(text, tools) {
        {
            let (line, column) = template::line_col(text, offset);
            problems.push(Problem {
                severity: Severity::Warning,
                code: "inactive_tool",
                message: format!("names the tool {word}, which is not active"),
                line,
                column,
            });
        }
    }
    problems.sort_by_key(|p| (p.line, p.column, p.severity));
    problems
}

/// Words of `text` that name a tool known to be inactive (and not also active), with offsets.
pub fn inactive_mentions<'t>(
    text: &'t str,
    tools: &'t ToolNames,
) -> impl Iterator<Item = (usize, &'t str)> {
    words(text).filter(|(_, word)| tools.inactive.contains(*word) && !tools.active.contains(*word))
}

/// True when the report holds an error.
pub fn has_errors(problems: &[Problem]) -> bool {
    problems.iter().any(|p| p.severity == Severity::Error)
}

/// Identifier-like words (`[A-Za-z0-9_]+`) with their byte offsets.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < bytes.len() && !is_word(bytes[i]) {
            i += 1;
        }
        if i >= bytes.len() {
            return None;
        }
        let start = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        // Word bytes are ASCII, so both ends are char boundaries.
        Some((start, &text[start..i]))
    })
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str, tools: &ToolNames) -> Vec<(&'static str, usize, usize)> {
        lint(text, tools)
            .into_iter()
            .map(|p| (p.code, p.line, p.column))
            .collect()
    }

    #[test]
    fn a_typo_in_a_placeholder_is_an_error_with_its_position() {
        let problems = lint("Hello\n  $sou1 here", &ToolNames::default());
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].severity, Severity::Error);
        assert_eq!((problems[0].line, problems[0].column), (2, 3));
        assert!(has_errors(&problems));
    }

    #[test]
    fn a_dollar_amount_is_only_a_warning() {
        assert_eq!(
            codes("costs $5", &ToolNames::default()),
            [("invalid_placeholder", 1, 7)]
        );
    }

    #[test]
    fn a_placeholder_used_twice_is_a_warning() {
        assert_eq!(
            codes("$soul and ${soul}", &ToolNames::default()),
            [("duplicate_placeholder", 1, 11)]
        );
    }

    #[test]
    fn a_retired_tool_name_in_the_text_is_a_warning() {
        let tools = ToolNames {
            active: BTreeSet::new(),
            inactive: ["read_memory".to_owned()].into(),
        };
        assert_eq!(
            codes("Call read_memory first.", &tools),
            [("inactive_tool", 1, 6)]
        );
        assert!(codes("Call read_memory_x first.", &tools).is_empty());
    }

    #[test]
    fn the_seeded_template_is_clean() {
        let seeds = crate::registry::catalog::Seeds::embedded().expect("seeds");
        assert_eq!(
            lint(&seeds.assistant.prompt_template, &ToolNames::default()),
            []
        );
    }
}
