//! The rollout guard on a real rollout (issue 26, item 3): every outcome for a
//! side of an active guarded rollout re-judges it in the outcome's transaction; a
//! candidate failing at a planted higher rate is aborted by the guard (the
//! history says why, the label's traffic goes back to the base), and equal rates
//! over a run are not, on both backends.

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

const ROLLOUT: &str = "/v1/agents/assistant/labels/production/rollout";

/// Revision 2 saved and `production` moved back to 1, then a rollout of 2 on
/// half the users with a guard of `min_outcomes` per side at alpha 0.05.
async fn guarded_rollout(app: &TestApp, min_outcomes: i64) {
    let ok = async |method: Method, path: &str, body: Value| {
        let (status, answer) = app.call(method, path, &app.operator, Some(body)).await;
        assert!(status.is_success(), "{path}: {status} {answer}");
    };
    ok(
        Method::PATCH,
        "/v1/agents/assistant",
        json!({"soul": "The candidate soul."}),
    )
    .await;
    ok(
        Method::PUT,
        "/v1/agents/assistant/labels/production",
        json!({"revision": 1}),
    )
    .await;
    let (status, started) = app.call(Method::POST, ROLLOUT, &app.operator,
        Some(json!({"candidate": 2, "percent": 50, "guard": {"min_outcomes": min_outcomes, "alpha": 0.05}}))).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
}

