//! The differential test: loadout's decision against Cedar's own `is_authorized`.
//!
//! Thousands of generated policy sets, callers and calls. loadout decides through
//! [`Policy::decide`] (its action-scope subsets, the split between the policies that
//! read an item and those that do not, its contexts built as restricted
//! expressions). The oracle asks cedar-policy directly, with nothing of loadout's:
//! the whole set, entities and contexts read from JSON, one request per item, the
//! forbids and the permits evaluated apart to learn every policy that holds. Then
//! it applies the overlay as docs/policies.md words it. The two must agree on the
//! outcome and on the deciding policy, and on which tools a caller may not see.

#![cfg(test)]

use std::collections::HashSet;
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Decision as CedarDecision, Effect, Entities, EntityUid, PolicyId,
    PolicySet, Request,
};
use serde_json::{Value, json};

use super::{Outcome, Policy, ToolShape, Who};
use crate::vocab::Tier;

/// splitmix64: the cases are the same on every run, and a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const TOOLS: [&str; 3] = ["get_page", "create_refunds", "delete_tasks"];
const USERS: [&str; 3] = ["u0", "u1", "u2"];
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
const TENANTS: [&str; 2] = ["default", "tb"];
const MEMBERS: [&str; 2] = ["m0", "m1"];
const TIERS: [&str; 3] = ["auto", "user_configurable", "requires_approval"];

fn parameters(tool: &str) -> Value {
    match tool {
        "get_page" => json!({
            "type": "object", "additionalProperties": false, "required": ["q", "n", "flag"],
            "properties": {"q": {"type": "string"}, "n": {"type": "integer"}, "flag": {"type": "boolean"}}
        }),
        "create_refunds" => json!({
            "type": "object", "additionalProperties": false, "required": ["refunds", "note"],
            "properties": {
                "note": {"type": "string"},
                "refunds": {"type": "array", "items": {
                    "type": "object", "additionalProperties": false, "required": ["amount", "reason"],
                    "properties": {"amount": {"type": "integer"}, "reason": {"type": "string"}}
                }}
            }
        }),
        _ => json!({
            "type": "object", "additionalProperties": false, "required": ["ids"],
            "properties": {"ids": {"type": "array", "items": {"type": "string"}}}
        }),
    }
}

/// One generated rule: its text, and whether it reads the call's arguments.
struct Rule {
    text: String,
    reads_arguments: bool,
}

/// A condition atom, and whether it reads `context.arguments` or `context.item`.
fn atom(rng: &mut Rng) -> (String, bool) {
    let n = rng.below(5) as i64 * 50;
    match rng.below(13) {
        0 => (
            format!("context.tenant == \"{}\"", rng.pick(&TENANTS)),
            false,
        ),
        1 => (
            format!("context.member == \"{}\"", rng.pick(&["m0", "m1", "tb/m0"])),
            false,
        ),
        2 => (format!("resource.tier == \"{}\"", rng.pick(&TIERS)), false),
        3 => (format!("resource.name == \"{}\"", rng.pick(&TOOLS)), false),
        4 => (
            format!("principal in Group::\"{}\"", rng.pick(&GROUPS)),
            false,
        ),
        5 => ("action in Action::\"call\"".to_owned(), false),
        6 => (format!("action == Action::\"{}\"", rng.pick(&TOOLS)), false),
        7 => (
            format!("principal == User::\"{}\"", rng.pick(&USERS)),
            false,
        ),
        8 => (
            format!("context.arguments has n && context.arguments.n > {n}"),
            true,
        ),
        9 => (
            format!("context has item && context.item.amount >= {n}"),
            true,
        ),
        10 => ("context.arguments.flag".to_owned(), true),
        11 => (format!("context.item.amount < {n}"), true),
        _ => ("context.arguments.ids.contains(\"a\")".to_owned(), true),
    }
}

fn condition(rng: &mut Rng) -> (String, bool) {
    let (a, ra) = atom(rng);
    match rng.below(4) {
        0 => (format!("!({a})"), ra),
        1 => {
            let (b, rb) = atom(rng);
            (format!("({a}) && ({b})"), ra || rb)
        }
        2 => {
            let (b, rb) = atom(rng);
            (format!("({a}) || ({b})"), ra || rb)
        }
        _ => (a, ra),
    }
}

