//! `cargo bench -p loadout --bench assign`: what picking a rollout's side costs
//! one subject (SHA-256 of four length-prefixed fields, issue 26 item 5 asks
//! under 1 µs).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use loadout::releases::traffic::assign;

fn bench(c: &mut Criterion) {
    c.bench_function("rollout_assign", |b| {
        b.iter(|| {
            assign::candidate(
                black_box("assistant"),
                black_box("production"),
                black_box(42),
                black_box("user-0123456789abcdef"),
                black_box(1_000),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
