//! The registry write guard: every admin write runs in one transaction that may
//! not add a `loadout check` error, and bumps the configuration generation.
//!
//! [`begin`] notes the check's errors before the write; [`commit`] runs the check
//! again inside the same transaction and rolls back (422) if an error was added, so
//! the API can never create drift that `serve` or CI would then reject.
//!
//! A write that changes only some agents (their texts, links, labels, rollouts or
//! users' instructions) opens with [`begin_for_agents`] and names each agent with
//! [`Write::touch`] before changing it (or [`Write::created`] after making it): the
//! check then runs the rules about those agents only, and only they are published.
//! Nothing else a rule reads changed, so nothing else can gain an error; and the
//! write holds the lock for a few reads of its own agents, not of the registry (a
//! template save at 1,000 agents took 3.3 s with two whole checks). A write that
//! changes one tool says so ([`Write::changes_tool`]): it is checked whole, and only
//! the agents linked to the tool are published. Every other write checks and
//! publishes everything, as [`begin`] says.
//!
//! The guard is only sound if admin writes take turns: under READ COMMITTED two
//! writes that each pass the check alone could commit together a state it rejects
//! (a tool switched off while a soul that names it is saved). So the first statement
//! of every write bumps the generation, which locks the `loadout_state` row until
//! the transaction ends: the next write waits there, then reads (each Postgres
//! statement takes a fresh snapshot) everything the first committed. On SQLite the
//! transaction is `BEGIN IMMEDIATE`, which takes the database's one write lock.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use entity::agent_tools;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait,
    QueryFilter, QuerySelect,
};
use serde::Serialize;

use super::check::{self, Problem, Report, Severity};
use crate::cache::Generation;
use crate::error::{Error, Result};
use crate::execute::executors::Executors;

/// An admin write in progress: its transaction, and the check's errors before it.
pub struct Write {
    txn: DatabaseTransaction,
    errors_before: BTreeSet<String>,
    /// The generation this write bumped to, holding the row lock.
    generation: i64,
    /// Who makes it (a key name), for the revisions it publishes; `None` if unsaid.
    author: Option<String>,
    scope: Scope,
    /// Under [`Scope::Everything`], the one tool this write changes, if it said so:
    /// only the agents linked to it are published.
    tool: Option<i32>,
    /// The write's time: every row it stamps gets the same.
    now: DateTime<Utc>,
}

/// What a write may change, and so what its check reads and what it publishes.
enum Scope {
    /// Anything: the whole check, every agent published.
    Everything,
    /// These agents only.
    Agents(BTreeSet<i32>),
}

impl Write {
    /// The write's time, read once when it began.
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// Names who makes this write: the revisions it publishes record it.
    pub fn by(mut self, author: &str) -> Self {
        self.author = Some(author.to_owned());
        self
    }

    /// Records the request's `Idempotency-Key` (when it sent one) in this write, so
    /// the record commits exactly when the write does.
    pub async fn keyed(self, key: Option<&crate::db::idempotency::Pending>) -> Result<Self> {
        crate::db::idempotency::record_if(&self.txn, key).await?;
        Ok(self)
    }

    /// Before this write changes agent `id`: notes the agent's errors as they are,
    /// and has [`commit`] check and publish it. A write opened by [`begin`] already
    /// covers every agent.
    pub async fn touch(&mut self, agent_id: i32) -> Result<()> {
        let Scope::Agents(ids) = &mut self.scope else {
            return Ok(());
        };
        if !ids.insert(agent_id) {
            return Ok(());
        }
        let (_, errors) = agent_errors(&self.txn, &BTreeSet::from([agent_id])).await?;
        self.errors_before.extend(errors);
        Ok(())
    }

    /// This write changes tool `tool_id` and nothing else an agent serves: [`commit`]
    /// publishes only the agents linked to it (the check stays whole).
    pub fn changes_tool(&mut self, tool_id: i32) {
        self.tool = Some(tool_id);
    }

    /// A write of the registry itself (tools, channels, connectors) is checked and
    /// published whole: one opened for some agents only cannot make it.
    pub fn covers_registry(&self) -> Result<()> {
        match self.scope {
            Scope::Everything => Ok(()),
            Scope::Agents(_) => Err(Error::internal(
                "a registry write inside a write opened for some agents only",
            )),
        }
    }

    /// After this write made agent `id`: [`commit`] checks and publishes it (it had
    /// no errors before, as it did not exist).
    pub fn created(&mut self, agent_id: i32) {
        if let Scope::Agents(ids) = &mut self.scope {
            ids.insert(agent_id);
        }
    }
}

impl std::ops::Deref for Write {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        &self.txn
    }
}

/// The details of a refused write: every problem it would add.
#[derive(Debug, Serialize)]
pub struct Problems<T> {
    pub problems: Vec<T>,
}

