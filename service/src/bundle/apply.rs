//! Applying a bundle: the whole change in one registry write (so a result that
//! `loadout check` would refuse is refused whole, nothing written), after the
//! staleness check, publishing revisions in the same transaction and, for gated
//! agents, opening change requests for `production` instead of moving it.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, TimeDelta, Utc};
use entity::{agent_configurations, agent_labels, agent_tools, channels, connectors, tools};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    Set,
};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::plan::{self, Action, Change, Plan, PlanFile};
use super::read::{self, Current};
use super::{
    AgentDoc, Bundle, ChannelDoc, ConnectorDoc, HeaderValue, LAYOUT_VERSION, State, ToolDoc,
};
use crate::actions::connector::store;
use crate::agents::change_requests::{self, ChangeRequestView, ChangeState};
use crate::agents::template::{self, Kind};
use crate::auth::Principal;
use crate::cache::Generation;
use crate::error::{Error, Result, check_name, check_size};
use crate::execute::connector::{Kind as ConnectorKind, Outbound, sealing};
use crate::prompt::lint;
use crate::registry::{ToolType, guard, links};
use crate::releases::{PRODUCTION, ReleaseMode};
use crate::secrets::Keyring;
use crate::vocab::MAX_TEXT_BYTES;

/// Channel guidance is limited to this many bytes (as `PATCH /v1/channels`).
const MAX_GUIDANCE_BYTES: usize = 64 * 1024;

/// What the caller started from: apply refuses objects changed since.
pub enum Base {
    /// A plan (`--plan FILE`, or the `plan` of an HTTP apply).
    Plan(PlanFile),
    /// The state an export wrote in the folder's root file.
    Export(State),
    /// Nothing known (a folder written by hand): no staleness check.
    Nothing,
}

/// Everything an apply takes besides the database.
pub struct Apply<'a> {
    /// The configuration wanted; header values given as values are sealed, given
    /// as `env` keep what the instance holds.
    pub target: Bundle,
    pub base: Base,
    pub prune: bool,
    /// Who applies (a key name, or `cli`): revisions and versions record it.
    pub who: &'a Principal,
    pub keyring: &'a Keyring,
    /// Checks a new or changed connector URL as `POST /v1/connectors` does.
    pub outbound: &'a Outbound,
    pub max_template_bytes: usize,
    /// How long a change request for a gated agent's `production` waits.
    pub request_ttl: TimeDelta,
    pub now: DateTime<Utc>,
}

/// What an apply did.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ConfigApplied)]
pub struct Applied {
    /// The instance's fingerprint before.
    pub before: String,
    /// Its fingerprint after.
    pub after: String,
    /// The changes made (the plan it carried out).
    pub changes: Vec<Change>,
    pub unchanged: usize,
    /// Change requests opened for gated agents' `production`.
    pub change_requests: Vec<ChangeRequestView>,
}

/// The details of a refusal for objects changed since the base.
#[derive(Debug, Serialize)]
struct Stale {
    objects: Vec<String>,
}

