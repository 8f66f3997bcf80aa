//! The layout's rules, checked on the source: `foo.rs` + `foo/` (never `mod.rs`),
//! no cycles between modules, thin handlers, and no `json!` building responses.
//!
//! The module graph is read from the source text: a node per file, an edge for
//! every `crate::`, `super::` or `self::` path and every path through a child
//! module a file declares. `pub mod` declarations are not edges. Test modules
//! (`#[cfg(test)]` to the end of the file) are left out. The same graph folded to
//! top-level modules (the file or folder directly under `src/`) must have no
//! cycle either: files can form no cycle while their folders do (`prompt::builder`
//! → `registry::kinds` and `registry::check` → `prompt::lint`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, by module path (`crate`, `http`, `http::error`).
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "main.rs"))
        .map(|file| {
            let relative = file.strip_prefix(src()).expect("under src");
            let name = relative
                .with_extension("")
                .to_string_lossy()
                .replace('/', "::");
            let name = if name == "lib" {
                "crate".to_owned()
            } else {
                name
            };
            let text = std::fs::read_to_string(&file).expect("read");
            // A file compiled only for tests (`#![cfg(test)]`) is test code throughout.
            let code = match text
                .find("#![cfg(test)]")
                .or_else(|| text.find("#[cfg(test)]"))
            {
                Some(at) => &text[..at],
                None => &text,
            };
            // Comments (doc links included) are not dependencies.
            let code: String = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| format!("{l}\n"))
                .collect();
            (name, code)
        })
        .collect()
}

fn parent(module: &str) -> String {
    match module.rsplit_once("::") {
        Some((parent, _)) => parent.to_owned(),
        None => "crate".to_owned(),
    }
}

/// Expands a use tree at `text` (after `crate::` etc.) into full paths.
fn use_paths(text: &str, prefix: &str, out: &mut Vec<String>) -> usize {
    let mut path = prefix.to_owned();
    let bytes = text.as_bytes();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i > start {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(&text[start..i]);
        }
        if text[i..].starts_with("::{") {
            i += 3;
            loop {
                while i < bytes.len() && (bytes[i] as char).is_whitespace() {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == b'}' {
                    return i + 1;
                }
                i += use_paths(&text[i..], &path, out);
                while i < bytes.len() && (bytes[i] == b',' || (bytes[i] as char).is_whitespace()) {
                    i += 1;
                }
            }
        } else if text[i..].starts_with("::") {
            i += 2;
        } else {
            out.push(path);
            return i;
        }
    }
}

/// The module each path in `code` points into (the longest known prefix).
fn edges(module: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let children: Vec<String> = code
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or_else(|| l.trim().strip_prefix("mod "))
        })
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_owned)
        .collect();
    let own = if module == "crate" {
        String::new()
    } else {
        module.to_owned()
    };
    let mut starts: Vec<(String, String)> = vec![
        ("crate::".into(), String::new()),
        (
            "super::".into(),
            if module == "crate" {
                String::new()
            } else {
                parent(module)
            },
        ),
        ("self::".into(), own.clone()),
    ];
    for child in &children {
        let full = if own.is_empty() {
            child.clone()
        } else {
            format!("{own}::{child}")
        };
        starts.push((format!("{child}::"), full));
    }
    let mut out = BTreeSet::new();
    for (start, base) in &starts {
        let base = if base == "crate" { "" } else { base.as_str() };
        for (at, _) in code.match_indices(start.as_str()) {
            let before = code[..at].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut paths = Vec::new();
            let rest = &code[at + start.len()..];
            if let Some(group) = rest.strip_prefix('{') {
                use_paths_group(group, base, &mut paths);
            } else {
                use_paths(rest, base, &mut paths);
            }
            for path in paths {
                let mut target = path.clone();
                loop {
                    if known.contains(&target) {
                        break;
                    }
                    match target.rsplit_once("::") {
                        Some((shorter, _)) => target = shorter.to_owned(),
                        None => {
                            target = if known.contains(&target) {
                                target
                            } else {
                                "crate".to_owned()
                            };
                            break;
                        }
                    }
                }
                if target != module {
                    out.insert(target);
                }
            }
        }
    }
    out
}

/// `a, b::c, d::{e, f}}` after an opening brace.
fn use_paths_group(text: &str, base: &str, out: &mut Vec<String>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && (bytes[i] == b',' || (bytes[i] as char).is_whitespace()) {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] == b'}' {
            return;
        }
        i += use_paths(&text[i..], base, out);
    }
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    modules
        .iter()
        .map(|(name, code)| (name.clone(), edges(name, code, &known)))
        .collect()
}

