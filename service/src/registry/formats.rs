//! An agent's tools in the three wire formats LLM clients expect: OpenAI Chat
//! Completions function tools (strict mode), Anthropic Messages API tools and an
//! MCP `tools/list` result.
//!
//! Pure functions over [`ToolDef`]: no database, no I/O. Output is deterministic:
//! tools are sorted by name and `serde_json` objects keep their keys sorted.

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::Tier;

pub use crate::vocab::ToolDef;

crate::closed_set! {
    /// A wire format for [`render`].
    pub enum Format as "format" {
        /// OpenAI Chat Completions function tools, strict mode.
        Openai = "openai",
        /// Anthropic Messages API tools.
        Anthropic = "anthropic",
        /// The result of an MCP `tools/list` call.
        Mcp = "mcp",
    }
}

/// Renders `tools` in `format`, sorted by name whatever the input order.
///
/// - [`Format::Openai`] gives an array of `{"type": "function", "function": {"name",
///   "description", "parameters", "strict": true}}`, the parameters passed through
///   [`strict_schema`] (a tool taken loose has its parameters as they are and
///   `"strict": false`);
/// - [`Format::Anthropic`] gives an array of `{"name", "description", "input_schema"}`;
/// - [`Format::Mcp`] gives an array of MCP `Tool`s, `{"name", "title",
///   "description", "inputSchema", "annotations", "_meta":
///   {"io.loadout/approval-tier"}}` (see [`mcp_tool`]): exactly what loadout's MCP
///   server answers to `tools/list`, so every format is an array in the same
///   `tools` field of the API's responses.
pub fn render(tools: &[ToolDef], format: Format) -> Tools {
    let mut sorted: Vec<&ToolDef> = tools.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let sorted = sorted.into_iter();
    match format {
        Format::Openai => Tools::Openai(sorted.map(openai_tool).collect()),
        Format::Anthropic => Tools::Anthropic(sorted.map(anthropic_tool).collect()),
        Format::Mcp => Tools::Mcp(sorted.map(mcp_tool).collect()),
    }
}

/// An agent's tools in one format, serialised as `{"format": ..., "tools": [...]}`
/// (flattened into the API's responses), so the format says which shape the
/// tools have.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(tag = "format", content = "tools", rename_all = "lowercase")]
pub enum Tools {
    Openai(Vec<OpenAiTool>),
    Anthropic(Vec<AnthropicTool>),
    Mcp(Vec<McpTool>),
}

/// An OpenAI Chat Completions function tool, strict mode.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct OpenAiTool {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: OpenAiFunction,
}

/// The function of an [`OpenAiTool`].
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct OpenAiFunction {
    pub name: String,
    pub description: String,
    /// The tool's schema rewritten by [`strict_schema`] (as it is when `strict` is false).
    #[schema(value_type = Object)]
    pub parameters: Value,
    /// `false` only for a synced tool taken loose on purpose (`allow_loose`).
    pub strict: bool,
}

/// An Anthropic Messages API tool.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct AnthropicTool {
    pub name: String,
    pub description: String,
    #[schema(value_type = Object)]
    pub input_schema: Value,
}

/// An MCP `Tool`, as in a `tools/list` result.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct McpTool {
    pub name: String,
    /// For people: the name with `_` as spaces, capitalised (`Get tasks`).
    pub title: String,
    pub description: String,
    #[serde(rename = "inputSchema")]
    #[schema(value_type = Object)]
    pub input_schema: Value,
    pub annotations: Annotations,
    #[serde(rename = "_meta")]
    pub meta: McpMeta,
}

/// The `_meta` key of a tool's approval tier, in MCP's `prefix/name` form.
pub const TIER_META_KEY: &str = "io.loadout/approval-tier";

/// loadout's `_meta` on an MCP tool.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct McpMeta {
    /// The approval tier as stored, so a drifted tier is visible (and reported by
    /// `loadout check`): `auto` runs at once, the others propose.
    #[serde(rename = "io.loadout/approval-tier")]
    #[schema(rename = "io.loadout/approval-tier")]
    pub approval_tier: String,
}

fn openai_tool(tool: &ToolDef) -> OpenAiTool {
    OpenAiTool {
        kind: "function",
        function: OpenAiFunction {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: if tool.strict {
                strict_schema(&tool.parameters)
            } else {
                tool.parameters.clone()
            },
            strict: tool.strict,
        },
    }
}

