//! Applying a bundle: the whole change in one registry write (so a result that
//! `loadout check` would refuse, or a dataset its owner would, is refused whole,
//! nothing written), after the staleness check, publishing revisions in the same
//! transaction and, for gated agents, opening change requests for `production`
//! instead of moving it.

use std::collections::{BTreeMap, HashMap};

use chrono::TimeDelta;
use entity::{agent_configurations, agent_labels, agent_tools, connectors};
use sea_orm::{ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::plan::{self, Action, Change, Plan, PlanFile};
use super::read::{self, Current};
use super::{
    AgentDoc, Bundle, ChannelDoc, ConnectorDoc, HeaderValue, LAYOUT_VERSION, State, ToolDoc,
};
use crate::agents::definition::{self, AgentUpdate, NewAgent};
use crate::agents::template;
use crate::auth::Principal;
use crate::connectors::client::Outbound;
use crate::connectors::store;
use crate::error::{Error, Result};
use crate::evals::cases::Case;
use crate::evals::datasets;
use crate::promotion::change_requests::{self, ChangeRequestView, ChangeState};
use crate::prompt::lint;
use crate::registry::{channels, guard, links, tools};
use crate::releases::{PRODUCTION, ReleaseMode};
use crate::secrets::Keyring;

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
    /// The bounds of the evaluation runs its `evals` check starts.
    pub evals: &'a crate::evals::EvalSettings,
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

/// Checks what belongs to the file format before the write (no database); each
/// object's own rules are its owner's, applied as it is written.
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
        release_mode(a)?;
    }
    Ok(())
}

fn release_mode(doc: &AgentDoc) -> Result<ReleaseMode> {
    doc.release_mode.parse::<ReleaseMode>().map_err(|_| {
        Error::refused(
            "invalid_release_mode",
            format!("agent {}: release_mode must be direct or gated", doc.name),
        )
    })
}