/// A cycle, as the list of modules around it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_is_a_mod_rs() {
    let found: Vec<String> = modules()
        .into_keys()
        .filter(|m| m.ends_with("::mod") || m == "mod")
        .collect();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn the_module_graph_has_no_cycles() {
    let graph = graph();
    assert!(
        graph.values().map(BTreeSet::len).sum::<usize>() > 50,
        "the graph reader found too few edges"
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}", cycle.join(" → "));
    }
}

#[test]
fn the_cycle_finder_finds_a_planted_cycle() {
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["c".to_owned()]));
    graph.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(
        find_cycle(&graph),
        Some(
            vec!["a", "b", "c", "a"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
}

/// The room a module is in: the longest of `rooms` (the layer table's entries) that
/// is the module or a parent of it, else its top-level module (`http::fetch` is
/// `http`; `connectors::client::mcp` is `connectors::client` when the table lists it).
fn room(module: &str, rooms: &BTreeSet<String>) -> String {
    rooms
        .iter()
        .filter(|r| module == r.as_str() || module.starts_with(&format!("{r}::")))
        .max_by_key(|r| r.len())
        .cloned()
        .unwrap_or_else(|| module.split("::").next().unwrap_or(module).to_owned())
}

/// The graph folded to rooms (see [`room`]); `crate` (the root, `lib.rs`) stays
/// itself; an edge inside one room is dropped.
fn fold(
    graph: &BTreeMap<String, BTreeSet<String>>,
    rooms: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph {
        let from = room(from, rooms);
        let targets = out.entry(from.clone()).or_default();
        targets.extend(to.iter().map(|t| room(t, rooms)).filter(|t| *t != from));
    }
    out
}

/// The rooms ARCHITECTURE.md's layer table names.
fn documented_rooms() -> BTreeSet<String> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md");
    documented_layers(&doc)
        .expect("the layer table")
        .into_keys()
        .collect()
}

/// The modules on a cycle, grouped: each group is a strongly connected component
/// of two or more modules (every one reaches every other).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_owned()];
        while let Some(node) = todo.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|node| (node, reach(node))).collect();
    let mut groups: Vec<BTreeSet<String>> = Vec::new();
    for (node, from_it) in &reached {
        if !from_it.contains(*node) || groups.iter().any(|g| g.contains(*node)) {
            continue;
        }
        let group: BTreeSet<String> = from_it
            .iter()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(*node)))
            .cloned()
            .collect();
        groups.push(group);
    }
    groups
}

#[test]
fn the_graph_of_rooms_has_no_cycles() {
    let rooms = documented_rooms();
    let graph = fold(&graph(), &rooms);
    assert!(
        graph.len() > 10,
        "the graph reader found too few top-level modules: {graph:?}"
    );
    let found = cycles(&graph);
    if !found.is_empty() {
        let files = self::graph();
        let top = |m: &str| room(m, &rooms);
        let mut edges = Vec::new();
        for group in &found {
            for (file, targets) in &files {
                for target in targets {
                    let (from, to) = (top(file), top(target));
                    if from != to && group.contains(&from) && group.contains(&to) {
                        edges.push(format!("  {file} → {target}"));
                    }
                }
            }
        }
        panic!(
            "cycles between rooms {found:?}; the edges inside them:\n{}",
            edges.join("\n")
        );
    }
}

#[test]
fn the_top_level_check_finds_a_cycle_between_folders_whose_files_have_none() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("prompt::builder", vec!["registry::kinds"]),
        ("prompt::lint", vec![]),
        ("registry::check", vec!["prompt::lint"]),
        ("registry::kinds", vec![]),
        ("app", vec!["registry::check", "prompt::builder"]),
    ]
    .into_iter()
    .map(|(from, to)| {
        (
            from.to_owned(),
            to.into_iter().map(str::to_owned).collect::<BTreeSet<_>>(),
        )
    })
    .collect();
    assert_eq!(find_cycle(&graph), None, "no cycle between the files");
    let folded = fold(&graph, &BTreeSet::new());
    assert_eq!(
        folded.get("app"),
        Some(&BTreeSet::from([
            "prompt".to_owned(),
            "registry".to_owned()
        ]))
    );
    let cycle = find_cycle(&folded).expect("a cycle between the folders");
    assert_eq!(cycle.first(), cycle.last());
    assert!(
        cycle.contains(&"prompt".to_owned()) && cycle.contains(&"registry".to_owned()),
        "{cycle:?}"
    );
    assert_eq!(
        cycles(&folded),
        vec![BTreeSet::from(["prompt".to_owned(), "registry".to_owned()])]
    );
    assert_eq!(cycles(&graph), Vec::<BTreeSet<String>>::new());
}

