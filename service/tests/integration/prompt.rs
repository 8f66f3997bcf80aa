//! `build_agent_prompt` over a migrated, seeded database: every channel × {template,
//! built-in} × {no user data, memory notes + user instructions}, as insta snapshots.
//! Both backends compare against the same golden files.

use crate::support::{TestDb, db_test};
use chrono::{DateTime, Utc};
use entity::{agent_configurations, user_agent_prompt_customizations};
use loadout::prompt::builder::{self, FixedClock, Source};
use loadout::prompt::load;
use loadout::registry::catalog::Seeds;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, QueryFilter, Set};

const CHANNELS: [&str; 5] = ["web", "telegram", "scheduled", "heartbeat", "session_open"];
const USER: &str = "user-7";
const TENANT: &str = loadout::auth::keys::DEFAULT_TENANT;

fn instant(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .expect("instant")
        .with_timezone(&Utc)
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

async fn assistant(db: &TestDb) -> agent_configurations::Model {
    agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq("assistant"))
        .one(&db.conn)
        .await
        .expect("query")
        .expect("assistant")
}

async fn give_user_instructions(db: &TestDb) {
    let now = Utc::now();
    user_agent_prompt_customizations::ActiveModel {
        tenant_id: Set(TENANT.into()),
        user_id: Set(USER.into()),
        agent_id: Set(assistant(db).await.id),
        instructions: Set("Answer in British English. Never schedule anything before 9:00.".into()),
        is_active: Set(true),
        created_at: Set(now),
        updated_at: Set(now),
        deleted_at: Set(None),
        ..Default::default()
    }
    .insert(&db.conn)
    .await
    .expect("insert instructions");
}

async fn use_builtin(db: &TestDb) {
    let mut edit = assistant(db).await.into_active_model();
    edit.prompt_template = Set(None);
    edit.update(&db.conn).await.expect("clear the template");
}

/// Renders one channel the way the API will: everything read from the database.
async fn render(db: &TestDb, channel: &str, with_user_data: bool) -> builder::RenderedPrompt {
    let (agent_id, agent) = load::agent(&db.conn, "assistant")
        .await
        .expect("load")
        .expect("assistant");
    let channels = load::channels(&db.conn).await.expect("channels");
    let mut context = builder::Context::at(&FixedClock(instant("2026-11-21T08:30:00Z")));
    context.time_zone = "Europe/Berlin".parse().expect("zone");
    if with_user_data {
        context.memory_notes = vec![
            "Prefers short answers before noon.".into(),
            "Working on the Atlas migration with Priya;\ndeadline is 4 December.".into(),
        ];
        context.user_instructions = load::user_instructions(&db.conn, TENANT, agent_id, USER)
            .await
            .expect("instructions");
        assert!(
            context.user_instructions.is_some(),
            "instructions were stored"
        );
        context.last_message_at = Some(instant("2026-11-18T19:10:00Z"));
    }
    builder::build_agent_prompt(&agent, channels.get(channel).expect("channel"), &context)
        .expect("render")
}

async fn snapshot_every_channel(db: &TestDb, path: &str, expected: Source) {
    for channel in CHANNELS {
        for (data, with_user_data) in [("bare", false), ("user_data", true)] {
            let rendered = render(db, channel, with_user_data).await;
            assert_eq!(rendered.provenance.source, expected);
            assert_eq!(rendered.provenance.channel, channel);
            insta::assert_snapshot!(format!("{channel}__{path}__{data}"), rendered.text);
        }
    }
}

db_test! {
    async fn every_channel_renders_through_the_seeded_template(db) {
        let db = seeded(db).await;
        give_user_instructions(&db).await;
        snapshot_every_channel(&db, "template", Source::Template).await;
    }
}

db_test! {
    async fn every_channel_renders_through_the_builtin_assembly(db) {
        let db = seeded(db).await;
        give_user_instructions(&db).await;
        use_builtin(&db).await;
        snapshot_every_channel(&db, "builtin", Source::Builtin).await;
    }
}

db_test! {
    async fn scheduled_and_heartbeat_carry_no_operating_model_or_learning(db) {
        let db = seeded(db).await;
        give_user_instructions(&db).await;
        for channel in ["scheduled", "heartbeat"] {
            let text = render(&db, channel, true).await.text;
            assert!(!text.contains("## How you work"), "{channel}: {text}");
            assert!(!text.contains("## Learning about the user"), "{channel}: {text}");
            assert!(!text.contains("## Welcome back"), "{channel}: {text}");
        }
        let web = render(&db, "web", true).await.text;
        assert!(web.contains("## How you work"));
        assert!(web.contains("## Learning about the user"));
        let open = render(&db, "session_open", true).await.text;
        assert!(open.contains("## How you work"));
        assert!(!open.contains("## Learning about the user"));
    }
}

db_test! {
    async fn inactive_links_tools_and_customizations_are_left_out(db) {
        use entity::{agent_tools, tools};
        let db = seeded(db).await;
        give_user_instructions(&db).await;
        let delete_tasks = tools::Entity::find()
            .filter(tools::Column::Name.eq("delete_tasks"))
            .one(&db.conn).await.expect("query").expect("delete_tasks");
        let mut off = delete_tasks.clone().into_active_model();
        off.is_active = Set(false);
        off.update(&db.conn).await.expect("deactivate");
        let link = agent_tools::Entity::find()
            .filter(agent_tools::Column::ToolId.ne(delete_tasks.id))
            .one(&db.conn).await.expect("query").expect("a link");
        let unlinked = tools::Entity::find_by_id(link.tool_id).one(&db.conn).await.expect("query").expect("tool");
        let mut detach = link.into_active_model();
        detach.deleted_at = Set(Some(Utc::now()));
        detach.update(&db.conn).await.expect("soft-delete the link");
        let customization = user_agent_prompt_customizations::Entity::find()
            .one(&db.conn).await.expect("query").expect("customization");
        let mut paused = customization.into_active_model();
        paused.is_active = Set(false);
        paused.update(&db.conn).await.expect("pause");

        let (agent_id, agent) = load::agent(&db.conn, "assistant").await.expect("load").expect("assistant");
        let names: Vec<&str> = agent.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 21);
        assert!(!names.contains(&"delete_tasks"));
        assert!(!names.contains(&unlinked.name.as_str()));
        assert!(names.is_sorted());
        assert_eq!(load::user_instructions(&db.conn, TENANT, agent_id, USER).await.expect("query"), None);
    }
}

db_test! {
    async fn an_unknown_channel_is_an_error_listing_the_known_ones(db) {
        let db = seeded(db).await;
        let channels = load::channels(&db.conn).await.expect("channels");
        let error = channels.get("sms").expect_err("unknown channel");
        assert_eq!(
            error.to_string(),
            "unknown channel \"sms\"; known channels: heartbeat, scheduled, session_open, telegram, web"
        );
    }
}
