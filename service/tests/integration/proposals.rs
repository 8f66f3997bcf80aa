//! The proposal ledger on real databases: lifecycle, conflicts, tenants, concurrent
//! approvals (exactly one runs), and the sweeper.

use crate::support::{TestDb, db_test};
use chrono::{DateTime, TimeDelta, Utc};
use entity::{agent_configurations, proposals as rows, tools};
use loadout::actions::ledger::{self, Approval, LedgerError, NewProposal};
use loadout::execute::Outcome;
use loadout::registry::catalog::Seeds;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;

const LEASE: TimeDelta = TimeDelta::minutes(5);

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("instant")
}

async fn seeded(db: TestDb) -> TestDb {
    let db = db.migrated().await;
    loadout::registry::seed::run(
        &db.conn,
        &Seeds::embedded().expect("seeds"),
        chrono::Utc::now(),
    )
    .await
    .expect("seed");
    db
}

async fn propose(db: &TestDb, tenant: &str, now: DateTime<Utc>) -> rows::Model {
    let agent = agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq("assistant"))
        .one(&db.conn)
        .await
        .expect("query")
        .expect("assistant");
    let tool = tools::Entity::find()
        .filter(tools::Column::Name.eq("create_tasks"))
        .one(&db.conn)
        .await
        .expect("query")
        .expect("create_tasks");
    let new = NewProposal {
        tenant_id: tenant.into(),
        agent_id: agent.id,
        tool_id: tool.id,
        tool_name: tool.name,
        user_id: Some("u-1".into()),
        conversation_id: "c-1".into(),
        message_id: None,
        arguments: json!({"tasks": [{"title": "Buy groceries"}]}),
        description: "Create tasks: Buy groceries".into(),
        preview: json!([{"field": "title", "new": "Buy groceries"}]),
        idempotency_key: None,
        request_hash: None,
        ttl: TimeDelta::hours(24),
        max_attempts: 2,
        revision_id: None,
        decided_by: None,
    };
    ledger::create(&db.conn, new, "test-agent", now)
        .await
        .expect("create")
}

fn transitions(events: &[entity::proposal_events::Model]) -> Vec<(Option<String>, String)> {
    events
        .iter()
        .map(|e| (e.from_state.clone(), e.to_state.clone()))
        .collect()
}

fn s(state: &str) -> Option<String> {
    Some(state.to_owned())
}

db_test! {
    async fn an_approved_proposal_runs_once_and_every_transition_is_an_event(db) {
        let db = seeded(db).await;
        let now = at("2026-11-21T09:00:00Z");
        let p = propose(&db, "t1", now).await;
        assert_eq!(p.state, "proposed");
        let Approval::Run(running) = ledger::approve(&db.conn, "t1", p.id, "approver", now, LEASE, None).await.expect("approve") else {
            panic!("the first approval runs");
        };
        assert_eq!((running.state.as_str(), running.attempts), ("executing", 1));
        assert_eq!(running.lease_until, Some(now + LEASE));
        let done = ledger::finish(&db.conn, "t1", p.id, 1, Outcome { success: true, result: json!({"created": 1}) }, now).await.expect("finish");
        assert_eq!(done.state, "succeeded");
        assert_eq!(done.result, Some(json!({"created": 1})));
        let Approval::AsItIs(again) = ledger::approve(&db.conn, "t1", p.id, "approver", now, LEASE, None).await.expect("approve again") else {
            panic!("a succeeded proposal never runs again");
        };
        assert_eq!(again.state, "succeeded");
        let events = ledger::events(&db.conn, "t1", p.id).await.expect("events");
        assert_eq!(transitions(&events), [
            (None, "proposed".to_owned()),
            (s("proposed"), "approved".to_owned()),
            (s("approved"), "executing".to_owned()),
            (s("executing"), "succeeded".to_owned()),
        ]);
        assert_eq!(events[1].actor, "approver");
    }
}

db_test! {
    async fn declined_failed_and_retried_proposals_follow_the_state_machine(db) {
        let db = seeded(db).await;
        let now = at("2026-11-21T09:00:00Z");
        let declined = propose(&db, "t1", now).await;
        assert_eq!(ledger::decline(&db.conn, "t1", declined.id, "approver", now, None).await.expect("decline").state, "declined");
        match ledger::approve(&db.conn, "t1", declined.id, "approver", now, LEASE, None).await {
            Err(LedgerError::Conflict { state, .. }) => assert_eq!(state, "declined"),
            other => panic!("approving a declined proposal: {other:?}"),
        }
        assert!(matches!(ledger::decline(&db.conn, "t1", declined.id, "approver", now, None).await, Err(LedgerError::Conflict { .. })));

        let p = propose(&db, "t1", now).await;
        assert!(matches!(ledger::retry(&db.conn, "t1", p.id, "approver", now, LEASE).await, Err(LedgerError::Conflict { .. })), "retry only from failed");
        ledger::approve(&db.conn, "t1", p.id, "approver", now, LEASE, None).await.expect("approve");
        let failed = ledger::finish(&db.conn, "t1", p.id, 1, Outcome { success: false, result: json!({"error": "upstream 503", "retryable": true}) }, now).await.expect("fail");
        assert_eq!(failed.state, "failed");
        let retried = ledger::retry(&db.conn, "t1", p.id, "approver", now, LEASE).await.expect("retry");
        assert_eq!((retried.state.as_str(), retried.attempts), ("executing", 2));
        // A late result from attempt 1 cannot overwrite attempt 2.
        assert!(matches!(ledger::finish(&db.conn, "t1", p.id, 1, Outcome { success: true, result: json!({}) }, now).await, Err(LedgerError::Conflict { .. })));
        ledger::finish(&db.conn, "t1", p.id, 2, Outcome { success: false, result: json!({"error": "again"}) }, now).await.expect("fail again");
        match ledger::retry(&db.conn, "t1", p.id, "approver", now, LEASE).await {
            Err(LedgerError::Conflict { state, proposal, .. }) => assert_eq!((state.as_str(), proposal.attempts), ("failed", 2)),
            other => panic!("attempts are bounded: {other:?}"),
        }
    }
}

