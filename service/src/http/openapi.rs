//! The OpenAPI document's frame: title, the bearer scheme, the shared components.
//! The operations come from each area's `#[utoipa::path]` annotations.

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
