//! `cargo bench -p loadout --bench prompt`: the engine on 8 KiB templates with 10
//! placeholders (the inputs `bench/template_vs_cpython.sh` also gives CPython), and
//! `build_agent_prompt` for the default assistant, in memory.
//!
//! - `template_8k.txt`: 10 placeholders and two `$$` escapes, like a real prompt;
//! - `template_8k_dollars.txt`: the same 10 placeholders among 64 `$$` escapes, the
//!   engine's worst realistic case (a copy per escape).

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loadout::prompt::builder::{self, Agent, Channel, Context, FixedClock, Tool};
use loadout::prompt::template;
use loadout::registry::catalog::Seeds;

const TEMPLATES: [(&str, &str); 2] = [
    ("8k_10", include_str!("../../bench/data/template_8k.txt")),
    (
        "8k_10_dollars",
        include_str!("../../bench/data/template_8k_dollars.txt"),
    ),
];
const VARS: &str = include_str!("../../bench/data/vars.json");

const NAMES: [&str; 10] = loadout::prompt::lint::KNOWN_PLACEHOLDERS;

/// The ten values found by a `match` on the name, the way the builder's values are.
struct ByMatch([String; 10]);

impl template::Values for ByMatch {
    fn get(&self, name: &str) -> Option<&str> {
        let i = match name {
            "identity" => 0,
            "soul" => 1,
            "channel_guidance" => 2,
            "current_time" => 3,
            "memory_notes" => 4,
            "user_instructions" => 5,
            "tool_guidance" => 6,
            "interaction_learning" => 7,
            "operating_model" => 8,
            "session_section" => 9,
            _ => return None,
        };
        debug_assert_eq!(NAMES[i], name);
        Some(&self.0[i])
    }
}

fn safe_substitute(c: &mut Criterion) {
    let values: HashMap<String, String> = serde_json::from_str(VARS).expect("vars.json");
    let by_match = ByMatch(std::array::from_fn(|i| values[NAMES[i]].clone()));
    let mut group = c.benchmark_group("template");
    for (name, text) in TEMPLATES {
        assert_eq!(template::identifiers(text).len(), 10);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("safe_substitute_{name}"), |b| {
            b.iter(|| template::safe_substitute(black_box(text), black_box(&values)))
        });
        // The same values looked up by a `match`, as the prompt builder does.
        group.bench_function(format!("safe_substitute_{name}_match"), |b| {
            b.iter(|| template::safe_substitute(black_box(text), black_box(&by_match)))
        });
        group.bench_function(format!("scan_{name}"), |b| {
            b.iter(|| memchr::memchr_iter(b'$', black_box(text).as_bytes()).count())
        });
        // The floor: copying the template into a new String, no scanning at all.
        group.bench_function(format!("copy_{name}"), |b| {
            b.iter(|| black_box(text).to_owned())
        });
    }
    group.finish();
}

/// The seeded assistant with every catalog tool, as `seed` would store it.
fn assistant(seeds: &Seeds, template: bool) -> Agent {
    let a = &seeds.assistant;
    Agent {
        name: a.name.clone(),
        identity: serde_json::to_value(&a.identity).expect("identity"),
        soul: a.soul.clone(),
        soul_version: 1,
        prompt_template: template.then(|| a.prompt_template.clone()),
        template_version: 1,
        operating_model: a.operating_model.clone(),
        interaction_learning: a.interaction_learning.clone(),
        tools: seeds
            .catalog
            .tools
            .iter()
            .map(|t| Tool {
                name: t.name.clone(),
                description: t.description.clone(),
                approval_tier: t.tier.clone(),
                prompt_section: Some(t.prompt_section.clone()),
            })
            .collect(),
    }
}

fn build(c: &mut Criterion) {
    let seeds = Seeds::embedded().expect("seeds");
    let channels: Vec<Channel> = seeds
        .channels
        .iter()
        .map(|c| Channel {
            name: c.name.clone(),
            guidance: c.guidance.clone(),
            include_operating_model: c.include_operating_model,
            include_interaction_learning: c.include_interaction_learning,
            include_session_section: c.include_session_section,
        })
        .collect();
    let web = channels.iter().find(|c| c.name == "web").expect("web");
    let now = "2026-11-21T08:30:00Z".parse().expect("instant");
    let mut context = Context::at(&FixedClock(now));
    context.time_zone = "Europe/Berlin".parse().expect("zone");
    context.memory_notes = vec!["Prefers short answers before noon.".into()];
    context.user_instructions = Some("Answer in British English.".into());

    let mut group = c.benchmark_group("build_agent_prompt");
    for (name, template) in [("template_web", true), ("builtin_web", false)] {
        let agent = assistant(&seeds, template);
        group.bench_function(name, |b| {
            b.iter(|| builder::build_agent_prompt(black_box(&agent), black_box(web), &context))
        });
    }
    group.finish();
}

criterion_group!(benches, safe_substitute, build);
criterion_main!(benches);
