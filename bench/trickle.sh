#!/usr/bin/env bash
# The trickle attack of issue 23, measured: more sockets than the global connection
# cap, all from 127.0.0.2, each sending the head of a console sign-in with a
# 4,000-byte form and then one byte of it every 2 s; meanwhile /health, an agent
# fetch (GET /v1/agents/assistant/prompt?channel=web) and an MCP session
# (initialize, then tools/list) from 127.0.0.1, each timed. It runs the integration
# test `abuse::a_trickle_on_more_sockets_than_the_global_cap_...` (which fails past
# 1 s) with a global cap of 128 and with the default, 1,024, on SQLite (and on
# Postgres when LOADOUT_TEST_POSTGRES_URL is set), and prints its `trickle:` lines.
#
# Usage, from the repository root: bench/trickle.sh
# The 1,024 run opens 1,280 client sockets in the test process: it raises the open
# file limit for itself first.
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 8192 2>/dev/null || echo "could not raise the open file limit (ulimit -n is $(ulimit -n))"
for cap in 128 1024; do
  LOADOUT_TRICKLE_MAX_CONNECTIONS=$cap cargo test -q -p loadout-tests --test integration \
    abuse::a_trickle_on_more_sockets_than_the_global_cap -- --nocapture --test-threads 1 2>&1 |
    grep -oE 'trickle: .*|did not answer.*' || true
done
