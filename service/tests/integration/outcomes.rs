//! Outcomes and what loadout records itself per revision (issue 26, item 2):
//! `POST /v1/agents/{agent}/outcomes` with an agent key, the latest report per
//! conversation counting once, `GET` per revision (an admin's tenant, every tenant
//! for an operator), the self-recorded signals and the metric, on both backends.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use chrono::{TimeDelta, Utc};
use loadout::actions::ledger::{self, Approval};
use loadout::auth::keys::{self, Role};
use loadout::execute::Outcome;
use serde_json::{Value, json};

const OUTCOMES: &str = "/v1/agents/assistant/outcomes";

fn report(revision: i64, conversation: &str, outcome: &str) -> Value {
    json!({"revision": revision, "conversation_id": conversation, "outcome": outcome})
}

async fn post(app: &TestApp, key: &str, body: Value) -> (StatusCode, Value) {
    app.call(Method::POST, OUTCOMES, key, Some(body)).await
}

async fn stored(app: &TestApp, key: &str, body: Value) -> Value {
    let (status, answer) = post(app, key, body).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    answer
}

/// The report as `key` reads it: the revision entry for `revision`.
async fn revision_report(app: &TestApp, key: &str, revision: i64) -> Value {
    let path = format!("{OUTCOMES}?revision={revision}");
    let (status, answer) = app.call(Method::GET, &path, key, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let revisions = answer["revisions"].as_array().expect("revisions");
    assert_eq!(revisions.len(), 1, "{answer}");
    revisions[0].clone()
}

db_test! {
    async fn an_agent_reports_an_outcome_and_the_report_counts_it_for_its_revision(db) {
        let app = TestApp::new(db.seeded().await).await;
        let body = json!({"revision": 1, "conversation_id": "c-1", "user_id": "u-1", "outcome": "success", "score": 0.75});
        let answer = stored(&app, &app.agent, body).await;
        assert_eq!(
            (&answer["agent"], &answer["revision"], &answer["conversation_id"], &answer["user_id"], &answer["outcome"], &answer["score"]),
            (&json!("assistant"), &json!(1), &json!("c-1"), &json!("u-1"), &json!("success"), &json!(0.75)),
            "{answer}"
        );
        assert!(answer["id"].is_i64() && answer["created_at"].is_string(), "{answer}");
        stored(&app, &app.agent, json!({"revision": 1, "conversation_id": "c-2", "outcome": "failure", "score": 0.25})).await;
        stored(&app, &app.agent, report(1, "c-3", "failure")).await;

        let (status, all) = app.call(Method::GET, OUTCOMES, &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{all}");
        let one = &all["revisions"][0];
        assert_eq!((&one["revision"], &one["successes"], &one["failures"], &one["scored"]), (&json!(1), &json!(1), &json!(2), &json!(2)), "{all}");
        assert!((one["failure_rate"].as_f64().expect("rate") - 2.0 / 3.0).abs() < 1e-9, "{all}");
        assert!((one["mean_score"].as_f64().expect("mean") - 0.5).abs() < 1e-9, "{all}");
    }
}

db_test! {
    async fn a_repeated_report_for_a_conversation_replaces_the_earlier_one(db) {
        let app = TestApp::new(db.seeded().await).await;
        let first = stored(&app, &app.agent, report(1, "c-1", "success")).await;
        for _ in 0..3 {
            stored(&app, &app.agent, report(1, "c-1", "success")).await;
        }
        let last = stored(&app, &app.agent, json!({"revision": 1, "conversation_id": "c-1", "outcome": "failure", "score": 2})).await;
        assert_eq!((&last["id"], &last["created_at"]), (&first["id"], &first["created_at"]), "the same outcome, updated: {last}");
        assert_eq!((&last["outcome"], &last["score"]), (&json!("failure"), &json!(2.0)));

        let counted = revision_report(&app, &app.operator, 1).await;
        assert_eq!((&counted["successes"], &counted["failures"]), (&json!(0), &json!(1)), "one conversation, its latest report: {counted}");
    }
}

db_test! {
    async fn a_revision_the_agent_does_not_have_is_404_revision_not_found(db) {
        let app = TestApp::new(db.seeded().await).await;
        let (status, answer) = post(&app, &app.agent, report(99, "c-1", "success")).await;
        assert_eq!((status, &answer["error"]["code"]), (StatusCode::NOT_FOUND, &json!("revision_not_found")), "{answer}");
        let (status, answer) = app.call(Method::GET, &format!("{OUTCOMES}?revision=99"), &app.operator, None).await;
        assert_eq!((status, &answer["error"]["code"]), (StatusCode::NOT_FOUND, &json!("revision_not_found")), "{answer}");
        let (status, _) = app.call(Method::POST, "/v1/agents/nobody/outcomes", &app.agent, Some(report(1, "c", "success"))).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}

db_test! {
    async fn malformed_reports_are_400_and_store_nothing(db) {
        let app = TestApp::new(db.seeded().await).await;
        let long = "x".repeat(129);
        let bodies = [
            report(1, "", "success"),
            report(1, &long, "success"),
            report(1, "c-1", "maybe"),
            json!({"revision": 1, "conversation_id": "c-1", "outcome": "success", "user_id": "a\u{7}b"}),
            json!({"revision": 1, "conversation_id": "c-1", "outcome": "success", "extra": true}),
            json!({"revision": "1", "conversation_id": "c-1", "outcome": "success"}),
            json!({"conversation_id": "c-1", "outcome": "success"}),
        ];
        for body in bodies {
            let (status, answer) = post(&app, &app.agent, body.clone()).await;
            assert_eq!((status, &answer["error"]["code"]), (StatusCode::BAD_REQUEST, &json!("bad_request")), "{body}: {answer}");
        }
        let reply = app.send(Method::POST, OUTCOMES, Some(&app.agent),
            Some(br#"{"revision": 1, "conversation_id": "c-1", "outcome": "success", "score": 1e999}"#.to_vec()), None).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "a score beyond f64 is not a number: {}", reply.body);
        let (status, answer) = app.call(Method::GET, OUTCOMES, &app.operator, None).await;
        assert_eq!((status, &answer["revisions"]), (StatusCode::OK, &json!([])), "{answer}");
    }
}

db_test! {
    async fn an_admin_reads_its_own_tenants_outcomes_and_an_operator_every_tenants(db) {
        let app = TestApp::new(db.seeded().await).await;
        let key = async |name, role, tenant| keys::create_for_tenant(&app.db.conn, name, role, Some(tenant), chrono::Utc::now()).await.expect("key");
        let acme_agent = key("acme-agent", Role::Agent, "acme").await;
        let acme_admin = key("acme-admin", Role::Admin, "acme").await;
        let globex_agent = key("globex-agent", Role::Agent, "globex").await;
        stored(&app, &acme_agent, report(1, "c-1", "failure")).await;
        // The same conversation id in another tenant is another conversation.
        stored(&app, &globex_agent, report(1, "c-1", "success")).await;
        stored(&app, &globex_agent, report(1, "c-2", "success")).await;

        let acme = revision_report(&app, &acme_admin, 1).await;
        assert_eq!((&acme["successes"], &acme["failures"]), (&json!(0), &json!(1)), "{acme}");
        let (_, whole) = app.call(Method::GET, OUTCOMES, &acme_admin, None).await;
        assert_eq!(whole["tenant"], "acme");
        let every = revision_report(&app, &app.operator, 1).await;
        assert_eq!((&every["successes"], &every["failures"]), (&json!(2), &json!(1)), "{every}");
        let (status, _) = app.call(Method::GET, OUTCOMES, &acme_agent, None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "an agent key reports, it does not read");
    }
}

db_test! {
    async fn outcomes_are_counted_in_the_metrics_by_agent_revision_and_outcome(db) {
        let app = TestApp::new(db.seeded().await).await;
        stored(&app, &app.agent, report(1, "c-1", "success")).await;
        stored(&app, &app.agent, report(1, "c-2", "success")).await;
        post(&app, &app.agent, report(7, "c-3", "failure")).await;
        let reply = app.send(Method::GET, "/metrics", Some(&app.operator), None, None).await;
        let text = reply.body.as_str().expect("the metrics text").to_owned();
        assert!(text.contains("loadout_outcomes_total{agent=\"assistant\",revision=\"1\",outcome=\"success\"} 2\n"), "{text}");
        assert!(!text.contains("revision=\"7\""), "a refused report makes no series: {text}");
    }
}

/// A tool call of `get_weather` (requires approval) with `arguments`, as the acme agent.
async fn weather_call(
    app: &TestApp,
    key: &str,
    arguments: Value,
    revision: i64,
) -> (StatusCode, Value) {
    let body = json!({"tool": "get_weather", "arguments": arguments, "conversation_id": "c", "revision": revision});
    app.call(
        Method::POST,
        "/v1/agents/assistant/tool-calls",
        key,
        Some(body),
    )
    .await
}

db_test! {
    async fn refusals_declines_and_failed_executions_are_counted_for_the_revision_they_happened_under(db) {
        let app = TestApp::new(db.seeded().await).await;
        let tool = json!({"name": "get_weather", "description": "Weather.", "approval_tier": "requires_approval",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}});
        let (status, body) = app.call(Method::POST, "/v1/tools", &app.operator, Some(tool)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let (status, body) = app.call(Method::PUT, "/v1/agents/assistant/links/get_weather", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (_, labels) = app.call(Method::GET, "/v1/agents/assistant/labels", &app.operator, None).await;
        let revision = labels["labels"].as_array().expect("labels").iter()
            .find(|l| l["name"] == "production").expect("production")["revision"].as_i64().expect("number");

        let (status, refused) = weather_call(&app, &app.agent, json!({"town": "Oslo"}), revision).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        let mut proposals = Vec::new();
        for city in ["Oslo", "Rome", "Lima"] {
            let (status, proposed) = weather_call(&app, &app.agent, json!({"city": city}), revision).await;
            assert_eq!(status, StatusCode::OK, "{proposed}");
            proposals.push(proposed["proposal_id"].as_i64().expect("id") as i32);
        }
        let (status, declined) = app.call(Method::POST, &format!("/v1/proposals/{}/decline", proposals[0]), &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{declined}");
        // Two executions: one fails, one succeeds (their outcomes given as an executor would).
        let now = Utc::now();
        for (id, success) in [(proposals[1], false), (proposals[2], true)] {
            let Approval::Run(claimed) = ledger::approve(&app.db.conn, "default", id, "approver", now, TimeDelta::minutes(1), None).await.expect("approve")
            else { panic!("the approval claims the run") };
            let outcome = match success {
                true => Outcome { success: true, result: json!({"ok": true}) },
                false => Outcome::failure("the weather service is down", true),
            };
            ledger::finish(&app.db.conn, "default", id, claimed.attempts, outcome, now).await.expect("finish");
        }

        let counted = revision_report(&app, &app.operator, revision).await;
        let signals = &counted["signals"];
        assert_eq!(signals["invalid_arguments"], json!({"count": 1, "of": 4, "rate": 0.25}), "{counted}");
        assert_eq!(signals["declined_proposals"], json!({"count": 1, "of": 3, "rate": 1.0 / 3.0}), "{counted}");
        assert_eq!(signals["failed_executions"], json!({"count": 1, "of": 2, "rate": 0.5}), "{counted}");
        // Another tenant's admin sees none of it.
        let other = keys::create_for_tenant(&app.db.conn, "globex-admin", Role::Admin, Some("globex"), chrono::Utc::now()).await.expect("key");
        let theirs = revision_report(&app, &other, revision).await;
        assert_eq!(theirs["signals"]["invalid_arguments"]["of"], 0, "{theirs}");
    }
}