/// Checks every object before the write (no database): names, sizes, definitions.
fn check(target: &Bundle) -> Result<()> {
    if target.version != LAYOUT_VERSION {
        return Err(Error::refused(
            "layout_version",
            format!(
                "the configuration is layout version {}; this loadout reads version {LAYOUT_VERSION}",
                target.version
            ),
        ));
    }
    for a in &target.agents {
        check_name("agent", &a.name)?;
        if !a.identity.is_object() {
            return Err(Error::refused(
                "invalid_identity",
                format!("agent {}: identity must be an object", a.name),
            ));
        }
        check_size("soul", &a.soul, MAX_TEXT_BYTES)?;
        for text in [&a.operating_model, &a.interaction_learning]
            .into_iter()
            .flatten()
        {
            check_size("section", text, MAX_TEXT_BYTES)?;
        }
        a.release_mode.parse::<ReleaseMode>().map_err(|_| {
            Error::refused(
                "invalid_release_mode",
                format!("agent {}: release_mode must be direct or gated", a.name),
            )
        })?;
    }
    for t in &target.tools {
        check_name("tool", &t.name)?;
        crate::registry::tools::check_type(&t.tool_type)?;
        crate::registry::tools::check_description(&t.description)?;
        crate::registry::tools::check_definition(
            &t.name,
            &t.approval_tier,
            &t.parameters,
            !t.strict,
        )?;
    }
    for c in &target.channels {
        check_name("channel", &c.name)?;
        check_size("guidance", &c.guidance, MAX_GUIDANCE_BYTES)?;
    }
    for c in &target.connectors {
        check_name("connector", &c.name)?;
        let kind = store::check_kind(&c.kind)?;
        store::check_method(&c.method)?;
        store::check_timeout(c.timeout_ms)?;
        let probe: Map<String, Value> = c
            .headers
            .iter()
            .map(|(name, value)| {
                let text = match value {
                    HeaderValue::Value { value } => value.clone(),
                    HeaderValue::Env { .. } => String::new(),
                };
                (name.clone(), Value::String(text))
            })
            .collect();
        store::check_headers(&probe)?;
        store::check_transport_headers(kind, &probe)?;
    }
    Ok(())
}

/// Every connector URL the configuration sets anew (a new connector, or a changed
/// URL) is checked as the connectors route checks it, before the write: a URL
/// `POST /v1/connectors` refuses is refused here too.
/// A connector moving to another scheme, host or port keeps no stored header
/// value, as with `PATCH /v1/connectors`: each header it names needs a value
/// given with the move (credentials meant for one server never go to another).
fn refuse_kept_headers(doc: &ConnectorDoc) -> Result<()> {
    let kept: Vec<&str> = doc
        .headers
        .iter()
        .filter(|(_, v)| matches!(v, HeaderValue::Env { .. }))
        .map(|(name, _)| name.as_str())
        .collect();
    if kept.is_empty() {
        return Ok(());
    }
    Err(Error::refused(
        "headers_need_values",
        format!(
            "connector {} moves to another host: its stored header values are never sent there; give {} a value with the move",
            doc.name,
            kept.join(", ")
        ),
    ))
}

async fn check_urls(db: &DatabaseConnection, outbound: &Outbound, target: &Bundle) -> Result<()> {
    let held: HashMap<String, String> = connectors::Entity::find()
        .filter(connectors::Column::DeletedAt.is_null())
        .all(db)
        .await?
        .into_iter()
        .map(|c| (c.name, c.url))
        .collect();
    for c in &target.connectors {
        if held.get(&c.name) == Some(&c.url) {
            continue;
        }
        outbound
            .check_url(&c.url)
            .await
            .map_err(|e| Error::refused("url_refused", format!("connector {}: {}", c.name, e)))?;
    }
    Ok(())
}

/// Objects whose fingerprint moved since `base` and is not already what `target`
/// wants (an object someone else changed).
fn stale(base: &BTreeMap<String, String>, now: &State, target: &State) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = base.keys().chain(now.objects.keys()).collect();
    keys.into_iter()
        .filter(|key| {
            let current = now.objects.get(*key);
            current != base.get(*key) && current != target.objects.get(*key)
        })
        .cloned()
        .collect()
}

fn refuse_stale(objects: Vec<String>, since: &str) -> Error {
    Error::new(
        crate::error::Kind::Conflict,
        "configuration_changed",
        format!(
            "the instance changed since the {since}: {}; export or plan again",
            objects.join(", ")
        ),
    )
    .with_details(Stale { objects })
}

