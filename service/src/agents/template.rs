//! The prompt template: lint on save, optimistic versions, history and restore.
//! Every accepted soul or template change is one immutable `prompt_versions` row.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use entity::{agent_configurations, prompt_versions, tools};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Set,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::row;
use crate::db::idempotency::Pending;
use crate::db::page;
use crate::error::{Error, Kind as ErrorKind, Result};
use crate::fetch::Prompts;
use crate::prompt::lint;
use crate::registry::guard::{self, Problems};

/// What a `prompt_versions` row versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Soul,
    Template,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Soul => "soul",
            Kind::Template => "template",
        }
    }
}

/// The current template.
#[derive(Debug, Serialize, ToSchema)]
pub struct TemplateView {
    pub agent: String,
    /// `null`: the built-in assembly.
    pub template: Option<String>,
    pub version: i32,
}

/// A saved template version, with the lint's warnings (or forced errors).
#[derive(Debug, Serialize, ToSchema)]
pub struct SavedTemplate {
    pub agent: String,
    pub version: i32,
    pub template: Option<String>,
    /// Saved over lint errors.
    pub forced: bool,
    pub warnings: Vec<lint::Problem>,
}

/// One template version.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionView {
    pub version: i32,
    pub template: Option<String>,
    pub forced: bool,
    /// Why it was forced, when the saver said.
    pub reason: Option<String>,
    /// The name of the key that saved it.
    pub author: String,
    pub created_at: DateTime<Utc>,
}

impl From<prompt_versions::Model> for VersionView {
    fn from(v: prompt_versions::Model) -> Self {
        Self {
            version: v.version,
            template: v.body,
            forced: v.forced,
            reason: v.reason,
            author: v.author,
            created_at: v.created_at,
        }
    }
}

/// A page of the template's history, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionList {
    pub agent: String,
    pub current_version: i32,
    pub versions: Vec<VersionView>,
    /// Pass as `after` for the next (newer) page; `null`: this page is the last.
    pub next_after: Option<i32>,
}

/// The body of `PUT .../prompt-template`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplatePut {
    pub template: String,
    /// Refuse the save (409) unless the template is still at this version.
    pub expected_version: Option<i32>,
    /// Save even with lint errors; recorded as forced.
    #[serde(default)]
    pub force: bool,
    /// Why the save is forced (kept with the version; at most 500 characters).
    pub reason: Option<String>,
}

/// A template save: the text, the version it replaces, and whether to force it.
#[derive(Debug, Default)]
pub struct Change {
    /// `None` clears the template (the built-in assembly renders).
    pub template: Option<String>,
    pub expected_version: Option<i32>,
    pub force: bool,
    pub reason: Option<String>,
}

impl From<TemplatePut> for Change {
    fn from(put: TemplatePut) -> Self {
        Self {
            template: Some(put.template),
            expected_version: put.expected_version,
            force: put.force,
            reason: put.reason,
        }
    }
}

/// The longest reason kept with a forced version.
pub const MAX_REASON_CHARS: usize = 500;

/// A version row to write.
pub struct NewVersion<'a> {
    pub agent_id: i32,
    pub version: i32,
    pub forced: bool,
    pub reason: Option<&'a str>,
    pub author: &'a str,
}

/// The details of a stale version.
#[derive(Debug, Serialize)]
struct Versions {
    expected_version: i32,
    current_version: i32,
}

/// 409: the soul or template moved on since the caller read it.
pub fn stale(kind: Kind, expected: i32, current: i32) -> Error {
    Error::conflict(format!(
        "the {} is at version {current}, not {expected}; reload and apply your change again",
        kind.as_str()
    ))
    .with_details(Versions {
        expected_version: expected,
        current_version: current,
    })
}

pub async fn record(
    write: &guard::Write,
    kind: Kind,
    new: &NewVersion<'_>,
    body: Option<String>,
) -> Result<prompt_versions::Model> {
    Ok(prompt_versions::ActiveModel {
        agent_id: Set(new.agent_id),
        kind: Set(kind.as_str().to_owned()),
        version: Set(new.version),
        body: Set(body),
        forced: Set(new.forced),
        reason: Set(new.reason.map(str::to_owned)),
        author: Set(new.author.to_owned()),
        created_at: Set(write.now()),
        ..Default::default()
    }
    .insert(&**write)
    .await?)
}

/// Templates over the configured limit are refused with the limit named.
pub fn check_template_size(max_template_bytes: usize, template: &str) -> Result<()> {
    if template.len() > max_template_bytes {
        return Err(Error::new(
            ErrorKind::TooLarge,
            "template_too_large",
            format!(
                "the template is {} bytes; the limit is {} bytes",
                template.len(),
                max_template_bytes
            ),
        ));
    }
    Ok(())
}

