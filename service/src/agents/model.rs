//! An agent's model settings as an operator edits them (`releases::model`): a
//! save is a guarded write like any other, so the settings reach `production` as
//! every change does (at once on a `direct` agent, by a signed-off change request
//! on a `gated` one).

use entity::{agent_configurations, channels};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect,
};
use serde::Serialize;
use utoipa::ToSchema;

use super::row;
use crate::db::Writer;
use crate::error::{Error, Result};
use crate::registry::guard;
use crate::releases::model::ModelSettings;

/// An agent's model settings (`settings` `null`: none, the application chooses).
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelView {
    pub agent: String,
    pub settings: Option<ModelSettings>,
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<ModelView> {
    let found = row(db, name).await?;
    Ok(ModelView {
        settings: ModelSettings::parse(found.model_settings.as_deref())?,
        agent: found.name,
    })
}

/// The live channels' names.
async fn channel_names(db: &impl ConnectionTrait) -> Result<Vec<String>> {
    Ok(channels::Entity::find()
        .select_only()
        .column(channels::Column::Name)
        .filter(channels::Column::DeletedAt.is_null())
        .into_tuple()
        .all(db)
        .await?)
}

/// Saves the agent's model settings inside an open write (`None` or empty
/// settings: none), checked against the live channels.
pub async fn save_in(
    write: &mut guard::Write,
    name: &str,
    settings: Option<ModelSettings>,
) -> Result<agent_configurations::Model> {
    let found = row(&**write, name).await?;
    write.touch(found.id).await?;
    let settings = settings.filter(|s| !s.is_empty());
    let text = match &settings {
        Some(settings) => {
            let live = channel_names(&**write).await?;
            settings.check(live.iter().map(String::as_str))?;
            Some(crate::digest::canonical(settings).map_err(Error::internal)?)
        }
        None => None,
    };
    agent_configurations::Entity::update_many()
        .col_expr(
            agent_configurations::Column::ModelSettings,
            Expr::value(text),
        )
        .col_expr(
            agent_configurations::Column::UpdatedAt,
            Expr::value(write.now()),
        )
        .filter(agent_configurations::Column::Id.eq(found.id))
        .exec(&**write)
        .await?;
    row(&**write, name).await
}

/// Saves the agent's model settings (a new revision; on a gated agent, `latest` only).
pub async fn save(
    w: &Writer<'_>,
    author: &str,
    name: &str,
    settings: Option<ModelSettings>,
) -> Result<ModelView> {
    let mut write = w.begin_for_agents().await?.by(author);
    let saved = save_in(&mut write, name, settings).await?;
    w.commit(write).await?;
    Ok(ModelView {
        settings: ModelSettings::parse(saved.model_settings.as_deref())?,
        agent: saved.name,
    })
}
