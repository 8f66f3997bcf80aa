//! Agent-scoped keys: a key made with `--agent NAME` reaches that agent only; every
//! other agent answers 404, exactly as an agent that does not exist, on the prompt,
//! render, tools, loadout and tool-call routes. Unscoped agent keys reach every agent.

use crate::support::db_test;
use axum::http::{Method, StatusCode};
use loadout::auth::keys::{self, KeyError, Role};
use serde_json::{Value, json};

db_test! {
    async fn a_scoped_agent_key_reaches_its_agent_and_no_other(db) {
        let db = db.seeded().await;
        let admin = db.key("admin", Role::Operator).await;
        let open = db.key("every-agent", Role::Agent).await;
        let state = crate::support::app::state(&db, &[]).await;
        let call = |method: Method, path: String, key: String, body: Option<Value>| {
            let state = state.clone();
            async move { crate::support::api::call(&state, method, &path, &key, body).await }
        };
        let (status, body) = call(Method::POST, "/v1/agents".into(), admin.clone(),
            Some(json!({"name": "researcher", "identity": {"name": "Researcher"}, "soul": "You dig."}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, body) = call(Method::PUT, "/v1/agents/researcher/links/get_tasks".into(), admin.clone(), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let scoped = keys::create_scoped(&db.conn, "assistant-only", Role::Agent, None, Some("assistant"), chrono::Utc::now())
            .await.expect("a scoped key");

        let routes = |agent: &str| vec![
            (Method::GET, format!("/v1/agents/{agent}/prompt?channel=web"), None),
            (Method::POST, format!("/v1/agents/{agent}/prompt/render"), Some(json!({"channel": "web"}))),
            (Method::GET, format!("/v1/agents/{agent}/tools"), None),
            (Method::GET, format!("/v1/agents/{agent}/loadout?channel=web"), None),
            (Method::POST, format!("/v1/agents/{agent}/tool-calls"),
                Some(json!({"tool": "get_tasks", "arguments": {}, "conversation_id": "c"}))),
            (Method::POST, format!("/v1/agents/{agent}/outcomes"),
                Some(json!({"revision": 1, "conversation_id": "c", "outcome": "success"}))),
        ];
        for (method, path, body) in routes("assistant") {
            let (status, answer) = call(method, path.clone(), scoped.clone(), body).await;
            assert_ne!(status, StatusCode::NOT_FOUND, "its own agent: {path} {answer}");
        }
        for ((method, path, body), (_, missing_path, _)) in routes("researcher").into_iter().zip(routes("nobody")) {
            let (status, answer) = call(method.clone(), path.clone(), scoped.clone(), body.clone()).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "another agent: {path} {answer}");
            let (_, missing) = call(method.clone(), missing_path, scoped.clone(), body.clone()).await;
            let text = |v: &Value| v["error"]["message"].as_str().unwrap_or_default().replace("researcher", "X").replace("nobody", "X");
            assert_eq!((answer["error"]["code"].clone(), text(&answer)), (missing["error"]["code"].clone(), text(&missing)),
                "a scoped key cannot tell another agent from none: {path}");
            let (status, answer) = call(method, path.clone(), open.clone(), body).await;
            assert_ne!(status, StatusCode::NOT_FOUND, "an unscoped agent key reaches every agent: {path} {answer}");
        }

        let listed = keys::list(&db.conn).await.expect("list");
        let scope = |name: &str| listed.iter().find(|k| k.name == name).map(|k| k.agent.clone());
        assert_eq!((scope("assistant-only"), scope("every-agent")), (Some(Some("assistant".to_owned())), Some(None)));
        assert!(matches!(keys::create_scoped(&db.conn, "x", Role::Admin, None, Some("assistant"), chrono::Utc::now()).await, Err(KeyError::ScopeNeedsAgentRole)));
        assert!(matches!(keys::create_scoped(&db.conn, "y", Role::Agent, None, Some("nobody"), chrono::Utc::now()).await, Err(KeyError::UnknownAgent(_))));

        use migration::{Migrator, MigratorTrait};
        crate::support::migrate_down_to(&db.conn, "m20261124_000011_agent_scoped_keys").await;
        let err = Migrator::down(&db.conn, Some(1)).await.expect_err("a live scoped key blocks the down");
        assert!(err.to_string().contains("agent-scoped key"), "{err}");
        crate::support::legacy::revoke(&db.conn, "assistant-only").await;
        Migrator::down(&db.conn, Some(1)).await.expect("down once the scoped key is revoked");
    }
}

db_test! {
    async fn admins_make_list_and_revoke_keys_over_the_api_in_their_tenant(db) {
        let db = db.seeded().await;
        let admin = db.key("admin", Role::Operator).await;
        let other_admin = keys::create_for_tenant(&db.conn, "acme-admin", Role::Admin, Some("acme"), chrono::Utc::now()).await.expect("key");
        let state = crate::support::app::state(&db, &[]).await;
        let call = |method: Method, path: &str, key: &str, body: Option<Value>| {
            let (state, path, key) = (state.clone(), path.to_owned(), key.to_owned());
            async move { crate::support::api::call(&state, method, &path, &key, body).await }
        };
        let (status, created) = call(Method::POST, "/v1/keys", &admin,
            Some(json!({"name": "bot", "role": "agent", "agent": "assistant"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{created}");
        let bot = created["key"].as_str().expect("the key, once").to_owned();
        assert_eq!((created["agent"].as_str(), created["tenant"].as_str()), (Some("assistant"), Some("default")));
        let (status, _) = call(Method::GET, "/v1/agents/assistant/tools", &bot, None).await;
        assert_eq!(status, StatusCode::OK, "the scoped key reaches its agent");

        let (_, listed) = call(Method::GET, "/v1/keys", &admin, None).await;
        let bot_row = listed["keys"].as_array().into_iter().flatten().find(|k| k["name"] == "bot").cloned().unwrap_or_default();
        assert_eq!(bot_row["agent"], "assistant", "{listed}");
        assert!(!listed.to_string().contains(&bot[16..]), "a list never holds a secret");
        let (_, theirs) = call(Method::GET, "/v1/keys", &other_admin, None).await;
        assert!(!theirs.to_string().contains("\"bot\""), "another tenant's admin does not see it: {theirs}");

        for (body, code) in [
            (json!({"name": "x", "role": "admin", "agent": "assistant"}), "invalid_key"),
            (json!({"name": "y", "role": "agent", "agent": "nobody"}), "invalid_key"),
            (json!({"name": "bot", "role": "agent"}), "name_taken"),
        ] {
            let (status, answer) = call(Method::POST, "/v1/keys", &admin, Some(body.clone())).await;
            assert_eq!(answer["error"]["code"], code, "{body}: {status} {answer}");
        }

        let (status, _) = call(Method::DELETE, "/v1/keys/bot", &other_admin, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "another tenant's key is 404");
        let (status, revoked) = call(Method::DELETE, "/v1/keys/bot", &admin, None).await;
        assert_eq!(status, StatusCode::OK, "{revoked}");
        assert!(!revoked["revoked_at"].is_null(), "{revoked}");
        let (status, _) = call(Method::GET, "/v1/agents/assistant/tools", &bot, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "a revoked key stops working although it was cached");
    }
}
