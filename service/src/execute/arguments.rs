//! Validates tool-call arguments against the tool's stored JSON Schema with the
//! `jsonschema` crate: all of Draft 2020-12 (the draft when the schema names none),
//! with `format` asserted (2020-12 only annotates it by default). The schema is the
//! tool's `parameters` as stored, never the strict shape exported to OpenAI.
//!
//! The schema is the one the revision the caller was served holds (`releases`), so
//! a validator is kept per tool *and revision* ([`Key`]): two revisions' schemas
//! never share one. Each is compiled once per configuration generation and kept in
//! [`Validators`].

use std::sync::Arc;

use jsonschema::{ValidationError, Validator};
use serde::Serialize;
use serde_json::Value;

use crate::cache::{Counts, Generation, Stamped, Weigh, share};
use crate::error::{Error, Result};

/// A tool's compiled argument validator, with the schema it was compiled from.
pub struct ToolValidator {
    pub schema: serde_json::Value,
    pub validator: jsonschema::Validator,
}

impl Weigh for Arc<ToolValidator> {
    fn bytes(&self) -> usize {
        // A compiled validator is a tree of nodes a few times the schema's text.
        self.schema.to_string().len() * 4
    }
}

/// Which validator: a tool's schema as one revision holds it. Revision ids are
/// unique over every agent's revisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// The revision's row id (not its per-agent number).
    pub revision_id: i32,
    pub tool_id: i32,
}

impl Weigh for Key {
    fn bytes(&self) -> usize {
        8
    }
}

/// The schema a call is checked against: which tool, in which revision.
pub struct Schema<'a> {
    pub key: Key,
    pub tool: &'a str,
    pub parameters: &'a Value,
}

/// Argument validators by tool and revision, compiled once per generation.
pub struct Validators {
    validators: Stamped<Key, Arc<ToolValidator>>,
    counts: Counts,
}

impl Validators {
    /// An empty map taking 2/16 of `budget`, counting into `counts`.
    pub fn new(budget: usize, counts: Counts) -> Self {
        Self {
            validators: Stamped::new(share(budget, 2)),
            counts,
        }
    }

    /// The argument validator of this tool in this revision.
    fn get(&self, key: Key, generation: i64) -> Option<Arc<ToolValidator>> {
        self.counts.count(self.validators.get(&key, generation))
    }

    fn put(&self, key: Key, stamp: i64, validator: Arc<ToolValidator>) {
        self.validators.put(key, stamp, validator);
    }
}

/// One way the arguments break the schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArgumentError {
    /// JSON Pointer to the offending value in the arguments (`""` is the whole object).
    pub path: String,
    /// The schema keyword that failed (`type`, `required`, `pattern`, ...).
    pub keyword: String,
    /// What is wrong, without echoing the value back.
    pub message: String,
}

/// The details of an `invalid_arguments` refusal.
#[derive(Debug, Serialize)]
struct InvalidArguments {
    /// The first error's path, as the details carried before every error was listed.
    path: String,
    /// Every error, in the validator's order.
    errors: Vec<ArgumentError>,
}

/// The details of an `invalid_arguments` refusal caused by the schema itself.
#[derive(Debug, Serialize)]
struct UncompilableSchema {
    tool: String,
}

/// Compiles `schema` as the call path does: Draft 2020-12 unless the schema's
/// `$schema` names another draft, formats asserted, no remote `$ref` (the crate is
/// built without resolvers). The error says why the schema is not usable.
pub fn compile(schema: &Value) -> std::result::Result<Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| describe_schema_error(&e))
}

/// A schema error as one line: where in the schema, and what.
fn describe_schema_error(error: &ValidationError<'_>) -> String {
    let at = error.instance_path().as_str();
    if at.is_empty() {
        error.to_string()
    } else {
        format!("at {at}: {error}")
    }
}

/// Every error `arguments` has under `validator`; empty when they are valid.
pub fn errors(validator: &Validator, arguments: &Value) -> Vec<ArgumentError> {
    validator
        .iter_errors(arguments)
        .map(|e| ArgumentError {
            path: e.instance_path().as_str().to_owned(),
            keyword: e.kind().keyword().to_owned(),
            message: e.masked().to_string(),
        })
        .collect()
}

