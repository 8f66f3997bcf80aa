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

/// At most this many problems are reported; one more line counts the rest.
pub const MAX_PROBLEMS: usize = 100;

/// What was found, before it is worded: cheap to collect for any number of finds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Find<'t> {
    Unknown(&'t str),
    Invalid,
    Duplicate(&'t str),
    InactiveTool(&'t str),
}

impl Find<'_> {
    fn severity(self) -> Severity {
        match self {
            Find::Unknown(_) => Severity::Error,
            _ => Severity::Warning,
        }
    }

    fn problem(self, (line, column): (usize, usize)) -> Problem {
        let (code, message) = match self {
            Find::Unknown(name) => (
                "unknown_placeholder",
                format!("unknown placeholder ${name}; known: {}", KNOWN_PLACEHOLDERS.join(", ")),
            ),
            Find::Invalid => (
                "invalid_placeholder",
                "`$` not followed by a name, `{name}` or `$` is kept verbatim; write `$$` for a literal dollar".into(),
            ),
            Find::Duplicate(name) => (
                "duplicate_placeholder",
                format!("${name} appears more than once; its text will be repeated"),
            ),
            Find::InactiveTool(word) => (
                "inactive_tool",
                format!("names the tool {word}, which is not active"),
            ),
        };
        Problem {
            severity: self.severity(),
            code,
            message,
            line,
            column,
        }
    }
}

/// Lints a template: unknown placeholders are errors; invalid `$`, a placeholder
/// used twice, and inactive tool names in the text are warnings. In position
/// order; past [`MAX_PROBLEMS`], one `more_problems` entry counts the rest (an
/// error if any of them is). Linear in the template: finds are collected as
/// offsets, sorted, and only the reported ones are located and worded, with
/// line and column advanced from one to the next.
pub fn lint(text: &str, tools: &ToolNames) -> Vec<Problem> {
    let mut finds: Vec<(usize, Severity, Find<'_>)> = Vec::new();
    let mut seen = BTreeSet::new();
    for found in template::placeholders(text) {
        let find = match found.kind {
            PlaceholderKind::Escaped => continue,
            PlaceholderKind::Invalid => Find::Invalid,
            PlaceholderKind::Named | PlaceholderKind::Braced => {
                if !KNOWN_PLACEHOLDERS.contains(&found.name) {
                    Find::Unknown(found.name)
                } else if !seen.insert(found.name) {
                    Find::Duplicate(found.name)
                } else {
                    continue;
                }
            }
        };
        finds.push((found.start, find.severity(), find));
    }
    for (offset, word) in inactive_mentions(text, tools) {
        let find = Find::InactiveTool(word);
        finds.push((offset, find.severity(), find));
    }
    finds.sort_unstable();
    let rest = finds.split_off(finds.len().min(MAX_PROBLEMS));
    let mut position = template::LineCounter::new(text);
    let mut problems: Vec<Problem> = finds
        .into_iter()
        .map(|(offset, _, find)| find.problem(position.advance_to(offset)))
        .collect();
    if let Some((offset, _, _)) = rest.first() {
        let severity = match rest.iter().any(|(_, s, _)| *s == Severity::Error) {
            true => Severity::Error,
            false => Severity::Warning,
        };
        problems.push(Problem {
            severity,
            code: "more_problems",
            message: format!(
                "{} more problems from here on are not listed; fix the ones above first",
                rest.len()
            ),
            line: 0,
            column: 0,
        });
        let (line, column) = position.advance_to(*offset);
        if let Some(last) = problems.last_mut() {
            (last.line, last.column) = (line, column);
        }
    }
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

/// The distinct words of `texts` that could name a tool: the only names whose
/// state [`lint`] and the registry's stale-name rules ever look up, so a reader
/// need not load every tool name in the registry.
pub fn mentioned<'t>(texts: impl IntoIterator<Item = &'t str>) -> BTreeSet<&'t str> {
    texts
        .into_iter()
        .flat_map(|text| words(text).map(|(_, word)| word))
        .filter(|word| word.len() <= MAX_NAME_BYTES)
        .collect()
}

/// No tool name is longer (the name rule allows 64 bytes; drifted rows a little more).
const MAX_NAME_BYTES: usize = 128;

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
    fn past_the_cap_one_entry_counts_the_rest_and_keeps_their_severity() {
        let text = "${ ".repeat(50) + "\n" + &"$nope ".repeat(100);
        let problems = lint(&text, &ToolNames::default());
        assert_eq!(problems.len(), MAX_PROBLEMS + 1);
        let last = problems.last().expect("last");
        assert_eq!(
            (last.code, last.severity),
            ("more_problems", Severity::Error)
        );
        assert!(
            last.message.starts_with("50 more problems"),
            "{}",
            last.message
        );
        assert_eq!((last.line, last.column), (2, 6 * 50 + 1));
        assert!(has_errors(&problems));
    }

    #[test]
    fn positions_advance_across_lines_as_each_problem_is_located() {
        assert_eq!(
            codes("$a\r\n  $b\n\n$c", &ToolNames::default()),
            [
                ("unknown_placeholder", 1, 1),
                ("unknown_placeholder", 2, 3),
                ("unknown_placeholder", 4, 1)
            ]
        );
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
