//! The OpenAPI document's frame: title, the bearer scheme, the shared components.
//! The operations come from each area's `#[utoipa::path]` annotations.

use serde_json::{Map, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "loadout", description = "Each LLM agent's tools and prompt, served from a database."),
    components(schemas(
        super::error::ErrorBody,
        crate::registry::formats::Format,
        crate::registry::Tier,
        crate::registry::ToolType,
        crate::actions::ledger::State,
    )),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

/// What is added once every route is in: the name pattern on name parameters.
pub fn finish(openapi: &mut utoipa::openapi::OpenApi) {
    utoipa::Modify::modify(&NamePatterns, openapi);
}

/// The document before the routes are added.
pub fn base() -> utoipa::openapi::OpenApi {
    <ApiDoc as utoipa::OpenApi>::openapi()
}

/// Declares the `Authorization: Bearer lo_...` scheme.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Path parameters that are names (agent, tool, channel, connector) get the name
/// pattern, so clients and fuzzers know what a valid one looks like.
struct NamePatterns;

/// `crate::error::check_name`'s rule.
const NAME_PATTERN: &str = "^[a-z0-9][a-z0-9._-]{0,63}$";

impl utoipa::Modify for NamePatterns {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
        use utoipa::openapi::{RefOr, path::ParameterIn};
        let names = ["agent", "tool", "channel", "connector"];
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                for parameter in operation.parameters.iter_mut().flatten() {
                    if parameter.parameter_in == ParameterIn::Path
                        && names.contains(&parameter.name.as_str())
                    {
                        let schema = ObjectBuilder::new()
                            .schema_type(Type::String)
                            .pattern(Some(NAME_PATTERN));
                        parameter.schema = Some(RefOr::T(Schema::Object(schema.build())));
                    }
                }
            }
        }
    }
}

/// The document as served: [`finish`]ed, then shaped for client generators.
///
/// - A bare `{"type": "object"}` (tool arguments, parameters, input schemas)
///   says it is free-form (`additionalProperties: true`); generators read a bare
///   object as an empty one.
/// - A nullable object (`{"type": ["object", "null"]}`) is an `anyOf` of the
///   object and `null`, the form generators turn into an optional model.
/// - Every operation takes and answers `X-Request-Id`, loadout's request id, and
///   an `ETag` is marked required where it is declared (every 200 and 304 of the
///   ETag'd GETs carries one).
pub fn for_generators(openapi: utoipa::openapi::OpenApi) -> Value {
    let mut document = serde_json::to_value(openapi).unwrap_or(Value::Null);
    if let Some(schemas) = document.pointer_mut("/components/schemas") {
        free_form(schemas);
    }
    if let Some(paths) = document.pointer_mut("/paths") {
        free_form(paths);
        unavailable(paths);
        idempotency_keys(paths);
        too_many_failures(paths);
        retry_after(paths);
        request_ids(paths);
    }
    document
}

/// Every operation that reads the database (all but `/health` and
/// `/openapi.json`) may answer 503: the database is busy, away, or cannot write.
fn unavailable(paths: &mut Value) {
    let answer = error_answer(
        "The database is busy, unreachable or cannot write (`busy`, `unavailable`, `storage_full`); nothing was saved. Retry after `Retry-After` seconds.",
    );
    let reads = operations(paths)
        .filter(|(path, _, _)| !matches!(*path, "/health" | "/openapi.json"))
        .filter_map(|(_, _, operation)| responses(operation));
    for responses in reads {
        responses.entry("503").or_insert_with(|| answer.clone());
    }
}

/// Every operation in `paths`: its path, its method and the operation itself.
fn operations(paths: &mut Value) -> impl Iterator<Item = (&str, &str, &mut Map<String, Value>)> {
    const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];
    paths
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.iter_mut())
        .filter_map(|(path, item)| Some((path.as_str(), item.as_object_mut()?)))
        .flat_map(|(path, item)| {
            item.iter_mut()
                .filter(|(method, _)| METHODS.contains(&method.as_str()))
                .filter_map(move |(method, operation)| {
                    Some((path, method.as_str(), operation.as_object_mut()?))
                })
        })
}