/// The tool's compiled validator: from the cache when it was compiled at this
/// generation from this same schema, otherwise compiled and cached. A revision's
/// schema never changes; comparing it anyway keeps a key that ever named two
/// schemas from answering with the wrong one.
/// `stamp` is the generation read before the tool's row.
fn validator(
    cache: &Validators,
    generation: &Generation,
    stamp: i64,
    key: Key,
    schema: &Value,
) -> std::result::Result<Arc<ToolValidator>, String> {
    if let Some(cached) = cache.get(key, generation.current())
        && cached.schema == *schema
    {
        return Ok(cached);
    }
    let compiled = Arc::new(ToolValidator {
        validator: compile(schema)?,
        schema: schema.clone(),
    });
    cache.put(key, stamp, compiled.clone());
    Ok(compiled)
}

/// Checks a call's arguments against the tool's schema in the revision served.
/// Invalid arguments, or a schema that does not compile (a drifted database), are a
/// 422 `invalid_arguments` whose details list every error with its JSON Pointer
/// path and keyword.
pub fn validate(
    cache: &Validators,
    generation: &Generation,
    stamp: i64,
    tool: Schema<'_>,
    arguments: &Value,
) -> Result<()> {
    let validator = validator(cache, generation, stamp, tool.key, tool.parameters).map_err(|why| {
        Error::refused(
            "invalid_arguments",
            format!(
                "the tool {:?} has a schema that is not valid JSON Schema ({why}); no call can pass it until an admin fixes it",
                tool.tool
            ),
        )
        .with_details(UncompilableSchema {
            tool: tool.tool.to_owned(),
        })
    })?;
    check(&validator.validator, arguments)
}