/// A report with its errors, each as its one-line text (what a write compares).
fn with_errors(report: Report) -> (Report, BTreeSet<String>) {
    let errors = report
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(ToString::to_string)
        .collect();
    (report, errors)
}

/// The report and its errors, each as its one-line text (code, subject, message).
async fn errors(db: &impl ConnectionTrait) -> Result<(Report, BTreeSet<String>)> {
    let seeds = super::catalog::Seeds::shared().map_err(Error::internal)?;
    let executors = Executors::load(db, None).await?;
    let report = check::errors_only(db, &seeds.catalog, &executors).await?;
    Ok(with_errors(report))
}

/// The agents with a link to `tool_id`, on or off: a write that changes only that
/// tool changes what these agents serve, and no other's.
async fn agents_linked_to(db: &impl ConnectionTrait, tool_id: i32) -> Result<BTreeSet<i32>> {
    let ids: Vec<i32> = agent_tools::Entity::find()
        .select_only()
        .column(agent_tools::Column::AgentId)
        .filter(agent_tools::Column::ToolId.eq(tool_id))
        .into_tuple()
        .all(db)
        .await?;
    Ok(ids.into_iter().collect())
}

/// The error-raising rules about these agents only, as [`errors`] gives them.
async fn agent_errors(
    db: &impl ConnectionTrait,
    ids: &BTreeSet<i32>,
) -> Result<(Report, BTreeSet<String>)> {
    let seeds = super::catalog::Seeds::shared().map_err(Error::internal)?;
    // The agent rules never ask the executors: no connector needs reading.
    let executors = Executors::compiled_in();
    let report = check::agents(db, &seeds.catalog, &executors, ids).await?;
    Ok(with_errors(report))
}

/// Opens a write's transaction, waits for its turn (the generation row's lock) and
/// notes the registry check's errors before it.
pub async fn begin(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<Write> {
    let txn = crate::db::begin_write(db).await?;
    let generation = crate::db::generation::bump(&txn).await?;
    let (_, errors_before) = errors(&txn).await?;
    Ok(Write {
        txn,
        errors_before,
        generation,
        author: None,
        scope: Scope::Everything,
        tool: None,
        now,
    })
}

/// Opens a write that changes only the agents it [`Write::touch`]es or
/// [`Write::created`] (see the module's documentation); it reads nothing more yet.
pub async fn begin_for_agents(db: &DatabaseConnection, now: DateTime<Utc>) -> Result<Write> {
    let txn = crate::db::begin_write(db).await?;
    let generation = crate::db::generation::bump(&txn).await?;
    Ok(Write {
        txn,
        errors_before: BTreeSet::new(),
        generation,
        author: None,
        scope: Scope::Agents(BTreeSet::new()),
        tool: None,
        now,
    })
}

impl crate::db::Writer<'_> {
    /// [`begin`], at this writer's time, with its key recorded.
    pub async fn begin(&self) -> Result<Write> {
        begin(self.db, self.now).await?.keyed(self.key).await
    }

    /// [`begin_for_agents`], at this writer's time, with its key recorded.
    pub async fn begin_for_agents(&self) -> Result<Write> {
        begin_for_agents(self.db, self.now)
            .await?
            .keyed(self.key)
            .await
    }

    /// [`commit`] through this writer's generation.
    pub async fn commit(&self, write: Write) -> Result<()> {
        commit(write, self.generation).await
    }
}

/// Refuses the write (rolled back) if it would add a `loadout check` error;
/// otherwise commits (the generation [`begin`] bumped with it) and lets this process
/// see the write at once.
/// Ends a write without keeping anything (a dry run).
pub async fn rollback(write: Write) -> Result<()> {
    write.txn.rollback().await?;
    Ok(())
}

pub async fn commit(write: Write, generation: &Generation) -> Result<()> {
    // Every agent whose served content this write changed gets its revision here,
    // in the write's transaction: a refused write leaves none.
    let author = write.author.as_deref();
    let (report, _) = match &write.scope {
        Scope::Everything => {
            match write.tool {
                Some(tool) => {
                    let linked = agents_linked_to(&write.txn, tool).await?;
                    crate::releases::publish_some(&write.txn, &linked, author, write.now).await?;
                }
                None => {
                    crate::releases::publish_all(&write.txn, author, write.now).await?;
                }
            }
            errors(&write.txn).await?
        }
        Scope::Agents(ids) => {
            crate::releases::publish_some(&write.txn, ids, author, write.now).await?;
            agent_errors(&write.txn, ids).await?
        }
    };
    let added: Vec<Problem> = report
        .problems
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .filter(|p| !write.errors_before.contains(&p.to_string()))
        .collect();
    if let Some(first) = added.first() {
        let message = format!("this change would make `loadout check` fail: {first}");
        write.txn.rollback().await?;
        return Err(Error::refused("registry_check_failed", message)
            .with_details(Problems { problems: added }));
    }
    write.txn.commit().await?;
    generation.observe(write.generation);
    Ok(())
}
