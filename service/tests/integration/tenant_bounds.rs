//! No tenant exhausts what every tenant shares (issue 35): webhook subscriptions
//! stop at their bound and a write records one event whatever subscribes; one
//! tenant's silent receivers leave another's delivery on time; a tool call names
//! only a revision a label serves; no secret reaches `idempotency_records`; console
//! pages refuse framing. MCP sessions per tenant: `hardening.rs`; bundles and
//! plans: `config_as_code.rs` and `service/tests/cli.rs`.

use std::time::Duration;

use crate::support::{TestApp, db_test};
use axum::http::{Method, StatusCode};
use chrono::Utc;
use entity::{
    idempotency_records, label_moves, webhook_deliveries, webhook_events, webhook_subscriptions,
};
use loadout::auth::keys::{self, Role};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, Set};
use serde_json::json;

use crate::webhooks::{Receiver, app, save_soul, subscribe};

db_test! {
    async fn subscriptions_stop_at_the_bound_and_a_write_records_one_event_whatever_subscribes(db) {
        let app = TestApp::builder(db)
            .flag("--connector-allow=127.0.0.1")
            .flag("--webhook-max-subscriptions=20")
            .build()
            .await;
        let tb = keys::create_for_tenant(&app.db.conn, "tb-admin", Role::Admin, Some("tb"), chrono::Utc::now()).await.expect("key");
        let (mut made, mut refused) = (0, 0);
        for i in 0..50 {
            let body = json!({"url": format!("http://127.0.0.1:9/hook/{i}"), "events": ["revision.published"]});
            let (status, answer) = app.call(Method::POST, "/v1/webhooks", &tb, Some(body)).await;
            match status {
                StatusCode::CREATED => made += 1,
                _ => {
                    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
                    assert_eq!(answer["error"]["code"], "limit_reached", "{answer}");
                    assert_eq!(answer["error"]["details"]["limit"], 20, "{answer}");
                    refused += 1;
                }
            }
        }
        assert_eq!((made, refused), (20, 30));
        // Deleting one frees a place.
        let (_, listed) = app.call(Method::GET, "/v1/webhooks", &tb, None).await;
        let first = listed["subscriptions"][0]["id"].clone();
        let (status, _) = app.call(Method::DELETE, &format!("/v1/webhooks/{first}"), &tb, None).await;
        assert_eq!(status, StatusCode::OK);
        let body = json!({"url": "http://127.0.0.1:9/hook/again", "events": ["revision.published"]});
        let (status, answer) = app.call(Method::POST, "/v1/webhooks", &tb, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");

        // Thousands of subscriptions (put straight in the database, as a bound
        // raised by the operator would allow): an operator write still answers,
        // with one event and no delivery in its transaction; the delivery job
        // derives them afterwards, in batches no database refuses.
        let now = Utc::now();
        let rows: Vec<webhook_subscriptions::ActiveModel> = (0..4_500)
            .map(|i| webhook_subscriptions::ActiveModel {
                tenant_id: Set("tb".into()),
                url: Set(format!("http://127.0.0.1:9/bulk/{i}")),
                events: Set("*".into()),
                secret: Set(String::new()),
                description: Set(None),
                state: Set("active".into()),
                disabled_reason: Set(None),
                failures: Set(0),
                created_by: Set("test".into()),
                created_at: Set(now - chrono::TimeDelta::seconds(5)),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            })
            .collect();
        for chunk in rows.chunks(500) {
            webhook_subscriptions::Entity::insert_many(chunk.to_vec()).exec_without_returning(&app.db.conn).await.expect("insert");
        }
        webhook_events::Entity::delete_many().exec(&app.db.conn).await.expect("clear");
        save_soul(&app, "A write under 4,520 subscriptions.").await;
        // The save publishes a revision and moves two labels: three events, one
        // row each, and not one delivery yet.
        let events = webhook_events::Entity::find().all(&app.db.conn).await.expect("events");
        assert_eq!(events.len(), 3, "one row per event: {events:?}");
        assert!(events.iter().all(|e| e.fanned_out_at.is_none()));
        assert_eq!(webhook_deliveries::Entity::find().count(&app.db.conn).await.expect("count"), 0);

        let taken = loadout::webhooks::fan_out::run(&app.db.conn, 100_000, chrono::Utc::now()).await.expect("fan out");
        assert_eq!(taken, 3);
        let deliveries = webhook_deliveries::Entity::find().count(&app.db.conn).await.expect("count");
        // 4,500 take every type; the 20 made over the API take revision.published.
        assert_eq!(deliveries, 3 * 4_500 + 20, "every subscription that wanted each, in chunks");
        assert_eq!(loadout::webhooks::fan_out::run(&app.db.conn, 100_000, chrono::Utc::now()).await.expect("again"), 0, "fanned out once");

        // Past the pending bound, a tenant's new deliveries are recorded failed, unattempted.
        save_soul(&app, "Another write.").await;
        loadout::webhooks::fan_out::run(&app.db.conn, 1_000, chrono::Utc::now()).await.expect("fan out");
        let failed = webhook_deliveries::Entity::find()
            .filter(webhook_deliveries::Column::State.eq("failed"))
            .filter(webhook_deliveries::Column::Attempts.eq(0))
            .count(&app.db.conn)
            .await
            .expect("count");
        assert_eq!(failed, 3 * 4_500 + 20);
    }
}

db_test! {
    async fn one_tenants_silent_receivers_leave_another_tenants_delivery_on_time(db) {
        // A receiver that accepts connections and never answers.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let silent_address = silent.local_addr().expect("address");
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        let (receiver, address) = Receiver::start().await;
        let app = app(db, &["--webhook-timeout-ms=60000"]).await;
        let tb = keys::create_for_tenant(&app.db.conn, "tb-admin", Role::Admin, Some("tb"), chrono::Utc::now()).await.expect("key");
        let default_admin = keys::create_for_tenant(&app.db.conn, "default-admin", Role::Admin, None, chrono::Utc::now()).await.expect("key");
        for i in 0..16 {
            subscribe(&app, &tb, &format!("http://{silent_address}/hook/{i}"), &["revision.published"]).await;
        }
        subscribe(&app, &default_admin, &format!("http://{address}/hook"), &["revision.published"]).await;
        save_soul(&app, "Delivered while tb's receivers are silent.").await;

        let got = receiver.wait_for("the default tenant's delivery", |g| !g.is_empty()).await;
        assert!(got[0].body.contains("revision.published"), "{}", got[0].body);
        // Every silent attempt is still in flight (none has timed out yet), and tb
        // holds no more than its share of the slots.
        let attempted = entity::webhook_attempts::Entity::find()
            .filter(entity::webhook_attempts::Column::Status.is_null())
            .count(&app.db.conn)
            .await
            .expect("count");
        assert_eq!(attempted, 0, "the default tenant's delivery did not wait for tb's");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let held = accepted.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=8).contains(&held), "tb holds at most 8 slots, held {held}");
    }
}

