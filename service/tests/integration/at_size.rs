//! Cost that does not grow with the instance (issue 36): list routes answer a page
//! at a time (never more than 1,000 items), the console's tool pages are searched and
//! paged, its overview groups the check's problems, and a write that changes one
//! agent checks and publishes that agent only, while still refusing what would make
//! `loadout check` fail.

use crate::support::{TestApp, db_test};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use entity::agent_revisions;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::{Value, json};

/// Tools `get_page0000`.. made over the API (an operator's writes).
async fn make_tools(app: &TestApp, n: usize) {
    for i in 0..n {
        let body = json!({
            "name": format!("get_page{i:04}"),
            "description": "Reads a page of records.",
            "approval_tier": "auto",
            "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false},
        });
        let (status, answer) = app
            .call(Method::POST, "/v1/tools", &app.operator, Some(body))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
    }
}

/// A console session's cookie for `key`.
async fn signed_in(app: &TestApp, key: &str) -> String {
    let sign_in = Request::post("/console/sign-in")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(format!("key={key}")))
        .expect("request");
    let signed = app.request(sign_in).await;
    signed
        .headers
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| {
            v.strip_prefix("loadout_session=")
                .map(|v| v.split(';').next().unwrap_or("").to_owned())
        })
        .expect("a session cookie")
}

/// A console page's HTML.
async fn page(app: &TestApp, cookie: &str, path: &str) -> String {
    let request = Request::get(path)
        .header(header::COOKIE, format!("loadout_session={cookie}"))
        .body(Body::empty())
        .expect("request");
    let reply = app.request(request).await;
    assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
    reply.body.as_str().expect("an HTML page").to_owned()
}