fn rule(rng: &mut Rng, i: usize) -> Rule {
    let mut text = String::new();
    if rng.chance(50) {
        text.push_str(&format!("@id(\"r{i}\") "));
    }
    let forbid = rng.chance(35);
    if !forbid && rng.chance(30) {
        text.push_str("@requireApproval ");
    }
    if !forbid && rng.chance(30) {
        text.push_str("@skipApproval ");
    }
    if forbid && rng.chance(30) {
        text.push_str(&format!("@reason(\"because {i}\") "));
    }
    text.push_str(if forbid { "forbid (" } else { "permit (" });
    text.push_str(&match rng.below(4) {
        0 => format!("principal == User::\"{}\", ", rng.pick(&USERS)),
        1 => format!("principal in Group::\"{}\", ", rng.pick(&GROUPS)),
        _ => "principal, ".to_owned(),
    });
    text.push_str(&match rng.below(6) {
        0 | 1 => format!("action == Action::\"{}\", ", rng.pick(&TOOLS)),
        2 => format!(
            "action in [Action::\"{}\", Action::\"{}\"], ",
            rng.pick(&TOOLS),
            rng.pick(&TOOLS)
        ),
        3 => "action in Action::\"call\", ".to_owned(),
        4 => "action in [Action::\"call\"], ".to_owned(),
        _ => "action, ".to_owned(),
    });
    text.push_str(&match rng.below(4) {
        0 => format!("resource == Tool::\"{}\")", rng.pick(&TOOLS)),
        1 => "resource is Tool)".to_owned(),
        _ => "resource)".to_owned(),
    });
    let mut reads_arguments = false;
    for _ in 0..rng.below(3) {
        let (c, reads) = condition(rng);
        reads_arguments |= reads;
        let kind = if rng.chance(75) { "when" } else { "unless" };
        text.push_str(&format!(" {kind} {{ {c} }}"));
    }
    text.push_str(";\n");
    Rule {
        text,
        reads_arguments,
    }
}

fn arguments(rng: &mut Rng, tool: &str) -> Value {
    let amount = |rng: &mut Rng| rng.below(5) as i64 * 50 + rng.below(3) as i64 - 1;
    match tool {
        "get_page" => json!({"q": "x", "n": amount(rng), "flag": rng.chance(50)}),
        "create_refunds" => {
            let items: Vec<Value> = (0..rng.below(4))
                .map(|_| json!({"amount": amount(rng), "reason": "r"}))
                .collect();
            json!({"note": "n", "refunds": items})
        }
        _ => {
            let ids: Vec<&str> = (0..rng.below(3)).map(|_| rng.pick(&["a", "b"])).collect();
            json!({ "ids": ids })
        }
    }
}

/// Cedar's own answer, with the overlay applied as documented.
struct Oracle {
    set: PolicySet,
    /// The ids, in the text's order.
    order: Vec<PolicyId>,
    /// The forbids that read no argument.
    outright: HashSet<PolicyId>,
}

/// A request of `tool` by `who` with `context` read from JSON.
fn request(tool: &str, who: &Who<'_>, context: Value) -> Request {
    Request::new(
        uid("User", who.user.unwrap_or("")),
        uid("Action", tool),
        uid("Tool", tool),
        Context::from_json_value(context, None).expect("context"),
        None,
    )
    .expect("request")
}

fn uid(kind: &str, id: &str) -> EntityUid {
    EntityUid::from_str(&format!("{kind}::{}", json!(id))).expect("a uid")
}

impl Oracle {
    fn new(rules: &[Rule]) -> Oracle {
        let text: String = rules.iter().map(|r| r.text.as_str()).collect();
        let parsed = PolicySet::from_str(&text).expect("generated policies parse");
        let mut set = PolicySet::new();
        let mut order = Vec::new();
        let mut outright = HashSet::new();
        for (i, rule) in rules.iter().enumerate() {
            let policy = parsed
                .policy(&PolicyId::new(format!("policy{i}")))
                .expect("in order");
            let policy = match policy.annotation("id") {
                Some(id) => policy.new_id(PolicyId::new(id)),
                None => policy.clone(),
            };
            if policy.effect() == Effect::Forbid && !rule.reads_arguments {
                outright.insert(policy.id().clone());
            }
            order.push(policy.id().clone());
            set.add(policy).expect("unique ids");
        }
        Oracle {
            set,
            order,
            outright,
        }
    }