/// An operation's responses.
fn responses(operation: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    operation.get_mut("responses")?.as_object_mut()
}

/// Adds `parameter` to an operation's parameters.
fn add_parameter(operation: &mut Map<String, Value>, parameter: &Value) {
    let parameters = operation
        .entry("parameters")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(parameters) = parameters.as_array_mut() {
        parameters.push(parameter.clone());
    }
}

/// A response's headers, created empty when it has none.
fn headers(response: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    response
        .entry("headers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

/// A response whose body is the one error shape.
fn error_answer(description: &str) -> Value {
    let schema = Map::from_iter([("$ref".into(), "#/components/schemas/ErrorBody".into())]);
    let media = Map::from_iter([("schema".into(), Value::Object(schema))]);
    let content = Map::from_iter([("application/json".into(), Value::Object(media))]);
    Value::Object(Map::from_iter([
        ("description".into(), description.into()),
        ("content".into(), Value::Object(content)),
    ]))
}

/// The optional `Idempotency-Key` request header.
fn idempotency_key_parameter() -> Value {
    Value::Object(Map::from_iter([
        ("name".into(), "Idempotency-Key".into()),
        ("in".into(), "header".into()),
        ("required".into(), false.into()),
        (
            "description".into(),
            "1 to 255 visible ASCII characters. A retry with the same key and request (per tenant, 24 hours) answers the first answer instead of writing again.".into(),
        ),
        (
            "schema".into(),
            Value::Object(Map::from_iter([("type".into(), "string".into())])),
        ),
    ]))
}

/// Declares `Idempotency-Key` on the API's writes (`http::idempotent`), with the
/// 409 and 422 it can answer.
fn idempotency_keys(paths: &mut Value) {
    let parameter = idempotency_key_parameter();
    let writes = operations(paths)
        .filter(|(path, _, _)| super::idempotent::takes_key(path))
        .filter(|(_, method, _)| matches!(*method, "post" | "put" | "patch" | "delete"));
    for (_, _, operation) in writes {
        add_parameter(operation, &parameter);
        if let Some(responses) = responses(operation) {
            responses
                .entry("400")
                .or_insert_with(|| error_answer("`invalid`: a malformed Idempotency-Key"));
            responses.entry("409").or_insert_with(|| {
                error_answer("`idempotent_request_pending`: a request with this Idempotency-Key was applied or is running")
            });
            responses.entry("422").or_insert_with(|| {
                error_answer(
                    "`idempotency_key_reused`: this Idempotency-Key was sent with another request, or by another API key",
                )
            });
        }
    }
}

/// Every operation that takes a key may answer 429 `too_many_failures`, with
/// `Retry-After`: its client address made too many failed authentications.
fn too_many_failures(paths: &mut Value) {
    let mut answer = error_answer(
        "`too_many_failures`: this client address presented too many unknown or revoked keys; retry after `Retry-After` seconds.",
    );
    if let Some(headers) = answer.as_object_mut().and_then(headers) {
        headers.insert("Retry-After".into(), retry_after_header());
    }
    let keyed = operations(paths)
        .filter(|(_, _, operation)| takes_key(operation))
        .filter_map(|(_, _, operation)| responses(operation));
    for responses in keyed {
        responses.entry("429").or_insert_with(|| answer.clone());
    }
}

/// Whether an operation takes a key: it keeps the document's bearer scheme, or names it.
fn takes_key(operation: &Map<String, Value>) -> bool {
    match operation.get("security").and_then(Value::as_array) {
        None => true,
        Some(schemes) => schemes.iter().any(|s| s.get("bearer").is_some()),
    }
}

/// The `Retry-After` response header: seconds.
fn retry_after_header() -> Value {
    Value::Object(Map::from_iter([
        (
            "description".into(),
            "Seconds to wait before retrying.".into(),
        ),
        (
            "schema".into(),
            Value::Object(Map::from_iter([("type".into(), "integer".into())])),
        ),
    ]))
}

/// Declares `Retry-After` (seconds) on every 503: each one carries it.
fn retry_after(paths: &mut Value) {
    let header = retry_after_header();
    let unavailable = operations(paths)
        .filter_map(|(_, _, operation)| responses(operation)?.get_mut("503")?.as_object_mut())
        .filter(|response| !response.contains_key("$ref"));
    for response in unavailable {
        if let Some(headers) = headers(response) {
            headers.insert("Retry-After".into(), header.clone());
        }
    }
}

/// Rewrites bare and nullable objects everywhere under `value`.
fn free_form(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let bare = ![
                "properties",
                "additionalProperties",
                "allOf",
                "anyOf",
                "oneOf",
                "$ref",
            ]
            .iter()
            .any(|k| map.contains_key(*k));
            match map.get("type") {
                Some(Value::String(t)) if t == "object" && bare => {
                    map.insert("additionalProperties".into(), Value::Bool(true));
                }
                Some(Value::Array(types)) if nullable_object(types) => or_null(map),
                _ => {}
            }
            map.values_mut().for_each(free_form);
        }
        Value::Array(items) => items.iter_mut().for_each(free_form),
        _ => {}
    }
}

