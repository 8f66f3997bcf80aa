//! Policies as data: an agent's Cedar policy set, part of its revision, decides
//! who may call which tool with which arguments, and what needs approval.
//!
//! A policy set is an overlay on the tiers, not Cedar's default-deny:
//! - a satisfied `forbid` denies the call, with its `@reason("…")`;
//! - else a satisfied `@requireApproval` `permit` (Docker's MCP gateway's
//!   convention) makes it wait for an approver;
//! - else a satisfied `permit` runs it at once; on a `requires_approval` tool only
//!   when that permit is marked `@skipApproval`, so a sign-off sees the relaxation;
//! - else the tier and the user's preference decide, exactly as without a policy.
//!
//! Nothing unsure comes out `auto`: a policy that fails to evaluate, arguments a
//! policy cannot read (a number that is not whole), or a policy set that no longer
//! parses all make the call wait for an approver. A policy's id is its
//! `@id("…")` annotation, else Cedar's `policy0`, `policy1`, …
//!
//! Which policies were satisfied is Cedar's own answer (`Authorizer::is_authorized`
//! over the entities a request has: the user in its groups, the tool's action in
//! `Action::"call"`, the tool with its attributes); the overlay only orders them.
//! The differential test in `oracle.rs` holds the two to the same answers.
//!
//! No text reaches the parser before [`bounds`] measured it, and compiling runs on
//! a thread whose stack fits those bounds.

pub mod bounds;
pub mod cases;
pub mod groups;
#[cfg(test)]
mod oracle;
mod schema;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision as CedarDecision, Effect, Entities, Entity,
    EntityId, EntityTypeName, EntityUid, Policy as CedarPolicy, PolicyId, PolicySet, Request,
    Response, RestrictedExpression, Schema, ValidationMode, Validator,
};
use miette::Diagnostic;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub use bounds::{Exceeded, MAX_EXPRESSION_DEPTH, MAX_NESTING, MAX_POLICY_BYTES, MAX_RULES};
pub use schema::MAX_DEPTH;

use crate::vocab::Tier;

/// The most items of one call a policy decides (each is one evaluation).
pub const MAX_ITEMS: usize = 1000;

/// The most rule evaluations one call's decision may take: the rules that can
/// apply to the tool and read no item, plus the items times the rules that read
/// one. A call past it is refused (`Policy::work`), so no call holds a CPU for
/// long whatever the policy and the arguments.
pub const MAX_WORK: usize = 200_000;

/// Decisions of more rule evaluations than this run off the async workers.
pub const INLINE_WORK: usize = 2_000;

/// What decided a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A `forbid` applies: the call is refused.
    Deny,
    /// A `@requireApproval` permit applies, or the policy could not decide.
    Approval,
    /// A `permit` applies: the call runs at once.
    Auto,
    /// No policy applies: the tier (and the user's preference) decides.
    Tier,
}

/// A policy's decision on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    /// The policy that decided (`None`: none applied, or the set could not decide).
    pub policy: Option<String>,
    /// Why: a forbid's `@reason`, or what could not be decided.
    pub reason: Option<String>,
    /// A `forbid` that holds whatever the arguments: the tool is hidden from this
    /// principal, and a call is refused as if the tool did not exist.
    pub outright: bool,
}

impl Decision {
    fn tier() -> Decision {
        Decision {
            outcome: Outcome::Tier,
            policy: None,
            reason: None,
            outright: false,
        }
    }

    fn unsure(reason: String) -> Decision {
        Decision {
            outcome: Outcome::Approval,
            policy: None,
            reason: Some(reason),
            outright: false,
        }
    }
}

/// Who calls: the key's tenant and member, the user the agent acts for, and the
/// user's groups.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    pub tenant: &'a str,
    pub member: &'a str,
    /// `None`: the call names no user; it is decided for `User::""`, in no group.
    pub user: Option<&'a str>,
    pub groups: &'a [String],
}

/// A problem in a policy set: where (1-based line and column in its text) and what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PolicyProblem {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for PolicyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Why a policy set does not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompileError {
    /// Past a bound (size, policies, nesting): refused before or right after
    /// parsing, with its own code (`policy_too_large`, `policy_too_deep`).
    Exceeded(Exceeded),
    /// Every syntax and validation problem, at its line and column.
    Problems(Vec<PolicyProblem>),
}

impl CompileError {
    /// The problems, a bound passed being one at the place it points to.
    pub fn problems(&self, text: &str) -> Vec<PolicyProblem> {
        match self {
            CompileError::Problems(problems) => problems.clone(),
            CompileError::Exceeded(exceeded) => {
                let (line, column) = position(text, exceeded.offset());
                vec![PolicyProblem {
                    line,
                    column,
                    message: exceeded.to_string(),
                }]
            }
        }
    }

    /// The first problem, as one line.
    pub fn first(&self, text: &str) -> String {
        self.problems(text)
            .first()
            .map(ToString::to_string)
            .unwrap_or_default()
    }
}

/// One tool as a policy sees it.
#[derive(Clone, Copy, Debug)]
pub struct ToolShape<'a> {
    pub name: &'a str,
    pub tier: &'a str,
    pub parameters: &'a Value,
}

/// Who a request is decided for, as Cedar takes it: built once per call.
struct Party {
    principal: EntityUid,
    entities: Entities,
}

/// A tool of the compiled set: its action, resource and input schema, and the
/// policies a call of it is evaluated against (a policy scoped to another action
/// never applies).
struct Compiled {
    action: EntityUid,
    resource: Entity,
    parameters: Value,
    /// The policies that can apply and read no `context.item`: evaluated once per call.
    once: PolicySet,
    /// The policies that can apply and read `context.item`: evaluated per item.
    per_item: PolicySet,
    /// Of those that can apply, the `forbid`s that read no argument.
    outright: PolicySet,
    /// Whether one of those names `Action::"call"`: only then does a request carry
    /// the action's entity in the group (it changes no other answer, and costs).
    grouped: bool,
    /// The list a call is decided by item by item: its name and one item's schema.
    list: Option<(String, Value)>,
}

