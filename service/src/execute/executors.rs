//! What carries out a tool call. A `builtin` tool needs an executor compiled into
//! this binary; an `api` or `mcp` tool needs a connector an operator configured.
//! The proposals issue fills this in; today the registry knows loadout's own builtin
//! (`update_instructions`: loadout owns users' instructions) and no connectors.

use std::collections::{BTreeMap, BTreeSet};

use super::{Call, Outcome};
use crate::connectors::client::{self as connector, Connector, Kind, Outbound, sealing};
use crate::secrets::Keyring;
use crate::vocab::ToolType;

/// The longest any call may run; a connector's `timeout_ms` may not exceed it.
pub const EXECUTION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long past its timeout an execution's lease lasts: time to record the outcome.
pub const LEASE_MARGIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Builtin tools this build can execute.
pub const BUILTIN: [&str; 1] = ["update_instructions"];

/// The executors available to this process.
#[derive(Clone, Debug, Default)]
pub struct Executors {
    builtin: BTreeSet<String>,
    /// Tool name → the connector its calls go to.
    connectors: BTreeMap<String, Connector>,
    /// The client connector calls go through; `None` where nothing is called
    /// (`loadout check` and the write guard only ask what is runnable).
    outbound: Option<Outbound>,
    /// The keys connectors' sealed header values open with, at call time.
    keyring: Keyring,
}

impl Executors {
    /// This build's builtins and no connectors.
    pub fn compiled_in() -> Self {
        Self {
            builtin: BUILTIN.iter().map(|s| (*s).to_owned()).collect(),
            connectors: BTreeMap::new(),
            outbound: None,
            keyring: Keyring::none(),
        }
    }

    /// The same executors opening sealed header values with `keyring`.
    pub fn with_keyring(mut self, keyring: Keyring) -> Self {
        self.keyring = keyring;
        self
    }

    /// The keys sealed header values open with (`loadout check` asks whether any).
    pub fn keyring(&self) -> &Keyring {
        &self.keyring
    }

    /// The builtins plus every live tool ↔ connector binding in the database.
    pub async fn load(
        db: &impl sea_orm::ConnectionTrait,
        outbound: Option<Outbound>,
    ) -> Result<Self, sea_orm::DbErr> {
        use entity::{connectors, tools};
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let mut executors = Self::compiled_in();
        executors.outbound = outbound;
        let bound = tools::Entity::find()
            .filter(tools::Column::ConnectorId.is_not_null())
            .filter(tools::Column::DeletedAt.is_null())
            .all(db)
            .await?;
        let live: BTreeMap<i32, connectors::Model> = connectors::Entity::find()
            .filter(connectors::Column::DeletedAt.is_null())
            .all(db)
            .await?
            .into_iter()
            .map(|c| (c.id, c))
            .collect();
        for tool in bound {
            if let Some(c) = tool.connector_id.and_then(|id| live.get(&id)) {
                let connector = connector_of(c, &tool);
                executors.connectors.insert(tool.name, connector);
            }
        }
        Ok(executors)
    }

    /// Calls `tool` as `pin` says (a gated agent's served revision pinned it): the
    /// connector named there, at the pinned URL, method, timeout and kind; its live
    /// header values only while it still has the pinned scheme, host and port, so
    /// credentials given for a new host never go to the pinned one. A pinned
    /// connector that is gone leaves the tool unconnected.
    pub async fn pin(
        &mut self,
        db: &impl sea_orm::ConnectionTrait,
        tool: &str,
        pin: &connector::ConnectorPin,
    ) -> Result<(), sea_orm::DbErr> {
        use entity::{connectors, tools};
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let live = connectors::Entity::find()
            .filter(connectors::Column::Name.eq(&pin.name))
            .filter(connectors::Column::DeletedAt.is_null())
            .one(db)
            .await?;
        let row = tools::Entity::find()
            .filter(tools::Column::Name.eq(tool))
            .filter(tools::Column::DeletedAt.is_null())
            .one(db)
            .await?;
        let (Some(live), Some(row)) = (live, row) else {
            self.connectors.remove(tool);
            return Ok(());
        };
        let pinned = connectors::Model {
            kind: pin.kind.clone(),
            url: pin.url.clone(),
            method: pin.method.clone(),
            timeout_ms: pin.timeout_ms,
            headers: match connector::same_origin(&live.url, &pin.url) {
                true => live.headers.clone(),
                false => serde_json::Value::Object(serde_json::Map::new()),
            },
            ..live
        };
        self.connectors
            .insert(tool.to_owned(), connector_of(&pinned, &row));
        Ok(())
    }

