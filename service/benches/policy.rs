//! `cargo bench -p loadout --bench policy`: what deciding one tool call costs
//! under a policy set of 100 rules (issue 38 item 8 asks under 50 µs), for a plain
//! call and for a list call of 10 items (decided item by item), and what hiding
//! tools from a principal costs a list of 20 tools.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use loadout::policies::{Policy, ToolShape, Who};
use loadout::vocab::Tier;
use serde_json::{Value, json};

fn refunds() -> Value {
    json!({
        "type": "object", "additionalProperties": false, "required": ["refunds"],
        "properties": {"refunds": {"type": "array", "items": {
            "type": "object", "additionalProperties": false,
            "required": ["amount", "reason", "currency"],
            "properties": {
                "amount": {"type": "integer"},
                "reason": {"type": "string"},
                "currency": {"type": ["string", "null"]},
            }}}}
    })
}

fn send() -> Value {
    json!({
        "type": "object", "additionalProperties": false, "required": ["to", "subject", "urgent"],
        "properties": {
            "to": {"type": "string"}, "subject": {"type": "string"}, "urgent": {"type": "boolean"},
        }
    })
}

/// 100 rules over 20 tools: per tool a threshold, a group permit, a forbid by
/// user, and argument rules; the rest on the two tools a call names.
fn policy() -> String {
    let mut text = String::new();
    for i in 0..18 {
        text.push_str(&format!(
            "@id(\"hide-{i}\") forbid (principal == User::\"banned-{i}\", action == Action::\"get_page{i:02}\", resource);\n"
        ));
        text.push_str(&format!(
            "@id(\"ops-{i}\") permit (principal in Group::\"ops-{i}\", action == Action::\"get_page{i:02}\", resource);\n"
        ));
        text.push_str(&format!(
            "@id(\"tenant-{i}\") forbid (principal, action == Action::\"get_page{i:02}\", resource) when {{ context.tenant == \"closed-{i}\" }};\n"
        ));
        text.push_str(&format!(
            "@id(\"member-{i}\") @requireApproval permit (principal, action == Action::\"get_page{i:02}\", resource) when {{ context.member == \"intern-{i}\" }};\n"
        ));
    }
    for i in 0..13 {
        text.push_str(&format!(
            "@id(\"big-{i}\") @requireApproval permit (principal, action == Action::\"create_refunds\", resource) when {{ context.item.amount > {} }};\n",
            100 + i * 10
        ));
    }
    for i in 0..13 {
        text.push_str(&format!(
            "@id(\"mail-{i}\") forbid (principal, action == Action::\"send_emails\", resource) when {{ context.arguments.to like \"*@blocked-{i}.example\" }};\n"
        ));
    }
    text.push_str(
        "@id(\"ok\") permit (principal, action == Action::\"create_refunds\", resource);\n",
    );
    text.push_str("@id(\"urgent\") @requireApproval permit (principal, action == Action::\"send_emails\", resource) when { context.arguments.urgent };\n");
    text
}

fn bench(c: &mut Criterion) {
    let empty =
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
    let names: Vec<String> = (0..18).map(|i| format!("get_page{i:02}")).collect();
    let (refunds, send) = (refunds(), send());
    let mut tools: Vec<ToolShape<'_>> = names
        .iter()
        .map(|n| ToolShape {
            name: n,
            tier: "auto",
            parameters: &empty,
        })
        .collect();
    tools.push(ToolShape {
        name: "create_refunds",
        tier: "user_configurable",
        parameters: &refunds,
    });
    tools.push(ToolShape {
        name: "send_emails",
        tier: "user_configurable",
        parameters: &send,
    });
    let text = policy();
    assert_eq!(text.lines().count(), 100, "100 rules");
    let policy = Policy::of(Some(&text), tools.iter().copied()).expect("a policy");
    assert!(matches!(policy, Policy::Ready(_)), "{policy:?}");
    let groups = vec!["ops-3".to_owned(), "support".to_owned()];
    let who = Who {
        tenant: "default",
        member: "agent",
        user: Some("user-42"),
        groups: &groups,
    };
    let mail = json!({"to": "someone@example.com", "subject": "hello", "urgent": false});
    c.bench_function("policy_decide_100_rules", |b| {
        b.iter(|| {
            policy.decide(
                black_box("send_emails"),
                Tier::UserConfigurable,
                black_box(&mail),
                who,
            )
        })
    });
    let items: Vec<Value> = (0..10)
        .map(|i| json!({"amount": 50 + i * 10, "reason": "late", "currency": null}))
        .collect();
    let list = json!({"refunds": items});
    c.bench_function("policy_decide_100_rules_10_items", |b| {
        b.iter(|| {
            policy.decide(
                black_box("create_refunds"),
                Tier::UserConfigurable,
                black_box(&list),
                who,
            )
        })
    });
    c.bench_function("policy_hide_20_tools", |b| {
        b.iter(|| {
            tools
                .iter()
                .filter(|t| policy.hides(black_box(t.name), who))
                .count()
        })
    });
}

/// The costliest call a save and a call's bound accept (issue 50, item 2): 1,000
/// items under 1,000 rules, 199 of which read each item (199,801 rule evaluations,
/// just under `MAX_WORK`); and the same policy's plain call of another tool.
fn largest(c: &mut Criterion) {
    let refunds = refunds();
    let tools = [ToolShape {
        name: "create_refunds",
        tier: "user_configurable",
        parameters: &refunds,
    }];
    let mut text = String::new();
    for i in 0..199 {
        text.push_str(&format!(
            "@id(\"item-{i}\") @requireApproval permit (principal, action == Action::\"create_refunds\", resource) when {{ context.item.amount > {} }};\n",
            1000 + i
        ));
    }
    for i in 0..801 {
        text.push_str(&format!(
            "@id(\"user-{i}\") forbid (principal == User::\"banned-{i}\", action == Action::\"create_refunds\", resource);\n"
        ));
    }
    let policy = Policy::of(Some(&text), tools.iter().copied()).expect("a policy");
    assert!(matches!(policy, Policy::Ready(_)), "{policy:?}");
    let items: Vec<Value> = (0..1000)
        .map(|i| json!({"amount": i % 500, "reason": "late", "currency": null}))
        .collect();
    let list = json!({ "refunds": items });
    assert!(policy.work("create_refunds", &list) <= loadout::policies::MAX_WORK);
    let who = Who {
        tenant: "default",
        member: "agent",
        user: Some("user-42"),
        groups: &[],
    };
    let mut group = c.benchmark_group("largest");
    group.sample_size(10);
    group.bench_function("policy_decide_1000_rules_1000_items", |b| {
        b.iter(|| {
            policy.decide(
                black_box("create_refunds"),
                Tier::UserConfigurable,
                black_box(&list),
                who,
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench, largest);
criterion_main!(benches);
