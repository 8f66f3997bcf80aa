//! The Langfuse-compatible prompt read API (`/api/public/v2/prompts/{name}`): who may
//! read what, with which key, and what is refused in Langfuse's error shape. The real
//! Langfuse SDKs reading it are peers (tests/peers/langfuse).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use base64::Engine;
use loadout::auth::keys::{self, Role};
use serde_json::json;

use crate::support::api::Reply;
use crate::support::{TestApp, db_test};

fn basic(secret: &str) -> String {
    let pair = format!("pk-lf-anything:{secret}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

async fn get(app: &TestApp, path: &str, authorization: Option<&str>) -> Reply {
    let mut request = Request::builder().method(Method::GET).uri(path);
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    app.request(request.body(Body::empty()).expect("request"))
        .await
}

fn refused(reply: &Reply, status: StatusCode, error: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["error"], error, "{}", reply.body);
}

db_test! {
    async fn a_langfuse_client_reads_what_its_key_reaches_and_nothing_else(db) {
        let app = TestApp::new(db.seeded().await).await;
        let operator = app.key("lf-operator", Role::Operator).await;
        let (status, body) = app.call(Method::POST, "/v1/agents", &operator,
            Some(json!({"name": "researcher", "identity": {"name": "Researcher"}, "soul": "You dig."}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let scoped = keys::create_scoped(&app.db.conn, "lf-assistant", Role::Agent, None, Some("assistant"), chrono::Utc::now())
            .await.expect("a scoped key");
        let approver = app.key("lf-approver", Role::Approver).await;

        // The rendered prompt is REST's, with Basic auth or a Bearer key, encoded slash or not.
        let rest = app.get("/v1/agents/assistant/prompt?channel=web").await;
        for (path, auth) in [
            ("/api/public/v2/prompts/assistant%2Fweb", basic(&scoped)),
            ("/api/public/v2/prompts/assistant/web?label=production", format!("Bearer {scoped}")),
        ] {
            let got = get(&app, path, Some(&auth)).await;
            assert_eq!(got.status, StatusCode::OK, "{path}: {}", got.body);
            assert_eq!(got.body["version"], rest.body["provenance"]["revision"]);
            assert_eq!(got.body["prompt"], rest.body["text"], "{path}");
            assert_eq!(got.body["labels"], json!(["latest", "production"]));
        }
        // The template in Langfuse's syntax.
        let template = get(&app, "/api/public/v2/prompts/assistant?version=1", Some(&basic(&scoped))).await;
        assert_eq!(template.status, StatusCode::OK, "{}", template.body);
        assert!(template.body["prompt"].as_str().unwrap_or_default().starts_with("{{identity}}"), "{}", template.body);

        // Another agent is exactly an agent that does not exist, for a scoped key.
        let other = get(&app, "/api/public/v2/prompts/researcher%2Fweb", Some(&basic(&scoped))).await;
        let none = get(&app, "/api/public/v2/prompts/nobody%2Fweb", Some(&basic(&scoped))).await;
        refused(&other, StatusCode::NOT_FOUND, "LangfuseNotFoundError");
        let text = |r: &Reply| r.body["message"].as_str().unwrap_or_default().replace("researcher", "X").replace("nobody", "X");
        assert_eq!(text(&other), text(&none));
        // The operator reaches it; it renders the built-in assembly, so it has no template.
        let researcher = get(&app, "/api/public/v2/prompts/researcher%2Fweb", Some(&basic(&operator))).await;
        assert_eq!(researcher.status, StatusCode::OK, "{}", researcher.body);
        let builtin = get(&app, "/api/public/v2/prompts/researcher", Some(&basic(&operator))).await;
        refused(&builtin, StatusCode::NOT_FOUND, "LangfuseNotFoundError");
        assert!(text(&builtin).contains("built-in assembly"), "{}", builtin.body);

        // Keys: none, a wrong one, a revoked one, one of a role that reads no prompts.
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", None).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some(&basic("lo_wrong"))).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some("Basic !!not-base64")).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some(&basic(&approver))).await, StatusCode::FORBIDDEN, "ForbiddenError");
        keys::revoke_now(&app.db.conn, "default", "lf-assistant", chrono::Utc::now()).await.expect("revoke");
        app.publish().await;
        refused(&get(&app, "/api/public/v2/prompts/assistant%2Fweb", Some(&basic(&scoped))).await, StatusCode::UNAUTHORIZED, "UnauthorizedError");

        // What loadout does not have, or cannot take.
        let reader = basic(&operator);
        for (path, status, error) in [
            ("/api/public/v2/prompts/assistant%2Fnope", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/assistant%2Fweb?version=999", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/assistant%2Fweb?label=nope", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/assistant%2Fweb?version=two", StatusCode::BAD_REQUEST, "InvalidRequestError"),
            ("/api/public/v2/prompts/Team%20Bot", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts/a%2Fb%2Fc", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/traces", StatusCode::NOT_FOUND, "LangfuseNotFoundError"),
            ("/api/public/v2/prompts", StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowedError"),
        ] {
            refused(&get(&app, path, Some(&reader)).await, status, error);
        }
        let write = Request::builder().method(Method::POST).uri("/api/public/v2/prompts")
            .header(header::AUTHORIZATION, &reader).header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"name":"x","prompt":"y","type":"text"}"#)).expect("request");
        let reply = app.request(write).await;
        refused(&reply, StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowedError");
        assert!(reply.body["message"].as_str().unwrap_or_default().contains("reads prompts only"), "{}", reply.body);
    }
}