/// Whether `policy`'s action scope can hold for `action`.
fn applies_to(policy: &CedarPolicy, action: &EntityUid, group: &EntityUid) -> bool {
    match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => &uid == action,
        ActionConstraint::In(uids) => uids.iter().any(|u| u == action || u == group),
    }
}

/// The policies of `set` that `keep` (each keeps its id).
fn subset(set: &PolicySet, keep: impl Fn(&CedarPolicy) -> bool) -> PolicySet {
    let mut out = PolicySet::new();
    for policy in set.policies().filter(|p| keep(p)) {
        // Ids are unique in `set`, so they are here too.
        let _ = out.add(policy.clone());
    }
    out
}

/// A converted argument value (see `schema::arguments`: strings, whole numbers,
/// booleans, sets and records only) as a Cedar value, with no schema lookup.
fn restricted(value: &Value) -> Option<RestrictedExpression> {
    Some(match value {
        Value::String(s) => RestrictedExpression::new_string(s.clone()),
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::Number(n) => RestrictedExpression::new_long(n.as_i64()?),
        Value::Array(items) => {
            RestrictedExpression::new_set(items.iter().map(restricted).collect::<Option<Vec<_>>>()?)
        }
        Value::Object(fields) => {
            let fields = fields
                .iter()
                .map(|(k, v)| Some((k.clone(), restricted(v)?)))
                .collect::<Option<Vec<_>>>()?;
            RestrictedExpression::new_record(fields).ok()?
        }
        Value::Null => return None,
    })
}

/// A policy set parsed (and, for a save, validated) against a revision's tools,
/// ready to decide.
pub struct Rules {
    set: PolicySet,
    /// Each policy's place in the text: of several that hold, the first decides.
    order: HashMap<PolicyId, usize>,
    /// The `forbid`s that read no argument: what hides a tool from a principal.
    outright: PolicySet,
    tools: HashMap<String, Compiled>,
    authorizer: Authorizer,
}

impl fmt::Debug for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rules")
            .field("policies", &self.set.num_of_policies())
            .finish_non_exhaustive()
    }
}

/// An agent's policy as a revision serves it: ready, or (if it no longer parses)
/// broken, which decides nothing `auto`.
#[derive(Debug)]
pub enum Policy {
    Ready(Box<Rules>),
    Broken(String),
}

impl Policy {
    /// The policy `text` as a revision serves it over `tools`; `None` when there is
    /// no policy. Parsed, not validated: the save validated it against the tools
    /// it had then, and a tool switched off or unlinked since must not make every
    /// other call wait (a policy naming it simply never applies). Runs on a deep
    /// thread of its own (see [`bounds`]): call it off the async workers.
    pub fn of<'a>(
        text: Option<&str>,
        tools: impl Iterator<Item = ToolShape<'a>> + Send,
    ) -> Option<Policy> {
        let text = text.filter(|t| !t.trim().is_empty())?;
        Some(match Rules::build(text, tools, false) {
            Ok(rules) => Policy::Ready(Box::new(rules)),
            Err(e) => Policy::Broken(format!(
                "the agent's policy does not compile: {}",
                e.first(text)
            )),
        })
    }

    /// The decision on a call of `tool` (of the revision) at `tier`.
    pub fn decide(&self, tool: &str, tier: Tier, arguments: &Value, who: Who<'_>) -> Decision {
        match self {
            Policy::Ready(rules) => rules.decide(tool, tier, arguments, who),
            Policy::Broken(reason) => Decision::unsure(reason.clone()),
        }
    }

    /// How many rule evaluations deciding this call takes (see [`MAX_WORK`]).
    pub fn work(&self, tool: &str, arguments: &Value) -> usize {
        match self {
            Policy::Ready(rules) => rules.work(tool, arguments),
            Policy::Broken(_) => 0,
        }
    }

    /// Whether a `forbid` denies `who` the tool whatever the arguments.
    pub fn hides(&self, tool: &str, who: Who<'_>) -> bool {
        match self {
            Policy::Ready(rules) => rules.hides(tool, who),
            Policy::Broken(_) => false,
        }
    }

    /// Whether any policy could hide a tool (so a list must ask [`Self::hides`]).
    pub fn can_hide(&self) -> bool {
        matches!(self, Policy::Ready(rules) if !rules.outright.is_empty())
    }
}

fn uid(kind: &str, id: &str) -> EntityUid {
    #[expect(clippy::expect_used, reason = "the type names are constants and valid")]
    let kind = EntityTypeName::from_str(kind).expect("a valid entity type name");
    EntityUid::from_type_name_and_id(kind, EntityId::new(id))
}

/// The 1-based line and column of byte `offset` in `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// `error` as problems at the places it labels (line 1, column 1 when none).
fn problems_of(text: &str, error: &dyn Diagnostic, message: String) -> PolicyProblem {
    let offset = error
        .labels()
        .and_then(|mut labels| labels.next())
        .map_or(0, |l| l.offset());
    let (line, column) = position(text, offset);
    let help = error.help().map(|h| format!(" ({h})")).unwrap_or_default();
    PolicyProblem {
        line,
        column,
        message: format!("{message}{help}"),
    }
}

/// What a policy reads of the call, from its JSON form (which names every
/// attribute it reads, and also a string literal that happens to be `"item"`:
/// such a policy is only evaluated more often than it must be).
#[derive(Clone, Copy)]
struct Reads {
    arguments: bool,
    item: bool,
    /// It names `Action::"call"` (or holds the string `"call"`).
    group: bool,
    /// The depth of its JSON form: two levels per AST level.
    json_depth: usize,
}

