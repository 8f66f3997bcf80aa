#!/usr/bin/env bash
# Server CPU per request on the cached fetch: for each binary given (or the word
# `bare`, or `bare:MODE` for examples/bare's `loop` and `traced` modes), a fresh
# SQLite server with default logging, wrk -t2 -c64 for SECONDS on the warm prompt URL,
# and `perf stat -e task-clock` on the server alongside. Prints req/s, µs of server CPU
# per request and context switches per request. Steadier than req/s alone when wrk and
# the server share 2 cores, though still ±1.5 µs between runs.
#
# Usage, from the repository root:
#   cargo build --release -p loadout --bin loadout --example bare
#   bench/cpu_per_request.sh 5 bare bare:traced target/release/loadout
# Needs: wrk, curl, perf.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=$1; shift
PORT=18410
URL="http://127.0.0.1:$PORT/v1/agents/assistant/prompt?channel=web"
for BIN in "$@"; do
  D=$(mktemp -d)
  if [ "${BIN%%:*}" = bare ]; then
    MODE=""; [ "$BIN" != bare ] && MODE=${BIN#bare:}
    env -u RUST_LOG target/release/examples/bare "127.0.0.1:$PORT" 7266 $MODE 2>/dev/null &
    PID=$!; sleep 0.5; KEY=none
  else
    env -u RUST_LOG DATABASE_URL="sqlite://$D/p.db?mode=rwc" "$BIN" serve --bind "127.0.0.1:$PORT" >"$D/out" 2>"$D/err" &
    PID=$!
    for _ in $(seq 1 100); do grep -q listening "$D/err" 2>/dev/null && break; sleep 0.1; done
    KEY=$(tail -n 1 "$D/out")
    curl -sf -o /dev/null -H "Authorization: Bearer $KEY" "$URL"
  fi
  perf stat -x, -e task-clock,context-switches -p "$PID" -o "$D/stat" -- sleep "$SECONDS_EACH" &
  STAT=$!
  wrk -t2 -c64 -d"${SECONDS_EACH}s" -H "Authorization: Bearer $KEY" "$URL" >"$D/wrk"
  wait "$STAT"
  awk -v name="$(basename "$BIN")" -F, '
    FNR == NR && /requests in/ { split($0, w, " "); n = w[1] }
    FNR == NR && /Requests\/sec/ { split($0, w, " "); rps = w[2] }
    FNR != NR && /task-clock/ { cpu = $1 }
    FNR != NR && /context-switches/ { cs = $1 }
    END { printf "%-24s %8.0f req/s  %6.2f us cpu/req  %4.2f cs/req\n", name, rps, cpu * 1000 / n, cs / n }
  ' "$D/wrk" "$D/stat"
  kill "$PID"; wait "$PID" 2>/dev/null || true
  rm -rf "$D"
done