    fn entities(tool: &str, tier: &str, who: &Who<'_>) -> Entities {
        let parents: Vec<Value> = match who.user {
            Some(_) => who
                .groups
                .iter()
                .map(|g| json!({"type": "Group", "id": g}))
                .collect(),
            None => Vec::new(),
        };
        let json = json!([
            {"uid": {"type": "User", "id": who.user.unwrap_or("")}, "attrs": {}, "parents": parents},
            {"uid": {"type": "Tool", "id": tool}, "attrs": {"name": tool, "tier": tier}, "parents": []},
            {"uid": {"type": "Action", "id": tool}, "attrs": {}, "parents": [{"type": "Action", "id": "call"}]},
            {"uid": {"type": "Action", "id": "call"}, "attrs": {}, "parents": []},
        ]);
        Entities::from_json_value(json, None).expect("entities")
    }

    /// Every policy of `effect` that holds, and whether any policy failed.
    fn holding(
        &self,
        effect: Effect,
        request: &Request,
        entities: &Entities,
    ) -> (Vec<PolicyId>, bool) {
        let mut only = PolicySet::new();
        for p in self.set.policies().filter(|p| p.effect() == effect) {
            only.add(p.clone()).expect("unique");
        }
        let response = Authorizer::new().is_authorized(request, &only, entities);
        let held = match (effect, response.decision()) {
            (Effect::Forbid, CedarDecision::Deny) | (Effect::Permit, CedarDecision::Allow) => {
                response.diagnostics().reason().cloned().collect()
            }
            _ => Vec::new(),
        };
        (held, response.diagnostics().errors().next().is_some())
    }

    fn first(&self, ids: &[PolicyId]) -> Option<PolicyId> {
        self.order.iter().find(|id| ids.contains(id)).cloned()
    }

    /// One request's decision: (outcome, deciding policy).
    fn one(
        &self,
        tool: &str,
        tier: Tier,
        context: Value,
        entities: &Entities,
        who: &Who<'_>,
    ) -> (Outcome, Option<String>) {
        let request = request(tool, who, context);
        let (forbids, failed_f) = self.holding(Effect::Forbid, &request, entities);
        // Documented: a forbid that hides the tool decides before any other.
        let hiding: Vec<PolicyId> = forbids
            .iter()
            .filter(|id| self.outright.contains(id))
            .cloned()
            .collect();
        if let Some(id) = self.first(&hiding).or_else(|| self.first(&forbids)) {
            return (Outcome::Deny, Some(id.to_string()));
        }
        let (permits, failed_p) = self.holding(Effect::Permit, &request, entities);
        if failed_f || failed_p {
            return (Outcome::Approval, None);
        }
        let marked = |key: &str| {
            let ids: Vec<PolicyId> = permits
                .iter()
                .filter(|id| self.set.annotation(id, key).is_some())
                .cloned()
                .collect();
            self.first(&ids)
        };
        if let Some(id) = marked("requireApproval") {
            return (Outcome::Approval, Some(id.to_string()));
        }
        let auto = match tier {
            Tier::RequiresApproval => marked("skipApproval"),
            _ => marked("skipApproval").or_else(|| self.first(&permits)),
        };
        match auto {
            Some(id) => (Outcome::Auto, Some(id.to_string())),
            None => (Outcome::Tier, None),
        }
    }