fn reads(policy: &CedarPolicy) -> Reads {
    let Ok(json) = policy.to_json() else {
        return Reads {
            arguments: true,
            item: true,
            group: true,
            json_depth: usize::MAX,
        };
    };
    let mut found = Reads {
        arguments: false,
        item: false,
        group: matches!(policy.action_constraint(), ActionConstraint::In(_)),
        json_depth: 0,
    };
    // Iteratively, so that no input deep enough to matter recurses here.
    let mut stack = vec![(&json, 1usize)];
    while let Some((value, depth)) = stack.pop() {
        found.json_depth = found.json_depth.max(depth);
        match value {
            Value::String(s) => {
                found.arguments |= s == "arguments";
                found.item |= s == "item";
                found.group |= s == schema::CALL;
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(fields) => {
                for (key, v) in fields {
                    found.arguments |= key == "arguments";
                    found.item |= key == "item";
                    stack.push((v, depth + 1));
                }
            }
            _ => {}
        }
    }
    // The JSON value is as deep as the policy: drop it on this (deep) thread, as
    // every other step of a compile.
    drop(json);
    found
}

/// How strict an outcome is, for combining a list call's items.
fn rank(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Auto => 0,
        Outcome::Tier => 1,
        Outcome::Approval => 2,
        Outcome::Deny => 3,
    }
}

/// The policies one evaluation found satisfied, or why it could not decide.
#[derive(Default)]
struct Held {
    forbids: Vec<PolicyId>,
    permits: Vec<PolicyId>,
    error: Option<String>,
}

impl Held {
    fn of(response: &Response) -> Held {
        let reasons = response.diagnostics().reason().cloned().collect();
        let (forbids, permits) = match response.decision() {
            CedarDecision::Deny => (reasons, Vec::new()),
            CedarDecision::Allow => (Vec::new(), reasons),
        };
        Held {
            forbids,
            permits,
            error: response
                .diagnostics()
                .errors()
                .next()
                .map(|e| e.to_string()),
        }
    }

    fn and(&self, other: &Held) -> Held {
        Held {
            forbids: [&self.forbids[..], &other.forbids[..]].concat(),
            permits: [&self.permits[..], &other.permits[..]].concat(),
            error: self.error.clone().or_else(|| other.error.clone()),
        }
    }
}

