//! `loadout revisions AGENT [--show N | --diff A B] [--json]`: an agent's revisions,
//! one revision, or what changed between two, read directly from the database.
//! Text for people by default; `--json` prints what the API answers.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use sea_orm::ConnectionTrait;
use serde_json::Value;

use crate::releases::diff::{self, RevisionDiff, TextChange, ValueChange};
use crate::releases::read::{self, RevisionView};

#[derive(Debug, clap::Args)]
pub struct RevisionsArgs {
    /// The agent's name.
    pub agent: String,
    /// One revision: what it serves.
    #[arg(long, value_name = "N", conflicts_with = "diff")]
    pub show: Option<i32>,
    /// What changed from revision A to revision B.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub diff: Option<Vec<i32>>,
    /// Print the API's JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What the command prints.
pub async fn output(db: &impl ConnectionTrait, args: &RevisionsArgs) -> anyhow::Result<String> {
    let name = args.agent.as_str();
    if let Some(pair) = &args.diff {
        let (from, to) = (pair[0], pair[1]);
        let found = diff::between(db, name, from, to).await?;
        return match args.json {
            true => json(&found),
            false => Ok(diff_text(&found)),
        };
    }
    if let Some(number) = args.show {
        let found = read::revision(db, name, number).await?;
        return match args.json {
            true => json(&found),
            false => Ok(show_text(&found, &labels_on(db, name).await?)),
        };
    }
    // The newest page the API would give at its largest; `--show N` reads any one.
    let page = read::Page {
        limit: read::MAX_PAGE,
        before: None,
    };
    let list = read::revisions(db, name, page).await?;
    if args.json {
        return json(&list);
    }
    let labels = labels_on(db, name).await?;
    let mut out = String::new();
    for r in &list.revisions {
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}",
            r.number,
            r.created_at.to_rfc3339(),
            r.author.as_deref().unwrap_or("-"),
            &r.content_hash[..r.content_hash.len().min(12)],
            names(&labels, r.number),
        );
    }
    Ok(out)
}

fn json(value: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_json::to_string_pretty(value)? + "\n")
}

/// Each revision number with the labels on it.
async fn labels_on(
    db: &impl ConnectionTrait,
    name: &str,
) -> anyhow::Result<BTreeMap<i32, Vec<String>>> {
    let mut on: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for label in read::labels(db, name).await?.labels {
        on.entry(label.revision).or_default().push(label.name);
    }
    Ok(on)
}

fn names(labels: &BTreeMap<i32, Vec<String>>, number: i32) -> String {
    labels
        .get(&number)
        .map_or_else(|| "-".to_owned(), |names| names.join(","))
}

/// One revision as text: who made it, its labels, then what it serves.
pub fn show_text(revision: &RevisionView, labels: &BTreeMap<i32, Vec<String>>) -> String {
    let c = &revision.content;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "revision {} of {}, by {} at {}\nlabels: {}\nsha256: {}",
        revision.number,
        revision.agent,
        revision.author.as_deref().unwrap_or("-"),
        revision.created_at.to_rfc3339(),
        names(labels, revision.number),
        revision.content_hash,
    );
    if let Some(identity) = c.identity.as_object() {
        for (field, value) in identity {
            let _ = writeln!(out, "identity.{field}: {}", compact(value));
        }
    }
    section(&mut out, "soul", &c.soul);
    section(&mut out, "operating_model", &c.operating_model);
    section(&mut out, "interaction_learning", &c.interaction_learning);
    match &c.template {
        None => out.push_str("\ntemplate: the built-in assembly\n"),
        Some(template) => section(&mut out, "template", template),
    }
    let _ = writeln!(out, "\ntools ({}):", c.tools.len());
    for t in &c.tools {
        let _ = writeln!(out, "  {}\t{}\t{}", t.name, t.tool_type, t.approval_tier);
    }
    let channels: Vec<&str> = c.channels.keys().map(String::as_str).collect();
    let _ = writeln!(out, "\nchannels: {}", channels.join(", "));
    out
}

fn section(out: &mut String, title: &str, text: &str) {
    if text.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{title}:");
    for line in text.lines() {
        let _ = writeln!(out, "  {line}");
    }
}