    fn decide(
        &self,
        tool: &str,
        tier_name: &str,
        arguments: &Value,
        who: &Who<'_>,
    ) -> (Outcome, Option<String>) {
        let tier = Tier::or_safest(tier_name);
        let entities = Oracle::entities(tool, tier_name, who);
        let base =
            json!({"tenant": who.tenant, "member": super::member_identity(who.tenant, who.member)});
        if tool != "create_refunds" {
            let mut context = base;
            context["arguments"] = arguments.clone();
            return self.one(tool, tier, context, &entities, who);
        }
        let items = arguments["refunds"].as_array().cloned().unwrap_or_default();
        let mut rest = arguments.clone();
        rest.as_object_mut().expect("an object").remove("refunds");
        if items.is_empty() {
            // Documented: an empty list is decided by the forbids that read no argument.
            let mut context = base;
            context["arguments"] = rest;
            let request = request(tool, who, context);
            let (forbids, _) = self.holding(Effect::Forbid, &request, &entities);
            let outright: Vec<PolicyId> = forbids
                .into_iter()
                .filter(|id| self.outright.contains(id))
                .collect();
            return match self.first(&outright) {
                Some(id) => (Outcome::Deny, Some(id.to_string())),
                None => (Outcome::Tier, None),
            };
        }
        let rank = |o: Outcome| match o {
            Outcome::Auto => 0,
            Outcome::Tier => 1,
            Outcome::Approval => 2,
            Outcome::Deny => 3,
        };
        let mut strictest: Option<(Outcome, Option<String>)> = None;
        for item in items {
            let mut context = base.clone();
            context["arguments"] = rest.clone();
            context["item"] = item;
            let decided = self.one(tool, tier, context, &entities, who);
            if decided.0 == Outcome::Deny {
                return decided;
            }
            if strictest
                .as_ref()
                .is_none_or(|s| rank(decided.0) > rank(s.0))
            {
                strictest = Some(decided);
            }
        }
        strictest.unwrap_or((Outcome::Tier, None))
    }

    /// Whether a forbid that reads no argument holds for `who` on `tool`.
    fn hides(&self, tool: &str, tier: &str, who: &Who<'_>) -> bool {
        let entities = Oracle::entities(tool, tier, who);
        let context =
            json!({"tenant": who.tenant, "member": super::member_identity(who.tenant, who.member)});
        let request = request(tool, who, context);
        let (forbids, _) = self.holding(Effect::Forbid, &request, &entities);
        forbids.iter().any(|id| self.outright.contains(id))
    }
}

#[test]
fn loadout_decides_as_cedar_itself_over_thousands_of_generated_cases() {
    let tiers: Vec<&str> = TOOLS
        .iter()
        .enumerate()
        .map(|(i, _)| TIERS[i % TIERS.len()])
        .collect();
    let params: Vec<Value> = TOOLS.iter().map(|t| parameters(t)).collect();
    let mut compared = 0;
    let mut decided = [0usize; 4];
    for seed in 0..400u64 {
        let mut rng = Rng(seed);
        // The tiers turn with the seed, so every tool meets every tier.
        let shapes: Vec<ToolShape<'_>> = TOOLS
            .iter()
            .zip(&params)
            .enumerate()
            .map(|(i, (name, parameters))| ToolShape {
                name,
                tier: tiers[(i + seed as usize) % tiers.len()],
                parameters,
            })
            .collect();
        let rules: Vec<Rule> = (0..1 + rng.below(8)).map(|i| rule(&mut rng, i)).collect();
        let text: String = rules.iter().map(|r| r.text.as_str()).collect();
        let oracle = Oracle::new(&rules);
        let policy = Policy::of(Some(&text), shapes.iter().copied()).expect("a policy");
        assert!(
            matches!(policy, Policy::Ready(_)),
            "seed {seed}: {policy:?}"
        );
        for _ in 0..15 {
            let shape = shapes[rng.below(shapes.len())];
            let user = rng.chance(85).then(|| rng.pick(&USERS));
            let groups: Vec<String> = GROUPS
                .iter()
                .filter(|_| rng.chance(40))
                .map(|g| (*g).to_owned())
                .collect();
            let who = Who {
                tenant: rng.pick(&TENANTS),
                member: rng.pick(&MEMBERS),
                user,
                groups: &groups,
            };
            let args = arguments(&mut rng, shape.name);
            let ours = policy.decide(shape.name, Tier::or_safest(shape.tier), &args, who);
            let theirs = oracle.decide(shape.name, shape.tier, &args, &who);
            assert_eq!(
                (ours.outcome, ours.policy.clone()),
                theirs,
                "seed {seed}: {} called with {args} by {who:?} under\n{text}\nloadout said {ours:?}",
                shape.name
            );
            assert_eq!(
                policy.hides(shape.name, who),
                oracle.hides(shape.name, shape.tier, &who),
                "seed {seed}: hiding {} from {who:?} under\n{text}",
                shape.name
            );
            decided[super::rank(ours.outcome) as usize] += 1;
            compared += 1;
        }
    }
    assert_eq!(compared, 6000);
    // Every outcome is met often enough for the comparison to mean something.
    assert!(decided.iter().all(|n| *n > 300), "{decided:?}");
}