impl Rules {
    /// Measures `text` ([`bounds`]), parses it, names each policy by its `@id`,
    /// and validates the set (strict mode) against the schema of `tools`. Every
    /// problem, at its line and column. Runs on a deep thread of its own, so the
    /// caller's stack does not matter; call it off the async workers.
    pub fn compile<'a>(
        text: &str,
        tools: impl Iterator<Item = ToolShape<'a>> + Send,
    ) -> Result<Rules, CompileError> {
        Rules::build(text, tools, true)
    }

    fn build<'a>(
        text: &str,
        tools: impl Iterator<Item = ToolShape<'a>> + Send,
        validate: bool,
    ) -> Result<Rules, CompileError> {
        let measured = bounds::measure(text).map_err(CompileError::Exceeded)?;
        let starts = &measured.starts;
        crate::cpu::deep_blocking(bounds::STACK_BYTES, || {
            Rules::parse(text, starts, tools, validate)
        })
        .unwrap_or_else(|| {
            Err(CompileError::Problems(vec![PolicyProblem {
                line: 1,
                column: 1,
                message: "the policy could not be compiled".to_owned(),
            }]))
        })
    }

    /// The work of [`Self::build`], on a stack that fits the bounds.
    fn parse<'a>(
        text: &str,
        starts: &[usize],
        tools: impl Iterator<Item = ToolShape<'a>>,
        validate: bool,
    ) -> Result<Rules, CompileError> {
        let problem = |message: String| {
            CompileError::Problems(vec![PolicyProblem {
                line: 1,
                column: 1,
                message,
            }])
        };
        let parsed = PolicySet::from_str(text).map_err(|errors| {
            CompileError::Problems(
                errors
                    .iter()
                    .map(|e| problems_of(text, e, e.to_string()))
                    .collect(),
            )
        })?;
        let mut set = PolicySet::new();
        let mut outright = PolicySet::new();
        let mut order = HashMap::new();
        let mut item_readers = HashSet::new();
        let mut group_readers = HashSet::new();
        let mut problems = Vec::new();
        for policy in parsed.policies() {
            // Cedar names the policies of a text `policy0`, `policy1`, … in order.
            let place = policy
                .id()
                .to_string()
                .strip_prefix("policy")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(usize::MAX);
            let offset = starts.get(place).copied().unwrap_or(0);
            let policy = match policy.annotation("id") {
                Some(id) => policy.new_id(PolicyId::new(id)),
                None => policy.clone(),
            };
            let read = reads(&policy);
            // Two JSON levels per AST level, and three around the condition.
            let depth = read.json_depth.saturating_sub(3) / 2;
            if depth > MAX_EXPRESSION_DEPTH {
                return Err(CompileError::Exceeded(Exceeded::Depth { depth, offset }));
            }
            let hides = policy.effect() == Effect::Forbid && !read.arguments && !read.item;
            if let Err(e) = set.add(policy.clone()) {
                let (line, column) = position(text, offset);
                problems.push(PolicyProblem {
                    line,
                    column,
                    message: format!("{e}: give each policy its own @id"),
                });
                continue;
            }
            order.insert(policy.id().clone(), place);
            if read.item {
                item_readers.insert(policy.id().clone());
            }
            if read.group {
                group_readers.insert(policy.id().clone());
            }
            if hides {
                // Ids are unique in `set`, so they are here too.
                let _ = outright.add(policy);
            }
        }
        let tools: Vec<ToolShape<'a>> = tools.collect();
        if validate {
            let schema_json = schema::schema(tools.iter().map(|t| (t.name, t.parameters)));
            let schema = Schema::from_json_value(schema_json)
                .map_err(|e| problem(format!("the tools' schemas make no Cedar schema: {e}")))?;
            let validated = Validator::new(schema).validate(&set, ValidationMode::Strict);
            for error in validated.validation_errors() {
                problems.push(problems_of(text, error, error.to_string()));
            }
        }
        if !problems.is_empty() {
            problems.sort_by_key(|p| (p.line, p.column));
            return Err(CompileError::Problems(problems));
        }
        let group = uid("Action", schema::CALL);
        let tools = tools
            .iter()
            .map(|t| {
                let action = uid("Action", t.name);
                let applies = |p: &CedarPolicy| applies_to(p, &action, &group);
                // A call of a tool without a list has no item: a policy reading
                // one is evaluated (and fails to find it) with the others.
                let list = schema::list_item(t.parameters)
                    .map(|(name, item)| (name.to_owned(), item.clone()));
                let listed = list.is_some();
                let per_item = |p: &CedarPolicy| listed && item_readers.contains(p.id());
                let compiled = Compiled {
                    once: subset(&set, |p| applies(p) && !per_item(p)),
                    per_item: subset(&set, |p| applies(p) && per_item(p)),
                    outright: subset(&outright, applies),
                    grouped: set
                        .policies()
                        .any(|p| applies(p) && group_readers.contains(p.id())),
                    resource: tool_entity(t),
                    parameters: t.parameters.clone(),
                    list,
                    action,
                };
                (t.name.to_owned(), compiled)
            })
            .collect();
        Ok(Rules {
            set,
            order,
            outright,
            tools,
            authorizer: Authorizer::new(),
        })
    }

    /// How many rule evaluations deciding a call of `tool` with `arguments` takes.
    pub fn work(&self, tool: &str, arguments: &Value) -> usize {
        let Some(compiled) = self.tools.get(tool) else {
            return 0;
        };
        let once = compiled.once.num_of_policies();
        let items = compiled
            .list
            .as_ref()
            .and_then(|(list, _)| arguments.get(list))
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        once.saturating_add(items.saturating_mul(compiled.per_item.num_of_policies()))
    }

    /// The decision on a call (see the module's doc for the order). A list tool's
    /// call is decided item by item (`context.item`) and is as strict as its
    /// strictest item: denied if one is, waits if one must, `auto` only if all are.
    /// The policies that read no item are evaluated once for the whole call.
    pub fn decide(&self, tool: &str, tier: Tier, arguments: &Value, who: Who<'_>) -> Decision {
        let Some(compiled) = self.tools.get(tool) else {
            return Decision::unsure(format!("the policy does not know the tool {tool:?}"));
        };
        let work = self.work(tool, arguments);
        if work > MAX_WORK {
            return Decision::unsure(format!(
                "the policy decides calls of up to {MAX_WORK} rule evaluations; this one takes {work}"
            ));
        }
        let list = compiled
            .list
            .as_ref()
            .map(|(name, item)| (name.as_str(), item));
        let converted = schema::arguments(&compiled.parameters, arguments).map(|mut a| {
            if let (Some((name, _)), Value::Object(fields)) = (list, &mut a) {
                fields.remove(name);
            }
            restricted(&a)
        });
        let args = match converted {
            Ok(Some(args)) => args,
            Ok(None) => return Decision::unsure("the policy cannot read the arguments".to_owned()),
            Err(why) => return Decision::unsure(format!("the policy cannot decide: {why}")),
        };
        let party = match self.party(compiled, who) {
            Ok(party) => party,
            Err(e) => return Decision::unsure(e),
        };
        let context = |item: Option<RestrictedExpression>| {
            let mut pairs = principal_pairs(who);
            pairs.push(("arguments".to_owned(), args.clone()));
            if let Some(item) = item {
                pairs.push(("item".to_owned(), item));
            }
            Context::from_pairs(pairs).map_err(|e| format!("the policy cannot decide: {e}"))
        };
        let once = match context(None).and_then(|c| self.ask(&compiled.once, compiled, c, &party)) {
            Ok(response) => Held::of(&response),
            Err(e) => return Decision::unsure(e),
        };
        let Some((list, item_schema)) = list else {
            return self.overlay(compiled, tier, &once);
        };
        let items = arguments
            .get(list)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if items.is_empty() {
            // Nothing to decide item by item: only a forbid that reads no argument applies.
            let outright = Held {
                forbids: once
                    .forbids
                    .iter()
                    .filter(|id| compiled.outright.policy(id).is_some())
                    .cloned()
                    .collect(),
                ..Held::default()
            };
            return match outright.forbids.is_empty() {
                true => Decision::tier(),
                false => self.overlay(compiled, tier, &outright),
            };
        }
        if items.len() > MAX_ITEMS {
            return Decision::unsure(format!(
                "the policy decides calls of up to {MAX_ITEMS} items"
            ));
        }
        let mut strictest: Option<Decision> = None;
        let mut last: Option<Held> = None;
        for (i, item) in items.iter().enumerate() {
            let item = match schema::arguments(item_schema, item).map(|i| restricted(&i)) {
                Ok(Some(item)) => item,
                Ok(None) => {
                    return Decision::unsure(format!("the policy cannot read /{list}/{i}"));
                }
                Err(why) => {
                    let why = why.replacen("argument /", &format!("argument /{list}/{i}/"), 1);
                    return Decision::unsure(format!("the policy cannot decide: {why}"));
                }
            };
            let held = match compiled.per_item.is_empty() {
                // No policy reads an item: every item is decided as the first.
                true if last.is_some() => continue,
                true => Held::default(),
                false => match context(Some(item))
                    .and_then(|c| self.ask(&compiled.per_item, compiled, c, &party))
                {
                    Ok(response) => Held::of(&response),
                    Err(e) => return Decision::unsure(e),
                },
            };
            let decision = self.overlay(compiled, tier, &once.and(&held));
            last = Some(held);
            if decision.outcome == Outcome::Deny {
                return decision;
            }
            if strictest
                .as_ref()
                .is_none_or(|s| rank(decision.outcome) > rank(s.outcome))
            {
                strictest = Some(decision);
            }
        }
        strictest.unwrap_or_else(Decision::tier)
    }

    /// Of several policies that hold, the first in the text.
    fn first(&self, ids: impl Iterator<Item = PolicyId>) -> Option<PolicyId> {
        ids.min_by_key(|id| self.order.get(id).copied().unwrap_or(usize::MAX))
    }

    /// The overlay's decision from the policies that hold.
    fn overlay(&self, compiled: &Compiled, tier: Tier, held: &Held) -> Decision {
        // A forbid that hides the tool decides before any other: the caller is told
        // the tool does not exist, whatever else holds.
        let hiding = held
            .forbids
            .iter()
            .filter(|id| compiled.outright.policy(id).is_some())
            .cloned();
        let forbid = self
            .first(hiding)
            .or_else(|| self.first(held.forbids.iter().cloned()));
        if let Some(id) = forbid {
            return Decision {
                outcome: Outcome::Deny,
                reason: Some(self.reason_of(&id)),
                outright: compiled.outright.policy(&id).is_some(),
                policy: Some(id.to_string()),
            };
        }
        if let Some(error) = &held.error {
            // A policy that failed to evaluate might have denied or asked.
            return Decision::unsure(format!("a policy failed to evaluate: {error}"));
        }
        let annotated = |key: &str| {
            self.first(
                held.permits
                    .iter()
                    .filter(|id| self.set.annotation(id, key).is_some())
                    .cloned(),
            )
        };
        if let Some(id) = annotated("requireApproval") {
            return Decision {
                outcome: Outcome::Approval,
                reason: self.set.annotation(&id, "reason").map(str::to_owned),
                policy: Some(id.to_string()),
                outright: false,
            };
        }
        let skips = annotated("skipApproval");
        let auto = match tier {
            Tier::RequiresApproval => skips,
            _ => skips.or_else(|| self.first(held.permits.iter().cloned())),
        };
        match auto {
            Some(id) => Decision {
                outcome: Outcome::Auto,
                policy: Some(id.to_string()),
                reason: None,
                outright: false,
            },
            None => Decision::tier(),
        }
    }

    /// Whether a `forbid` that reads no argument denies `who` the tool.
    pub fn hides(&self, tool: &str, who: Who<'_>) -> bool {
        if self.outright.is_empty() {
            return false;
        }
        let Some(compiled) = self.tools.get(tool) else {
            return false;
        };
        if compiled.outright.is_empty() {
            return false;
        }
        let Ok(context) = Context::from_pairs(principal_pairs(who)) else {
            return false;
        };
        let Ok(party) = self.party(compiled, who) else {
            return false;
        };
        match self.ask(&compiled.outright, compiled, context, &party) {
            Ok(response) => response.diagnostics().reason().next().is_some(),
            Err(_) => false,
        }
    }

    /// The principal and the entities a request of `tool` by `who` is decided
    /// with: the user in its groups, the tool, and the tool's action in
    /// `Action::"call"` (so `action in Action::"call"` holds, as documented).
    fn party(&self, tool: &Compiled, who: Who<'_>) -> Result<Party, String> {
        let principal = uid("User", who.user.unwrap_or(""));
        let parents: HashSet<EntityUid> = match who.user {
            Some(_) => who.groups.iter().map(|g| uid("Group", g)).collect(),
            None => HashSet::new(),
        };
        let user = Entity::new_no_attrs(principal.clone(), parents);
        let entities = match tool.grouped {
            true => {
                let call = uid("Action", schema::CALL);
                let action =
                    Entity::new_no_attrs(tool.action.clone(), HashSet::from([call.clone()]));
                let group = Entity::new_no_attrs(call, HashSet::new());
                Entities::from_entities([user, tool.resource.clone(), action, group], None)
            }
            false => Entities::from_entities([user, tool.resource.clone()], None),
        }
        .map_err(|e| format!("the policy cannot decide: {e}"))?;
        Ok(Party {
            principal,
            entities,
        })
    }

    fn ask(
        &self,
        set: &PolicySet,
        tool: &Compiled,
        context: Context,
        party: &Party,
    ) -> Result<Response, String> {
        let request = Request::new(
            party.principal.clone(),
            tool.action.clone(),
            tool.resource.uid(),
            context,
            None,
        )
        .map_err(|e| format!("the policy cannot decide: {e}"))?;
        Ok(self
            .authorizer
            .is_authorized(&request, set, &party.entities))
    }

    fn reason_of(&self, id: &PolicyId) -> String {
        match self.set.annotation(id, "reason") {
            Some(reason) => reason.to_owned(),
            None => format!("policy {id} forbids this call"),
        }
    }
}

