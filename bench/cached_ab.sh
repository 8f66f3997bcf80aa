#!/usr/bin/env bash
# Interleaved A/B of the cached fetch: GET /v1/agents/assistant/prompt?channel=web (cache
# warm) on a fresh SQLite server per run, for each binary given and the bare handler
# (the word `bare`), alternated ROUNDS times, so a drift of the shared machine hits all
# of them alike. Prints req/s and p99 per run. `bare:traced` is the bare handler
# inside loadout's request-wide layers (request id, span, `served` line at the default
# level, catch-panic), served by loadout's connection loop: what those layers cost
# with no loadout handler at all. `bare:loop` is the bare handler in that loop alone.
# A path to a copy of examples/bare (its file name starting with `bare`), with or
# without `:MODE`, runs that copy instead of target/release/examples/bare: the layers
# of two builds side by side (`/tmp/bare-before:traced /tmp/bare-after:traced`).
#
# Usage, from the repository root:
#   cargo build --release -p loadout --bin loadout --example bare
#   cp target/release/loadout /tmp/loadout-new
#   ROUNDS=4 LOG=unset bench/cached_ab.sh 6 bare /tmp/loadout-new /tmp/loadout-old
# LOG is RUST_LOG for the servers (default warn); `unset` starts them without it
# (the default level, one `served` line per request, stderr to a file).
# USERS=1 asks with a new `user_id` on every request instead (bench/users.lua): the
# miss path, where the response cache never answers (skip `bare` there: it caches
# nothing to miss).
# Needs: wrk, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=$1; shift
PORT=${PORT:-18400}
for _ in $(seq 1 "${ROUNDS:-2}"); do
  for BIN in "$@"; do
    D=$(mktemp -d)
    URL="http://127.0.0.1:$PORT/v1/agents/assistant/prompt?channel=web"
    EXE=${BIN%%:*}
    if [ "$EXE" = bare ] || case $(basename "$EXE") in bare*) [ -x "$EXE" ] ;; *) false ;; esac; then
      MODE=""; [ "$BIN" != "$EXE" ] && MODE=${BIN#*:}
      [ "$EXE" = bare ] && EXE=target/release/examples/bare
      if [ "${LOG:-warn}" = unset ]; then LOGENV="-u RUST_LOG"; else LOGENV="RUST_LOG=${LOG:-warn}"; fi
      env $LOGENV "$EXE" "127.0.0.1:$PORT" 7266 $MODE 2>/dev/null &
      PID=$!; sleep 0.5; KEY=none
    else
      if [ "${LOG:-warn}" = unset ]; then
        env -u RUST_LOG DATABASE_URL="sqlite://$D/p.db?mode=rwc" "$BIN" serve --bind "127.0.0.1:$PORT" >"$D/out" 2>"$D/err" &
      else
        RUST_LOG="${LOG:-warn}" DATABASE_URL="sqlite://$D/p.db?mode=rwc" "$BIN" serve --bind "127.0.0.1:$PORT" >"$D/out" 2>"$D/err" &
      fi
      PID=$!
      for _ in $(seq 1 100); do grep -q listening "$D/err" 2>/dev/null && break; sleep 0.1; done
      KEY=$(tail -n 1 "$D/out")
      curl -sf -o /dev/null -H "Authorization: Bearer $KEY" "$URL"
    fi
    printf "%-24s " "$(basename "$BIN")"
    if [ "${USERS:-0}" = 1 ]; then
      LOAD=(-s bench/users.lua "http://127.0.0.1:$PORT" -- "$KEY" users "r$RANDOM")
    else
      LOAD=(-H "Authorization: Bearer $KEY" "$URL")
    fi
    wrk -t2 -c64 -d"${SECONDS_EACH}s" --latency "${LOAD[@]}" \
      | awk '/Requests\/sec/ {rps=$2} /^ +99%/ {p99=$2} END {printf "%10.0f req/s  p99 %s\n", rps, p99}'
    kill "$PID"; wait "$PID" 2>/dev/null || true
    rm -rf "$D"
  done
done
