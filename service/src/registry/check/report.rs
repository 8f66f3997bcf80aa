//! What a check finds: problems with a severity and a stable code, and the report.

use std::fmt;

use serde::Serialize;

use super::code::ProblemCode;

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
    /// `tool`, `agent`, `link`, `catalog` or `connector`.
    pub kind: &'static str,
    /// The tool, agent or `agent/tool` the problem is about.
    pub subject: String,
    pub code: ProblemCode,
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
    pub(super) fn finish(mut problems: Vec<Problem>, checked: Counts) -> Self {
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

    /// The same report with `more` problems in it.
    pub(super) fn with(self, mut more: Vec<Problem>) -> Self {
        more.extend(self.problems);
        Report::finish(more, self.checked)
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

/// The problems the rules have found so far.
#[derive(Default)]
pub(super) struct Problems(pub(super) Vec<Problem>);

impl Problems {
    pub(super) fn add(
        &mut self,
        severity: Severity,
        kind: &'static str,
        subject: &str,
        code: ProblemCode,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.0.push(Problem {
            severity,
            kind,
            subject: subject.to_owned(),
            code,
            message: message.into(),
            hint: hint.into(),
        });
    }

    pub(super) fn error(
        &mut self,
        kind: &'static str,
        subject: &str,
        code: ProblemCode,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.add(Severity::Error, kind, subject, code, message, hint);
    }

    pub(super) fn warning(
        &mut self,
        kind: &'static str,
        subject: &str,
        code: ProblemCode,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.add(Severity::Warning, kind, subject, code, message, hint);
    }
}
