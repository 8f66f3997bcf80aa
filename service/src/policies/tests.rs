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
    let problems = Rules::compile(text, shapes(&r, &d).into_iter()).expect_err("unknown attribute");
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
    let d = amounts("permit (principal, action == Action::\"create_refunds\", resource);").decide(
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