db_test! {
    async fn another_tenant_sees_nothing(db) {
        let db = seeded(db).await;
        let now = at("2026-11-21T09:00:00Z");
        let p = propose(&db, "t1", now).await;
        assert!(matches!(ledger::get(&db.conn, "t2", p.id).await, Err(LedgerError::NotFound)));
        assert!(matches!(ledger::approve(&db.conn, "t2", p.id, "x", now, LEASE, None).await, Err(LedgerError::NotFound)));
        assert!(matches!(ledger::decline(&db.conn, "t2", p.id, "x", now, None).await, Err(LedgerError::NotFound)));
        assert!(matches!(ledger::events(&db.conn, "t2", p.id).await, Err(LedgerError::NotFound)));
        assert_eq!(ledger::get(&db.conn, "t1", p.id).await.expect("own").state, "proposed");
    }
}

db_test! {
    async fn fifty_concurrent_approvals_run_the_proposal_exactly_once(db) {
        let db = seeded(db).await;
        let now = at("2026-11-21T09:00:00Z");
        let p = propose(&db, "t1", now).await;
        let mut tasks = Vec::new();
        for i in 0..50 {
            let conn = db.conn.clone();
            tasks.push(tokio::spawn(async move {
                ledger::approve(&conn, "t1", p.id, &format!("approver-{i}"), now, LEASE, None).await
            }));
        }
        let mut runs = 0;
        for task in tasks {
            match task.await.expect("join").expect("every approval answers") {
                Approval::Run(row) => {
                    runs += 1;
                    assert_eq!(row.attempts, 1);
                }
                Approval::AsItIs(row) => assert!(["approved", "executing"].contains(&row.state.as_str()), "{}", row.state),
            }
        }
        assert_eq!(runs, 1);
        let row = ledger::get(&db.conn, "t1", p.id).await.expect("row");
        assert_eq!((row.state.as_str(), row.attempts), ("executing", 1));
        assert_eq!(ledger::events(&db.conn, "t1", p.id).await.expect("events").len(), 3);
    }
}

db_test! {
    async fn the_sweeper_fails_dead_executions_reports_stuck_approvals_and_expires(db) {
        let db = seeded(db).await;
        let now = at("2026-11-21T09:00:00Z");
        let dead = propose(&db, "t1", now).await;
        ledger::approve(&db.conn, "t1", dead.id, "approver", now, LEASE, None).await.expect("approve");
        let waiting = propose(&db, "t2", now).await;
        let later = now + TimeDelta::minutes(10);
        assert_eq!(ledger::sweep(&db.conn, now + TimeDelta::minutes(1), LEASE).await.expect("early sweep"), Default::default());
        let orphans = ledger::sweep(&db.conn, later, LEASE).await.expect("sweep");
        assert_eq!(orphans.failed, [dead.id]);
        let row = ledger::get(&db.conn, "t1", dead.id).await.expect("row");
        assert_eq!((row.state.as_str(), row.outcome_unknown), ("failed", true));
        assert!(matches!(ledger::retry(&db.conn, "t1", dead.id, "approver", later, LEASE).await, Err(LedgerError::Conflict { .. })), "an unknown outcome is never re-run");
        assert_eq!(ledger::get(&db.conn, "t2", waiting.id).await.expect("row").state, "proposed");
        let expired = ledger::sweep(&db.conn, now + TimeDelta::hours(25), LEASE).await.expect("sweep");
        assert_eq!(expired.expired, [waiting.id]);
        assert_eq!(ledger::get(&db.conn, "t2", waiting.id).await.expect("row").state, "expired");
    }
}

#[test]
fn the_arguments_hash_ignores_key_order() {
    let a: serde_json::Value =
        serde_json::from_str(r#"{"b": 1, "a": [{"y": 2, "x": 1}]}"#).expect("json");
    let b: serde_json::Value =
        serde_json::from_str(r#"{"a": [{"x": 1, "y": 2}], "b": 1}"#).expect("json");
    assert_eq!(ledger::arguments_hash(&a), ledger::arguments_hash(&b));
    assert_ne!(
        ledger::arguments_hash(&a),
        ledger::arguments_hash(&json!({"b": 2}))
    );
}

db_test! {
    async fn the_servers_sweeper_fails_a_dead_execution_and_counts_it(db) {
        let db = seeded(db).await;
        let long_ago = Utc::now() - TimeDelta::hours(1);
        let p = propose(&db, "t1", long_ago).await;
        ledger::approve(&db.conn, "t1", p.id, "approver", long_ago, LEASE, None).await.expect("approve");
        let state = crate::support::app::state(&db, &[]).await;
        let sweeper = state.spawn_proposal_sweeper();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        // The row turns `failed` inside the sweep; the counter moves when the sweep returns.
        let counted = |text: &str| text.contains("loadout_proposal_orphans_failed_total 1\n");
        while ledger::get(&db.conn, "t1", p.id).await.expect("row").state != "failed"
            || !counted(&state.metrics.render().expect("metrics"))
        {
            assert!(std::time::Instant::now() < deadline, "the sweeper never ran: {:?}", state.metrics.render());
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        sweeper.abort();
        let row = ledger::get(&db.conn, "t1", p.id).await.expect("row");
        assert!(row.outcome_unknown);
    }
}
