#!/usr/bin/env bash
# The rollout guard's false alarms and power, simulated (service/examples/guard_sim.rs):
# for every failure rate (0.5 to 20 %) and candidate share (1 to 50 %), ROLLOUTS
# rollouts with equal failure rates on both sides, the guard asked after every
# outcome up to HORIZON outcomes, under every min_outcomes (1, the API's least, to
# 100) and alpha (0.5, the API's most, 0.05, 0.01): the fraction aborted with its 95 %
# upper bound. Then a few real regressions (and one better candidate): the fraction
# aborted and the outcomes it took. Seeded, so a rerun prints the same tables.
# Pass `every` as the third argument to ask the guard after every outcome without the
# simulation's shortcut (see the example's documentation); same tables, slower.
#
# Usage, from the repository root: bench/guard_sim.sh [ROLLOUTS [HORIZON [every]]]
# (defaults 1000 and 20000; a few minutes on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run -q --release -p loadout --example guard_sim -- "${1:-1000}" "${2:-20000}" ${3:+"$3"}