db_test! {
    async fn a_call_names_only_a_revision_a_label_or_rollout_serves(db) {
        let app = TestApp::new(db).await;
        save_soul(&app, "Revision two.").await;
        save_soul(&app, "Revision three.").await;
        let call = |revision: i64| json!({
            "tool": "update_instructions", "arguments": {"instructions": "Buy milk"},
            "conversation_id": "c-1", "user_id": "u-1", "revision": revision
        });
        let (_, agent) = app.call(Method::GET, "/v1/agents/assistant/revisions", &app.operator, None).await;
        let newest = agent["revisions"].as_array().and_then(|r| r.iter().filter_map(|x| x["number"].as_i64()).max()).expect("revisions");
        // The labels moved away from the older ones more than the grace ago.
        label_moves::Entity::update_many()
            .col_expr(label_moves::Column::CreatedAt, Expr::value(Utc::now() - chrono::TimeDelta::hours(2)))
            .exec(&app.db.conn)
            .await
            .expect("age the moves");
        let (status, answer) = app.call(Method::POST, "/v1/agents/assistant/tool-calls", &app.agent, Some(call(newest - 1))).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
        assert_eq!(answer["error"]["code"], "revision_not_served", "{answer}");
        let (status, answer) = app.call(Method::POST, "/v1/agents/assistant/tool-calls", &app.agent, Some(call(newest))).await;
        assert!(status.is_success(), "the served revision is callable: {answer}");
    }
}

db_test! {
    async fn no_webhook_secret_is_kept_in_an_idempotency_record(db) {
        let app = TestApp::builder(db).flag("--connector-allow=127.0.0.1").build().await;
        let admin = keys::create_for_tenant(&app.db.conn, "hook-admin", Role::Admin, None, chrono::Utc::now()).await.expect("key");
        let created = app.request(
            axum::http::Request::post("/v1/webhooks")
                .header("authorization", format!("Bearer {admin}"))
                .header("content-type", "application/json")
                .header("idempotency-key", "make-hook-1")
                .body(axum::body::Body::from(json!({"url": "http://127.0.0.1:9/hook"}).to_string()))
                .expect("request"),
        ).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
        let id = created.body["subscription"]["id"].clone();
        let rotated = app.request(
            axum::http::Request::post(format!("/v1/webhooks/{id}/rotate-secret"))
                .header("authorization", format!("Bearer {admin}"))
                .header("content-type", "application/json")
                .header("idempotency-key", "rotate-hook-1")
                .body(axum::body::Body::from("{}"))
                .expect("request"),
        ).await;
        assert!(rotated.status.is_success(), "{}", rotated.body);
        for row in idempotency_records::Entity::find().all(&app.db.conn).await.expect("records") {
            assert!(!row.body.unwrap_or_default().contains("whsec_"), "a secret in an idempotency record");
        }
    }
}