/// Plans and, when something would change, applies `input` in one guarded write.
/// A dry run (`plan_only`) plans inside the same checks and writes nothing.
pub async fn apply(
    db: &DatabaseConnection,
    generation: &Generation,
    input: Apply<'_>,
) -> Result<Applied> {
    check(&input.target)?;
    check_urls(db, input.outbound, &input.target).await?;
    let target_state = input.target.state();
    if let Base::Plan(plan) = &input.base {
        if plan.version != plan::PLAN_VERSION {
            return Err(Error::refused(
                "plan_version",
                "the plan is of another loadout version",
            ));
        }
        if plan.target != target_state.instance {
            return Err(Error::new(
                crate::error::Kind::Conflict,
                "configuration_changed",
                "the configuration changed since the plan was made: plan again",
            ));
        }
        if plan.prune != input.prune {
            return Err(Error::refused(
                "plan_prune",
                "the plan was made with a different --prune: plan again, or apply as planned",
            ));
        }
    }
    let write = guard::begin(db).await?.by(&input.who.member);
    let current = read::current(&*write).await?;
    let now_state = current.bundle.state();
    let stale_objects = match &input.base {
        Base::Plan(plan) => stale(&plan.objects, &now_state, &target_state),
        Base::Export(state) => stale(&state.objects, &now_state, &target_state),
        Base::Nothing => Vec::new(),
    };
    if !stale_objects.is_empty() {
        let since = match input.base {
            Base::Plan(_) => "plan",
            _ => "export",
        };
        guard::rollback(write).await?;
        return Err(refuse_stale(stale_objects, since));
    }
    let plan = plan::compute(&current, &input.target, input.prune, Some(input.keyring));
    if !plan.changes_anything {
        guard::rollback(write).await?;
        return Ok(Applied {
            before: plan.against.clone(),
            after: plan.against,
            changes: Vec::new(),
            unchanged: plan.unchanged,
            change_requests: Vec::new(),
        });
    }
    let mut writer = Writer {
        db: &write,
        current: &current,
        input: &input,
        agents: HashMap::new(),
        tools: HashMap::new(),
        connectors: HashMap::new(),
        lint_names: None,
    };
    writer.run(&plan).await?;
    let requests = writer.gated_requests().await?;
    let after = read::current(&*write).await?.bundle.state().instance;
    guard::commit(write, generation).await?;
    Ok(Applied {
        before: plan.against,
        after,
        changes: plan.changes,
        unchanged: plan.unchanged,
        change_requests: requests,
    })
}

/// The write in progress: the rows made or updated so far, by name.
struct Writer<'a> {
    db: &'a guard::Write,
    current: &'a Current,
    input: &'a Apply<'a>,
    agents: HashMap<String, agent_configurations::Model>,
    tools: HashMap<String, tools::Model>,
    connectors: HashMap<String, connectors::Model>,
    lint_names: Option<lint::ToolNames>,
}

fn split(object: &str) -> (&str, &str) {
    object.split_once('/').unwrap_or((object, ""))
}

