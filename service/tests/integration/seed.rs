//! `loadout seed` on a freshly migrated database.

use crate::support::db_test;
use entity::{agent_configurations, agent_tools, tools};
use loadout::registry::catalog::Seeds;
use loadout::registry::seed::{self, SeedReport};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, IntoActiveModel, PaginatorTrait, QueryFilter, Set,
};

db_test! {
    async fn migrate_and_seed_give_the_assistant_exactly_the_23_canonical_tools(db) {
        let db = db.migrated().await;
        let seeds = Seeds::embedded().expect("seeds");
        let report = seed::run(&db.conn, &seeds, chrono::Utc::now()).await.expect("seed");
        assert_eq!(report, SeedReport { tools_created: 0, agents_created: 1, links_created: 23, channels_created: 0 });
        assert_eq!(assistant_operating_model(&db).await, Some(seeds.assistant.operating_model.clone()));

        let active = tools::Entity::find().filter(tools::Column::IsActive.eq(true)).all(&db.conn).await.expect("tools");
        let mut names: Vec<&str> = active.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        let mut expected: Vec<&str> = seeds.catalog.tools.iter().map(|t| t.name.as_str()).collect();
        expected.sort_unstable();
        assert_eq!(names, expected);

        let assistant = agent_configurations::Entity::find()
            .filter(agent_configurations::Column::Name.eq("assistant"))
            .one(&db.conn).await.expect("query").expect("assistant exists");
        assert_eq!(assistant.prompt_template.as_deref(), Some(seeds.assistant.prompt_template.as_str()));
        let links = agent_tools::Entity::find()
            .filter(agent_tools::Column::AgentId.eq(assistant.id))
            .filter(agent_tools::Column::IsActive.eq(true))
            .count(&db.conn).await.expect("count");
        assert_eq!(links, 23);
    }
}

db_test! {
    async fn seeding_again_never_overwrites_an_admin_edit(db) {
        let db = db.migrated().await;
        let seeds = Seeds::embedded().expect("seeds");
        seed::run(&db.conn, &seeds, chrono::Utc::now()).await.expect("first seed");

        let assistant = agent_configurations::Entity::find()
            .filter(agent_configurations::Column::Name.eq("assistant"))
            .one(&db.conn).await.expect("query").expect("assistant");
        let mut edit = assistant.clone().into_active_model();
        edit.soul = Set("An admin's own soul.".into());
        edit.prompt_template = Set(None);
        edit.update(&db.conn).await.expect("edit");
        let link = agent_tools::Entity::find().one(&db.conn).await.expect("query").expect("a link");
        let mut detach = link.into_active_model();
        detach.is_active = Set(false);
        detach.update(&db.conn).await.expect("detach");
        let before = crate::support::dump::rows(&db).await;

        let report = seed::run(&db.conn, &seeds, chrono::Utc::now()).await.expect("second seed");
        assert_eq!(report, SeedReport::default());
        crate::support::dump::assert_same(&crate::support::dump::rows(&db).await, &before);
    }
}

async fn assistant_operating_model(db: &crate::support::TestDb) -> Option<String> {
    agent_configurations::Entity::find()
        .filter(agent_configurations::Column::Name.eq("assistant"))
        .one(&db.conn)
        .await
        .expect("query")
        .expect("assistant")
        .operating_model
}

db_test! {
    async fn seed_restores_a_missing_default_channel_and_leaves_edited_ones_alone(db) {
        use entity::channels;
        let db = db.migrated().await;
        let seeds = Seeds::embedded().expect("seeds");
        let web = channels::Entity::find()
            .filter(channels::Column::Name.eq("web"))
            .one(&db.conn).await.expect("query").expect("web is created by the migration");
        let mut edit = web.into_active_model();
        edit.guidance = Set("An admin's own guidance.".into());
        edit.update(&db.conn).await.expect("edit");
        channels::Entity::delete_many()
            .filter(channels::Column::Name.eq("heartbeat"))
            .exec(&db.conn).await.expect("remove heartbeat");

        let report = seed::run(&db.conn, &seeds, chrono::Utc::now()).await.expect("seed");
        assert_eq!(report.channels_created, 1);
        let all = channels::Entity::find().all(&db.conn).await.expect("channels");
        assert_eq!(all.len(), 5);
        let web = all.iter().find(|c| c.name == "web").expect("web");
        assert_eq!(web.guidance, "An admin's own guidance.");
    }
}
