//! `loadout migrate` on both backends.

use loadout::migrate::{self, MigrateCommand};
use loadout_tests::db_test;
use sea_orm::ConnectionTrait;

db_test! {
    async fn migrate_up_applies_both_migrations(db) {
        let states = migrate::run(&db.conn, MigrateCommand::Up { n: None }).await.expect("up");
        let applied: Vec<(&str, bool)> = states.iter().map(|s| (s.name.as_str(), s.applied)).collect();
        assert_eq!(applied, [
            ("m20260224_000001_create_base_schema", true),
            ("m20260224_000002_canonicalize_tool_registry", true),
        ]);
    }
}

db_test! {
    async fn up_with_a_step_count_applies_only_that_many(db) {
        let states = migrate::run(&db.conn, MigrateCommand::Up { n: Some(1) }).await.expect("up -n 1");
        assert_eq!(states.iter().filter(|s| s.applied).count(), 1);
        let states = migrate::run(&db.conn, MigrateCommand::Down { n: 1 }).await.expect("down");
        assert_eq!(states.iter().filter(|s| s.applied).count(), 0);
    }
}

db_test! {
    async fn refresh_and_reset_round_trip(db) {
        let db = db.migrated().await;
        let states = migrate::run(&db.conn, MigrateCommand::Refresh).await.expect("refresh");
        assert!(states.iter().all(|s| s.applied));
        let states = migrate::run(&db.conn, MigrateCommand::Reset).await.expect("reset");
        assert!(states.iter().all(|s| !s.applied));
        let states = migrate::run(&db.conn, MigrateCommand::Fresh).await.expect("fresh");
        assert!(states.iter().all(|s| s.applied));
    }
}

db_test! {
    async fn a_database_newer_than_the_binary_is_refused(db) {
        let db = db.migrated().await;
        db.conn
            .execute_unprepared("INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000001_from_the_future', 0)")
            .await
            .expect("plant a future migration");
        let err = migrate::run(&db.conn, MigrateCommand::Down { n: 1 }).await.expect_err("refused");
        let message = format!("{err:#}");
        assert!(message.contains("m20991231_000001_from_the_future") && message.contains("newer"), "{message}");
        // Nothing was rolled back.
        let states = migrate::status(&db.conn).await;
        assert!(states.is_err() || states.expect("status").iter().all(|s| s.applied));
    }
}