/// The refusal a call with `arguments` gets under `validator`: a 422
/// `invalid_arguments` naming the first error, every error in its details.
pub fn check(validator: &Validator, arguments: &Value) -> Result<()> {
    let errors = errors(validator, arguments);
    let Some(first) = errors.first() else {
        return Ok(());
    };
    let at = match first.path.as_str() {
        "" => "the arguments".to_owned(),
        path => path.to_owned(),
    };
    let more = match errors.len() {
        1 => String::new(),
        n => format!(" ({n} errors in all, listed in details.errors)"),
    };
    let message = format!(
        "invalid arguments: {at}: {}{more}. The arguments must match the tool's JSON Schema.",
        first.message
    );
    let details = InvalidArguments {
        path: first.path.clone(),
        errors,
    };
    Err(Error::refused("invalid_arguments", message).with_details(details))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The errors `arguments` has under `schema`, as (path, keyword).
    fn problems(schema: Value, arguments: Value) -> Vec<(String, String)> {
        let validator = compile(&schema).expect("compiles");
        errors(&validator, &arguments)
            .into_iter()
            .map(|e| (e.path, e.keyword))
            .collect()
    }

    fn object(property: Value) -> Value {
        json!({"type": "object", "properties": {"x": property}, "required": ["x"], "additionalProperties": false})
    }

    fn passes(property: Value, x: Value) -> bool {
        problems(object(property), json!({ "x": x })).is_empty()
    }

    fn keyword_of(property: Value, x: Value) -> Vec<(String, String)> {
        problems(object(property), json!({ "x": x }))
    }

    fn at_x(keyword: &str) -> Vec<(String, String)> {
        vec![("/x".to_owned(), keyword.to_owned())]
    }

    #[test]
    fn one_point_zero_is_an_integer() {
        assert!(passes(json!({"type": "integer"}), json!(1.0)));
    }

    #[test]
    fn one_point_five_is_not_an_integer() {
        assert_eq!(
            keyword_of(json!({"type": "integer"}), json!(1.5)),
            at_x("type")
        );
    }

    #[test]
    fn any_of_accepts_a_value_matching_one_branch_and_refuses_one_matching_none() {
        let any_of = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        assert!(passes(any_of.clone(), json!(3)));
        assert_eq!(keyword_of(any_of, json!(true)), at_x("anyOf"));
    }

    #[test]
    fn one_of_refuses_a_value_matching_two_branches() {
        let one_of = json!({"oneOf": [{"type": "integer"}, {"minimum": 0}]});
        assert!(passes(one_of.clone(), json!(-1)));
        assert_eq!(keyword_of(one_of, json!(1)), at_x("oneOf"));
    }

    #[test]
    fn const_refuses_any_other_value() {
        assert!(passes(json!({"const": "v1"}), json!("v1")));
        assert_eq!(
            keyword_of(json!({"const": "v1"}), json!("v2")),
            at_x("const")
        );
    }

    #[test]
    fn enum_refuses_a_value_outside_the_list() {
        let levels = json!({"enum": ["low", "high", null]});
        assert!(passes(levels.clone(), Value::Null));
        assert_eq!(keyword_of(levels, json!("urgent")), at_x("enum"));
    }

    #[test]
    fn pattern_refuses_a_string_that_does_not_match() {
        let sku = json!({"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"});
        assert!(passes(sku.clone(), json!("ABC-12")));
        assert_eq!(keyword_of(sku, json!("abc-12")), at_x("pattern"));
    }

    #[test]
    fn a_date_time_format_is_asserted() {
        let when = json!({"type": "string", "format": "date-time"});
        assert!(passes(when.clone(), json!("2026-11-21T08:30:00Z")));
        assert_eq!(keyword_of(when, json!("next tuesday")), at_x("format"));
    }

    #[test]
    fn an_email_format_is_asserted() {
        let email = json!({"type": "string", "format": "email"});
        assert!(passes(email.clone(), json!("ada@example.com")));
        assert_eq!(keyword_of(email, json!("ada at example")), at_x("format"));
    }

    #[test]
    fn minimum_and_maximum_bound_a_number() {
        let percent = json!({"type": "number", "minimum": 0, "maximum": 100});
        assert!(passes(percent.clone(), json!(100)));
        assert_eq!(keyword_of(percent.clone(), json!(-1)), at_x("minimum"));
        assert_eq!(keyword_of(percent, json!(100.5)), at_x("maximum"));
    }

    #[test]
    fn min_length_and_max_length_bound_a_string() {
        let code = json!({"type": "string", "minLength": 2, "maxLength": 3});
        assert!(passes(code.clone(), json!("abc")));
        assert_eq!(keyword_of(code.clone(), json!("a")), at_x("minLength"));
        assert_eq!(keyword_of(code, json!("abcd")), at_x("maxLength"));
    }

    #[test]
    fn unique_items_refuses_a_repeated_item() {
        let tags = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
        assert!(passes(tags.clone(), json!(["a", "b"])));
        assert_eq!(keyword_of(tags, json!(["a", "a"])), at_x("uniqueItems"));
    }

    #[test]
    fn a_ref_to_defs_is_followed() {
        let schema = json!({
            "type": "object",
            "$defs": {"id": {"type": "string", "pattern": "^t[0-9]+$"}},
            "properties": {"ids": {"type": "array", "items": {"$ref": "#/$defs/id"}}},
            "required": ["ids"],
            "additionalProperties": false
        });
        assert_eq!(problems(schema.clone(), json!({"ids": ["t1"]})), []);
        assert_eq!(
            problems(schema, json!({"ids": ["t1", "x"]})),
            [("/ids/1".to_owned(), "pattern".to_owned())]
        );
    }

    #[test]
    fn errors_in_nested_arrays_have_their_json_pointer() {
        let grid =
            json!({"type": "array", "items": {"type": "array", "items": {"type": "integer"}}});
        assert!(passes(grid.clone(), json!([[1, 2], [3]])));
        assert_eq!(
            keyword_of(grid, json!([[1, 2], [3, "four"]])),
            [("/x/1/1".to_owned(), "type".to_owned())]
        );
    }

    #[test]
    fn every_error_is_listed_with_its_path_and_keyword() {
        let schema = json!({
            "type": "object",
            "properties": {"tasks": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "priority": {"enum": ["low", "high"]}},
                "required": ["title", "priority"],
                "additionalProperties": false
            }}},
            "required": ["tasks"],
            "additionalProperties": false
        });
        let arguments =
            json!({"tasks": [{"title": 5, "priority": "urgent"}, {"title": "ok"}], "x": 1});
        let mut found = problems(schema, arguments);
        found.sort();
        let expected: Vec<(String, String)> = [
            ("", "additionalProperties"),
            ("/tasks/0/priority", "enum"),
            ("/tasks/0/title", "type"),
            ("/tasks/1", "required"),
        ]
        .into_iter()
        .map(|(p, k)| (p.to_owned(), k.to_owned()))
        .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_schema_without_a_schema_keyword_is_read_as_draft_2020_12() {
        // `prefixItems` exists only in 2020-12; an older draft would ignore it.
        let pair =
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]});
        assert!(passes(pair.clone(), json!(["a", 1])));
        assert_eq!(
            keyword_of(pair, json!(["a", "b"])),
            [("/x/1".to_owned(), "type".to_owned())]
        );
    }

    #[test]
    fn messages_do_not_echo_the_value() {
        let validator = compile(&object(json!({"type": "integer"}))).expect("compiles");
        let found = errors(&validator, &json!({"x": "secret-token"}));
        assert_eq!(found.len(), 1);
        assert!(!found[0].message.contains("secret-token"), "{found:?}");
    }

    #[test]
    fn a_schema_that_is_not_json_schema_does_not_compile() {
        let why = compile(&object(json!({"type": "text"}))).expect_err("refused");
        assert!(why.contains("/properties/x/type"), "{why}");
    }

    #[test]
    fn a_schema_naming_an_unknown_meta_schema_does_not_compile() {
        let mut custom = object(json!({"type": "string"}));
        custom["$schema"] = json!("https://example.com/my-meta-schema");
        assert!(compile(&custom).is_err());
    }

    #[test]
    fn a_schema_naming_draft_7_is_read_as_draft_7() {
        // Draft 7 has no `prefixItems`: the keyword is ignored.
        let mut pair = object(json!({"type": "array", "prefixItems": [{"type": "string"}]}));
        pair["$schema"] = json!("http://json-schema.org/draft-07/schema#");
        let validator = compile(&pair).expect("compiles");
        assert_eq!(errors(&validator, &json!({"x": [1]})), []);
    }

    #[test]
    fn a_validator_is_compiled_once_per_generation() {
        let generation = Generation::new(4);
        let cache = Validators::new(crate::cache::DEFAULT_BUDGET, Counts::default());
        let schema = object(json!({"type": "string"}));
        let first = validator(&cache, &generation, 4, KEY, &schema).expect("compiles");
        let again = validator(&cache, &generation, 4, KEY, &schema).expect("compiles");
        assert!(Arc::ptr_eq(&first, &again), "the same generation reuses it");
        generation.observe(5);
        let after_a_write = validator(&cache, &generation, 5, KEY, &schema).expect("compiles");
        assert!(
            !Arc::ptr_eq(&first, &after_a_write),
            "a new generation compiles again"
        );
    }

    #[test]
    fn a_schema_changed_within_a_generation_is_compiled_again() {
        let generation = Generation::new(4);
        let cache = Validators::new(crate::cache::DEFAULT_BUDGET, Counts::default());
        let strings = validator(
            &cache,
            &generation,
            4,
            KEY,
            &object(json!({"type": "string"})),
        )
        .expect("compiles");
        let numbers = validator(
            &cache,
            &generation,
            4,
            KEY,
            &object(json!({"type": "number"})),
        )
        .expect("compiles");
        assert_eq!(errors(&strings.validator, &json!({"x": 1})).len(), 1);
        assert_eq!(errors(&numbers.validator, &json!({"x": 1})), []);
    }

    #[test]
    fn two_revisions_of_a_tool_never_share_a_validator() {
        let generation = Generation::new(4);
        let cache = Validators::new(crate::cache::DEFAULT_BUDGET, Counts::default());
        let newer = Key {
            revision_id: 2,
            ..KEY
        };
        let strings = object(json!({"type": "string"}));
        let old = validator(&cache, &generation, 4, KEY, &strings).expect("compiles");
        let new = validator(&cache, &generation, 4, newer, &strings).expect("compiles");
        assert!(!Arc::ptr_eq(&old, &new));
        let again = validator(&cache, &generation, 4, KEY, &strings).expect("compiles");
        assert!(Arc::ptr_eq(&old, &again), "each revision keeps its own");
    }

    const KEY: Key = Key {
        revision_id: 1,
        tool_id: 1,
    };

    #[test]
    fn a_remote_ref_is_not_fetched() {
        let remote = object(json!({"$ref": "https://example.com/schema.json"}));
        assert!(compile(&remote).is_err());
    }
}