fn names(list: &Value, field: &str) -> Vec<String> {
    list[field]
        .as_array()
        .expect("a list")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

db_test! {
    async fn tools_and_agents_are_listed_a_page_at_a_time(db) {
        let app = TestApp::builder(db).build().await;
        make_tools(&app, 5).await;
        // Every page in turn: each name once, in order, and the last page says so.
        let mut seen = Vec::new();
        let mut path = "/v1/tools?limit=7".to_owned();
        loop {
            let (status, page) = app.call(Method::GET, &path, &app.operator, None).await;
            assert_eq!(status, StatusCode::OK, "{page}");
            let got = names(&page, "tools");
            assert!(got.len() <= 7, "{got:?}");
            seen.extend(got);
            match page["next_after"].as_str() {
                Some(after) => path = format!("/v1/tools?limit=7&after={after}"),
                None => break,
            }
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(seen, sorted, "by name, each once");
        assert_eq!(seen.len(), 28, "the 23 seeded tools and five more");
        // Without a limit, a page of up to 100; a search narrows by name.
        let (_, all) = app.call(Method::GET, "/v1/tools", &app.operator, None).await;
        assert_eq!(names(&all, "tools").len(), 28);
        assert!(all["next_after"].is_null(), "{all}");
        let (_, found) = app.call(Method::GET, "/v1/tools?search=PAGE000", &app.operator, None).await;
        assert_eq!(names(&found, "tools"), ["get_page0000", "get_page0001", "get_page0002", "get_page0003", "get_page0004"]);
        // `_` is a name's character, not a wildcard.
        let (_, none) = app.call(Method::GET, "/v1/tools?search=get%25page", &app.operator, None).await;
        assert_eq!(names(&none, "tools"), Vec::<String>::new());
        for bad in ["limit=0", "limit=1001", "limit=x"] {
            let (status, answer) = app.call(Method::GET, &format!("/v1/tools?{bad}"), &app.operator, None).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {answer}");
        }

        for name in ["alpha", "beta", "gamma"] {
            let body = json!({"name": name, "identity": {"display_name": name}, "soul": "Helpful."});
            let (status, answer) = app.call(Method::POST, "/v1/agents", &app.operator, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{answer}");
        }
        let (_, first) = app.call(Method::GET, "/v1/agents?limit=2", &app.operator, None).await;
        assert_eq!(names(&first, "agents"), ["alpha", "assistant"]);
        assert_eq!(first["next_after"], "assistant");
        let (_, second) = app.call(Method::GET, "/v1/agents?limit=2&after=assistant", &app.operator, None).await;
        assert_eq!(names(&second, "agents"), ["beta", "gamma"]);
        assert!(second["next_after"].is_null(), "{second}");
        let (status, _) = app.call(Method::GET, "/v1/agents?limit=5000", &app.operator, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}

db_test! {
    async fn versions_and_label_history_are_paged(db) {
        let app = TestApp::builder(db).build().await;
        for i in 0..4 {
            let body = json!({"template": format!("$identity\n\n$soul\n\nVersion {i}.\n")});
            let (status, answer) = app
                .call(Method::PUT, "/v1/agents/assistant/prompt-template", &app.operator, Some(body))
                .await;
            assert_eq!(status, StatusCode::OK, "{answer}");
        }
        let versions = |v: &Value| -> Vec<i64> {
            v["versions"].as_array().expect("versions").iter().map(|v| v["version"].as_i64().expect("n")).collect()
        };
        let (_, first) = app.call(Method::GET, "/v1/agents/assistant/prompt-template/versions?limit=2", &app.operator, None).await;
        assert_eq!(versions(&first), [1, 2], "{first}");
        assert_eq!(first["next_after"], 2);
        let (_, rest) = app.call(Method::GET, "/v1/agents/assistant/prompt-template/versions?limit=10&after=2", &app.operator, None).await;
        assert_eq!(versions(&rest), [3, 4, 5]);
        assert!(rest["next_after"].is_null());

        // `latest` moved on every save: newest first, a page at a time, by move id.
        let path = "/v1/agents/assistant/labels/latest/history";
        let (_, page) = app.call(Method::GET, &format!("{path}?limit=2"), &app.operator, None).await;
        let moves = page["moves"].as_array().expect("moves");
        assert_eq!(moves.len(), 2, "{page}");
        assert!(moves[0]["id"].as_i64() > moves[1]["id"].as_i64(), "{page}");
        let before = page["next_before"].as_i64().expect("more moves");
        assert_eq!(Some(before), moves[1]["id"].as_i64());
        let (_, older) = app.call(Method::GET, &format!("{path}?limit=1000&before={before}"), &app.operator, None).await;
        let older = older["moves"].as_array().expect("moves");
        assert_eq!(older.len(), 3, "five moves in all: {older:?}");
        assert!(older.iter().all(|m| m["id"].as_i64() < Some(before)));
        let (status, _) = app.call(Method::GET, "/v1/agents/assistant/labels/nope/history", &app.operator, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

db_test! {
    async fn a_write_to_one_agent_checks_and_publishes_that_agent_only(db) {
        let app = TestApp::builder(db).build().await;
        for name in ["alpha", "beta"] {
            let body = json!({"name": name, "identity": {"display_name": name}, "soul": "Helpful."});
            let (status, answer) = app.call(Method::POST, "/v1/agents", &app.operator, Some(body)).await;
            assert_eq!(status, StatusCode::CREATED, "{answer}");
        }
        let revisions = |name: &'static str| {
            let conn = app.db.conn.clone();
            async move {
                let agent = entity::agent_configurations::Entity::find()
                    .filter(entity::agent_configurations::Column::Name.eq(name))
                    .one(&conn).await.expect("read").expect("agent");
                agent_revisions::Entity::find()
                    .filter(agent_revisions::Column::AgentId.eq(agent.id))
                    .count(&conn).await.expect("count")
            }
        };
        let (alpha, beta) = (revisions("alpha").await, revisions("beta").await);
        let body = json!({"soul": "Helpful, and brief."});
        let (status, answer) = app.call(Method::PATCH, "/v1/agents/alpha", &app.operator, Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_eq!(revisions("alpha").await, alpha + 1, "the agent written gets its revision");
        assert_eq!(revisions("beta").await, beta, "another agent is not published again");

        // What the check refuses is still refused on the scoped path: a soul that
        // names a tool switched off (an error), and a template with lint errors.
        make_tools(&app, 1).await;
        let off = json!({"is_active": false});
        let (status, answer) = app.call(Method::PATCH, "/v1/tools/get_page0000", &app.operator, Some(off)).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let body = json!({"soul": "Call get_page0000 first."});
        let (status, answer) = app.call(Method::PATCH, "/v1/agents/beta", &app.operator, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["error"]["code"], "registry_check_failed", "{answer}");
        assert_eq!(revisions("beta").await, beta, "a refused write publishes nothing");
        // A new agent with that soul is refused too (it had no errors before it existed).
        let body = json!({"name": "gamma", "identity": {"display_name": "g"}, "soul": "Call get_page0000 first."});
        let (status, answer) = app.call(Method::POST, "/v1/agents", &app.operator, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        let (status, _) = app.call(Method::GET, "/v1/agents/gamma", &app.operator, None).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "nothing of it was kept");
    }
}

db_test! {
    async fn console_tool_pages_are_searched_and_paged_and_the_overview_groups_problems(db) {
        let app = TestApp::builder(db).build().await;
        make_tools(&app, 3).await;
        let session = signed_in(&app, &app.operator).await;
        let html = page(&app, &session, "/console/tools?q=page000").await;
        assert!(html.contains("get_page0001"), "{html}");
        assert!(!html.contains("href=\"/console/tools/get_tasks\""), "the search narrows the list");
        let html = page(&app, &session, "/console/agents/assistant/tools?q=page0002").await;
        assert!(html.contains("Linked"), "{html}");
        assert!(html.contains("aria-label=\"Link get_page0002\""), "{html}");
        assert!(!html.contains("aria-label=\"Link get_page0001\""), "{html}");
        assert!(html.contains("aria-label=\"Unlink get_tasks\""), "the linked tools are always shown");
        // Three new api tools without a connector: one warning row, not three.
        let overview = page(&app, &session, "/console/").await;
        assert_eq!(overview.matches("<code>not_connected</code>").count(), 1, "{overview}");
        assert!(overview.contains("more") || overview.contains("like it"), "{overview}");
    }
}
