//! Who may change what every tenant's agents run (issue 23, item 1 and the key
//! findings). Configuration is shared by all tenants, so only an operator writes
//! it; a tenant's admin manages its own tenant. Every documented route is driven
//! with a tenant admin and an operator, so a new configuration route cannot be
//! left open by mistake.

use std::time::Duration;

use crate::support::db_test;
use axum::http::{Method, StatusCode};
use loadout::app::AppState;
use loadout::auth::keys::{self, Role};
use serde_json::{Value, json};

async fn state_of(db: &crate::support::TestDb) -> AppState {
    crate::support::app::state(db, &[]).await
}

async fn call(
    state: &AppState,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    crate::support::api::call(state, method, path, key, body).await
}

/// What only an operator may do: every write under agents, tools and channels but
/// the tenant's own (users' instructions, renders, previews, tool calls, outcomes), every
/// connector route, and the instance's metrics. Signing off a change request (a
/// label's move) is refused to a tenant's admin too (running its checks is not: it
/// reads the request and decides nothing), and so is everything about
/// sign-off power: a signer's operator or approver key decides it. Applying a configuration is a configuration
/// write; planning one only reads.
fn operator_only(method: &str, path: &str) -> bool {
    let tenant_data = [
        "/instructions",
        "/prompt/render",
        "/prompt/preview",
        "/tool-calls",
        "/outcomes",
        "/policy/validate",
        "/snapshots",
        "/eval-runs",
    ];
    let configuration = ["/v1/agents", "/v1/tools", "/v1/channels"];
    let write = method != "get";
    (write
        && configuration.iter().any(|p| path.starts_with(p))
        && !tenant_data.iter().any(|t| path.ends_with(t)))
        || (write && path.starts_with("/v1/change-requests") && !path.ends_with("/checks"))
        || path.starts_with("/v1/signer-grants")
        || path.ends_with("/signer-grants")
        || path.starts_with("/v1/connectors")
        || path.starts_with("/v1/tool-changes")
        || (write && path.starts_with("/v1/model-connections"))
        || path.ends_with("/connector")
        || (write && path == "/v1/config/apply")
        || path == "/metrics"
}

/// A concrete path for a documented template.
fn concrete(template: &str) -> String {
    template
        .replace("{agent}", "assistant")
        .replace("{tool}", "get_tasks")
        .replace("{channel}", "web")
        .replace("{connector}", "nowhere")
        .replace("{version}", "1")
        .replace("{number}", "1")
        .replace("{label}", "production")
        .replace("{user_id}", "alice")
        .replace("{group}", "ops")
        .replace("{id}", "1")
        .replace("{conversation_id}", "c1")
        .replace("{key}", "nobody")
}

/// The shared configuration's rows (users' instructions, tenant data, left out).
async fn configuration(db: &crate::support::TestDb) -> Value {
    let mut rows = crate::support::dump::rows(db).await;
    rows.as_object_mut()
        .expect("tables")
        .remove("user_agent_prompt_customizations");
    rows
}