/// The calling member as `context.member` names it: an identity, not a display
/// name. A member of the default tenant (every operator's, and every key's
/// before tenants) is its name, as policies have always read it; any other
/// tenant's is `tenant/name`, which no name can spell (names take no `/`), so a
/// key another tenant's admin names `bot` is never `bot`.
pub fn member_identity(tenant: &str, member: &str) -> String {
    match tenant == crate::auth::keys::DEFAULT_TENANT {
        true => member.to_owned(),
        false => format!("{tenant}/{member}"),
    }
}

/// `{tenant, member}`: what every context holds.
fn principal_pairs(who: Who<'_>) -> Vec<(String, RestrictedExpression)> {
    vec![
        (
            "tenant".to_owned(),
            RestrictedExpression::new_string(who.tenant.to_owned()),
        ),
        (
            "member".to_owned(),
            RestrictedExpression::new_string(member_identity(who.tenant, who.member)),
        ),
    ]
}

fn tool_entity(tool: &ToolShape<'_>) -> Entity {
    let attrs = HashMap::from([
        (
            "name".to_owned(),
            RestrictedExpression::new_string(tool.name.to_owned()),
        ),
        (
            "tier".to_owned(),
            RestrictedExpression::new_string(tool.tier.to_owned()),
        ),
    ]);
    let id = uid("Tool", tool.name);
    Entity::new(id.clone(), attrs, HashSet::new())
        .unwrap_or_else(|_| Entity::new_no_attrs(id, HashSet::new()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn refunds() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["items"],
            "properties": {"items": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["amount", "reason"],
                "properties": {
                    "amount": {"type": "integer"},
                    "reason": {"type": ["string", "null"]},
                }
            }}}
        })
    }

    fn deletes() -> Value {
        json!({"type": "object", "additionalProperties": false, "required": ["ids"],
               "properties": {"ids": {"type": "array", "items": {"type": "string"}}}})
    }

    const POLICY: &str = r#"
    @id("big-refunds")
    @requireApproval
    @reason("refunds over 100 need a second person")
    permit (principal, action == Action::"create_refunds", resource)
    when { context.item.amount > 100 };

    @id("ops-auto")
    @skipApproval
    permit (principal in Group::"ops", action == Action::"delete_tasks", resource);

    @id("no-deletes-for-guests")
    @reason("guests never delete")
    forbid (principal in Group::"guests", action == Action::"delete_tasks", resource);
    "#;

    fn shapes<'a>(refunds: &'a Value, deletes: &'a Value) -> Vec<ToolShape<'a>> {
        vec![
            ToolShape {
                name: "create_refunds",
                tier: "user_configurable",
                parameters: refunds,
            },
            ToolShape {
                name: "delete_tasks",
                tier: "requires_approval",
                parameters: deletes,
            },
        ]
    }

    fn who<'a>(user: &'a str, groups: &'a [String]) -> Who<'a> {
        Who {
            tenant: "default",
            member: "agent",
            user: Some(user),
            groups,
        }
    }

    fn amounts(policy: &str) -> Policy {
        let (r, d) = (refunds(), deletes());
        Policy::of(Some(policy), shapes(&r, &d).into_iter()).expect("a policy")
    }

    const THRESHOLD: &str = r#"
    @id("big")
    @requireApproval
    permit (principal, action == Action::"create_refunds", resource)
    when { context.item.amount > 100 };

    @id("small")
    permit (principal, action == Action::"create_refunds", resource);
    "#;

    #[test]
    fn a_policy_set_compiles_against_the_tools_schemas() {
        let (r, d) = (refunds(), deletes());
        let rules = Rules::compile(POLICY, shapes(&r, &d).into_iter());
        assert!(rules.is_ok(), "{:?}", rules.err());
    }

    #[test]
    fn an_argument_the_schema_lacks_is_a_problem_at_its_line() {
        let (r, d) = (refunds(), deletes());
        let text = "permit (principal, action == Action::\"create_refunds\", resource)\nwhen { context.item.total > 100 };";
        let problems = Rules::compile(text, shapes(&r, &d).into_iter())
            .expect_err("unknown attribute")
            .problems(text);
        assert_eq!(problems[0].line, 2, "{problems:?}");
        assert!(problems[0].message.contains("total"), "{problems:?}");
    }

    #[test]
    fn a_type_mismatch_and_an_unknown_tool_are_problems() {
        let (r, d) = (refunds(), deletes());
        let mismatch = "permit (principal, action == Action::\"create_refunds\", resource) when { context.arguments.items == \"x\" };";
        assert!(Rules::compile(mismatch, shapes(&r, &d).into_iter()).is_err());
        let unknown = "permit (principal, action == Action::\"send_emails\", resource);";
        assert!(Rules::compile(unknown, shapes(&r, &d).into_iter()).is_err());
    }

    #[test]
    fn a_syntax_error_is_a_problem_at_its_line_and_column() {
        let (r, d) = (refunds(), deletes());
        let text = "permit (principal, action, resource)\n  wehn { true };";
        let problems = Rules::compile(text, shapes(&r, &d).into_iter())
            .expect_err("syntax")
            .problems(text);
        assert_eq!(
            (problems[0].line, problems[0].column > 1),
            (2, true),
            "{problems:?}"
        );
    }

    #[test]
    fn a_forbid_denies_with_its_reason_and_hides_the_tool() {
        let policy = amounts(POLICY);
        let guests = vec!["guests".to_owned()];
        let d = policy.decide(
            "delete_tasks",
            Tier::RequiresApproval,
            &json!({"ids": ["1"]}),
            who("u", &guests),
        );
        assert_eq!(d.outcome, Outcome::Deny);
        assert_eq!(d.policy.as_deref(), Some("no-deletes-for-guests"));
        assert_eq!(d.reason.as_deref(), Some("guests never delete"));
        assert!(d.outright);
        assert!(policy.hides("delete_tasks", who("u", &guests)));
        assert!(!policy.hides("delete_tasks", who("u", &[])));
        assert!(!policy.hides("create_refunds", who("u", &guests)));
    }

    #[test]
    fn a_permit_relaxes_a_requires_approval_tool_only_when_marked() {
        let policy = amounts(POLICY);
        let ops = vec!["ops".to_owned()];
        let d = policy.decide(
            "delete_tasks",
            Tier::RequiresApproval,
            &json!({"ids": []}),
            who("u", &ops),
        );
        assert_eq!(
            (d.outcome, d.policy.as_deref()),
            (Outcome::Auto, Some("ops-auto"))
        );
        let unmarked = "permit (principal, action == Action::\"delete_tasks\", resource);";
        let d = amounts(unmarked).decide(
            "delete_tasks",
            Tier::RequiresApproval,
            &json!({"ids": []}),
            who("u", &ops),
        );
        assert_eq!(d.outcome, Outcome::Tier);
        // The same unmarked permit does make a user_configurable tool auto.
        let d = amounts("permit (principal, action == Action::\"create_refunds\", resource);")
            .decide(
                "create_refunds",
                Tier::UserConfigurable,
                &json!({"items": [{"amount": 1, "reason": null}]}),
                who("u", &[]),
            );
        assert_eq!(d.outcome, Outcome::Auto);
    }

    #[test]
    fn approval_beats_auto_and_deny_beats_both() {
        let policy = amounts(THRESHOLD);
        let at = |amount: i64| json!({"items": [{"amount": 1, "reason": null}, {"amount": amount, "reason": "x"}]});
        let d = policy.decide(
            "create_refunds",
            Tier::UserConfigurable,
            &at(100),
            who("u", &[]),
        );
        assert_eq!(
            (d.outcome, d.policy.as_deref()),
            (Outcome::Auto, Some("small"))
        );
        let d = policy.decide(
            "create_refunds",
            Tier::UserConfigurable,
            &at(101),
            who("u", &[]),
        );
        assert_eq!(
            (d.outcome, d.policy.as_deref()),
            (Outcome::Approval, Some("big"))
        );
        let args = at(101);
        let both = format!("{THRESHOLD}\n@id(\"never\") forbid (principal, action, resource);");
        let d = amounts(&both).decide("create_refunds", Tier::Auto, &args, who("u", &[]));
        assert_eq!(
            (d.outcome, d.policy.as_deref()),
            (Outcome::Deny, Some("never"))
        );
    }

    #[test]
    fn arguments_that_cannot_be_decided_never_come_out_auto() {
        let policy = amounts("permit (principal, action == Action::\"create_refunds\", resource);");
        let args = json!({"items": [{"amount": 100.5, "reason": null}]});
        let d = policy.decide("create_refunds", Tier::Auto, &args, who("u", &[]));
        assert_eq!(d.outcome, Outcome::Approval, "{d:?}");
    }

    #[test]
    fn without_a_policy_nothing_is_compiled() {
        let (r, d) = (refunds(), deletes());
        assert!(Policy::of(None, shapes(&r, &d).into_iter()).is_none());
        assert!(Policy::of(Some("  \n"), shapes(&r, &d).into_iter()).is_none());
    }

    #[test]
    fn a_policy_that_no_longer_parses_asks_for_approval() {
        let policy = amounts("permit (principal, action, resource) wehn { true };");
        let d = policy.decide(
            "create_refunds",
            Tier::Auto,
            &json!({"items": [{"amount": 1, "reason": null}]}),
            who("u", &[]),
        );
        assert_eq!(d.outcome, Outcome::Approval);
        assert!(d.reason.unwrap_or_default().contains("does not compile"));
    }

    #[test]
    fn a_served_policy_naming_a_tool_the_revision_lacks_still_decides_the_others() {
        let text = format!(
            "{THRESHOLD}\n@id(\"stock\") forbid (principal, action == Action::\"get_stock\", resource);"
        );
        let policy = amounts(&text);
        let args = json!({"items": [{"amount": 1, "reason": null}]});
        let d = policy.decide(
            "create_refunds",
            Tier::UserConfigurable,
            &args,
            who("u", &[]),
        );
        assert_eq!(
            (d.outcome, d.policy.as_deref()),
            (Outcome::Auto, Some("small"))
        );
        // A save still validates: the unknown action is a problem there.
        let (r, dl) = (refunds(), deletes());
        assert!(Rules::compile(&text, shapes(&r, &dl).into_iter()).is_err());
    }

    #[test]
    fn two_policies_with_one_id_are_refused() {
        let (r, d) = (refunds(), deletes());
        let text = "@id(\"a\") permit (principal, action, resource);\n@id(\"a\") forbid (principal, action, resource);";
        let problems = Rules::compile(text, shapes(&r, &d).into_iter())
            .expect_err("duplicate")
            .problems(text);
        assert!(problems[0].message.contains("@id"), "{problems:?}");
    }

    #[test]
    fn test_cases_report_what_they_expected_and_got() {
        let policy = amounts(POLICY);
        let (r, d) = (refunds(), deletes());
        let cases = cases::parse(r#"[
            {"tool": "delete_tasks", "arguments": {"ids": []}, "user": "u", "groups": ["ops"], "expect": "auto", "policy": "ops-auto"},
            {"name": "guests", "tool": "delete_tasks", "arguments": {"ids": []}, "user": "u", "groups": ["guests"], "expect": "auto"}
        ]"#).expect("cases");
        let failures = cases::run(&policy, &shapes(&r, &d), &cases);
        assert_eq!(
            failures,
            vec!["guests: expected auto, got deny by no-deletes-for-guests".to_owned()]
        );
    }
}