#[test]
fn the_graph_reader_sees_grouped_and_nested_uses() {
    let known = BTreeSet::from([
        "x".to_owned(),
        "y::z".to_owned(),
        "y".to_owned(),
        "w".to_owned(),
    ]);
    let found = edges(
        "w",
        "use crate::{x::Thing, y::{z::{self, Other}, More}};",
        &known,
    );
    assert_eq!(
        found,
        BTreeSet::from(["x".to_owned(), "y::z".to_owned(), "y".to_owned()])
    );
}

/// Every `fn` in `code` with its first line and length in lines.
fn functions(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let is_fn = ["fn ", "async fn ", "pub fn ", "pub async fn "]
            .iter()
            .any(|p| trimmed.starts_with(p));
        if !is_fn || line.len() != trimmed.len() {
            continue;
        }
        let end = lines[i..]
            .iter()
            .position(|l| *l == "}")
            .map_or(1, |n| n + 1);
        out.push((trimmed.to_owned(), end));
    }
    out
}

#[test]
fn no_http_function_is_longer_than_40_lines() {
    let long: Vec<String> = modules()
        .into_iter()
        .filter(|(m, _)| m == "http" || m.starts_with("http::"))
        .flat_map(|(m, code)| {
            functions(&code)
                .into_iter()
                .filter(|(_, len)| *len > 40)
                .map(move |(f, len)| format!("{m}: {f} ({len} lines)"))
        })
        .collect();
    assert!(long.is_empty(), "{long:#?}");
}

#[test]
fn no_json_macro_builds_a_response_outside_tests() {
    let found: Vec<String> = modules()
        .into_iter()
        .filter(|(_, code)| code.contains("json!("))
        .map(|(m, _)| m)
        .collect();
    assert!(found.is_empty(), "{found:?}");
}

/// The modules that read the system time themselves (`Utc::now()`) rather than
/// from the clock they are given (`Clock`, or a `now` their caller read from one):
/// only `vocab::clock`'s `SystemClock` may, so a test's `FixedClock` (or the
/// command line's) governs every time loadout stamps or decides by.
fn own_clocks(modules: &BTreeMap<String, String>) -> Vec<String> {
    modules
        .iter()
        .filter(|(m, code)| m.as_str() != "vocab::clock" && code.contains("Utc::now()"))
        .map(|(m, _)| m.clone())
        .collect()
}

#[test]
fn only_the_clock_reads_the_system_time() {
    let found = own_clocks(&modules());
    assert!(
        found.is_empty(),
        "take `now` or a `Clock` from the caller: {found:?}"
    );
}

#[test]
fn the_clock_check_finds_a_planted_read() {
    let planted = BTreeMap::from([
        ("vocab::clock".to_owned(), "Utc::now()".to_owned()),
        (
            "releases::moves".to_owned(),
            "let at = chrono::Utc::now();".to_owned(),
        ),
        (
            "registry::guard".to_owned(),
            "let at = write.now();".to_owned(),
        ),
    ]);
    assert_eq!(own_clocks(&planted), vec!["releases::moves".to_owned()]);
}

