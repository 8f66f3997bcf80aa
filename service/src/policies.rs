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
//! compiles against the revision's tools all make the call wait for an approver.
//! A policy's id is its `@id("…")` annotation, else Cedar's `policy0`, `policy1`, …

pub mod cases;
pub mod groups;
mod schema;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision as CedarDecision, Effect, Entities, Entity,
    EntityId, EntityTypeName, EntityUid, Policy as CedarPolicy, PolicyId, PolicySet, Request,
    RestrictedExpression, Schema, ValidationMode, Validator,
};
use miette::Diagnostic;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub use schema::MAX_DEPTH;

use crate::vocab::Tier;

/// The largest policy set an agent may hold, in bytes of text.
pub const MAX_POLICY_BYTES: usize = 256 * 1024;

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

/// A tool of the compiled set: its action, resource and input schema.
struct Compiled {
    action: EntityUid,
    resource: Entity,
    parameters: Value,
    /// The policies whose action scope can hold for this tool: what a call of it
    /// is evaluated against (a policy scoped to another action never applies).
    set: PolicySet,
    /// Of those, the `forbid`s that read no argument.
    outright: PolicySet,
}

/// Whether `policy`'s action scope can hold for `action`.
fn applies_to(policy: &CedarPolicy, action: &EntityUid, group: &EntityUid) -> bool {
    match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => &uid == action,
        ActionConstraint::In(uids) => uids.iter().any(|u| u == action || u == group),
    }
}