fn anthropic_tool(tool: &ToolDef) -> AnthropicTool {
    AnthropicTool {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: tool.parameters.clone(),
    }
}

/// The one MCP shape of a tool: the REST export (`?format=mcp`) and the MCP
/// server's `tools/list` are both built here.
pub fn mcp_tool(tool: &ToolDef) -> McpTool {
    let annotations = annotations(&tool.name, tool.approval_tier());
    McpTool {
        name: tool.name.clone(),
        title: annotations.title.clone(),
        description: tool.description.clone(),
        input_schema: tool.parameters.clone(),
        annotations,
        meta: McpMeta {
            approval_tier: tool.approval_tier.clone(),
        },
    }
}

/// MCP tool annotations (`title` and the behaviour hints), serialised in camelCase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// The name with `_` as spaces and the first letter capitalised: `Get tasks`.
    pub title: String,
    /// The tool does not change anything.
    pub read_only_hint: bool,
    /// The tool may remove or overwrite data.
    pub destructive_hint: bool,
    /// Calling it twice with the same input has the same effect as once.
    pub idempotent_hint: bool,
    /// The tool reaches outside the service; always `false` here.
    pub open_world_hint: bool,
}

/// The MCP annotations for a tool, all four hints set (MCP reads a missing hint
/// as its unsafe default), from the verb before the first `_` of its name (the
/// whole name when there is none) and the tier:
///
/// | verb            | readOnly         | destructive | idempotent |
/// |-----------------|------------------|-------------|------------|
/// | `get`, `search` | when tier `auto` | false       | true       |
/// | `delete`        | false            | true        | true       |
/// | `set`, `link`   | false            | false       | true       |
/// | `update`        | false            | false       | false      |
/// | `create`        | false            | false       | false      |
/// | anything else   | false            | true        | false      |
///
/// A read that needs approval is not `readOnly`: calling it files a proposal
/// instead of answering, so a client must not treat it as free to call. Unknown
/// verbs get the most conservative hints. `openWorldHint` is `false`: a tool acts
/// on the systems its agent is configured for, not an open set of outside ones.
pub fn annotations(name: &str, tier: Tier) -> Annotations {
    let verb = name.split('_').next().unwrap_or(name);
    let (read_only, destructive, idempotent) = match verb {
        "get" | "search" => (tier == Tier::Auto, false, true),
        "delete" => (false, true, true),
        "set" | "link" => (false, false, true),
        "update" | "create" => (false, false, false),
        _ => (false, true, false),
    };
    Annotations {
        title: title(name),
        read_only_hint: read_only,
        destructive_hint: destructive,
        idempotent_hint: idempotent,
        open_world_hint: false,
    }
}

fn title(name: &str) -> String {
    let spaced = name.replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The schema rewritten for OpenAI strict mode; the input is not modified.
///
/// Every object schema (`type` is or includes `"object"`, or it has `properties`)
/// found at the root or under `properties`, `items` (schema or array),
/// `prefixItems`, `anyOf`/`oneOf`/`allOf`, `$defs`/`definitions` or a schema-valued
/// `additionalProperties` gets:
///
/// - `"additionalProperties": false`;
/// - `"properties": {}` if it had none;
/// - `"required"` listing every property: the names already required, in their
///   original order, then the others by name. Required names that
///   are not properties are dropped, since strict mode cannot satisfy them.
///
/// A property that was not required becomes nullable so that the model can still
/// leave it out by sending `null`:
///
/// - `"type": "T"` becomes `["T", "null"]`, and an array `type` gets `"null"` appended;
/// - an `enum` without `null` gets `null` appended (alongside the `type` change);
/// - a schema with neither `type` nor `enum` (only `anyOf`, `$ref`, ...), or with a
///   non-null `const`, is wrapped as `{"anyOf": [original, {"type": "null"}]}`.
///
/// A property that already accepts `null` is left alone, as are boolean schemas.
/// Already-strict schemas come back unchanged.
pub fn strict_schema(schema: &Value) -> Value {
    let mut out = schema.clone();
    make_strict(&mut out);
    out
}

fn make_strict(schema: &mut Value) {
    let Value::Object(obj) = schema else {
        return;
    };

    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = obj.get_mut(key) {
            children.values_mut().for_each(make_strict);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = obj.get_mut(key) {
            match child {
                Value::Array(members) => members.iter_mut().for_each(make_strict),
                other => make_strict(other),
            }
        }
    }
    for key in ["prefixItems", "anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(members)) = obj.get_mut(key) {
            members.iter_mut().for_each(make_strict);
        }
    }

    if is_object_schema(obj) {
        strict_object(obj);
    }
}