/// Each table and the modules that own its writes (a module path, or a folder's:
/// `actions::ledger` covers `actions::ledger::transitions`). Every other module
/// writes through an owner's function: REST, the console, the command line and
/// configuration as code are begin → the owner's `_in` → commit, so an object's
/// rules live in one place.
const OWNERS: &[(&str, &[&str])] = &[
    // The seed writes the canonical registry before any owner's rules can apply.
    (
        "agent_configurations",
        &[
            "agents::definition",
            "agents::template",
            "agents::policy",
            "agents::model",
            "registry::seed",
        ],
    ),
    ("user_groups", &["agents::groups"]),
    ("user_group_members", &["agents::groups"]),
    ("prompt_versions", &["agents::template", "registry::seed"]),
    // A tool's connector binding is the connector store's rule (kinds must match).
    (
        "tools",
        &["registry::tools", "registry::seed", "connectors::store"],
    ),
    // A tool's soft delete switches its links off.
    (
        "agent_tools",
        &["registry::links", "registry::tools", "registry::seed"],
    ),
    ("channels", &["registry::channels", "registry::seed"]),
    // Sealing re-seals header values when the secrets key rotates.
    (
        "connectors",
        &["connectors::store", "connectors::client::sealing"],
    ),
    ("agent_labels", &["promotion::labels", "releases::moves"]),
    ("label_moves", &["releases::moves"]),
    ("agent_revisions", &["releases"]),
    ("change_requests", &["promotion::change_requests"]),
    ("render_snapshots", &["promotion::snapshots"]),
    // Sealing re-seals API keys when the secrets key rotates.
    (
        "model_connections",
        &["evals::connections", "connectors::client::sealing"],
    ),
    ("eval_datasets", &["evals::datasets"]),
    ("eval_runs", &["evals::runs", "evals::runner"]),
    ("eval_results", &["evals::runner"]),
    ("tool_changes", &["connectors::pins"]),
    (
        "rollouts",
        &[
            "promotion::change_requests",
            "promotion::rollouts",
            "releases::traffic",
            "releases::outcomes",
        ],
    ),
    ("rollout_events", &["releases::traffic"]),
    ("outcomes", &["releases::outcomes"]),
    ("revision_signals", &["releases::signals"]),
    ("api_keys", &["auth::keys", "auth::signers"]),
    ("members", &["auth::members", "auth::signers", "auth::sso"]),
    ("signer_grants", &["auth::signers"]),
    ("oidc_logins", &["auth::sso"]),
    ("console_sessions", &["console::session"]),
    ("idempotency_records", &["db::idempotency"]),
    ("proposals", &["actions::ledger"]),
    ("proposal_events", &["actions::ledger"]),
    ("user_tool_preferences", &["actions::preferences"]),
    (
        "user_agent_prompt_customizations",
        &["agents::instructions", "execute::executors"],
    ),
    ("webhook_events", &["events", "webhooks::fan_out"]),
    (
        "webhook_subscriptions",
        &[
            "webhooks::subscriptions",
            "webhooks::deliver",
            "connectors::client::sealing",
        ],
    ),
    (
        "webhook_deliveries",
        &["webhooks::fan_out", "webhooks::deliver"],
    ),
    ("webhook_attempts", &["webhooks::deliver"]),
];

/// The tables a module's code writes: every `T::ActiveModel` and every
/// `T::Entity::insert…` / `update_many` / `delete…`, with `use entity::x as y`
/// aliases resolved.
fn tables_written(code: &str) -> BTreeSet<String> {
    let mut aliases = BTreeMap::new();
    for line in code
        .lines()
        .filter(|l| l.trim_start().starts_with("use entity"))
    {
        for part in line.split([',', '{', '}', ';']) {
            let words: Vec<&str> = part.split_whitespace().collect();
            if let [.., table, "as", alias] = words.as_slice() {
                let table = table.rsplit("::").next().unwrap_or(table);
                aliases.insert((*alias).to_owned(), table.to_owned());
            }
        }
    }
    let writes = [
        "::ActiveModel",
        "::Entity::insert",
        "::Entity::update_many",
        "::Entity::delete",
    ];
    let mut found = BTreeSet::new();
    for marker in writes {
        for (at, _) in code.match_indices(marker) {
            let next = code[at + marker.len()..].chars().next();
            if marker == "::ActiveModel" && next.is_some_and(|c| c.is_ascii_alphanumeric()) {
                continue; // `ActiveModelTrait`, `ActiveModelBehavior`
            }
            let before = &code[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[start..];
            let table = aliases
                .get(name)
                .cloned()
                .unwrap_or_else(|| name.to_owned());
            found.insert(table);
        }
    }
    found
}

fn owned_by(module: &str, owners: &[&str]) -> bool {
    owners
        .iter()
        .any(|o| module == *o || module.starts_with(&format!("{o}::")))
}

/// Writes outside their table's owners, as `module writes table`.
fn foreign_writes(modules: &BTreeMap<String, String>) -> Vec<String> {
    let owners: BTreeMap<&str, &[&str]> = OWNERS.iter().copied().collect();
    let mut out = Vec::new();
    for (module, code) in modules {
        for table in tables_written(code) {
            match owners.get(table.as_str()) {
                Some(list) if owned_by(module, list) => {}
                Some(_) => out.push(format!("{module} writes {table}")),
                None => out.push(format!(
                    "{module} writes {table}, which has no owner listed"
                )),
            }
        }
    }
    out
}

#[test]
fn every_table_is_written_by_its_owners_only() {
    let foreign = foreign_writes(&modules());
    assert!(foreign.is_empty(), "{foreign:#?}");
}

#[test]
fn the_owner_check_finds_a_planted_write() {
    let planted = BTreeMap::from([
        (
            "bundle::apply".to_owned(),
            "use entity::tools as t;\nlet row = t::ActiveModel { ..Default::default() };\n"
                .to_owned(),
        ),
        (
            "http::agents".to_owned(),
            "entity::channels::Entity::update_many().exec(db).await?;\n".to_owned(),
        ),
        (
            "registry::tools".to_owned(),
            "tools::ActiveModel {}".to_owned(),
        ),
    ]);
    assert_eq!(
        foreign_writes(&planted),
        vec![
            "bundle::apply writes tools".to_owned(),
            "http::agents writes channels".to_owned(),
        ]
    );
}

/// ARCHITECTURE.md's layer table: each top-level module and its layer. The table is
/// the one whose header is `| layer | modules | owns | may use |`; a row's modules
/// are the backticked names in its second cell.
fn documented_layers(doc: &str) -> Result<BTreeMap<String, u32>, String> {
    let mut lines = doc
        .lines()
        .skip_while(|l| !l.starts_with("| layer | modules |"));
    lines
        .next()
        .ok_or("no `| layer | modules | owns | may use |` table")?;
    let mut layers = BTreeMap::new();
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let layer: u32 = cells
            .get(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("a layer is a whole number: {line}"))?;
        let modules = cells
            .get(2)
            .ok_or_else(|| format!("no modules cell: {line}"))?;
        for name in modules.split('`').skip(1).step_by(2) {
            if layers.insert(name.to_owned(), layer).is_some() {
                return Err(format!("{name} is in two rows"));
            }
        }
    }
    Ok(layers)
}