db_test! {
    async fn console_pages_may_not_be_framed(db) {
        let app = TestApp::new(db).await;
        let reply = app.send(Method::GET, "/console/sign-in", None, None, None).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.headers["content-security-policy"], "frame-ancestors 'none'");
        assert_eq!(reply.headers["x-frame-options"], "DENY");
    }
}

db_test! {
    async fn a_connector_change_reaches_a_gated_production_only_through_a_signed_off_promotion(db) {
        use crate::connectors::{Connecting, app as connector_app, target};
        let (url, received) = target().await;
        let app = connector_app(db, true).await;
        app.connect("crm", &format!("{url}/ok"), 5_000).await;
        let (status, agent) = app.call(Method::PATCH, "/v1/agents/assistant", &app.operator, Some(json!({"release_mode": "gated"}))).await;
        assert_eq!(status, StatusCode::OK, "{agent}");
        let (production, latest) = production_and_latest(&app).await;
        assert_eq!(production, latest);

        // The connector moves to another path of the same host: latest pins it,
        // production keeps its pin.
        let (status, body) = app.call(Method::PATCH, "/v1/connectors/crm", &app.operator, Some(json!({"url": format!("{url}/nope")}))).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (production, latest) = production_and_latest(&app).await;
        assert!(latest > production, "the change published a revision: {production} {latest}");
        let (status, diff) = app.call(Method::GET, &format!("/v1/agents/assistant/revisions/{production}/diff/{latest}"), &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{diff}");
        let changed = &diff["diff"]["tools"]["changed"];
        assert_eq!(changed[0]["name"], "delete_tasks", "{diff}");
        assert_eq!(changed[0]["fields"][0]["field"], "connector", "{diff}");

        let id = app.propose().await;
        app.approve(id).await;
        let kinds: Vec<String> = received.lock().expect("log").iter().map(|(k, _, _)| k.clone()).collect();
        assert_eq!(kinds, ["ok"], "production still calls the pinned URL");

        // Signed off: production moves, and the next call goes to the new URL.
        let (status, request) = app.call(Method::PUT, "/v1/agents/assistant/labels/production", &app.operator, Some(json!({"revision": latest, "reason": "new endpoint"}))).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{request}");
        let signer = app.key("crm-signer", Role::Approver).await;
        let (status, decided) = app.call(Method::POST, &format!("/v1/change-requests/{}/approve", request["id"]), &signer, Some(json!({"reason": "checked"}))).await;
        assert!(status.is_success(), "{decided}");
        let id = app.propose().await;
        let answer = app.approve(id).await;
        let kinds: Vec<String> = received.lock().expect("log").iter().map(|(k, _, _)| k.clone()).collect();
        assert_eq!(kinds, ["ok", "nope"], "after the sign-off: {answer}");
    }
}

/// The revisions `production` and `latest` of the assistant point at.
async fn production_and_latest(app: &TestApp) -> (i64, i64) {
    let (_, labels) = app
        .call(
            Method::GET,
            "/v1/agents/assistant/labels",
            &app.operator,
            None,
        )
        .await;
    let at = |name: &str| {
        labels["labels"]
            .as_array()
            .expect("labels")
            .iter()
            .find(|l| l["name"] == name)
            .and_then(|l| l["revision"].as_i64())
            .expect("label")
    };
    (at("production"), at("latest"))
}

db_test! {
    async fn keys_and_outcomes_per_subject_stop_at_their_bounds(db) {
        let app = TestApp::builder(db)
            .flag("--max-keys-per-tenant=3")
            .flag("--max-outcomes-per-subject=2")
            .build()
            .await;
        // tb's admin holds one key; two more fit, the fourth is refused, and a
        // revoked key frees its place.
        let tb = keys::create_for_tenant(&app.db.conn, "tb-admin", Role::Admin, Some("tb"), chrono::Utc::now()).await.expect("key");
        for name in ["tb-a", "tb-b"] {
            let (status, body) = app.call(Method::POST, "/v1/keys", &tb, Some(json!({"name": name, "role": "agent"}))).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        let (status, body) = app.call(Method::POST, "/v1/keys", &tb, Some(json!({"name": "tb-c", "role": "agent"}))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"]["code"], "limit_reached", "{body}");
        let (status, body) = app.call(Method::DELETE, "/v1/keys/tb-a", &tb, None).await;
        assert!(status.is_success(), "{body}");
        let (status, body) = app.call(Method::POST, "/v1/keys", &tb, Some(json!({"name": "tb-c", "role": "agent"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        // Another tenant's keys are counted apart.
        let (status, body) = app.call(Method::POST, "/v1/keys", &app.operator, Some(json!({"name": "acme-a", "role": "agent", "tenant": "acme"}))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");

        // One user's conversations on one revision: two, then refused; a report of
        // a conversation already counted still replaces it; another user is apart.
        let outcome = |conversation: &str, user: &str| json!({"revision": 1, "conversation_id": conversation, "user_id": user, "outcome": "success"});
        for conversation in ["c-1", "c-2"] {
            let (status, body) = app.call(Method::POST, "/v1/agents/assistant/outcomes", &app.agent, Some(outcome(conversation, "u-1"))).await;
            assert_eq!(status, StatusCode::CREATED, "{body}");
        }
        let (status, body) = app.call(Method::POST, "/v1/agents/assistant/outcomes", &app.agent, Some(outcome("c-3", "u-1"))).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"]["code"], "limit_reached", "{body}");
        let (status, body) = app.call(Method::POST, "/v1/agents/assistant/outcomes", &app.agent, Some(outcome("c-2", "u-1"))).await;
        assert_eq!(status, StatusCode::CREATED, "a conversation already reported is replaced: {body}");
        let (status, body) = app.call(Method::POST, "/v1/agents/assistant/outcomes", &app.agent, Some(outcome("c-3", "u-2"))).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
}

db_test! {
    async fn revisions_are_listed_a_page_at_a_time(db) {
        let app = TestApp::new(db).await;
        for i in 0..4 {
            save_soul(&app, &format!("Soul {i}.")).await;
        }
        let (status, first) = app.call(Method::GET, "/v1/agents/assistant/revisions?limit=2", &app.operator, None).await;
        assert_eq!(status, StatusCode::OK, "{first}");
        let numbers = |page: &serde_json::Value| -> Vec<i64> {
            page["revisions"].as_array().expect("revisions").iter().filter_map(|r| r["number"].as_i64()).collect()
        };
        assert_eq!(numbers(&first), [5, 4]);
        let next = first["next_before"].as_i64().expect("more");
        let (_, second) = app.call(Method::GET, &format!("/v1/agents/assistant/revisions?limit=2&before={next}"), &app.operator, None).await;
        assert_eq!(numbers(&second), [3, 2]);
        let (_, last) = app.call(Method::GET, &format!("/v1/agents/assistant/revisions?limit=2&before={}", second["next_before"]), &app.operator, None).await;
        assert_eq!((numbers(&last), last["next_before"].clone()), (vec![1], json!(null)));
        let (status, body) = app.call(Method::GET, "/v1/agents/assistant/revisions?limit=0", &app.operator, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    }
}

db_test! {
    async fn a_receiver_that_answers_2xx_and_then_stalls_is_a_failed_attempt(db) {
        // Headers and a 200 at once, then a body that never finishes.
        let stall = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = stall.local_addr().expect("address");
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut socket, _)) = stall.accept().await {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buffer = vec![0u8; 65_536];
                let _ = socket.read(&mut buffer).await;
                let _ = socket.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n").await;
                held.push(socket);
            }
        });
        let app = app(db, &["--webhook-timeout-ms=500", "--webhook-retry-base-ms=60000"]).await;
        let admin = keys::create_for_tenant(&app.db.conn, "stall-admin", Role::Admin, None, chrono::Utc::now()).await.expect("key");
        subscribe(&app, &admin, &format!("http://{address}/hook"), &["revision.published"]).await;
        save_soul(&app, "A delivery the receiver never finishes taking.").await;
        let mut attempts = Vec::new();
        for _ in 0..100 {
            attempts = entity::webhook_attempts::Entity::find().all(&app.db.conn).await.expect("attempts");
            if !attempts.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(attempts.len(), 1, "{attempts:?}");
        assert_eq!(attempts[0].status, Some(200));
        assert!(attempts[0].error.is_some(), "a timed-out answer is an error: {attempts:?}");
        let delivery = webhook_deliveries::Entity::find().one(&app.db.conn).await.expect("read").expect("a delivery");
        assert_eq!(delivery.state, "pending", "retried, not delivered");
    }
}