    /// Binds a tool to a connector (for tests and embedding).
    pub fn connect(&mut self, tool: &str, connector: Connector) {
        self.connectors.insert(tool.to_owned(), connector);
    }

    /// How long a call of `tool` may run: its connector's timeout, or the cap.
    pub fn timeout_for(&self, tool: &str) -> std::time::Duration {
        self.connectors
            .get(tool)
            .map_or(EXECUTION_TIMEOUT, |c| c.timeout.min(EXECUTION_TIMEOUT))
    }

    /// The lease an execution of `tool` takes: its timeout plus [`LEASE_MARGIN`].
    /// Past it, the executing process is presumed dead (a live call has timed out
    /// and recorded its outcome by then), so the sweeper never fails a live call.
    pub fn lease_for(&self, tool: &str) -> chrono::TimeDelta {
        let lease = self.timeout_for(tool) + LEASE_MARGIN;
        chrono::TimeDelta::from_std(lease).unwrap_or(chrono::TimeDelta::MAX)
    }

    pub fn has_builtin(&self, tool: &str) -> bool {
        self.builtin.contains(tool)
    }

    pub fn has_connector(&self, tool: &str) -> bool {
        self.connectors.contains_key(tool)
    }
}

/// Why a call cannot run now (answered with 424).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{tool} is not connected: {why}")]
pub struct NotRunnable {
    pub tool: String,
    pub why: String,
}

impl Executors {
    /// Whether a call of `tool` (of type `tool_type`) can run now.
    pub fn runnable(&self, tool: &str, tool_type: &str) -> Result<(), NotRunnable> {
        let builtin = tool_type.parse() == Ok(ToolType::Builtin);
        let ok = match builtin {
            true => self.has_builtin(tool),
            false => self.has_connector(tool),
        };
        if ok {
            Ok(())
        } else {
            Err(NotRunnable {
                tool: tool.to_owned(),
                why: match builtin {
                    true => "this build has no executor for it".to_owned(),
                    false => format!("no connector is configured for this {tool_type} tool"),
                },
            })
        }
    }

    /// Runs a call in its own task with a timeout. A failure, timeout or panic becomes
    /// `{success: false, result: {error, retryable}}` with a sanitised message; it never
    /// affects another call.
    pub async fn run(
        &self,
        db: &sea_orm::DatabaseConnection,
        call: Call,
        timeout: std::time::Duration,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Outcome {
        let db = db.clone();
        let connector = self.connectors.get(&call.tool).cloned();
        let outbound = self.outbound.clone();
        let keyring = self.keyring.clone();
        let timeout = connector.as_ref().map_or(timeout, |c| {
            c.timeout.min(timeout) + std::time::Duration::from_millis(100)
        });
        let task = tokio::spawn(async move {
            match connector {
                Some(c) => match outbound {
                    Some(outbound) => connector::run(&c, &outbound, &keyring, &call).await,
                    None => failure("this process has no outbound client", false),
                },
                None => run_builtin(&db, &call, now).await,
            }
        });
        let abort = task.abort_handle();
        match tokio::time::timeout(timeout, task).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(join)) => {
                tracing::error!(panicked = join.is_panic(), "an executor failed");
                failure("the executor failed unexpectedly", false)
            }
            Err(_) => {
                abort.abort();
                failure("the executor timed out", true)
            }
        }
    }
}