/// Tool names for the lint: active rows, and names known to be inactive or retired.
/// `texts`: only the names these mention are read (what the lint of these texts can
/// ask about); `None` reads every name (an apply linting many agents at once).
pub async fn lint_tool_names(
    db: &impl ConnectionTrait,
    texts: Option<&[&str]>,
) -> Result<lint::ToolNames> {
    // Names and states only: a registry's schemas and descriptions are most of its bytes.
    let states = || {
        tools::Entity::find()
            .select_only()
            .column(tools::Column::Name)
            .column(tools::Column::IsActive)
            .column_as(tools::Column::DeletedAt.is_null(), "live")
    };
    let rows: Vec<(String, bool, bool)> = match texts {
        None => states().into_tuple().all(db).await?,
        Some(texts) => {
            let words: Vec<&str> = lint::mentioned(texts.iter().copied()).into_iter().collect();
            let mut rows = Vec::new();
            for chunk in words.chunks(500) {
                let found: Vec<(String, bool, bool)> = states()
                    .filter(tools::Column::Name.is_in(chunk.iter().copied()))
                    .into_tuple()
                    .all(db)
                    .await?;
                rows.extend(found);
            }
            rows
        }
    };
    let mut names = lint::ToolNames::default();
    for (name, active, live) in rows {
        if active && live {
            names.active.insert(name);
        } else {
            names.inactive.insert(name);
        }
    }
    if let Ok(seeds) = crate::registry::catalog::Seeds::shared() {
        let retired: BTreeSet<String> = seeds
            .catalog
            .deactivated
            .iter()
            .chain(seeds.catalog.renamed.keys())
            .cloned()
            .collect();
        names.inactive.extend(retired);
    }
    Ok(names)
}

/// Size-checks and lints a candidate template, off the async workers.
pub async fn lint(
    db: &DatabaseConnection,
    max_template_bytes: usize,
    text: &str,
) -> Result<Vec<lint::Problem>> {
    check_template_size(max_template_bytes, text)?;
    let names = lint_tool_names(db, Some(&[text])).await?;
    let text = text.to_owned();
    tokio::task::spawn_blocking(move || lint::lint(&text, &names))
        .await
        .map_err(|e| Error::internal(format_args!("the lint did not finish: {e}")))
}

/// A new agent's template: lint errors refuse it (there is no `force` on create).
pub async fn lint_new(
    db: &DatabaseConnection,
    max_template_bytes: usize,
    text: &str,
) -> Result<Vec<lint::Problem>> {
    unforced(lint(db, max_template_bytes, text).await?)
}

/// Lints a template a write carries without `force` (a configuration file's),
/// against tool names read once for the whole write.
pub fn lint_with(
    names: &lint::ToolNames,
    max_template_bytes: usize,
    text: &str,
) -> Result<Vec<lint::Problem>> {
    check_template_size(max_template_bytes, text)?;
    unforced(lint::lint(text, names))
}

/// Lint errors refuse a template saved without `force`.
fn unforced(problems: Vec<lint::Problem>) -> Result<Vec<lint::Problem>> {
    if lint::has_errors(&problems) {
        return Err(Error::refused(
            "lint_failed",
            "the template has lint errors; fix them, or create the agent without a template and save it with \"force\": true",
        )
        .with_details(Problems { problems }));
    }
    Ok(problems)
}

pub async fn get(db: &DatabaseConnection, name: &str) -> Result<TemplateView> {
    let found = row(db, name).await?;
    Ok(TemplateView {
        agent: found.name,
        template: found.prompt_template,
        version: found.template_version,
    })
}

/// Saves a new template version (`None`: back to the built-in assembly): lint first
/// (errors → 422 unless `force`), then the optimistic version check (409), then the
/// write, the version row and the generation bump in one transaction.
pub async fn save(
    prompts: &Prompts<'_>,
    max_template_bytes: usize,
    author: &str,
    name: &str,
    change: Change,
    key: Option<&Pending>,
) -> Result<SavedTemplate> {
    let Change {
        template,
        expected_version,
        force,
        reason,
    } = change;
    let reason = reason.filter(|r| !r.trim().is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(Error::invalid(format!(
            "reason: at most {MAX_REASON_CHARS} characters"
        )));
    }
    let problems = match &template {
        Some(text) => lint(prompts.db, max_template_bytes, text).await?,
        None => Vec::new(),
    };
    if lint::has_errors(&problems) && !force {
        return Err(Error::refused(
            "lint_failed",
            "the template has lint errors; fix them or save with \"force\": true",
        )
        .with_details(Problems { problems }));
    }
    if let Some(text) = &template {
        let loaded = crate::fetch::agent(prompts, name).await?;
        crate::fetch::check_worst_case(prompts, text, &loaded.agent).await?;
    }
    let mut write = guard::begin_for_agents(prompts.db, prompts.clock.now())
        .await?
        .keyed(key)
        .await?
        .by(author);
    let version = Version {
        forced: force,
        reason: reason.as_deref(),
        author,
    };
    let (found, saved) = save_in(&mut write, name, template, expected_version, &version).await?;
    guard::commit(write, prompts.generation).await?;
    Ok(SavedTemplate {
        agent: found.name,
        version: saved.version,
        template: saved.body,
        forced: saved.forced,
        warnings: problems,
    })
}