fn is_object_schema(obj: &Map<String, Value>) -> bool {
    let typed_object = match obj.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed_object || obj.contains_key("properties")
}

fn strict_object(obj: &mut Map<String, Value>) {
    let mut properties = match obj.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let was_required: Vec<String> = match obj.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(Value::as_str)
            .filter(|n| properties.contains_key(*n))
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };

    let mut required: Vec<String> = Vec::with_capacity(properties.len());
    for name in &was_required {
        if !required.contains(name) {
            required.push(name.clone());
        }
    }
    // The rest by name: key order is not part of JSON (and PostgreSQL's `jsonb`
    // keeps its own), so the output must not depend on it.
    let mut rest: Vec<String> = Vec::new();
    for (name, prop) in properties.iter_mut() {
        if !was_required.contains(name) {
            make_nullable(prop);
            rest.push(name.clone());
        }
    }
    rest.sort();
    required.extend(rest);

    obj.insert("properties".to_owned(), Value::Object(properties));
    obj.insert(
        "required".to_owned(),
        Value::Array(required.into_iter().map(Value::String).collect()),
    );
    obj.insert("additionalProperties".to_owned(), Value::Bool(false));
}

fn make_nullable(prop: &mut Value) {
    let Value::Object(obj) = prop else {
        return;
    };
    if accepts_null(obj) {
        return;
    }
    let has_const = obj.get("const").is_some_and(|c| !c.is_null());
    let has_type = matches!(obj.get("type"), Some(Value::String(_) | Value::Array(_)));
    let has_enum = matches!(obj.get("enum"), Some(Value::Array(_)));
    if has_const || (!has_type && !has_enum) {
        let original = std::mem::take(prop);
        let null = Value::Object(Map::from_iter([("type".to_owned(), Value::from("null"))]));
        let any_of = Value::Array(vec![original, null]);
        *prop = Value::Object(Map::from_iter([("anyOf".to_owned(), any_of)]));
        return;
    }
    if let Some(t) = obj.get_mut("type") {
        match t {
            Value::String(name) => {
                let name = std::mem::take(name);
                *t = Value::Array(vec![Value::String(name), Value::from("null")]);
            }
            Value::Array(types) if !types.iter().any(|t| t == "null") => {
                types.push(Value::from("null"));
            }
            _ => {}
        }
    }
    if let Some(Value::Array(values)) = obj.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
}