#[cfg(test)]
mod limits {
    //! Every construct Cedar nests, at the largest size the bounds let through and
    //! one step past it: parsed on the deep thread without overflowing its stack
    //! (an overflow aborts this test binary), refused past the bound, and what a
    //! save accepts is decided on a stack the size of a request worker's.

    use serde_json::json;

    use super::*;

    /// The expression `kind` nested `n` times.
    fn nested(kind: &str, n: usize) -> String {
        let r = |s: &str| s.repeat(n);
        match kind {
            "parentheses" => format!("{}true{}", r("("), r(")")),
            "not" => format!("{}true", r("!")),
            "negation" => format!("{}1 == 1", r("-")),
            "plus" => format!("1{} == 1", r(" + 1")),
            "times" => format!("1{} == 1", r(" * 1")),
            "or" => format!("true{}", r(" || true")),
            "and" => format!("true{}", r(" && true")),
            "if" => format!("{}true{}", r("if true then "), r(" else true")),
            "sets" => format!("{}1{} == [1]", r("["), r("]")),
            "records" => format!("{}1{} == {{a: 1}}", r("{a: "), r("}")),
            "attributes" => format!("context{} == 1", r(".a")),
            "has" => format!("context has {}a", r("a.")),
            "calls" => format!("{}[1].contains(1){}", r("[1].contains("), r(")")),
            "mixed" => format!("{}true{}", r("!(-(["), r("])) == 1)")),
            _ => unreachable!("{kind}"),
        }
    }

