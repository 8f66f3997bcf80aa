//! `GET /v1/agents/{agent}/revisions/{from}/diff/{to}` (issue 25, item 5): what
//! changed between two revisions, on both backends and against the OpenAPI document
//! (every answer here is contract-checked by the harness).

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

async fn write(app: &TestApp, method: Method, path: &str, body: Value) {
    let (status, answer) = app.call(method, path, &app.operator, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {answer}");
}

async fn diff(app: &TestApp, from: i64, to: i64) -> (StatusCode, Value) {
    let path = format!("/v1/agents/assistant/revisions/{from}/diff/{to}");
    app.call(Method::GET, &path, &app.operator, None).await
}

db_test! {
    async fn a_soul_edit_is_a_line_diff_and_nothing_else_changed(db) {
        let app = TestApp::new(db).await;
        let revision = app.call(Method::GET, "/v1/agents/assistant/revisions/1", &app.operator, None).await.1;
        let soul = revision["content"]["soul"].as_str().expect("soul").to_owned();
        write(&app, Method::PATCH, "/v1/agents/assistant", json!({"soul": format!("{soul}\nAlways be brief.")})).await;

        let (status, body) = diff(&app, 1, 2).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!((body["agent"].as_str(), body["from"].as_i64(), body["to"].as_i64()), (Some("assistant"), Some(1), Some(2)));
        let d = &body["diff"];
        assert_eq!(d["identical"], false);
        assert!(d["soul"]["inserted"].as_u64() >= Some(1), "{d}");
        let inserted: Vec<&str> = d["soul"]["hunks"][0]["lines"].as_array().expect("lines").iter()
            .filter(|l| l["kind"] == "insert").map(|l| l["text"].as_str().expect("text")).collect();
        assert_eq!(inserted.last(), Some(&"Always be brief."));
        assert_eq!(d["template"], Value::Null);
        assert_eq!(d["identity"], json!([]));
        assert_eq!(d["tools"], json!({"added": [], "removed": [], "changed": []}));
    }
}

db_test! {
    async fn a_raised_tier_and_a_new_description_are_a_changed_tool_with_before_and_after(db) {
        let app = TestApp::new(db).await;
        write(&app, Method::PATCH, "/v1/tools/get_tasks", json!({
            "approval_tier": "requires_approval", "description": "Lists the user's tasks, newest first."
        })).await;

        let (status, body) = diff(&app, 1, 2).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let changed = &body["diff"]["tools"]["changed"];
        assert_eq!(changed.as_array().map(Vec::len), Some(1), "{changed}");
        assert_eq!(changed[0]["name"], "get_tasks");
        let fields: Vec<&str> = changed[0]["fields"].as_array().expect("fields").iter()
            .map(|f| f["field"].as_str().expect("field")).collect();
        assert_eq!(fields, ["description", "approval_tier"]);
        assert_eq!(changed[0]["fields"][1]["before"], "auto");
        assert_eq!(changed[0]["fields"][1]["after"], "requires_approval");
        assert_eq!(body["diff"]["soul"], Value::Null);

        // Backwards, the same change undone.
        let (_, back) = diff(&app, 2, 1).await;
        assert_eq!(back["diff"]["tools"]["changed"][0]["fields"][1]["after"], "auto");
    }
}

db_test! {
    async fn a_detached_tool_is_removed_and_a_revision_against_itself_is_identical(db) {
        let app = TestApp::new(db).await;
        let (status, body) = app.call(Method::DELETE, "/v1/agents/assistant/links/get_tasks", &app.operator, None).await;
        assert!(status.is_success(), "{status}: {body}");

        let (_, body) = diff(&app, 1, 2).await;
        let removed: Vec<&str> = body["diff"]["tools"]["removed"].as_array().expect("removed").iter()
            .map(|t| t["name"].as_str().expect("name")).collect();
        assert_eq!(removed, ["get_tasks"]);
        assert_eq!(body["diff"]["tools"]["added"], json!([]));

        let (_, same) = diff(&app, 2, 2).await;
        assert_eq!(same["diff"]["identical"], true);
    }
}

db_test! {
    async fn a_revision_the_agent_does_not_have_is_404(db) {
        let app = TestApp::new(db).await;
        let (status, body) = diff(&app, 1, 9).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        let (status, _) = app.call(Method::GET, "/v1/agents/nobody/revisions/1/diff/1", &app.operator, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
