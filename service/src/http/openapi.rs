//! The OpenAPI document's frame: title, the bearer scheme, the shared components.
//! The operations come from each area's `#[utoipa::path]` annotations.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "loadout", description = "Each LLM agent's tools and prompt, served from a database."),
    components(schemas(super::error::ErrorBody)),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
struct ApiDoc;

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