    fn policy(expr: &str) -> String {
        format!("permit (principal, action, resource) when {{ {expr} }};")
    }

    /// The largest `n` whose text passes [`bounds::measure`].
    fn largest(kind: &str) -> usize {
        let passes = |n| bounds::measure(&policy(&nested(kind, n))).is_ok();
        let (mut ok, mut bad) = (1, 2);
        while passes(bad) {
            (ok, bad) = (bad, bad * 2);
        }
        while bad - ok > 1 {
            let mid = (ok + bad) / 2;
            match passes(mid) {
                true => ok = mid,
                false => bad = mid,
            }
        }
        ok
    }

    const KINDS: [&str; 14] = [
        "parentheses",
        "not",
        "negation",
        "plus",
        "times",
        "or",
        "and",
        "if",
        "sets",
        "records",
        "attributes",
        "has",
        "calls",
        "mixed",
    ];

    fn tools() -> Value {
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
    }

    #[test]
    fn every_construct_at_the_bound_compiles_without_overflowing_and_past_it_is_refused() {
        let params = tools();
        let shapes = [ToolShape {
            name: "get_page",
            tier: "auto",
            parameters: &params,
        }];
        for kind in KINDS {
            let n = largest(kind);
            let at = policy(&nested(kind, n));
            // Compiled at the bound: accepted, refused as too deep once parsed, or
            // invalid, but answered (an overflow would abort the test binary).
            let compiled = Rules::compile(&at, shapes.iter().copied());
            assert!(
                !matches!(
                    compiled,
                    Err(CompileError::Exceeded(Exceeded::Nesting { .. }))
                ),
                "{kind} at {n}: {compiled:?}"
            );
            let past = policy(&nested(kind, n + 1));
            let refused = Rules::compile(&past, shapes.iter().copied()).expect_err(kind);
            assert!(
                matches!(refused, CompileError::Exceeded(Exceeded::Nesting { .. })),
                "{kind} at {}: {refused:?}",
                n + 1
            );
            assert_eq!(
                Exceeded::Nesting {
                    estimate: 0,
                    offset: 0
                }
                .code(),
                "policy_too_deep"
            );
        }
    }

