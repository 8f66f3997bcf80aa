//! The documentation a newcomer walks: README.md and ARCHITECTURE.md stay short, and
//! every relative link in every page (README, ARCHITECTURE, CONTRIBUTING, BENCHMARKS,
//! the guide under `docs/`, the Python client's README) reaches a file that exists,
//! and a `#section` a heading of that page. The examples themselves are run by
//! `cli.rs` (the shell blocks) and the Python client's suite.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository root")
}

/// Every Markdown page of the documentation.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut out: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "CONTRIBUTING.md",
        "BENCHMARKS.md",
        "clients/python/README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    let mut todo = vec![root.join("docs")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    text.split("```").step_by(2).collect::<Vec<_>>().join("\n")
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces
/// as hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .lines()
        .filter_map(|l| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            (1..=6)
                .contains(&hashes)
                .then(|| l[hashes..].strip_prefix(' '))?
        })
        .map(slug)
        .collect()
}

/// The targets of `[text](target)` links in a page's prose.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            let target = &rest[..end];
            if !target.contains(char::is_whitespace) {
                out.push(target.to_owned());
            }
        }
    }
    out
}

/// Each broken relative link: `page: target: why`.
fn broken(pages: &[PathBuf]) -> Vec<String> {
    let root = root();
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(page).expect("a page");
        let name = page
            .strip_prefix(&root)
            .unwrap_or(page)
            .display()
            .to_string();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let dest = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a folder").join(path)
            };
            if !dest.exists() {
                out.push(format!("{name}: {target}: no such file"));
                continue;
            }
            if !anchor.is_empty() && dest.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&dest).expect("the linked page");
                if !anchors(&there).contains(anchor) {
                    out.push(format!("{name}: {target}: no heading #{anchor}"));
                }
            }
        }
    }
    out
}

#[test]
fn every_relative_link_in_the_docs_reaches_a_file_and_a_heading() {
    let pages = pages();
    assert!(pages.len() >= 15, "the docs pages found: {pages:?}");
    let found = broken(&pages);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_link_check_finds_a_planted_broken_link() {
    let dir = std::env::temp_dir().join(format!("loadout-links-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let page = dir.join("a.md");
    std::fs::write(
        &page,
        "# A page\n\n## Set-up: two `commands`\n\n[ok](#set-up-two-commands) [gone](b.md) \
         [no heading](a.md#nowhere)\n\n```sh\necho [not a link](c.md)\n```\n",
    )
    .expect("write");
    let found = broken(std::slice::from_ref(&page));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].ends_with("b.md: no such file"), "{found:#?}");
    assert!(
        found[1].ends_with("a.md#nowhere: no heading #nowhere"),
        "{found:#?}"
    );
}

#[test]
fn the_readme_and_the_architecture_stay_short() {
    let size = |p: &str| std::fs::metadata(root().join(p)).expect("the page").len();
    assert!(
        size("README.md") < 15 * 1024,
        "README.md: {} bytes",
        size("README.md")
    );
    assert!(
        size("ARCHITECTURE.md") < 30 * 1024,
        "ARCHITECTURE.md: {} bytes",
        size("ARCHITECTURE.md")
    );
}