fn failure(error: &str, retryable: bool) -> Outcome {
    Outcome::failure(error, retryable)
}

async fn run_builtin(
    db: &sea_orm::DatabaseConnection,
    call: &Call,
    now: chrono::DateTime<chrono::Utc>,
) -> Outcome {
    match call.tool.as_str() {
        "update_instructions" => update_instructions(db, call, now).await,
        other => failure(&format!("no builtin executor for {other}"), false),
    }
}

/// Replaces the user's standing instructions for the agent in the call's tenant, so
/// that tenant's next rendered prompt shows them (and no other tenant's does); bumps
/// the configuration generation in the same transaction.
async fn update_instructions(
    db: &sea_orm::DatabaseConnection,
    call: &Call,
    now: chrono::DateTime<chrono::Utc>,
) -> Outcome {
    use entity::user_agent_prompt_customizations as uapc;
    use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
    let Some(user) = call.user_id.as_deref() else {
        return failure("update_instructions needs the call's user_id", false);
    };
    let Some(text) = call.arguments.get("instructions").and_then(|v| v.as_str()) else {
        return failure("update_instructions needs \"instructions\" text", false);
    };
    let write = async {
        let txn = crate::db::begin_write(db).await?;
        // First: the generation row's lock serialises this check-then-insert with
        // any other write of the same user's instructions (and with admin writes).
        crate::db::generation::bump(&txn).await?;
        let existing = uapc::Entity::find()
            .filter(uapc::Column::TenantId.eq(&call.tenant))
            .filter(uapc::Column::AgentId.eq(call.agent_id))
            .filter(uapc::Column::UserId.eq(user))
            .one(&txn)
            .await?;
        match existing {
            Some(row) => {
                let mut active: uapc::ActiveModel = row.into();
                active.instructions = Set(text.to_owned());
                active.is_active = Set(true);
                active.deleted_at = Set(None);
                active.updated_at = Set(now);
                active.update(&txn).await?;
            }
            None => {
                uapc::ActiveModel {
                    tenant_id: Set(call.tenant.clone()),
                    user_id: Set(user.to_owned()),
                    agent_id: Set(call.agent_id),
                    instructions: Set(text.to_owned()),
                    is_active: Set(true),
                    created_at: Set(now),
                    updated_at: Set(now),
                    deleted_at: Set(None),
                    ..Default::default()
                }
                .insert(&txn)
                .await?;
            }
        }
        let changed = crate::events::Instructions {
            tenant: call.tenant.clone(),
            agent: crate::events::agent_name(&txn, call.agent_id).await?,
            user: user.to_owned(),
            active: true,
        };
        crate::events::record(
            &txn,
            now,
            crate::events::Event::InstructionsChanged(changed),
        )
        .await?;
        txn.commit().await
    };
    match write.await {
        Ok(()) => Outcome {
            success: true,
            result: serde_json::Value::Object(serde_json::Map::from_iter([(
                "updated".to_owned(),
                serde_json::Value::Bool(true),
            )])),
        },
        Err(e) => {
            tracing::error!(error = %e, "update_instructions could not write");
            failure("the instructions could not be saved; try again", true)
        }
    }
}

fn connector_of(row: &entity::connectors::Model, tool: &entity::tools::Model) -> Connector {
    let headers = sealing::stored(row);
    Connector {
        id: row.id,
        name: row.name.clone(),
        // A drifted kind is called as neither: `check` reports it, the call fails.
        kind: row.kind.parse().unwrap_or(Kind::Http),
        remote_tool: tool
            .remote_name
            .clone()
            .unwrap_or_else(|| tool.name.clone()),
        url: row.url.clone(),
        method: row.method.clone(),
        headers,
        timeout: std::time::Duration::from_millis(u64::try_from(row.timeout_ms).unwrap_or(30_000)),
        remote_schema: tool.remote_schema.clone().filter(|_| tool.strict),
        accepted_schema: tool
            .remote_schema
            .clone()
            .filter(|_| !row.trusted && tool.remote_name.is_some()),
    }
}