impl Writer<'_> {
    fn txn(&self) -> &sea_orm::DatabaseTransaction {
        self.db
    }

    async fn run(&mut self, plan: &Plan) -> Result<()> {
        let input = self.input;
        let target = &input.target;
        let by_kind = |kind: &str| -> Vec<(&Change, &str)> {
            plan.changes
                .iter()
                .filter_map(|c| {
                    let (k, name) = split(&c.object);
                    (k == kind).then_some((c, name))
                })
                .collect()
        };
        for (change, name) in by_kind("connector") {
            if let Some(doc) = target.connectors.iter().find(|c| c.name == name) {
                self.connector(change, doc).await?;
            }
        }
        for (_, name) in by_kind("tool") {
            if let Some(doc) = target.tools.iter().find(|t| t.name == name) {
                self.tool(doc).await?;
            }
        }
        for (_, name) in by_kind("channel") {
            if let Some(doc) = target.channels.iter().find(|c| c.name == name) {
                self.channel(doc).await?;
            }
        }
        for (change, name) in by_kind("agent") {
            if let Some(doc) = target.agents.iter().find(|a| a.name == name) {
                self.agent(change, doc).await?;
            }
        }
        for change in plan.changes.iter().filter(|c| c.action == Action::Remove) {
            self.remove(&change.object).await?;
        }
        Ok(())
    }

    /// The live connector of that name, as this write left it.
    fn connector_row(&self, name: &str) -> Option<&connectors::Model> {
        self.connectors
            .get(name)
            .or_else(|| self.current.connectors.get(name))
    }

    fn tool_row(&self, name: &str) -> Option<&tools::Model> {
        self.tools
            .get(name)
            .or_else(|| self.current.tools.get(name))
    }

    async fn connector(&mut self, change: &Change, doc: &ConnectorDoc) -> Result<()> {
        let now = Utc::now();
        let existing = self.current.connectors.get(&doc.name).cloned();
        let row = match existing {
            Some(row) => row,
            None => connectors::ActiveModel {
                name: Set(doc.name.clone()),
                kind: Set(doc.kind.clone()),
                url: Set(doc.url.clone()),
                method: Set(doc.method.clone()),
                headers: Set(Value::Object(Map::new())),
                timeout_ms: Set(doc.timeout_ms),
                created_at: Set(now),
                updated_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            }
            .insert(self.txn())
            .await
            .map_err(|e| taken(e, "connector", &doc.name))?,
        };
        let moved = change.action != Action::Create
            && !crate::execute::connector::same_origin(&row.url, &doc.url);
        if moved {
            refuse_kept_headers(doc)?;
        }
        let headers_changed = moved
            || change.action == Action::Create
            || change.fields.iter().any(|f| f.field.starts_with("header "));
        let mut active: connectors::ActiveModel = row.clone().into();
        active.kind = Set(doc.kind.clone());
        active.url = Set(doc.url.clone());
        active.method = Set(doc.method.clone());
        active.timeout_ms = Set(doc.timeout_ms);
        if headers_changed {
            active.headers = Set(self.headers(&row, doc)?);
        }
        active.updated_at = Set(now);
        let saved = active.update(self.txn()).await?;
        self.connectors.insert(doc.name.clone(), saved);
        Ok(())
    }

    /// The headers to store: given values sealed for this connector, `env` ones
    /// kept as stored (a header the instance does not hold needs a value).
    fn headers(&self, row: &connectors::Model, doc: &ConnectorDoc) -> Result<Value> {
        let stored: HashMap<String, String> = sealing::stored(row).into_iter().collect();
        let mut given = Map::new();
        let mut kept = Map::new();
        for (name, value) in &doc.headers {
            match value {
                HeaderValue::Value { value } => {
                    given.insert(name.clone(), Value::String(value.clone()));
                }
                HeaderValue::Env { env } => match stored.get(name) {
                    Some(held) => {
                        kept.insert(name.clone(), Value::String(held.clone()));
                    }
                    None => {
                        return Err(Error::refused(
                            "header_value_missing",
                            format!(
                                "connector {}: header {name} has no value (set {env}, or give it as a value)",
                                doc.name
                            ),
                        ));
                    }
                },
            }
        }
        let sealed = match given.is_empty() {
            true => Map::new(),
            false => match sealing::seal(self.input.keyring, row.id, given)? {
                Value::Object(map) => map,
                _ => Map::new(),
            },
        };
        kept.extend(sealed);
        Ok(Value::Object(kept))
    }

    async fn tool(&mut self, doc: &ToolDoc) -> Result<()> {
        let now = Utc::now();
        let tool_type = crate::registry::tools::check_type(&doc.tool_type)?;
        let connector_id = match &doc.connector {
            None => None,
            Some(name) => {
                let connector = self.connector_row(name).ok_or_else(|| {
                    Error::refused(
                        "unknown_connector",
                        format!("tool {}: no connector named {name:?}", doc.name),
                    )
                })?;
                let kind = connector
                    .kind
                    .parse::<ConnectorKind>()
                    .map(ConnectorKind::tool_type);
                if !matches!(tool_type, ToolType::Api | ToolType::Mcp) || kind != Ok(tool_type) {
                    return Err(Error::refused(
                        "connector_kind_mismatch",
                        format!(
                            "tool {} is a {} tool and {name} an {} connector: api tools take http connectors, mcp tools mcp ones, builtins none",
                            doc.name, doc.tool_type, connector.kind
                        ),
                    ));
                }
                Some(connector.id)
            }
        };
        let mut active = match self.current.tools.get(&doc.name) {
            Some(row) => row.clone().into(),
            None => tools::ActiveModel {
                name: Set(doc.name.clone()),
                created_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            },
        };
        active.tool_type = Set(tool_type.as_str().to_owned());
        active.description = Set(doc.description.clone());
        active.approval_tier = Set(doc.approval_tier.clone());
        active.parameters = Set(doc.parameters.clone());
        active.prompt_section = Set(doc.prompt_section.clone());
        active.connector_id = Set(connector_id);
        active.strict = Set(doc.strict);
        active.is_active = Set(doc.active);
        active.updated_at = Set(now);
        let saved = match self.current.tools.contains_key(&doc.name) {
            true => active.update(self.txn()).await?,
            false => active
                .insert(self.txn())
                .await
                .map_err(|e| taken(e, "tool", &doc.name))?,
        };
        self.tools.insert(doc.name.clone(), saved);
        Ok(())
    }

    async fn channel(&mut self, doc: &ChannelDoc) -> Result<()> {
        let now = Utc::now();
        let mut active = match self.current.channels.get(&doc.name) {
            Some(row) => row.clone().into(),
            None => channels::ActiveModel {
                name: Set(doc.name.clone()),
                created_at: Set(now),
                deleted_at: Set(None),
                ..Default::default()
            },
        };
        active.description = Set(doc.description.clone());
        active.guidance = Set(doc.guidance.clone());
        active.include_operating_model = Set(doc.include_operating_model);
        active.include_interaction_learning = Set(doc.include_interaction_learning);
        active.include_session_section = Set(doc.include_session_section);
        active.updated_at = Set(now);
        match self.current.channels.contains_key(&doc.name) {
            true => active.update(self.txn()).await?,
            false => active
                .insert(self.txn())
                .await
                .map_err(|e| taken(e, "channel", &doc.name))?,
        };
        Ok(())
    }

    /// Lints a template the apply saves: errors refuse the apply (a file has no `force`).
    async fn lint(&mut self, agent: &str, text: &str) -> Result<()> {
        template::check_template_size(self.input.max_template_bytes, text)?;
        if self.lint_names.is_none() {
            self.lint_names = Some(template::lint_tool_names(self.txn()).await?);
        }
        let names = self
            .lint_names
            .as_ref()
            .ok_or_else(|| Error::internal("no lint names"))?;
        let problems = lint::lint(text, names);
        if lint::has_errors(&problems) {
            return Err(Error::refused(
                "lint_failed",
                format!("agent {agent}: the template has lint errors"),
            )
            .with_details(guard::Problems { problems }));
        }
        Ok(())
    }

    async fn agent(&mut self, change: &Change, doc: &AgentDoc) -> Result<()> {
        let now = Utc::now();
        let author = self.input.who.member.clone();
        let mode: ReleaseMode = doc.release_mode.parse().unwrap_or(ReleaseMode::Gated);
        let template_changed = change.texts.iter().any(|t| t.field == "template");
        if template_changed && let Some(text) = &doc.template {
            self.lint(&doc.name, text).await?;
        }
        let saved = match self.current.agents.get(&doc.name) {
            None => {
                let saved = agent_configurations::ActiveModel {
                    name: Set(doc.name.clone()),
                    identity: Set(doc.identity.clone()),
                    soul: Set(doc.soul.clone()),
                    prompt_template: Set(doc.template.clone()),
                    operating_model: Set(doc.operating_model.clone()),
                    interaction_learning: Set(doc.interaction_learning.clone()),
                    soul_version: Set(1),
                    template_version: Set(1),
                    release_mode: Set(mode.as_str().to_owned()),
                    created_at: Set(now),
                    updated_at: Set(now),
                    deleted_at: Set(None),
                    ..Default::default()
                }
                .insert(self.txn())
                .await
                .map_err(|e| taken(e, "agent", &doc.name))?;
                let first = template::NewVersion {
                    agent_id: saved.id,
                    version: 1,
                    forced: false,
                    reason: None,
                    author: &author,
                };
                template::record(self.txn(), Kind::Soul, &first, Some(doc.soul.clone())).await?;
                template::record(self.txn(), Kind::Template, &first, doc.template.clone()).await?;
                saved
            }
            Some(row) => {
                if mode == ReleaseMode::Direct
                    && ReleaseMode::or_gated(&row.release_mode) == ReleaseMode::Gated
                {
                    return Err(Error::refused(
                        "release_mode_gated",
                        format!(
                            "{} is gated: an apply cannot take the sign-off away; `loadout release-mode {} direct` on the database can",
                            doc.name, doc.name
                        ),
                    ));
                }
                let mut active: agent_configurations::ActiveModel = row.clone().into();
                active.identity = Set(doc.identity.clone());
                active.operating_model = Set(doc.operating_model.clone());
                active.interaction_learning = Set(doc.interaction_learning.clone());
                active.release_mode = Set(mode.as_str().to_owned());
                if row.soul != doc.soul {
                    let version = row.soul_version + 1;
                    active.soul = Set(doc.soul.clone());
                    active.soul_version = Set(version);
                    let next = template::NewVersion {
                        agent_id: row.id,
                        version,
                        forced: false,
                        reason: None,
                        author: &author,
                    };
                    template::record(self.txn(), Kind::Soul, &next, Some(doc.soul.clone())).await?;
                }
                if row.prompt_template != doc.template {
                    let version = row.template_version + 1;
                    active.prompt_template = Set(doc.template.clone());
                    active.template_version = Set(version);
                    let next = template::NewVersion {
                        agent_id: row.id,
                        version,
                        forced: false,
                        reason: None,
                        author: &author,
                    };
                    template::record(self.txn(), Kind::Template, &next, doc.template.clone())
                        .await?;
                }
                active.updated_at = Set(now);
                active.update(self.txn()).await?
            }
        };
        self.links(&saved, doc).await?;
        self.agents.insert(doc.name.clone(), saved);
        Ok(())
    }

    /// Switches on the links the document names; with `--prune`, off the others.
    async fn links(&mut self, agent: &agent_configurations::Model, doc: &AgentDoc) -> Result<()> {
        for name in &doc.tools {
            let tool = self.tool_row(name).cloned().ok_or_else(|| {
                Error::refused(
                    "unknown_tool",
                    format!("agent {}: no tool named {name:?} to link", doc.name),
                )
            })?;
            let on = self
                .current
                .links
                .get(&(agent.id, tool.id))
                .is_some_and(|l| l.is_active);
            if !on {
                links::set_in(self.txn(), agent, &tool, true).await?;
            }
        }
        if self.input.prune {
            let wanted: std::collections::HashSet<i32> = doc
                .tools
                .iter()
                .filter_map(|n| self.tool_row(n).map(|t| t.id))
                .collect();
            let detach: Vec<agent_tools::Model> = self
                .current
                .links
                .values()
                .filter(|l| l.agent_id == agent.id && l.is_active && !wanted.contains(&l.tool_id))
                .cloned()
                .collect();
            for link in detach {
                let mut active: agent_tools::ActiveModel = link.into();
                active.is_active = Set(false);
                active.updated_at = Set(Utc::now());
                active.update(self.txn()).await?;
            }
        }
        Ok(())
    }

    /// Soft-deletes one object (`--prune`).
    async fn remove(&mut self, object: &str) -> Result<()> {
        let now = Utc::now();
        let (kind, name) = split(object);
        match kind {
            "agent" => {
                if let Some(row) = self.current.agents.get(name) {
                    let mut active: agent_configurations::ActiveModel = row.clone().into();
                    active.deleted_at = Set(Some(now));
                    active.updated_at = Set(now);
                    active.update(self.txn()).await?;
                }
            }
            "tool" => {
                if let Some(row) = self.current.tools.get(name) {
                    agent_tools::Entity::update_many()
                        .col_expr(agent_tools::Column::IsActive, Expr::value(false))
                        .col_expr(agent_tools::Column::UpdatedAt, Expr::value(now))
                        .filter(agent_tools::Column::ToolId.eq(row.id))
                        .filter(agent_tools::Column::IsActive.eq(true))
                        .exec(self.txn())
                        .await?;
                    let mut active: tools::ActiveModel = row.clone().into();
                    active.is_active = Set(false);
                    active.deleted_at = Set(Some(now));
                    active.updated_at = Set(now);
                    active.update(self.txn()).await?;
                }
            }
            "channel" => {
                if let Some(row) = self.current.channels.get(name) {
                    let mut active: channels::ActiveModel = row.clone().into();
                    active.deleted_at = Set(Some(now));
                    active.updated_at = Set(now);
                    active.update(self.txn()).await?;
                }
            }
            "connector" => {
                if let Some(row) = self.current.connectors.get(name) {
                    let mut active: connectors::ActiveModel = row.clone().into();
                    active.headers = Set(Value::Object(Map::new()));
                    active.deleted_at = Set(Some(now));
                    active.updated_at = Set(now);
                    active.update(self.txn()).await?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Publishes now (the guard's commit publishes again, finding nothing new) and,
    /// for each gated agent whose `latest` moved, asks for `production` to follow by
    /// a change request (superseding one still pending).
    async fn gated_requests(&self) -> Result<Vec<ChangeRequestView>> {
        let published =
            crate::releases::publish_all(self.txn(), Some(&self.input.who.member)).await?;
        let mut live: HashMap<&str, &agent_configurations::Model> = self
            .current
            .agents
            .iter()
            .map(|(name, row)| (name.as_str(), row))
            .collect();
        live.extend(self.agents.iter().map(|(name, row)| (name.as_str(), row)));
        let gated: HashMap<i32, &agent_configurations::Model> = live
            .into_values()
            .filter(|a| ReleaseMode::or_gated(&a.release_mode) == ReleaseMode::Gated)
            .map(|a| (a.id, a))
            .collect();
        let mut opened = Vec::new();
        for p in published {
            if !gated.contains_key(&p.agent_id) || !p.moved.contains(&crate::releases::LATEST) {
                continue;
            }
            let Some(label) = production(self.txn(), p.agent_id).await? else {
                continue;
            };
            let to = entity::agent_revisions::Entity::find()
                .filter(entity::agent_revisions::Column::AgentId.eq(p.agent_id))
                .filter(entity::agent_revisions::Column::Number.eq(p.number))
                .one(self.txn())
                .await?
                .ok_or_else(|| Error::internal("a revision just published is missing"))?;
            if label.revision_id == to.id {
                continue;
            }
            let now = self.input.now;
            change_requests::end_pending(self.txn(), p.agent_id, PRODUCTION, now, |_| {
                Some(ChangeState::Superseded)
            })
            .await?;
            let request = change_requests::Request {
                agent_id: p.agent_id,
                label: PRODUCTION,
                from_revision_id: label.revision_id,
                to_revision_id: to.id,
                reason: Some("loadout apply"),
                expires_at: now + self.input.request_ttl,
                kind: change_requests::ChangeKind::Move,
                share_bp: None,
                guard: None,
                rollout_id: None,
            };
            opened.push(change_requests::open(self.txn(), self.input.who, request, now).await?);
        }
        Ok(opened)
    }
}

async fn production(
    db: &impl ConnectionTrait,
    agent_id: i32,
) -> Result<Option<agent_labels::Model>> {
    Ok(agent_labels::Entity::find()
        .filter(agent_labels::Column::AgentId.eq(agent_id))
        .filter(agent_labels::Column::Name.eq(PRODUCTION))
        .one(db)
        .await?)
}

fn taken(e: sea_orm::DbErr, what: &str, name: &str) -> Error {
    Error::from_db(e, || {
        format!(
            "a {what} named {name:?} existed and was deleted: names of deleted {what}s stay taken"
        )
    })
}