/// How a new template version is recorded.
pub struct Version<'a> {
    /// Saved despite lint errors (also lets `loadout check` report its problems as
    /// warnings: an explicit decision, not drift).
    pub forced: bool,
    pub reason: Option<&'a str>,
    pub author: &'a str,
}

/// Writes a new template version inside an open write (the text linted before):
/// the optimistic version check (409), the agent's row and the version row.
pub async fn save_in(
    write: &mut guard::Write,
    name: &str,
    template: Option<String>,
    expected_version: Option<i32>,
    how: &Version<'_>,
) -> Result<(agent_configurations::Model, prompt_versions::Model)> {
    let found = row(&**write, name).await?;
    write.touch(found.id).await?;
    if let Some(expected) = expected_version
        && expected != found.template_version
    {
        return Err(stale(Kind::Template, expected, found.template_version));
    }
    let version = found.template_version + 1;
    // Conditional on the version read above, so two concurrent saves cannot both win.
    let updated = agent_configurations::Entity::update_many()
        .col_expr(
            agent_configurations::Column::PromptTemplate,
            Expr::value(template.clone()),
        )
        .col_expr(
            agent_configurations::Column::TemplateVersion,
            Expr::value(version),
        )
        .col_expr(
            agent_configurations::Column::UpdatedAt,
            Expr::value(write.now()),
        )
        .filter(agent_configurations::Column::Id.eq(found.id))
        .filter(agent_configurations::Column::TemplateVersion.eq(found.template_version))
        .exec(&**write)
        .await?;
    if updated.rows_affected != 1 {
        return Err(stale(Kind::Template, found.template_version, version));
    }
    let next = NewVersion {
        agent_id: found.id,
        version,
        forced: how.forced,
        reason: how.reason,
        author: how.author,
    };
    let saved = record(write, Kind::Template, &next, template).await?;
    Ok((found, saved))
}

/// A page of the template's versions, oldest first (`page.cursor`: newer than
/// that version).
pub async fn versions(
    db: &DatabaseConnection,
    name: &str,
    page: page::ByNumber,
) -> Result<VersionList> {
    let limit = crate::error::check_limit(page.limit)?;
    let found = row(db, name).await?;
    let mut query = prompt_versions::Entity::find()
        .filter(prompt_versions::Column::AgentId.eq(found.id))
        .filter(prompt_versions::Column::Kind.eq(Kind::Template.as_str()));
    if let Some(after) = page.cursor {
        query = query.filter(prompt_versions::Column::Version.gt(after));
    }
    let rows = query
        .order_by_asc(prompt_versions::Column::Version)
        .limit(limit + 1)
        .all(db)
        .await?;
    let (versions, next_after) = page::cut(rows, limit, |v| v.version);
    Ok(VersionList {
        agent: found.name,
        current_version: found.template_version,
        versions: versions.into_iter().map(VersionView::from).collect(),
        next_after,
    })
}

async fn one_version(
    db: &DatabaseConnection,
    name: &str,
    version: i32,
) -> Result<(agent_configurations::Model, prompt_versions::Model)> {
    let found = row(db, name).await?;
    let version_row = prompt_versions::Entity::find()
        .filter(prompt_versions::Column::AgentId.eq(found.id))
        .filter(prompt_versions::Column::Kind.eq(Kind::Template.as_str()))
        .filter(prompt_versions::Column::Version.eq(version))
        .one(db)
        .await?
        .ok_or_else(|| {
            Error::not_found(format!("agent {name:?} has no template version {version}"))
        })?;
    Ok((found, version_row))
}

pub async fn version(db: &DatabaseConnection, name: &str, version: i32) -> Result<VersionView> {
    Ok(one_version(db, name, version).await?.1.into())
}

/// A new version equal to version `n` (history is never rewritten), as forced as
/// the version it copies: lint and the check apply again otherwise.
pub async fn restore(
    prompts: &Prompts<'_>,
    max_template_bytes: usize,
    author: &str,
    name: &str,
    version: i32,
    key: Option<&Pending>,
) -> Result<SavedTemplate> {
    let (found, old) = one_version(prompts.db, name, version).await?;
    let expected = Some(found.template_version);
    let change = Change {
        template: old.body,
        expected_version: expected,
        force: old.forced,
        reason: old.reason,
    };
    save(prompts, max_template_bytes, author, name, change, key).await
}
