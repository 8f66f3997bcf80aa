//! YAML read into JSON values, bounded: a promptfoo suite, an assertion's schema
//! text, and the objects `contains-json` finds in a reply are all someone else's
//! text. serde-saphyr (panic-free, with budgets) rather than serde_yaml, which is
//! deprecated and has none.
//!
//! The budgets bound what one read may cost: scalar bytes to a dataset's size,
//! nesting, and aliases (an anchor's bytes times the aliases that replay it bound
//! the "billion laughs"). Booleans are YAML 1.2's (`true`/`false`, not `yes`/`no`)
//! and a repeated key is an error, as in js-yaml, which promptfoo reads with.

use serde_json::Value;

/// The most scalar bytes read: a dataset's limit (`cases::MAX_DATASET_BYTES`).
const MAX_SCALAR_BYTES: usize = 4 * 1024 * 1024;
/// The deepest nesting read (a suite is a few levels deep; a schema a few more).
const MAX_DEPTH: usize = 64;
/// The most aliases (`*name`) one read may use.
const MAX_ALIASES: usize = 100;
/// The most bytes anchored (`&name`) content may hold, all anchors together.
const MAX_ANCHORED_BYTES: usize = 256 * 1024;
/// The most parser events aliases may replay.
const MAX_REPLAYED_EVENTS: usize = 10_000;

/// `text` read as YAML (JSON is YAML) into a JSON value; the error is one line.
pub fn parse(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str_with_options(text, options()).map_err(|e| one_line(&e.to_string()))
}

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_total_scalar_bytes = MAX_SCALAR_BYTES;
    budget.max_depth = MAX_DEPTH;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_recorded_anchor_bytes = MAX_ANCHORED_BYTES;
    budget.max_documents = 1;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    options.strict_booleans = true;
    options.with_snippet = false;
    options
}

/// A parser's message on one line, cut to a readable length.
fn one_line(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn yaml_and_json_read_into_the_same_value() {
        let yaml = parse("a: 1\nb: [x, true]\n").unwrap();
        let json = parse(r#"{"a": 1, "b": ["x", true]}"#).unwrap();
        assert_eq!(yaml, json);
    }

    #[test]
    fn yes_is_a_string_as_in_yaml_1_2() {
        assert_eq!(parse("a: yes").unwrap()["a"], "yes");
    }

    #[test]
    fn a_repeated_key_is_refused() {
        assert!(parse("a: 1\na: 2\n").is_err());
    }

    #[test]
    fn an_alias_bomb_is_refused_by_the_budget() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(parse(&text).is_err());
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("{}{}", "[".repeat(500), "]".repeat(500));
        assert!(parse(&text).is_err());
    }
}