/// A diff as text: unified hunks for the texts, `before → after` for fields.
pub fn diff_text(found: &RevisionDiff) -> String {
    let (from, to, d) = (found.from, found.to, &found.diff);
    let mut out = format!("{}: revision {from} → {to}\n", found.agent);
    if d.identical {
        out.push_str("no differences\n");
        return out;
    }
    for change in &d.identity {
        field_text(&mut out, &format!("identity.{}", change.field), change);
    }
    let texts = [
        ("soul", &d.soul),
        ("operating_model", &d.operating_model),
        ("interaction_learning", &d.interaction_learning),
    ];
    for (title, change) in texts {
        if let Some(change) = change {
            let _ = writeln!(
                out,
                "--- {title} (revision {from})\n+++ {title} (revision {to})"
            );
            hunks(&mut out, change, "");
        }
    }
    if let Some(t) = &d.template {
        let side = |builtin: bool, n: i32| match builtin {
            true => format!("the built-in assembly (revision {n})"),
            false => format!("template (revision {n})"),
        };
        let _ = writeln!(
            out,
            "--- {}\n+++ {}",
            side(t.builtin_before, from),
            side(t.builtin_after, to)
        );
        hunks(&mut out, &t.text, "");
    }
    for t in &d.tools.added {
        let _ = writeln!(
            out,
            "tool added: {} ({}, {})",
            t.name, t.tool_type, t.approval_tier
        );
    }
    for t in &d.tools.removed {
        let _ = writeln!(
            out,
            "tool removed: {} ({}, {})",
            t.name, t.tool_type, t.approval_tier
        );
    }
    for t in &d.tools.changed {
        let _ = writeln!(out, "tool changed: {}", t.name);
        for change in &t.fields {
            field_text(&mut out, &format!("  {}", change.field), change);
        }
    }
    if !d.contract.is_empty() {
        let verdict = match d.breaking {
            true => "BREAKING for callers",
            false => "compatible for callers",
        };
        let _ = writeln!(out, "tool contract: {verdict}");
        for c in &d.contract {
            let at = match c.path.is_empty() {
                true => String::new(),
                false => format!(" {}", c.path),
            };
            let _ = writeln!(
                out,
                "  {} {} {}{at}: {}",
                c.compat.as_str(),
                c.tool,
                c.kind.as_str(),
                c.detail
            );
        }
    }
    if let Some(policy) = &d.policy {
        let _ = writeln!(
            out,
            "--- policy (revision {from})\n+++ policy (revision {to})"
        );
        hunks(&mut out, policy, "");
    }
    for change in &d.model {
        field_text(&mut out, &format!("model {}", change.field), change);
    }
    for name in &d.channels.added {
        let _ = writeln!(out, "channel added: {name}");
    }
    for name in &d.channels.removed {
        let _ = writeln!(out, "channel removed: {name}");
    }
    for c in &d.channels.changed {
        let _ = writeln!(out, "channel changed: {}", c.name);
        for change in &c.fields {
            field_text(&mut out, &format!("  {}", change.field), change);
        }
    }
    out
}

/// `title: before → after` on one line; long or many-line texts and JSON objects
/// as a line diff below the title instead.
fn field_text(out: &mut String, title: &str, change: &ValueChange) {
    let indent = format!("{}  ", " ".repeat(title.len() - title.trim_start().len()));
    match (text_of(&change.before), text_of(&change.after)) {
        (Some(before), Some(after))
            if before.contains('\n')
                || after.contains('\n')
                || before.len() + after.len() > 100 =>
        {
            let _ = writeln!(out, "{title}:");
            hunks(out, &diff::lines(&before, &after), &indent);
        }
        _ => {
            let _ = writeln!(
                out,
                "{title}: {} → {}",
                compact(&change.before),
                compact(&change.after)
            );
        }
    }
}

/// The text a value diffs as: a string itself, an object or array pretty-printed.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some(String::new()),
        Value::Object(_) | Value::Array(_) => {
            serde_json::to_string_pretty(value).ok().map(|s| s + "\n")
        }
        _ => None,
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::Null => "(none)".to_owned(),
        other => other.to_string(),
    }
}

fn hunks(out: &mut String, change: &TextChange, indent: &str) {
    if change.too_large {
        let _ = writeln!(
            out,
            "{indent}(too large to compare line by line: {} lines before, {} after)",
            change.deleted, change.inserted
        );
    }
    for h in &change.hunks {
        let _ = writeln!(
            out,
            "{indent}@@ -{},{} +{},{} @@",
            h.old_start, h.old_lines, h.new_start, h.new_lines
        );
        for line in &h.lines {
            let _ = writeln!(out, "{indent}{}{}", line.kind.sign(), line.text);
        }
    }
}