db_test! {
    async fn every_configuration_route_refuses_a_tenant_admin_and_admits_an_operator(db) {
        let db = db.seeded().await;
        let operator = db.key("operator", Role::Operator).await;
        let tenant_admin = keys::create_for_tenant(&db.conn, "b-admin", Role::Admin, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        let state = state_of(&db).await;
        let document = crate::support::api::send(&state, Method::GET, "/openapi.json", None, None, None).await.body;
        let paths = document["paths"].as_object().expect("paths");

        let before = configuration(&db).await;
        let mut refused = Vec::new();
        let mut operations = Vec::new();
        for (template, item) in paths {
            for method in ["get", "post", "put", "patch", "delete"] {
                // Outcomes take agent keys only (`rollout_guard`): no admin or operator.
                let agents_only = method == "post" && template.ends_with("/outcomes");
                if item.get(method).is_none() || template == "/mcp" || agents_only {
                    continue;
                }
                let path = concrete(template);
                let http_method: Method = method.to_uppercase().parse().expect("method");
                let body = (method != "get" && method != "delete").then(|| json!({}));
                let (status, answer) = call(&state, http_method, &path, &tenant_admin, body).await;
                if status == StatusCode::FORBIDDEN {
                    assert!(answer["error"]["message"].as_str().unwrap_or("").contains("operator key"), "{method} {path}: {answer}");
                    refused.push(format!("{method} {template}"));
                }
                operations.push((method, template.clone(), path));
            }
        }
        let expected: Vec<String> = operations.iter()
            .filter(|(method, template, _)| operator_only(method, template))
            .map(|(method, template, _)| format!("{method} {template}"))
            .collect();
        assert!(expected.len() >= 20, "the configuration routes were found: {expected:?}");
        assert_eq!(refused, expected, "a tenant admin is refused exactly the configuration routes");
        crate::support::dump::assert_same(&configuration(&db).await, &before);

        // The operator passes the role check on each of them (what follows is the
        // route's own answer to an empty body: 2xx, 400, 404 or 422).
        for (method, template, path) in operations.iter().filter(|(m, t, _)| operator_only(m, t)) {
            let http_method: Method = method.to_uppercase().parse().expect("method");
            let body = (*method != "get" && *method != "delete").then(|| json!({}));
            let (status, answer) = call(&state, http_method, path, &operator, body).await;
            assert!(![StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&status), "{method} {template}: {status} {answer}");
        }
    }
}

db_test! {
    async fn a_tenant_admin_cannot_take_approval_off_every_tenants_deletes(db) {
        let db = db.seeded().await;
        let operator = db.key("operator", Role::Operator).await;
        let tenant_admin = keys::create_for_tenant(&db.conn, "b-admin", Role::Admin, Some("tenantb"), chrono::Utc::now()).await.expect("key");
        let state = state_of(&db).await;
        let auto = Some(json!({"approval_tier": "auto"}));
        let (status, answer) = call(&state, Method::PATCH, "/v1/tools/delete_tasks", &tenant_admin, auto.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
        let (_, tool) = call(&state, Method::GET, "/v1/tools/delete_tasks", &tenant_admin, None).await;
        assert_eq!(tool["approval_tier"], "requires_approval", "a tenant admin still reads the tool: {tool}");

        // Its own tenant's data stays its own to manage.
        let (status, answer) = call(&state, Method::PUT, "/v1/agents/assistant/users/alice/instructions", &tenant_admin,
            Some(json!({"instructions": "Short answers."}))).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let (status, answer) = call(&state, Method::GET, "/v1/keys", &tenant_admin, None).await;
        assert_eq!(status, StatusCode::OK, "{answer}");

        let (status, answer) = call(&state, Method::PATCH, "/v1/tools/delete_tasks", &operator, auto).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(answer["approval_tier"], "auto");
    }
}

db_test! {
    async fn only_an_operator_makes_or_revokes_operators_and_names_are_unique_per_tenant(db) {
        let db = db.seeded().await;
        let operator = db.key("operator", Role::Operator).await;
        let state = state_of(&db).await;
        // An operator gives a tenant its first admin.
        let (status, created) = call(&state, Method::POST, "/v1/keys", &operator,
            Some(json!({"name": "ci", "role": "admin", "tenant": "acme"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        assert_eq!(created["tenant"], "acme");
        let acme_admin = created["key"].as_str().expect("key").to_owned();

        // The same name in another tenant is no conflict, and tells nothing.
        let (status, answer) = call(&state, Method::POST, "/v1/keys", &operator,
            Some(json!({"name": "ci", "role": "admin", "tenant": "globex"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        let (status, answer) = call(&state, Method::POST, "/v1/keys", &acme_admin,
            Some(json!({"name": "operator", "role": "agent"}))).await;
        assert_eq!(status, StatusCode::CREATED, "the operator's name is free in acme: {answer}");
        let (status, answer) = call(&state, Method::POST, "/v1/keys", &acme_admin,
            Some(json!({"name": "ci", "role": "agent"}))).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::CONFLICT, Some("name_taken")), "{answer}");

        // A tenant admin cannot make itself an operator, reach another tenant, or
        // revoke the operator.
        for body in [
            json!({"name": "up", "role": "operator"}),
            json!({"name": "there", "role": "admin", "tenant": "globex"}),
        ] {
            let (status, answer) = call(&state, Method::POST, "/v1/keys", &acme_admin, Some(body.clone())).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{body}: {answer}");
        }
        let default_admin = keys::create_for_tenant(&db.conn, "d-admin", Role::Admin, None, chrono::Utc::now()).await.expect("key");
        let (status, answer) = call(&state, Method::DELETE, "/v1/keys/operator", &default_admin, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
        let (status, answer) = call(&state, Method::GET, "/v1/agents/assistant/tools", &operator, None).await;
        assert_eq!(status, StatusCode::OK, "the operator still works: {answer}");
        let (status, answer) = call(&state, Method::POST, "/v1/keys", &operator,
            Some(json!({"name": "op2", "role": "operator", "tenant": "acme"}))).await;
        assert_eq!((status, answer["error"]["code"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_key")), "operators have no tenant: {answer}");

        // The operator revokes in the tenant it names; the other tenant's `ci` lives on.
        let (status, answer) = call(&state, Method::DELETE, "/v1/keys/ci?tenant=acme", &operator, None).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let (_, globex) = call(&state, Method::GET, "/v1/keys?tenant=globex", &operator, None).await;
        assert!(globex["keys"][0]["revoked_at"].is_null(), "{globex}");
        let (status, _) = call(&state, Method::GET, "/v1/keys?tenant=globex", &default_admin, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an admin reads its own tenant's keys only");
    }
}

db_test! {
    async fn the_upgrade_makes_default_admins_operators_and_other_tenants_admins_stay_admins(db) {
        use migration::{Migrator, MigratorTrait};
        let db = db.seeded().await;
        crate::support::migrate_down_to(&db.conn, "m20261125_000013_idempotency_records").await;
        let old_admin = crate::support::legacy::key(&db.conn, "admin", "admin", None).await;
        let named_default = crate::support::legacy::key(&db.conn, "admin-2", "admin", None).await;
        let acme_admin = crate::support::legacy::key(&db.conn, "acme-admin", "admin", Some("acme")).await;
        Migrator::up(&db.conn, None).await.expect("up");

        let roles: Vec<(String, String, String)> = keys::list(&db.conn).await.expect("list").into_iter()
            .map(|k| (k.name, k.role, k.tenant)).collect();
        assert_eq!(roles, [
            ("admin".into(), "operator".into(), "default".into()),
            ("admin-2".into(), "operator".into(), "default".into()),
            ("acme-admin".into(), "admin".into(), "acme".into()),
        ]);
        let state = state_of(&db).await;
        let soul = Some(json!({"soul": "Upgraded."}));
        for key in [&old_admin, &named_default] {
            let (status, answer) = call(&state, Method::PATCH, "/v1/agents/assistant", key, soul.clone()).await;
            assert_eq!(status, StatusCode::OK, "nobody who configured the instance is locked out: {answer}");
        }
        let (status, _) = call(&state, Method::PATCH, "/v1/agents/assistant", &acme_admin, soul).await;
        assert_eq!(status, StatusCode::FORBIDDEN);

        // Down refuses while two tenants share a key name, and works once they do not.
        keys::create_for_tenant(&db.conn, "admin", Role::Agent, Some("acme"), chrono::Utc::now()).await.expect("the name is free in acme");
        crate::support::migrate_down_to(&db.conn, "m20261125_000015_key_names_per_tenant").await;
        let err = Migrator::down(&db.conn, Some(1)).await.expect_err("a shared name blocks the down");
        assert!(err.to_string().contains("\"admin\""), "{err}");
        crate::support::sea_orm::ConnectionTrait::execute_unprepared(&db.conn,
            "UPDATE api_keys SET name = 'acme-agent', revoked_at = updated_at WHERE tenant_id = 'acme' AND name = 'admin'").await.expect("revoke and rename");
        crate::support::migrate_down_to(&db.conn, "m20261125_000013_idempotency_records").await;
        let roles: Vec<String> = crate::support::legacy::keys(&db.conn).await.into_iter().map(|(_, role, _)| role).collect();
        assert!(!roles.contains(&"operator".to_owned()), "{roles:?}");
        Migrator::up(&db.conn, None).await.expect("up again");
    }
}

db_test! {
    async fn cached_keys_fail_closed_once_the_generation_has_not_been_read_for_the_key_trust(db) {
        let db = db.seeded().await;
        let agent = db.key("agent", Role::Agent).await;
        let state = crate::support::app::state(&db, &["--key-trust-ms=300"]).await;
        let connection = state.db.clone();
        let path = "/v1/agents/assistant/prompt?channel=web";
        let (status, answer) = call(&state, Method::GET, path, &agent, None).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        state.generation.observe(state.generation.current());
        // The database goes away (a revocation now could not be heard of).
        connection.close_by_ref().await.expect("close");
        let (status, answer) = call(&state, Method::GET, path, &agent, None).await;
        assert_eq!(status, StatusCode::OK, "within the trust the cached key still serves: {answer}");
        tokio::time::sleep(Duration::from_millis(400)).await;
        let (status, answer) = call(&state, Method::GET, path, &agent, None).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "past it the key is not taken on trust: {answer}");
    }
}