/// `{"type": ["object", "null"], ...}` as `{"anyOf": [{"type": "object", ...}, {"type": "null"}]}`,
/// the description kept outside.
fn or_null(map: &mut Map<String, Value>) {
    let mut object = Map::from_iter([("type".into(), "object".into())]);
    for key in ["properties", "required", "additionalProperties"] {
        if let Some(v) = map.remove(key) {
            object.insert(key.into(), v);
        }
    }
    if !object.contains_key("properties") && !object.contains_key("additionalProperties") {
        object.insert("additionalProperties".into(), Value::Bool(true));
    }
    map.remove("propertyNames");
    map.remove("type");
    let null = Value::Object(Map::from_iter([("type".into(), "null".into())]));
    map.insert(
        "anyOf".into(),
        Value::Array(vec![Value::Object(object), null]),
    );
}

fn nullable_object(types: &[Value]) -> bool {
    types.len() == 2 && types.iter().any(|t| t == "object") && types.iter().any(|t| t == "null")
}

/// Declares `X-Request-Id` on every operation: sent (optional; loadout makes one
/// when absent) and answered on every response.
fn request_ids(paths: &mut Value) {
    let (parameter, header) = request_id_declarations();
    for (_, _, operation) in operations(paths) {
        add_parameter(operation, &parameter);
        let answers = responses(operation)
            .into_iter()
            .flat_map(|r| r.values_mut())
            .filter_map(Value::as_object_mut)
            .filter(|r| !r.contains_key("$ref"));
        for headers in answers.filter_map(headers) {
            headers.insert("X-Request-Id".into(), header.clone());
            if let Some(Value::Object(etag)) = headers.get_mut("ETag") {
                etag.insert("required".into(), Value::Bool(true));
            }
        }
    }
}

/// The `X-Request-Id` parameter and response header.
fn request_id_declarations() -> (Value, Value) {
    let string = || Value::Object(Map::from_iter([("type".into(), "string".into())]));
    let parameter = Map::from_iter([
        ("name".into(), "X-Request-Id".into()),
        ("in".into(), "header".into()),
        ("required".into(), false.into()),
        (
            "description".into(),
            "Your id for this request (logged when it is at most 64 visible ASCII bytes); loadout makes one when absent.".into(),
        ),
        ("schema".into(), string()),
    ]);
    let header = Map::from_iter([
        (
            "description".into(),
            "The request's id: the client's, or one loadout made.".into(),
        ),
        ("schema".into(), string()),
    ]);
    (Value::Object(parameter), Value::Object(header))
}