    #[test]
    fn the_nesting_that_killed_the_server_compiles_on_the_deep_thread_and_more_is_refused() {
        // 150 nested parentheses: 351 bytes, and a stack overflow on the landed main.
        let text = policy(&nested("parentheses", 150));
        assert!(text.len() < 400);
        let params = tools();
        let shapes = [ToolShape {
            name: "get_page",
            tier: "auto",
            parameters: &params,
        }];
        let rules = Rules::compile(&text, shapes.iter().copied()).expect("compiles");
        let who = Who {
            tenant: "default",
            member: "m",
            user: None,
            groups: &[],
        };
        let d = rules.decide("get_page", Tier::UserConfigurable, &json!({}), who);
        assert_eq!(d.outcome, Outcome::Auto);
        let e = bounds::measure(&policy(&nested("parentheses", 300))).expect_err("too deep");
        assert_eq!(e.code(), "policy_too_deep");
        assert!(e.to_string().contains(&MAX_NESTING.to_string()), "{e}");
    }

    #[test]
    fn the_deepest_expression_a_save_accepts_is_decided_on_a_request_workers_stack() {
        let params = tools();
        let shapes = [ToolShape {
            name: "get_page",
            tier: "auto",
            parameters: &params,
        }];
        for kind in ["parentheses", "not", "or", "if", "plus", "mixed"] {
            // The largest n a compile accepts.
            let mut n = 1;
            while Rules::compile(&policy(&nested(kind, n + 1)), shapes.iter().copied())
                .is_ok_and(|_| n < 5000)
            {
                n += if n < 64 { 1 } else { 8 };
            }
            let text = policy(&nested(kind, n));
            let Ok(rules) = Rules::compile(&text, shapes.iter().copied()) else {
                continue;
            };
            let decided = std::thread::Builder::new()
                .stack_size(2 * 1024 * 1024)
                .spawn(move || {
                    let who = Who {
                        tenant: "default",
                        member: "m",
                        user: Some("u"),
                        groups: &[],
                    };
                    let d = rules.decide("get_page", Tier::UserConfigurable, &json!({}), who);
                    drop(rules);
                    d
                })
                .expect("a thread")
                .join()
                .expect("decided without overflowing");
            assert_ne!(
                decided.reason.as_deref().map(|r| r.contains("recursion")),
                Some(true),
                "{kind} at {n}: {decided:?}"
            );
        }
    }
}