/// Reports `per_side` conversations for each side, alternating; the base fails
/// when `base_fails(i)`, the candidate when `candidate_fails(i)`.
async fn report(
    app: &TestApp,
    per_side: usize,
    base_fails: fn(usize) -> bool,
    candidate_fails: fn(usize) -> bool,
) {
    for i in 0..per_side {
        for (revision, fails) in [(1, base_fails(i)), (2, candidate_fails(i))] {
            let outcome = if fails { "failure" } else { "success" };
            let body = json!({"revision": revision, "conversation_id": format!("r{revision}-{i}"), "outcome": outcome});
            let (status, answer) = app
                .call(
                    Method::POST,
                    "/v1/agents/assistant/outcomes",
                    &app.agent,
                    Some(body),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{answer}");
        }
    }
}

async fn rollout_status(app: &TestApp) -> Value {
    let (status, answer) = app.call(Method::GET, ROLLOUT, &app.operator, None).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

db_test! {
    async fn a_candidate_failing_at_a_planted_higher_rate_is_aborted_by_the_guard_and_traffic_goes_back(db) {
        let app = TestApp::new(db.seeded().await).await;
        guarded_rollout(&app, 30).await;
        // 10 % failures on the base, 30 % on the candidate.
        report(&app, 150, |i| i % 10 == 0, |i| i % 10 < 3).await;

        let status = rollout_status(&app).await;
        assert!(status["current"].is_null(), "the rollout no longer runs: {status}");
        let ended = &status["past"][0];
        assert_eq!(ended["state"], "aborted", "{status}");
        let reason = ended["end_reason"].as_str().expect("reason");
        assert!(reason.starts_with("guard: candidate failure rate") && reason.contains("mixture likelihood ratio"), "{reason}");
        let last = ended["events"].as_array().expect("events").last().expect("event").clone();
        assert_eq!((&last["kind"], &last["by"]), (&json!("aborted"), &json!("guard")), "{last}");

        // Every user is served the base again.
        for user in 0..40 {
            let reply = app.get(&format!("/v1/agents/assistant/prompt?channel=web&user_id=user-{user}")).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            assert_eq!(reply.headers["loadout-revision"], "1", "user-{user} after the abort");
        }
    }
}

db_test! {
    async fn equal_failure_rates_over_a_run_do_not_abort_the_rollout(db) {
        let app = TestApp::new(db.seeded().await).await;
        guarded_rollout(&app, 30).await;
        // 10 % on each side, the failures at different places in the run.
        report(&app, 150, |i| i % 10 == 0, |i| i % 10 == 5).await;

        let status = rollout_status(&app).await;
        assert_eq!(status["current"]["state"], "active", "{status}");
    }
}

db_test! {
    async fn nothing_is_judged_before_each_side_has_the_guards_minimum(db) {
        let app = TestApp::new(db.seeded().await).await;
        guarded_rollout(&app, 200).await;
        // A candidate failing every time, but fewer than 200 outcomes a side.
        report(&app, 60, |_| false, |_| true).await;

        let status = rollout_status(&app).await;
        assert_eq!(status["current"]["state"], "active", "{status}");
    }
}

/// Reports `per_side` conversations for each side with `key` (its tenant's),
/// alternating; the sides fail as `base_fails` and `candidate_fails` say.
async fn report_as(
    app: &TestApp,
    key: &str,
    per_side: usize,
    base_fails: fn(usize) -> bool,
    candidate_fails: fn(usize) -> bool,
) {
    for i in 0..per_side {
        for (revision, fails) in [(1, base_fails(i)), (2, candidate_fails(i))] {
            let outcome = if fails { "failure" } else { "success" };
            let body = json!({"revision": revision, "conversation_id": format!("r{revision}-{i}"), "outcome": outcome});
            let (status, answer) = app
                .call(
                    Method::POST,
                    "/v1/agents/assistant/outcomes",
                    key,
                    Some(body),
                )
                .await;
            assert_eq!(status, StatusCode::CREATED, "{answer}");
        }
    }
}

async fn agent_of(app: &TestApp, name: &str, tenant: &str) -> String {
    loadout::auth::keys::create_for_tenant(
        &app.db.conn,
        name,
        loadout::auth::keys::Role::Agent,
        Some(tenant),
        chrono::Utc::now(),
    )
    .await
    .expect("agent key")
}

db_test! {
    /// Tenant tb's agent plants failures on the candidate (every one of its
    /// conversations), the default tenant's outcomes are equal on both sides:
    /// one tenant's guard trips, the population's does not, and the rollout runs on.
    async fn one_tenants_planted_failures_do_not_abort_a_shared_rollout(db) {
        let app = TestApp::new(db.seeded().await).await;
        let planter = agent_of(&app, "planter", "tb").await;
        guarded_rollout(&app, 30).await;
        report_as(&app, &app.agent, 150, |i| i % 10 == 0, |i| i % 10 == 5).await;
        report_as(&app, &planter, 60, |_| false, |_| true).await;
        let status = rollout_status(&app).await;
        assert_eq!(status["current"]["state"], "active", "{status}");
    }
}

db_test! {
    /// Two tenants see the candidate fail three times as often; a third plants
    /// successes on the candidate and failures on the base. Its outcomes enter
    /// its own guard only, so they cannot hide the regression: the rollout aborts.
    async fn one_tenants_planted_successes_do_not_mask_a_regression(db) {
        let app = TestApp::new(db.seeded().await).await;
        let honest = agent_of(&app, "honest", "tc").await;
        let masker = agent_of(&app, "masker", "tb").await;
        guarded_rollout(&app, 30).await;
        report_as(&app, &masker, 400, |_| true, |_| false).await;
        report_as(&app, &app.agent, 200, |i| i % 10 == 0, |i| i % 10 < 3).await;
        report_as(&app, &honest, 200, |i| i % 10 == 0, |i| i % 10 < 3).await;
        let status = rollout_status(&app).await;
        assert!(status["current"].is_null(), "aborted: {status}");
        let reason = status["past"][0]["end_reason"].as_str().expect("reason");
        assert!(reason.contains("default") && reason.contains("tc") && !reason.contains("tb"), "{reason}");
    }
}

db_test! {
    async fn only_agent_keys_report_outcomes(db) {
        let app = TestApp::new(db.seeded().await).await;
        let body = json!({"revision": 1, "conversation_id": "c-1", "outcome": "failure"});
        let (status, refused) = app.call(Method::POST, "/v1/agents/assistant/outcomes", &app.operator, Some(body.clone())).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
        let admin = loadout::auth::keys::create_for_tenant(&app.db.conn, "tb-admin", loadout::auth::keys::Role::Admin, Some("tb"), chrono::Utc::now()).await.expect("key");
        let (status, _) = app.call(Method::POST, "/v1/agents/assistant/outcomes", &admin, Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
    }
}