/// Every import of a module in a higher layer, and every module the table misses.
fn layer_violations(
    graph: &BTreeMap<String, BTreeSet<String>>,
    layers: &BTreeMap<String, u32>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (from, targets) in graph {
        let Some(&mine) = layers.get(from) else {
            out.push(format!("{from} is not in the layer table"));
            continue;
        };
        for to in targets {
            match layers.get(to) {
                Some(&theirs) if theirs > mine => {
                    out.push(format!("{from} (layer {mine}) uses {to} (layer {theirs})"));
                }
                Some(_) => {}
                None => out.push(format!("{to} is not in the layer table")),
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_module_uses_only_its_layer_and_those_below_as_architecture_md_says() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .expect("ARCHITECTURE.md");
    let layers = documented_layers(&doc).expect("the layer table");
    let rooms: BTreeSet<String> = layers.keys().cloned().collect();
    // `crate` (lib.rs) declares the modules; it is no layer.
    let mut graph = fold(&graph(), &rooms);
    graph.remove("crate");
    for targets in graph.values_mut() {
        targets.remove("crate");
    }
    let found = layer_violations(&graph, &layers);
    assert!(found.is_empty(), "{found:#?}");
    let stale: Vec<&String> = layers.keys().filter(|m| !graph.contains_key(*m)).collect();
    assert!(
        stale.is_empty(),
        "the table names modules that do not exist: {stale:?}"
    );
}

#[test]
fn the_layer_check_finds_a_planted_upward_import() {
    let doc = "| layer | modules | owns | may use |\n|---|---|---|---|\n\
               | 0 | `vocab`, `digest` | words | nothing |\n| 1 | `db` | pools | 0 |\n\
               | 2 | `http` | routes | 0-1 |\n";
    let layers = documented_layers(doc).expect("parsed");
    assert_eq!(layers.get("digest"), Some(&0));
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("vocab", vec!["digest"]),
        ("db", vec!["vocab", "http"]),
        ("http", vec!["db", "cli"]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        layer_violations(&graph, &layers),
        vec![
            "cli is not in the layer table".to_owned(),
            "db (layer 1) uses http (layer 2)".to_owned(),
        ]
    );
}

#[test]
fn a_room_inside_a_folder_is_its_own_node() {
    let rooms = BTreeSet::from(["connectors".to_owned(), "connectors::client".to_owned()]);
    assert_eq!(
        room("connectors::client::mcp::capped", &rooms),
        "connectors::client"
    );
    assert_eq!(room("connectors::sync", &rooms), "connectors");
    assert_eq!(room("connectors_extra::x", &rooms), "connectors_extra");
    let graph: BTreeMap<String, BTreeSet<String>> = [
        (
            "connectors::sync",
            vec!["connectors::client::mcp", "registry::tools"],
        ),
        (
            "connectors::client::http",
            vec!["connectors::client::target"],
        ),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    let folded = fold(&graph, &rooms);
    assert_eq!(
        folded.get("connectors"),
        Some(&BTreeSet::from([
            "connectors::client".to_owned(),
            "registry".to_owned()
        ]))
    );
    assert_eq!(folded.get("connectors::client"), Some(&BTreeSet::new()));
}