/// Whether the schema, at its own level, already lets `null` through.
fn accepts_null(obj: &Map<String, Value>) -> bool {
    let type_ok = match obj.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "null"),
        _ => false,
    };
    let enum_ok = match obj.get("enum") {
        Some(Value::Array(values)) => values.iter().any(Value::is_null),
        _ => false,
    };
    let const_ok = obj.get("const").is_some_and(Value::is_null);
    let union_ok = ["anyOf", "oneOf"].iter().any(|key| match obj.get(*key) {
        Some(Value::Array(members)) => members
            .iter()
            .any(|m| m.as_object().is_some_and(accepts_null)),
        _ => false,
    });

    let has_type = obj.contains_key("type");
    let has_enum = obj.contains_key("enum");
    let has_const = obj.contains_key("const");
    if has_type || has_enum || has_const {
        (!has_type || type_ok) && (!has_enum || enum_ok) && (!has_const || const_ok)
    } else {
        union_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rendered(tools: &[ToolDef], format: Format) -> Value {
        serde_json::to_value(render(tools, format)).expect("serialises")["tools"].clone()
    }

    fn tool(name: &str, tier: &str, parameters: Value) -> ToolDef {
        ToolDef {
            name: name.to_owned(),
            description: format!("{name} description"),
            approval_tier: tier.to_owned(),
            parameters,
            strict: true,
        }
    }

    /// Copy of `create_tasks` from the catalog, trimmed: already strict.
    fn catalog_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": { "type": "string" },
                            "due_date": { "type": ["string", "null"] }
                        },
                        "required": ["title", "due_date"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["tasks"],
            "additionalProperties": false
        })
    }

    #[test]
    fn strict_schema_rewrites_nested_objects() {
        let input = json!({
            "type": "object",
            "properties": {
                "batch": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": { "type": "string" },
                            "note": { "type": "string", "description": "optional" },
                            "tags": { "type": "array", "items": { "type": "string" } }
                        },
                        "required": ["id"]
                    }
                },
                "dry_run": { "type": "boolean" }
            },
            "required": ["batch"]
        });
        let before = input.clone();

        let out = strict_schema(&input);

        assert_eq!(
            out,
            json!({
                "type": "object",
                "properties": {
                    "batch": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": { "type": "string" },
                                "note": { "type": ["string", "null"], "description": "optional" },
                                "tags": { "type": ["array", "null"], "items": { "type": "string" } }
                            },
                            "required": ["id", "note", "tags"],
                            "additionalProperties": false
                        }
                    },
                    "dry_run": { "type": ["boolean", "null"] }
                },
                "required": ["batch", "dry_run"],
                "additionalProperties": false
            })
        );
        assert_eq!(input, before, "the input must not be mutated");
    }

    #[test]
    fn strict_schema_leaves_an_already_strict_schema_alone() {
        let schema = catalog_schema();
        assert_eq!(strict_schema(&schema), schema);
    }

    #[test]
    fn strict_schema_is_a_no_op_on_every_catalog_schema() {
        let seeds = crate::registry::catalog::Seeds::embedded().expect("embedded seeds parse");
        for t in &seeds.catalog.tools {
            let schema = t.schema_json();
            assert_eq!(strict_schema(&schema), schema, "{}", t.name);
        }
    }

    #[test]
    fn every_catalog_verb_has_specific_annotations() {
        let seeds = crate::registry::catalog::Seeds::embedded().expect("embedded seeds parse");
        let fallback = annotations("zzz_unknown", Tier::Auto);
        for verb in &seeds.catalog.vocabulary {
            let a = annotations(&format!("{verb}_things"), Tier::Auto);
            let hints = (a.read_only_hint, a.destructive_hint, a.idempotent_hint);
            let conservative = (
                fallback.read_only_hint,
                fallback.destructive_hint,
                fallback.idempotent_hint,
            );
            assert_ne!(
                hints, conservative,
                "verb {verb} falls through to the default"
            );
        }
    }

    #[test]
    fn strict_schema_makes_optional_enums_nullable() {
        let input = json!({
            "type": "object",
            "properties": {
                "priority": { "type": "string", "enum": ["low", "high"] },
                "status": { "enum": ["open", "done"] },
                "colour": { "type": ["string", "null"], "enum": ["red", null] }
            }
        });
        assert_eq!(
            strict_schema(&input),
            json!({
                "type": "object",
                "properties": {
                    "priority": { "type": ["string", "null"], "enum": ["low", "high", null] },
                    "status": { "enum": ["open", "done", null] },
                    "colour": { "type": ["string", "null"], "enum": ["red", null] }
                },
                "required": ["colour", "priority", "status"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn strict_schema_wraps_untyped_optional_properties() {
        let input = json!({
            "type": "object",
            "properties": {
                "a_ref": { "$ref": "#/$defs/thing" },
                "b_union": { "anyOf": [{ "type": "string" }, { "type": "integer" }] },
                "c_nullable_union": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
                "d_const": { "type": "string", "const": "x" }
            },
            "$defs": {
                "thing": { "properties": { "x": { "type": "integer" } } }
            }
        });
        assert_eq!(
            strict_schema(&input),
            json!({
                "type": "object",
                "properties": {
                    "a_ref": { "anyOf": [{ "$ref": "#/$defs/thing" }, { "type": "null" }] },
                    "b_union": { "anyOf": [
                        { "anyOf": [{ "type": "string" }, { "type": "integer" }] },
                        { "type": "null" }
                    ] },
                    "c_nullable_union": { "anyOf": [{ "type": "string" }, { "type": "null" }] },
                    "d_const": { "anyOf": [{ "type": "string", "const": "x" }, { "type": "null" }] }
                },
                "required": ["a_ref", "b_union", "c_nullable_union", "d_const"],
                "additionalProperties": false,
                "$defs": {
                    "thing": {
                        "properties": { "x": { "type": ["integer", "null"] } },
                        "required": ["x"],
                        "additionalProperties": false
                    }
                }
            })
        );
    }

    #[test]
    fn strict_schema_reaches_every_subschema_keyword() {
        let loose = || json!({ "type": "object", "properties": { "k": { "type": "string" } } });
        let strict = || {
            json!({
                "type": "object",
                "properties": { "k": { "type": ["string", "null"] } },
                "required": ["k"],
                "additionalProperties": false
            })
        };
        let input = json!({
            "anyOf": [loose()],
            "oneOf": [loose()],
            "allOf": [loose()],
            "definitions": { "d": loose() },
            "prefixItems": [loose()],
            "items": [loose()],
            "additionalProperties": loose()
        });
        assert_eq!(
            strict_schema(&input),
            json!({
                "anyOf": [strict()],
                "oneOf": [strict()],
                "allOf": [strict()],
                "definitions": { "d": strict() },
                "prefixItems": [strict()],
                "items": [strict()],
                "additionalProperties": strict()
            })
        );
    }

    #[test]
    fn strict_schema_fills_in_empty_objects_and_drops_unknown_required() {
        assert_eq!(
            strict_schema(&json!({ "type": "object" })),
            json!({
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": false
            })
        );
        assert_eq!(
            strict_schema(&json!({
                "type": ["object", "null"],
                "properties": { "a": { "type": "string" } },
                "required": ["ghost", "a", "a"],
                "additionalProperties": true
            })),
            json!({
                "type": ["object", "null"],
                "properties": { "a": { "type": "string" } },
                "required": ["a"],
                "additionalProperties": false
            })
        );
        // Non-object schemas pass through untouched.
        let scalar = json!({ "type": "string", "maxLength": 3 });
        assert_eq!(strict_schema(&scalar), scalar);
        assert_eq!(strict_schema(&json!(true)), json!(true));
    }

    fn two_tools_reversed() -> Vec<ToolDef> {
        vec![
            tool(
                "get_tasks",
                "auto",
                json!({ "type": "object", "properties": { "limit": { "type": "integer" } } }),
            ),
            tool("delete_tasks", "requires_approval", catalog_schema()),
        ]
    }

    #[test]
    fn a_tool_taken_loose_is_rendered_for_openai_as_it_is_without_strict() {
        let open_map = json!({"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}});
        let mut loose = tool("get_labels", "auto", open_map.clone());
        loose.strict = false;
        assert_eq!(
            rendered(&[loose], Format::Openai)[0]["function"],
            json!({
                "name": "get_labels",
                "description": "get_labels description",
                "parameters": open_map,
                "strict": false
            })
        );
    }

    #[test]
    fn renders_openai() {
        assert_eq!(
            rendered(&two_tools_reversed(), Format::Openai),
            json!([
                {
                    "type": "function",
                    "function": {
                        "name": "delete_tasks",
                        "description": "delete_tasks description",
                        "parameters": catalog_schema(),
                        "strict": true
                    }
                },
                {
                    "type": "function",
                    "function": {
                        "name": "get_tasks",
                        "description": "get_tasks description",
                        "parameters": {
                            "type": "object",
                            "properties": { "limit": { "type": ["integer", "null"] } },
                            "required": ["limit"],
                            "additionalProperties": false
                        },
                        "strict": true
                    }
                }
            ])
        );
    }

    #[test]
    fn renders_anthropic() {
        assert_eq!(
            rendered(&two_tools_reversed(), Format::Anthropic),
            json!([
                {
                    "name": "delete_tasks",
                    "description": "delete_tasks description",
                    "input_schema": catalog_schema()
                },
                {
                    "name": "get_tasks",
                    "description": "get_tasks description",
                    "input_schema": {
                        "type": "object",
                        "properties": { "limit": { "type": "integer" } }
                    }
                }
            ])
        );
    }

    #[test]
    fn renders_mcp() {
        assert_eq!(
            rendered(&two_tools_reversed(), Format::Mcp),
            json!(
                [
                    {
                        "name": "delete_tasks",
                        "title": "Delete tasks",
                        "description": "delete_tasks description",
                        "inputSchema": catalog_schema(),
                        "annotations": {
                            "title": "Delete tasks",
                            "readOnlyHint": false,
                            "destructiveHint": true,
                            "idempotentHint": true,
                            "openWorldHint": false
                        },
                        "_meta": { "io.loadout/approval-tier": "requires_approval" }
                    },
                    {
                        "name": "get_tasks",
                        "title": "Get tasks",
                        "description": "get_tasks description",
                        "inputSchema": {
                            "type": "object",
                            "properties": { "limit": { "type": "integer" } }
                        },
                        "annotations": {
                            "title": "Get tasks",
                            "readOnlyHint": true,
                            "destructiveHint": false,
                            "idempotentHint": true,
                            "openWorldHint": false
                        },
                        "_meta": { "io.loadout/approval-tier": "auto" }
                    }
                ]
            )
        );
    }

    #[test]
    fn renders_empty_input() {
        assert_eq!(rendered(&[], Format::Openai), json!([]));
        assert_eq!(rendered(&[], Format::Anthropic), json!([]));
        assert_eq!(rendered(&[], Format::Mcp), json!([]));
    }

    #[test]
    fn mcp_meta_keeps_the_tier_as_stored() {
        let out = rendered(&[tool("get_x", "weird", json!({}))], Format::Mcp);
        assert_eq!(
            out[0]["_meta"],
            json!({ "io.loadout/approval-tier": "weird" })
        );
    }

    #[test]
    fn approval_tier_defaults_to_requires_approval() {
        let tier = |t: &str| tool("get_x", t, json!({})).approval_tier();
        assert_eq!(tier("auto"), Tier::Auto);
        assert_eq!(tier("user_configurable"), Tier::UserConfigurable);
        assert_eq!(tier("requires_approval"), Tier::RequiresApproval);
        assert_eq!(tier("Auto"), Tier::RequiresApproval);
        assert_eq!(tier(""), Tier::RequiresApproval);
    }

    #[test]
    fn annotation_table() {
        // (name, title, readOnly, destructive, idempotent)
        let cases = [
            ("get_tasks", "Get tasks", true, false, true),
            ("search_gmail", "Search gmail", true, false, true),
            ("delete_memories", "Delete memories", false, true, true),
            ("set_project", "Set project", false, false, true),
            ("update_tasks", "Update tasks", false, false, false),
            ("create_reminders", "Create reminders", false, false, false),
            ("link_memories", "Link memories", false, false, true),
            ("purge_everything", "Purge everything", false, true, false),
            ("get", "Get", true, false, true),
            ("getter_things", "Getter things", false, true, false),
            ("", "", false, true, false),
        ];
        for (name, title, read_only, destructive, idempotent) in cases {
            assert_eq!(
                annotations(name, Tier::Auto),
                Annotations {
                    title: title.to_owned(),
                    read_only_hint: read_only,
                    destructive_hint: destructive,
                    idempotent_hint: idempotent,
                    open_world_hint: false,
                },
                "{name}"
            );
        }
    }

    #[test]
    fn a_read_that_needs_approval_is_not_read_only() {
        for tier in [Tier::UserConfigurable, Tier::RequiresApproval] {
            let a = annotations("get_tasks", tier);
            assert!(!a.read_only_hint && !a.destructive_hint && a.idempotent_hint);
        }
        assert!(annotations("search_tasks", Tier::Auto).read_only_hint);
    }

    #[test]
    fn annotations_serialise_in_camel_case() {
        let a = annotations("get_context_info", Tier::Auto);
        let expected = json!({
            "title": "Get context info",
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false
        });
        assert_eq!(serde_json::to_value(&a).expect("serialises"), expected);
    }

    #[test]
    fn format_parses_and_displays() {
        for (text, format) in [
            ("openai", Format::Openai),
            ("anthropic", Format::Anthropic),
            ("mcp", Format::Mcp),
        ] {
            assert_eq!(text.parse::<Format>(), Ok(format));
            assert_eq!(format.to_string(), text);
            assert_eq!(
                serde_json::to_value(format).expect("serialises"),
                json!(text)
            );
        }
    }

    #[test]
    fn format_rejects_unknown_names() {
        for bad in ["gemini", "OpenAI", " mcp", ""] {
            let err = bad.parse::<Format>().expect_err(bad);
            assert_eq!(err.value, bad);
        }
        assert_eq!(
            "x".parse::<Format>().map_err(|e| e.to_string()),
            Err(r#"unknown format "x"; use one of openai, anthropic, mcp"#.to_owned())
        );
    }
}
