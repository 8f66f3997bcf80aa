#!/usr/bin/env bash
# Load benchmark for GET /v1/agents/assistant/prompt?channel=web with an agent key:
# the release server on SQLite and on Postgres, and a bare axum handler returning a
# body of the same size, each under wrk (64 connections, 2 threads, 10 s, cache warm).
# Prints requests/s, p50 and p99 for each and the ratio to the bare handler, then
# edit-to-visible times: PUT a template, fetch until it shows, on one process and
# across two processes sharing one Postgres database.
#
# Needs: wrk (apt-get install wrk), curl, python3, PostgreSQL on 127.0.0.1:5432 (trust).
# Usage, from the repository root: bench/load.sh [seconds]
# BENCH_LOG=info measures with the per-request log line on (default: warn, off).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-10}"
PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS loadout_bench WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

cargo build --release -q -p loadout --bin loadout --example bare
BIN=target/release/loadout

# start NAME URL PORT [extra serve flags]: starts serve, waits until it listens; prints its admin key if it made one.
start() {
  local name=$1 url=$2 port=$3; shift 3
  RUST_LOG="${BENCH_LOG:-warn}" DATABASE_URL="$url" "$BIN" serve --bind "127.0.0.1:$port" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  for _ in $(seq 1 100); do grep -q "listening" "$WORK/$name.err" 2>/dev/null && return; sleep 0.1; done
  echo "bench: $name did not start" >&2; cat "$WORK/$name.err" >&2; exit 1
}

agent_key() { DATABASE_URL="$1" "$BIN" keys create --role agent --name "bench-$RANDOM" | tail -n 1; }
admin_key() { DATABASE_URL="$1" "$BIN" keys create --role operator --name "bench-admin-$RANDOM" | tail -n 1; }

# load LABEL URL [KEY]: prints "LABEL rps p50 p99" (latencies in ms).
load() {
  local label=$1 url=$2 key=${3:-none}
  curl -sf -o /dev/null -H "Authorization: Bearer $key" "$url"   # warm the cache
  wrk -t2 -c64 -d"${SECONDS_EACH}s" --latency -H "Authorization: Bearer $key" "$url" >"$WORK/$label.wrk"
  python3 - "$label" "$WORK/$label.wrk" <<'PY'
import re, sys
label, text = sys.argv[1], open(sys.argv[2]).read()
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)", v)
    if m is None:
        sys.exit(f"cannot read wrk latency {v!r}:\n{text}")
    n, unit = m.groups()
    return float(n) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p50 = ms(re.search(r"^\s*50%\s+(\S+)", text, re.M).group(1))
p99 = ms(re.search(r"^\s*99%\s+(\S+)", text, re.M).group(1))
errors = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
print(f"{label} {rps:.0f} {p50:.3f} {p99:.3f} {errors.group(1) if errors else 0}")
PY
}

PROMPT=/v1/agents/assistant/prompt?channel=web
SQLITE_URL="sqlite://$WORK/bench.db?mode=rwc"
start sqlite "$SQLITE_URL" 18081
SQLITE_KEY=$(agent_key "$SQLITE_URL")
SIZE=$(curl -s -H "Authorization: Bearer $SQLITE_KEY" "http://127.0.0.1:18081$PROMPT" | wc -c)

psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS loadout_bench WITH (FORCE)" >/dev/null
psql -q "$PG_ADMIN" -c "CREATE DATABASE loadout_bench" >/dev/null
PG_URL=postgres://postgres@127.0.0.1:5432/loadout_bench
start postgres "$PG_URL" 18082
PG_KEY=$(agent_key "$PG_URL")

target/release/examples/bare "127.0.0.1:18090" "$SIZE" 2>"$WORK/bare.err" &
PIDS+=($!)
sleep 0.5

{
  load bare "http://127.0.0.1:18090$PROMPT"
  load sqlite "http://127.0.0.1:18081$PROMPT" "$SQLITE_KEY"
  load postgres "http://127.0.0.1:18082$PROMPT" "$PG_KEY"
} >"$WORK/results"

echo "GET $PROMPT, body $SIZE bytes, wrk -t2 -c64 -d${SECONDS_EACH}s, $(nproc) cores"
python3 - "$WORK/results" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
bare = float(rows[0][1])
print(f"{'server':10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs bare':>8} {'non-2xx':>8}")
for label, rps, p50, p99, errors in rows:
    print(f"{label:10} {float(rps):9.0f} {float(p50):8.3f} {float(p99):8.3f} {float(rps) / bare:8.2f} {errors:>8}")
PY

# Edit-to-visible: PUT a template through one process, fetch from the given one until it shows.
visible() {
  local label=$1 write_port=$2 read_port=$3 admin=$4 key=$5 marker="bench-$RANDOM$RANDOM"
  curl -sf -o /dev/null -H "Authorization: Bearer $key" "http://127.0.0.1:$read_port$PROMPT"   # the reader's cache is warm
  python3 - "$label" "$write_port" "$read_port" "$admin" "$key" "$marker" <<'PY'
import json, sys, time, urllib.request
label, wport, rport, admin, key, marker = sys.argv[1:]
def call(port, method, path, token, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.read()
start = time.perf_counter()
call(wport, "PUT", "/v1/agents/assistant/prompt-template", admin, {"template": f"{marker} $soul"})
written = time.perf_counter()
fetches = 0
while True:
    fetches += 1
    if marker.encode() in call(rport, "GET", "/v1/agents/assistant/prompt?channel=web", key):
        break
    time.sleep(0.005)
seen = time.perf_counter()
print(f"{label:26} PUT {1000 * (written - start):6.1f} ms, then visible after {1000 * (seen - written):6.1f} ms ({fetches} fetches, 5 ms apart)")
PY
}
SQLITE_ADMIN=$(admin_key "$SQLITE_URL")
PG_ADMIN_KEY=$(admin_key "$PG_URL")
start postgres-2 "$PG_URL" 18083 --no-migrate
echo
echo "edit-to-visible (poll interval 250 ms):"
visible "sqlite, same process" 18081 18081 "$SQLITE_ADMIN" "$SQLITE_KEY"
visible "postgres, same process" 18082 18082 "$PG_ADMIN_KEY" "$PG_KEY"
for _ in 1 2 3; do
  visible "postgres, other process" 18082 18083 "$PG_ADMIN_KEY" "$PG_KEY"
done
