//! OpenFeature's remote evaluation protocol (issue 53, item 2), in process: each
//! flag's value is what the REST fetch serves the same user (the oracle), a
//! rollout splits on `targetingKey` as the fetch does, errors are OFREP's, the
//! bulk answer has its ETag and points at the change stream, and one tenant's
//! users' instructions never reach another tenant's evaluation. The official
//! providers are driven against a real server in `peers.rs`.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use loadout::auth::keys::{self, Role};
use serde_json::{Value, json};

use crate::support::api::Reply;
use crate::support::{TestApp, db_test};

fn post(path: &str, key: Option<&str>, body: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::post(path).header("content-type", "application/json");
    if let Some(key) = key {
        request = request.header("authorization", format!("Bearer {key}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::from(body.to_owned())).expect("request")
}

async fn evaluate(app: &TestApp, key: &str, flag: &str, context: Value) -> Reply {
    let body = json!({"context": context}).to_string();
    app.request(post(
        &format!("/ofrep/v1/evaluate/flags/{flag}"),
        Some(key),
        &body,
        &[],
    ))
    .await
}

async fn ok(app: &TestApp, method: Method, path: &str, key: &str, body: Option<Value>) -> Value {
    let (status, answer) = app.call(method.clone(), path, key, body).await;
    assert!(status.is_success(), "{method} {path}: {status} {answer}");
    answer
}

db_test! {
    async fn each_flag_is_what_the_fetch_serves_the_same_user(db) {
        let app = TestApp::new(db.seeded().await).await;
        let prompt = evaluate(&app, &app.agent, "assistant:prompt:web", json!({"targetingKey": "alice", "tz": "Europe/Berlin"})).await;
        assert_eq!(prompt.status, StatusCode::OK, "{:?}", prompt.body);
        let fetched = app.get("/v1/agents/assistant/prompt?channel=web&user_id=alice&tz=Europe/Berlin").await;
        assert_eq!(prompt.body["value"], fetched.body["text"]);
        assert_eq!(prompt.body["reason"], "STATIC");
        assert_eq!(prompt.body["variant"], "1");
        assert_eq!(prompt.body["metadata"], json!({"agent": "assistant", "label": "production", "revision": 1}));

        let tools = evaluate(&app, &app.agent, "assistant:tools:anthropic", json!({"targetingKey": "alice"})).await;
        let fetched = app.get("/v1/agents/assistant/tools?format=anthropic&user_id=alice").await;
        assert_eq!(tools.body["value"], fetched.body);

        // No model settings saved: the code default (DISABLED, no value).
        let model = evaluate(&app, &app.agent, "assistant:model:web", json!({})).await;
        assert_eq!(model.status, StatusCode::OK, "{:?}", model.body);
        assert_eq!(model.body["reason"], "DISABLED");
        assert!(model.body.get("value").is_none(), "{:?}", model.body);
        ok(&app, Method::PUT, "/v1/agents/assistant/model", &app.operator,
            Some(json!({"model": "gpt-test", "parameters": {"temperature": 0.25}}))).await;
        let model = evaluate(&app, &app.agent, "assistant:model:web", json!({})).await;
        let fetched = app.get("/v1/agents/assistant/loadout?channel=web").await;
        assert_eq!(model.body["value"], fetched.body["model"], "{:?}", model.body);
        assert_eq!(model.body["value"]["model"], "gpt-test");

        // A label the agent lacks: DISABLED, the provider serves its default.
        let staging = evaluate(&app, &app.agent, "assistant:prompt:web", json!({"label": "staging"})).await;
        assert_eq!(staging.status, StatusCode::OK);
        assert_eq!(staging.body["reason"], "DISABLED");
        assert_eq!(staging.body["variant"], "disabled");
    }
}

db_test! {
    async fn a_rollout_splits_on_the_targeting_key_as_the_fetch_does(db) {
        let app = TestApp::new(db.seeded().await).await;
        ok(&app, Method::PATCH, "/v1/agents/assistant", &app.operator, Some(json!({"soul": "The candidate soul."}))).await;
        ok(&app, Method::PUT, "/v1/agents/assistant/labels/production", &app.operator, Some(json!({"revision": 1}))).await;
        let body = json!({"candidate": 2, "percent": 50.0, "reason": "try it"});
        let (status, answer) = app.call(Method::POST, "/v1/agents/assistant/labels/production/rollout", &app.operator, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        let mut sides = std::collections::BTreeSet::new();
        for i in 0..24 {
            let user = format!("user-{i}");
            let flag = evaluate(&app, &app.agent, "assistant:prompt:web", json!({"targetingKey": user})).await;
            let fetched = app.get(&format!("/v1/agents/assistant/prompt?channel=web&user_id={user}")).await;
            assert_eq!(flag.body["reason"], "SPLIT");
            assert_eq!(flag.body["variant"], fetched.headers["loadout-revision"].to_str().unwrap(), "{user}");
            assert_eq!(flag.body["value"], fetched.body["text"], "{user}");
            sides.insert(flag.body["variant"].as_str().unwrap().to_owned());
        }
        assert_eq!(sides.len(), 2, "24 users at 50% land on both sides: {sides:?}");
        // Without a targeting key: the base, as the fetch without a subject.
        let anonymous = evaluate(&app, &app.agent, "assistant:prompt:web", json!({})).await;
        assert_eq!(anonymous.body["variant"], "1");
        assert_eq!(anonymous.body["reason"], "STATIC");
    }
}

db_test! {
    async fn errors_are_ofreps_and_a_key_reaches_only_what_it_may(db) {
        let app = TestApp::new(db.seeded().await).await;
        let unknown = evaluate(&app, &app.agent, "nobody:prompt:web", json!({})).await;
        assert_eq!(unknown.status, StatusCode::NOT_FOUND);
        assert_eq!(unknown.body, json!({"key": "nobody:prompt:web", "errorCode": "FLAG_NOT_FOUND", "errorDetails": unknown.body["errorDetails"]}));
        let malformed = evaluate(&app, &app.agent, "assistant:prompt", json!({})).await;
        assert_eq!(malformed.body["errorCode"], "FLAG_NOT_FOUND");
        let channel = evaluate(&app, &app.agent, "assistant:prompt:fax", json!({})).await;
        assert_eq!(channel.status, StatusCode::NOT_FOUND, "{:?}", channel.body);
        let context = evaluate(&app, &app.agent, "assistant:prompt:web", json!({"targetingKey": 7})).await;
        assert_eq!(context.status, StatusCode::BAD_REQUEST);
        assert_eq!(context.body["errorCode"], "INVALID_CONTEXT");
        assert_eq!(context.body["key"], "assistant:prompt:web");
        let parse = app.request(post("/ofrep/v1/evaluate/flags/assistant:prompt:web", Some(&app.agent), "{not json", &[])).await;
        assert_eq!(parse.status, StatusCode::BAD_REQUEST);
        assert_eq!(parse.body["errorCode"], "PARSE_ERROR");

        let none = app.request(post("/ofrep/v1/evaluate/flags/assistant:prompt:web", None, "{}", &[])).await;
        assert_eq!(none.status, StatusCode::UNAUTHORIZED);
        let approver = app.key("approver", Role::Approver).await;
        let refused = evaluate(&app, &approver, "assistant:prompt:web", json!({})).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        // X-API-Key is OFREP's other way to send the key.
        let by_header = app.request(post("/ofrep/v1/evaluate/flags/assistant:prompt:web", None, "{}", &[("x-api-key", &app.agent)])).await;
        assert_eq!(by_header.status, StatusCode::OK, "{:?}", by_header.body);
        // A key scoped to another agent: the flag does not exist for it.
        ok(&app, Method::POST, "/v1/agents", &app.operator, Some(json!({
            "name": "someone-else", "identity": {"display_name": "Else", "role": "another agent", "description": "Another."},
            "soul": "Another."
        }))).await;
        let made = ok(&app, Method::POST, "/v1/keys", &app.operator, Some(json!({"name": "elsewhere", "role": "agent", "agent": "someone-else"}))).await;
        let scoped = made["key"].as_str().unwrap().to_owned();
        let hidden = evaluate(&app, &scoped, "assistant:prompt:web", json!({})).await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND);
        assert_eq!(hidden.body["errorCode"], "FLAG_NOT_FOUND");
    }
}

db_test! {
    async fn one_tenants_users_instructions_never_reach_another_tenants_evaluation(db) {
        let app = TestApp::new(db.seeded().await).await;
        let now = chrono::Utc::now();
        let a_admin = keys::create_for_tenant(&app.db.conn, "a-admin", Role::Admin, Some("tenanta"), now).await.expect("key");
        let a_agent = keys::create_for_tenant(&app.db.conn, "a-agent", Role::Agent, Some("tenanta"), now).await.expect("key");
        let b_agent = keys::create_for_tenant(&app.db.conn, "b-agent", Role::Agent, Some("tenantb"), now).await.expect("key");
        ok(&app, Method::PUT, "/v1/agents/assistant/users/alice/instructions", &a_admin,
            Some(json!({"instructions": "Answer in haiku only."}))).await;
        let mine = evaluate(&app, &a_agent, "assistant:prompt:web", json!({"targetingKey": "alice"})).await;
        assert!(mine.body["value"].as_str().unwrap().contains("Answer in haiku only."), "{:?}", mine.body);
        let theirs = evaluate(&app, &b_agent, "assistant:prompt:web", json!({"targetingKey": "alice"})).await;
        assert!(!theirs.body["value"].as_str().unwrap().contains("haiku"), "{:?}", theirs.body);
        let bulk = app.request(post("/ofrep/v1/evaluate/flags", Some(&b_agent), &json!({"context": {"targetingKey": "alice"}}).to_string(), &[])).await;
        assert!(!bulk.body.to_string().contains("haiku"));
    }
}

db_test! {
    async fn the_bulk_answer_has_every_flag_an_etag_and_the_stream(db) {
        let app = TestApp::new(db.seeded().await).await;
        let body = json!({"context": {"targetingKey": "alice"}}).to_string();
        let first = app.request(post("/ofrep/v1/evaluate/flags", Some(&app.agent), &body, &[])).await;
        assert_eq!(first.status, StatusCode::OK, "{:?}", first.body);
        let keys: Vec<&str> = first.body["flags"].as_array().unwrap().iter().map(|f| f["key"].as_str().unwrap()).collect();
        for wanted in ["assistant:prompt:web", "assistant:tools:openai", "assistant:tools:mcp", "assistant:model", "assistant:model:web"] {
            assert!(keys.contains(&wanted), "{wanted} in {keys:?}");
        }
        let stream = &first.body["eventStreams"][0];
        assert_eq!((&stream["type"], &stream["inactivityDelaySec"]), (&json!("sse"), &json!(120)));
        let uri = stream["endpoint"]["requestUri"].as_str().expect("requestUri").to_owned();
        assert!(uri.starts_with("/v1/changes?token="), "{uri}");
        let etag = first.etag.clone().expect("etag");
        let again = app.request(post("/ofrep/v1/evaluate/flags", Some(&app.agent), &body, &[("if-none-match", &etag)])).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED);
        // One agent named in the context; the stream is that agent's.
        let one = json!({"context": {"targetingKey": "alice", "agent": "assistant"}}).to_string();
        let named = app.request(post("/ofrep/v1/evaluate/flags", Some(&app.agent), &one, &[])).await;
        let named_uri = named.body["eventStreams"][0]["endpoint"]["requestUri"].as_str().unwrap().to_owned();
        assert!(named_uri.starts_with("/v1/changes?agent=assistant&token="), "{named_uri}");
        // The URL opens the stream with no header (an EventSource sends none), as that key.
        let opened = app.request(Request::get(&uri).body(Body::empty()).unwrap()).await;
        assert_eq!(opened.status, StatusCode::OK, "{:?}", opened.body);
        assert!(opened.body.as_str().unwrap().contains("\"type\":\"ready\""));
        let tampered = uri.replacen("token=", "token=9", 1);
        let refused = app.request(Request::get(&tampered).body(Body::empty()).unwrap()).await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
        let elsewhere = format!("{named_uri}&agent=other");
        let scoped = app.request(Request::get(elsewhere.replacen("agent=assistant&", "", 1)).body(Body::empty()).unwrap()).await;
        assert_eq!(scoped.status, StatusCode::NOT_FOUND, "a token for one agent opens no other agent's stream");
        // A change: a new ETag, asked for with the event's etag as flagConfigEtag.
        ok(&app, Method::PATCH, "/v1/agents/assistant", &app.operator, Some(json!({"soul": "Changed."}))).await;
        let tag = format!("%22g{}%22", app.state.generation.current());
        let changed = app.request(post(&format!("/ofrep/v1/evaluate/flags?flagConfigEtag={tag}&flagConfigLastModified=1771622898"), Some(&app.agent), &body, &[("if-none-match", &etag)])).await;
        assert_eq!(changed.status, StatusCode::OK);
        assert_ne!(changed.etag.as_deref(), Some(etag.as_str()));
        // A revoked key's token opens nothing.
        let made = ok(&app, Method::POST, "/v1/keys", &app.operator, Some(json!({"name": "short-lived", "role": "agent"}))).await;
        let short = made["key"].as_str().unwrap().to_owned();
        let theirs = app.request(post("/ofrep/v1/evaluate/flags", Some(&short), &body, &[])).await;
        let their_uri = theirs.body["eventStreams"][0]["endpoint"]["requestUri"].as_str().unwrap().to_owned();
        ok(&app, Method::DELETE, "/v1/keys/short-lived", &app.operator, None).await;
        let gone = app.request(Request::get(&their_uri).body(Body::empty()).unwrap()).await;
        assert_eq!(gone.status, StatusCode::UNAUTHORIZED);
        let unknown = app.request(post("/ofrep/v1/evaluate/flags", Some(&app.agent), &json!({"context": {"agent": "nobody"}}).to_string(), &[])).await;
        assert_eq!(unknown.status, StatusCode::BAD_REQUEST);
        assert_eq!(unknown.body["errorCode"], "INVALID_CONTEXT");
    }
}