/// Every connector URL the configuration sets anew (a new connector, or a changed
/// URL) is checked as the connectors route checks it, before the write.
async fn check_urls(db: &DatabaseConnection, outbound: &Outbound, target: &Bundle) -> Result<()> {
    let held: HashMap<String, String> = connectors::Entity::find()
        .filter(connectors::Column::DeletedAt.is_null())
        .all(db)
        .await?
        .into_iter()
        .map(|c| (c.name, c.url))
        .collect();
    for c in &target.connectors {
        if held.get(&c.name) != Some(&c.url) {
            store::check_url(outbound, &c.url).await?;
        }
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
pub async fn apply(w: &crate::db::Writer<'_>, input: Apply<'_>) -> Result<Applied> {
    check(&input.target)?;
    check_urls(w.db, input.outbound, &input.target).await?;
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
    let mut write = w.begin().await?.by(&input.who.member);
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
    let mut writer = Applying {
        db: &mut write,
        current: &current,
        input: &input,
        agents: HashMap::new(),
        tools: HashMap::new(),
        lint_names: None,
    };
    writer.run(&plan).await?;
    let requests = writer.gated_requests().await?;
    let after = read::current(&*write).await?.bundle.state().instance;
    w.commit(write).await?;
    Ok(Applied {
        before: plan.against,
        after,
        changes: plan.changes,
        unchanged: plan.unchanged,
        change_requests: requests,
    })
}

/// The write in progress: the rows made or updated so far, by name.
struct Applying<'a> {
    db: &'a mut guard::Write,
    current: &'a Current,
    input: &'a Apply<'a>,
    agents: HashMap<String, agent_configurations::Model>,
    tools: HashMap<String, entity::tools::Model>,
    lint_names: Option<lint::ToolNames>,
}

fn split(object: &str) -> (&str, &str) {
    object.split_once('/').unwrap_or((object, ""))
}

impl Applying<'_> {
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
        // After the agents and channels: a dataset names both.
        for (_, key) in by_kind("dataset") {
            if let Some((agent, name, cases)) = dataset(target, key) {
                self.dataset(agent, name, cases).await?;
            }
        }
        // A removed agent's datasets go first, while the agent is still found.
        let removals = plan.changes.iter().filter(|c| c.action == Action::Remove);
        let (datasets, others): (Vec<&Change>, Vec<&Change>) =
            removals.partition(|c| split(&c.object).0 == "dataset");
        for change in datasets.into_iter().chain(others) {
            self.remove(&change.object).await?;
        }
        Ok(())
    }

    /// Saves a dataset's cases as its next version through its owner, which checks
    /// them (422 `invalid_dataset` refuses the whole apply).
    async fn dataset(&mut self, agent: &str, name: &str, cases: &[Case]) -> Result<()> {
        let save = datasets::Save {
            agent,
            name,
            cases: cases.to_vec(),
            by: &self.input.who.member,
        };
        let now = self.db.now();
        datasets::put_in(self.txn(), save, now).await?;
        Ok(())
    }

    fn tool_row(&self, name: &str) -> Option<&entity::tools::Model> {
        self.tools
            .get(name)
            .or_else(|| self.current.tools.get(name))
    }

    async fn connector(&mut self, change: &Change, doc: &ConnectorDoc) -> Result<()> {
        let input = self.input;
        if !self.current.connectors.contains_key(&doc.name) {
            let new = store::NewConnector {
                name: doc.name.clone(),
                kind: doc.kind.clone(),
                url: doc.url.clone(),
                method: doc.method.clone(),
                headers: Map::new(),
                timeout_ms: doc.timeout_ms,
                trusted: doc.trusted.unwrap_or(false),
            };
            store::create_in(self.db, input.keyring, new).await?;
        }
        let moved = self
            .current
            .connectors
            .get(&doc.name)
            .is_some_and(|row| !crate::connectors::client::same_origin(&row.url, &doc.url));
        let headers_changed = moved
            || change.action == Action::Create
            || change.fields.iter().any(|f| f.field.starts_with("header "));
        let mut given = Map::new();
        let mut keep = Vec::new();
        for (name, value) in &doc.headers {
            match value {
                HeaderValue::Value { value } => {
                    given.insert(name.clone(), Value::String(value.clone()));
                }
                HeaderValue::Env { .. } => keep.push(name.clone()),
            }
        }
        let update = store::Change {
            kind: Some(doc.kind.clone()),
            url: Some(doc.url.clone()),
            method: Some(doc.method.clone()),
            timeout_ms: Some(doc.timeout_ms),
            trusted: doc.trusted,
            headers: headers_changed.then_some(given),
            keep: match headers_changed {
                true => keep,
                false => Vec::new(),
            },
        };
        store::update_in(self.db, input.keyring, &doc.name, update).await?;
        Ok(())
    }

    async fn tool(&mut self, doc: &ToolDoc) -> Result<()> {
        let def = tools::Definition {
            name: doc.name.clone(),
            tool_type: doc.tool_type.clone(),
            description: doc.description.clone(),
            approval_tier: doc.approval_tier.clone(),
            parameters: doc.parameters.clone(),
            prompt_section: doc.prompt_section.clone(),
            strict: doc.strict,
            active: doc.active,
        };
        let current = self.current.tools.get(&doc.name);
        let saved = match current {
            Some(row) => tools::replace_in(self.db, row.clone(), def).await?,
            None => tools::create_in(self.db, def).await?,
        };
        let bound = current.and_then(|row| row.connector_id);
        let saved = match (&doc.connector, bound) {
            (None, None) => saved,
            (connector, _) => store::bind_in(self.db, &doc.name, connector.as_deref()).await?,
        };
        self.tools.insert(doc.name.clone(), saved);
        Ok(())
    }

    async fn channel(&mut self, doc: &ChannelDoc) -> Result<()> {
        if self.current.channels.contains_key(&doc.name) {
            let update = channels::ChannelUpdate {
                description: Some(doc.description.clone()),
                guidance: Some(doc.guidance.clone()),
                include_operating_model: Some(doc.include_operating_model),
                include_interaction_learning: Some(doc.include_interaction_learning),
                include_session_section: Some(doc.include_session_section),
            };
            channels::update_in(self.db, &doc.name, update).await?;
        } else {
            let new = channels::NewChannel {
                name: doc.name.clone(),
                description: doc.description.clone(),
                guidance: doc.guidance.clone(),
                include_operating_model: doc.include_operating_model,
                include_interaction_learning: doc.include_interaction_learning,
                include_session_section: doc.include_session_section,
            };
            channels::create_in(self.db, new).await?;
        }
        Ok(())
    }

    /// Lints a template the apply saves: errors refuse the apply (a file has no
    /// `force`). Tool names are read once, in the write (so they include the tools
    /// this apply made).
    async fn lint(&mut self, text: &str) -> Result<()> {
        if self.lint_names.is_none() {
            self.lint_names = Some(template::lint_tool_names(&**self.db, None).await?);
        }
        let names = self
            .lint_names
            .as_ref()
            .ok_or_else(|| Error::internal("no lint names"))?;
        template::lint_with(names, self.input.max_template_bytes, text)?;
        Ok(())
    }

    async fn agent(&mut self, change: &Change, doc: &AgentDoc) -> Result<()> {
        let author = self.input.who.member.clone();
        let mode = release_mode(doc)?;
        let template_changed = change.texts.iter().any(|t| t.field == "template");
        if template_changed && let Some(text) = &doc.template {
            self.lint(text).await?;
        }
        let saved = match self.current.agents.get(&doc.name) {
            None => {
                let new = NewAgent {
                    name: doc.name.clone(),
                    identity: doc.identity.clone(),
                    soul: doc.soul.clone(),
                    prompt_template: doc.template.clone(),
                    operating_model: doc.operating_model.clone(),
                    interaction_learning: doc.interaction_learning.clone(),
                };
                definition::create_in(self.db, &author, new, Some(mode)).await?
            }
            Some(row) => {
                let update = AgentUpdate {
                    identity: Some(doc.identity.clone()),
                    soul: Some(doc.soul.clone()),
                    operating_model: Some(doc.operating_model.clone()),
                    interaction_learning: Some(doc.interaction_learning.clone()),
                    expected_soul_version: None,
                    release_mode: Some(mode),
                };
                let saved = definition::update_in(self.db, &author, &doc.name, update).await?;
                match row.prompt_template == doc.template {
                    true => saved,
                    false => {
                        let how = template::Version {
                            forced: false,
                            reason: None,
                            author: &author,
                        };
                        template::save_in(self.db, &doc.name, doc.template.clone(), None, &how)
                            .await?;
                        links::agent(&**self.db, &doc.name).await?
                    }
                }
            }
        };
        self.links(&saved, doc).await?;
        // After the links: the policy is checked against the tools they give.
        let policy = doc.policy.clone().filter(|p| !p.trim().is_empty());
        let stored_tests = saved
            .policy_tests
            .as_deref()
            .and_then(|t| crate::policies::cases::parse(t).ok())
            .unwrap_or_default();
        let saved = match saved.policy == policy && stored_tests == doc.policy_tests {
            true => saved,
            false => {
                let put = crate::agents::policy::PolicyPut {
                    policy,
                    tests: doc.policy_tests.clone(),
                };
                crate::agents::policy::save_in(self.db, &doc.name, put).await?
            }
        };
        let stored = crate::releases::model::ModelSettings::parse(saved.model_settings.as_deref())
            .ok()
            .flatten();
        let model = doc.model.clone().filter(|m| !m.is_empty());
        let saved = match stored == model {
            true => saved,
            false => crate::agents::model::save_in(self.db, &doc.name, model).await?,
        };
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
                links::set_in(self.db, agent, &tool, true).await?;
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
                links::switch_off_in(self.db, link).await?;
            }
        }
        Ok(())
    }

    /// Soft-deletes one object (`--prune`), as its owner's delete does.
    async fn remove(&mut self, object: &str) -> Result<()> {
        let (kind, name) = split(object);
        match kind {
            "agent" if self.current.agents.contains_key(name) => {
                definition::delete_in(self.db, name).await?;
            }
            "tool" => {
                if let Some(row) = self.current.tools.get(name) {
                    tools::delete_in(self.db, row.clone()).await?;
                }
            }
            "channel" if self.current.channels.contains_key(name) => {
                channels::delete_in(self.db, name).await?;
            }
            "connector" if self.current.connectors.contains_key(name) => {
                store::delete_in(self.db, name).await?;
            }
            "dataset" => {
                if let Some((agent, dataset)) = name.split_once('/') {
                    let now = self.db.now();
                    datasets::delete_in(self.txn(), agent, dataset, now).await?;
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
            crate::releases::publish_all(self.txn(), Some(&self.input.who.member), self.db.now())
                .await?;
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
            let now = self.db.now();
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
                evals: self.input.evals,
            };
            opened.push(change_requests::open(self.txn(), self.input.who, request, now).await?);
        }
        Ok(opened)
    }
}

/// The agent, name and cases the target holds for `AGENT/NAME`.
fn dataset<'a>(target: &'a Bundle, key: &'a str) -> Option<(&'a str, &'a str, &'a [Case])> {
    let (agent, name) = key.split_once('/')?;
    let doc = target.agents.iter().find(|a| a.name == agent)?;
    let cases = doc.datasets.get(name)?;
    Some((agent, name, cases))
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