/// The policies of `set` that can apply to `action` (each keeps its id).
fn subset(set: &PolicySet, action: &EntityUid, group: &EntityUid) -> PolicySet {
    let mut out = PolicySet::new();
    for policy in set.policies().filter(|p| applies_to(p, action, group)) {
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

/// A policy set parsed and validated against a revision's tools, ready to decide.
pub struct Rules {
    set: PolicySet,
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

/// An agent's policy as a revision serves it: ready, or (if it no longer compiles
/// against the revision's tools) broken, which decides nothing `auto`.
#[derive(Debug)]
pub enum Policy {
    Ready(Box<Rules>),
    Broken(String),
}

impl Policy {
    /// The policy `text` compiled for `tools`; `None` when there is no policy.
    pub fn of<'a>(
        text: Option<&str>,
        tools: impl Iterator<Item = ToolShape<'a>>,
    ) -> Option<Policy> {
        let text = text.filter(|t| !t.trim().is_empty())?;
        Some(match Rules::compile(text, tools) {
            Ok(rules) => Policy::Ready(Box::new(rules)),
            Err(problems) => {
                let first = problems
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_default();
                Policy::Broken(format!("the agent's policy does not compile: {first}"))
            }
        })
    }

    /// The decision on a call of `tool` (of the revision) at `tier`.
    pub fn decide(&self, tool: &str, tier: Tier, arguments: &Value, who: Who<'_>) -> Decision {
        match self {
            Policy::Ready(rules) => rules.decide(tool, tier, arguments, who),
            Policy::Broken(reason) => Decision::unsure(reason.clone()),
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

/// Whether a policy reads the call's arguments or item (its JSON form names them).
fn reads_arguments(policy: &CedarPolicy) -> bool {
    policy
        .to_json()
        .map(|json| {
            let json = json.to_string();
            json.contains("\"arguments\"") || json.contains("\"item\"")
        })
        .unwrap_or(true)
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

/// The most items of one call a policy decides (each is one evaluation).
pub const MAX_ITEMS: usize = 1000;

impl Rules {
    /// Parses `text`, names each policy by its `@id`, and validates the set (strict
    /// mode) against the schema of `tools`. Every problem, at its line and column.
    pub fn compile<'a>(
        text: &str,
        tools: impl Iterator<Item = ToolShape<'a>>,
    ) -> Result<Rules, Vec<PolicyProblem>> {
        Rules::build(text, tools, true)
    }

    fn build<'a>(
        text: &str,
        tools: impl Iterator<Item = ToolShape<'a>>,
        validate: bool,
    ) -> Result<Rules, Vec<PolicyProblem>> {
        if text.len() > MAX_POLICY_BYTES {
            return Err(vec![PolicyProblem {
                line: 1,
                column: 1,
                message: format!("the policy is over {MAX_POLICY_BYTES} bytes"),
            }]);
        }
        let parsed = PolicySet::from_str(text).map_err(|errors| {
            errors
                .iter()
                .map(|e| problems_of(text, e, e.to_string()))
                .collect::<Vec<_>>()
        })?;
        let mut set = PolicySet::new();
        let mut outright = PolicySet::new();
        let mut problems = Vec::new();
        for policy in parsed.policies() {
            let policy = match policy.annotation("id") {
                Some(id) => policy.new_id(PolicyId::new(id)),
                None => policy.clone(),
            };
            let hides = policy.effect() == Effect::Forbid && !reads_arguments(&policy);
            if let Err(e) = set.add(policy.clone()) {
                let id = policy.id().to_string();
                let at = text.find(&format!("@id(\"{id}\")")).unwrap_or(0);
                let (line, column) = position(text, at);
                problems.push(PolicyProblem {
                    line,
                    column,
                    message: format!("{e}: give each policy its own @id"),
                });
                continue;
            }
            if hides {
                // Ids are unique in `set`, so they are here too.
                let _ = outright.add(policy);
            }
        }
        let tools: Vec<ToolShape<'a>> = tools.collect();
        let schema_json = schema::schema(tools.iter().map(|t| (t.name, t.parameters)));
        let schema = Schema::from_json_value(schema_json).map_err(|e| {
            vec![PolicyProblem {
                line: 1,
                column: 1,
                message: format!("the tools' schemas make no Cedar schema: {e}"),
            }]
        })?;
        if validate {
            let validated = Validator::new(schema.clone()).validate(&set, ValidationMode::Strict);
            for error in validated.validation_errors() {
                problems.push(problems_of(text, error, error.to_string()));
            }
        }
        if !problems.is_empty() {
            problems.sort_by_key(|p| (p.line, p.column));
            return Err(problems);
        }
        let group = uid("Action", schema::CALL);
        let tools = tools
            .iter()
            .map(|t| {
                let action = uid("Action", t.name);
                let compiled = Compiled {
                    set: subset(&set, &action, &group),
                    outright: subset(&outright, &action, &group),
                    resource: tool_entity(t),
                    action,
                    parameters: t.parameters.clone(),
                };
                (t.name.to_owned(), compiled)
            })
            .collect();
        Ok(Rules {
            set,
            outright,
            tools,
            authorizer: Authorizer::new(),
        })
    }

    /// The decision on a call (see the module's doc for the order). A list tool's
    /// call is decided item by item (`context.item`) and is as strict as its
    /// strictest item: denied if one is, waits if one must, `auto` only if all are.
    pub fn decide(&self, tool: &str, tier: Tier, arguments: &Value, who: Who<'_>) -> Decision {
        let Some(compiled) = self.tools.get(tool) else {
            return Decision::unsure(format!("the policy does not know the tool {tool:?}"));
        };
        let list = schema::list_item(&compiled.parameters);
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
        let Some((list, item_schema)) = list else {
            return self.decide_one(compiled, tier, &args, None, who, &party);
        };
        let items = arguments
            .get(list)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if items.is_empty() {
            // Nothing to decide item by item: only a forbid that reads no argument applies.
            return match self.hides(tool, who) {
                true => self.decide_one(compiled, tier, &args, None, who, &party),
                false => Decision::tier(),
            };
        }
        if items.len() > MAX_ITEMS {
            return Decision::unsure(format!(
                "the policy decides calls of up to {MAX_ITEMS} items"
            ));
        }
        let mut strictest: Option<Decision> = None;
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
            let decision = self.decide_one(compiled, tier, &args, Some(item), who, &party);
            if strictest
                .as_ref()
                .is_none_or(|s| rank(decision.outcome) > rank(s.outcome))
            {
                strictest = Some(decision);
            }
        }
        strictest.unwrap_or_else(Decision::tier)
    }

    fn decide_one(
        &self,
        compiled: &Compiled,
        tier: Tier,
        args: &RestrictedExpression,
        item: Option<RestrictedExpression>,
        who: Who<'_>,
        party: &Party,
    ) -> Decision {
        let mut pairs = principal_pairs(who);
        pairs.push(("arguments".to_owned(), args.clone()));
        if let Some(item) = item {
            pairs.push(("item".to_owned(), item));
        }
        let context = match Context::from_pairs(pairs) {
            Ok(context) => context,
            Err(e) => return Decision::unsure(format!("the policy cannot decide: {e}")),
        };
        let response = match self.ask(&compiled.set, compiled, context, party) {
            Ok(response) => response,
            Err(e) => return Decision::unsure(e),
        };
        let reasons: Vec<&PolicyId> = response.diagnostics().reason().collect();
        if response.decision() == CedarDecision::Deny
            && let Some(id) = reasons.first()
        {
            return Decision {
                outcome: Outcome::Deny,
                policy: Some(id.to_string()),
                reason: Some(self.reason_of(id)),
                outright: self.outright.policy(id).is_some(),
            };
        }
        if let Some(error) = response.diagnostics().errors().next() {
            // A policy that failed to evaluate might have denied or asked.
            return Decision::unsure(format!("a policy failed to evaluate: {error}"));
        }
        let permits: Vec<&PolicyId> = match response.decision() {
            CedarDecision::Allow => reasons,
            CedarDecision::Deny => Vec::new(),
        };
        let annotated = |key: &str| {
            permits
                .iter()
                .find(|id| compiled.set.annotation(id, key).is_some())
                .map(|id| id.to_string())
        };
        if let Some(id) = annotated("requireApproval") {
            return Decision {
                outcome: Outcome::Approval,
                reason: self
                    .set
                    .annotation(&PolicyId::new(&id), "reason")
                    .map(str::to_owned),
                policy: Some(id),
                outright: false,
            };
        }
        let skips = annotated("skipApproval");
        let auto = match tier {
            Tier::RequiresApproval => skips,
            _ => skips.or_else(|| permits.first().map(|id| id.to_string())),
        };
        match auto {
            Some(id) => Decision {
                outcome: Outcome::Auto,
                policy: Some(id),
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

    /// The principal and the entities a request of `tool` by `who` is decided with.
    fn party(&self, tool: &Compiled, who: Who<'_>) -> Result<Party, String> {
        let principal = uid("User", who.user.unwrap_or(""));
        let parents: HashSet<EntityUid> = match who.user {
            Some(_) => who.groups.iter().map(|g| uid("Group", g)).collect(),
            None => HashSet::new(),
        };
        let user = Entity::new_no_attrs(principal.clone(), parents);
        let entities = Entities::from_entities([user, tool.resource.clone()], None)
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
    ) -> Result<cedar_policy::Response, String> {
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

/// `{tenant, member}`: what every context holds.
fn principal_pairs(who: Who<'_>) -> Vec<(String, RestrictedExpression)> {
    vec![
        (
            "tenant".to_owned(),
            RestrictedExpression::new_string(who.tenant.to_owned()),
        ),
        (
            "member".to_owned(),
            RestrictedExpression::new_string(who.member.to_owned()),
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
        let problems =
            Rules::compile(text, shapes(&r, &d).into_iter()).expect_err("unknown attribute");
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
        let problems = Rules::compile(
            "permit (principal, action, resource)\n  wehn { true };",
            shapes(&r, &d).into_iter(),
        )
        .expect_err("syntax");
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
    fn a_policy_that_no_longer_compiles_asks_for_approval() {
        let policy = amounts("permit (principal, action == Action::\"send_emails\", resource);");
        let d = policy.decide(
            "create_refunds",
            Tier::Auto,
            &json!({"items": []}),
            who("u", &[]),
        );
        assert_eq!(d.outcome, Outcome::Approval);
        assert!(d.reason.unwrap_or_default().contains("does not compile"));
    }

    #[test]
    fn two_policies_with_one_id_are_refused() {
        let (r, d) = (refunds(), deletes());
        let text = "@id(\"a\") permit (principal, action, resource);\n@id(\"a\") forbid (principal, action, resource);";
        let problems = Rules::compile(text, shapes(&r, &d).into_iter()).expect_err("duplicate");
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
