#!/usr/bin/env bash
# Per-user fetch benchmark: GET /v1/agents/assistant/prompt?channel=web&user_id=<new user>
# on every request (bench/users.lua), so the response cache never answers. The release
# server on SQLite and on Postgres against the "database floor" (service/examples/floor.rs:
# one indexed SELECT through a raw sqlx pool, one render, a body of the same size) on the
# same database, each under wrk (64 connections, 2 threads). Prints requests/s, p50, p99,
# loadout/floor and the server's VmRSS/VmHWM after each miss run. Then the cached path
# (fixed URL, cache warm) of a loadout started with RUST_LOG unset, i.e. the default
# `info` level with one log line per request (and of the SQLite server above, at
# BENCH_LOG), against the bare handler (examples/bare.rs) returning a body of that size.
# The miss table's `rollout` rows repeat loadout's miss run with a rollout of revision 2
# on production for 50 % of users, and its `aborted` rows once more after the rollout's
# abort (same servers: before, during, after). ROLLOUT_AB=N then alternates N rounds of
# the miss without and with a rollout on each server (see below).
#
# BENCH_RSS=1 adds two memory floods on the SQLite server, VmRSS/VmHWM before and after:
#  (a) 100,000 distinct users. wrk cannot stop after N requests (thread:stop() ends a
#      thread, but wrk still sleeps out -d and divides by it), so it runs in chunks, each
#      as long as the remaining requests need at the last rate seen (+10%), each with its
#      own user-id prefix, until the chunks' request counts add up to 100,000 or more;
#  (b) user `flood` with the largest instructions the server accepts (1 MB tried first),
#      fetched for every channel × ~70 time zones, cycling, for [seconds].
#
# Needs: wrk (apt-get install wrk), curl, python3, psql, PostgreSQL on 127.0.0.1:5432 (trust).
# Usage, from the repository root: bench/fetch.sh [seconds]
# BENCH_LOG sets RUST_LOG for the measured servers (default: warn, no per-request line);
# LOADOUT_BIN=path measures that prebuilt loadout binary instead of building one;
# BENCH_NO_BUILD=1 also skips building the examples (bare, floor) and uses target/release's.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-10}"
PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres
PG_DB=loadout_fetch_bench
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# Build, then run copies, so a concurrent rebuild cannot swap a binary mid-run.
# BENCH_NO_BUILD=1 runs the examples already in target/release (several builds in a row).
if [ "${BENCH_NO_BUILD:-0}" = 1 ]; then
  :
elif [ -n "${LOADOUT_BIN:-}" ]; then
  cargo build --release -q -p loadout --example bare --example floor
else
  cargo build --release -q -p loadout --bin loadout --example bare --example floor
fi
mkdir "$WORK/bin"
cp "${LOADOUT_BIN:-target/release/loadout}" "$WORK/bin/loadout"
cp target/release/examples/bare target/release/examples/floor "$WORK/bin/"
BIN="$WORK/bin/loadout"

# start NAME URL PORT LOG [extra serve flags]: starts serve, waits until it listens.
# LOG is RUST_LOG, or "unset" to start it with RUST_LOG unset (the default level).
start() {
  local name=$1 url=$2 port=$3 log=$4; shift 4
  if [ "$log" = unset ]; then
    env -u RUST_LOG DATABASE_URL="$url" "$BIN" serve --bind "127.0.0.1:$port" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  else
    RUST_LOG="$log" DATABASE_URL="$url" "$BIN" serve --bind "127.0.0.1:$port" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  fi
  PIDS+=($!)
  eval "PID_$name=$!"
  wait_listening "$name"
}
# example NAME ARGS...: starts target/release/examples/NAME (bare or floor), waits until it listens.
example() {
  local name=$1; shift
  "$WORK/bin/${name%%-*}" "$@" 2>"$WORK/$name.err" &
  PIDS+=($!)
  wait_listening "$name"
}
wait_listening() {
  for _ in $(seq 1 100); do grep -q "listening" "$WORK/$1.err" 2>/dev/null && return; sleep 0.1; done
  echo "bench: $1 did not start" >&2; cat "$WORK/$1.err" >&2; exit 1
}

agent_key() { DATABASE_URL="$1" "$BIN" keys create --role agent --name "bench-$RANDOM" | tail -n 1; }
admin_key() { DATABASE_URL="$1" "$BIN" keys create --role operator --name "bench-admin-$RANDOM" | tail -n 1; }
rss() { awk '/^VmRSS/ {r = $2} /^VmHWM/ {h = $2} END {printf "VmRSS %d kB, VmHWM %d kB\n", r, h}' "/proc/$1/status"; }

# wrk_run LABEL WRK-ARGS...: runs wrk, prints "LABEL rps p50 p99 non-2xx socket-errors requests" (ms).
wrk_run() {
  local label=$1 out="$WORK/${1//\//-}.wrk"; shift
  wrk "$@" >"$out"
  python3 - "$label" "$out" <<'PY'
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
sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
requests = re.search(r"(\d+) requests in", text).group(1)
print(f"{label} {rps:.0f} {p50:.3f} {p99:.3f} {errors.group(1) if errors else 0} "
      f"{sum(map(int, sock.groups())) if sock else 0} {requests}")
PY
}
# miss LABEL PORT KEY [PREFIX]: wrk with a new user on every request.
miss() {
  curl -sf -o /dev/null -H "Authorization: Bearer $3" "http://127.0.0.1:$2$PROMPT&user_id=warm"
  wrk_run "$1" -t2 -c64 -d"${SECONDS_EACH}s" --latency -s bench/users.lua "http://127.0.0.1:$2" -- "$3" users "${4:-}"
}
# cached LABEL URL [KEY]: wrk on one fixed URL, cache warm.
cached() {
  local key=${3:-none}
  curl -sf -o /dev/null -H "Authorization: Bearer $key" "$2"
  wrk_run "$1" -t2 -c64 -d"${SECONDS_EACH}s" --latency -H "Authorization: Bearer $key" "$2"
}
# table FILE BASELINE-LABEL RATIO-HEADER: the rows of FILE, req/s also as a ratio to the baseline row's.
table() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
base = {r[0]: float(r[1]) for r in rows}[sys.argv[2]]
print(f"{'backend':9} {'server':16} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {sys.argv[3]:>14} {'non-2xx':>8} {'sock err':>8}")
for label, rps, p50, p99, errors, sock, _ in rows:
    backend, server = label.split("/")
    print(f"{backend:9} {server:16} {float(rps):8.0f} {float(p50):8.3f} {float(p99):8.3f} {float(rps) / base:14.2f} {errors:>8} {sock:>8}")
PY
}

PROMPT=/v1/agents/assistant/prompt?channel=web
SQLITE_URL="sqlite://$WORK/fetch.db?mode=rwc"
start sqlite "$SQLITE_URL" 18181 "${BENCH_LOG:-warn}"
SQLITE_KEY=$(agent_key "$SQLITE_URL")
MISS_SIZE=$(curl -sf -H "Authorization: Bearer $SQLITE_KEY" "http://127.0.0.1:18181$PROMPT&user_id=size" | wc -c)

PGOPTIONS="-c client_min_messages=warning" psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null
psql -q "$PG_ADMIN" -c "CREATE DATABASE $PG_DB" >/dev/null
PG_URL=postgres://postgres@127.0.0.1:5432/$PG_DB
start postgres "$PG_URL" 18182 "${BENCH_LOG:-warn}"
PG_KEY=$(agent_key "$PG_URL")

# The floor reads the databases loadout has just migrated and seeded.
example floor-sqlite 127.0.0.1:18191 "$SQLITE_URL" "$MISS_SIZE"
example floor-postgres 127.0.0.1:18192 "$PG_URL" "$MISS_SIZE"
FLOOR_SIZE=$(curl -sf "http://127.0.0.1:18191$PROMPT&user_id=size" | wc -c)

echo "miss: GET $PROMPT&user_id=<new user each request>, loadout body $MISS_SIZE bytes, floor $FLOOR_SIZE,"
echo "wrk -t2 -c64 -d${SECONDS_EACH}s, $(nproc) cores, RUST_LOG=${BENCH_LOG:-warn}"
for backend in sqlite postgres; do
  port=18181 floor=18191 key=$SQLITE_KEY pid=$PID_sqlite
  [ "$backend" = postgres ] && port=18182 floor=18192 key=$PG_KEY pid=$PID_postgres
  miss "$backend/floor" "$floor" none >>"$WORK/miss"
  miss "$backend/loadout" "$port" "$key" "$backend-" >>"$WORK/miss"
  echo "loadout on $backend after its miss run: $(rss "$pid")" >>"$WORK/rss"
done
# The same miss with a rollout running on production (revision 2 for 50 % of users): the
# running rollout's cached lookup and one SHA-256 per request, half the users on each side.
# api PORT KEY METHOD PATH BODY: an operator's call on the assistant.
api() {
  curl -sf -o /dev/null -X "$3" -H "Authorization: Bearer $2" -H 'Content-Type: application/json' \
    "http://127.0.0.1:$1/v1/agents/assistant$4" -d "$5"
}
SQLITE_ADMIN=$(admin_key "$SQLITE_URL")
PG_ADMIN_KEY=$(admin_key "$PG_URL")
rollout_on() { api "$1" "$2" POST /labels/production/rollout '{"candidate": 2, "percent": 50}'; }
rollout_off() { api "$1" "$2" POST /labels/production/rollout/abort '{}'; }
for side in "18181 $SQLITE_ADMIN" "18182 $PG_ADMIN_KEY"; do
  set -- $side
  api "$1" "$2" PATCH "" '{"soul": "The candidate soul for the benchmark."}'
  api "$1" "$2" PUT /labels/production '{"revision": 1}'
  rollout_on "$1" "$2"
done
miss sqlite/rollout 18181 "$SQLITE_KEY" sqlite-rollout- >>"$WORK/miss"
miss postgres/rollout 18182 "$PG_KEY" postgres-rollout- >>"$WORK/miss"
# And without it again (aborted): before, during and after on the same servers, so the
# difference between the two plain rows shows what drift and noise alone do.
rollout_off 18181 "$SQLITE_ADMIN"
rollout_off 18182 "$PG_ADMIN_KEY"
miss sqlite/aborted 18181 "$SQLITE_KEY" sqlite-aborted- >>"$WORK/miss"
miss postgres/aborted 18182 "$PG_KEY" postgres-aborted- >>"$WORK/miss"
python3 - "$WORK/miss" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
rps = {r[0]: float(r[1]) for r in rows}
print(f"{'backend':9} {'server':8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'loadout/floor':>14} {'non-2xx':>8} {'sock err':>8}")
for label, r, p50, p99, errors, sock, _ in rows:
    backend, server = label.split("/")
    ratio = f"{float(r) / rps[backend + '/floor']:.2f}" if server != "floor" else ""
    print(f"{backend:9} {server:8} {float(r):8.0f} {float(p50):8.3f} {float(p99):8.3f} {ratio:>14} {errors:>8} {sock:>8}")
PY
cat "$WORK/rss"

# ROLLOUT_AB=N: N interleaved rounds per backend of the miss without (off) and with (on) a
# running rollout, in ABBA order (off-on, then on-off, ...) so a drift hits both alike;
# each `on` starts a new rollout and aborts it after its run. Prints on/off per round.
if [ "${ROLLOUT_AB:-0}" -gt 0 ]; then
  for backend in sqlite postgres; do
    port=18181 key=$SQLITE_KEY admin=$SQLITE_ADMIN
    [ "$backend" = postgres ] && port=18182 key=$PG_KEY admin=$PG_ADMIN_KEY
    for round in $(seq 1 "$ROLLOUT_AB"); do
      order="off on"; [ $((round % 2)) = 0 ] && order="on off"
      for state in $order; do
        if [ "$state" = on ]; then rollout_on "$port" "$admin"; fi
        miss "$backend/$state/$round" "$port" "$key" "$backend-ab$round$state-" >>"$WORK/ab"
        if [ "$state" = on ]; then rollout_off "$port" "$admin"; fi
      done
    done
  done
  echo
  echo "interleaved: $ROLLOUT_AB rounds per backend (ABBA), wrk -t2 -c64 -d${SECONDS_EACH}s each"
  python3 - "$WORK/ab" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
runs = {}
for label, rps, p50, p99, *_ in rows:
    backend, state, round_ = label.split("/")
    runs.setdefault(backend, {}).setdefault(round_, {})[state] = (float(rps), float(p99))
for backend, rounds in runs.items():
    ratios = []
    for round_, r in sorted(rounds.items(), key=lambda kv: int(kv[0])):
        ratio = r["on"][0] / r["off"][0]
        ratios.append(ratio)
        print(f"{backend:9} round {round_:>2}: off {r['off'][0]:8.0f} req/s (p99 {r['off'][1]:.2f} ms), "
              f"on {r['on'][0]:8.0f} req/s (p99 {r['on'][1]:.2f} ms), on/off {ratio:.3f}")
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    print(f"{backend:9} on/off median {statistics.median(ratios):.3f}, quartiles {q[0]:.3f}-{q[2]:.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f}")
PY
fi

# Cached path: a third loadout on a fresh SQLite file, RUST_LOG unset.
INFO_URL="sqlite://$WORK/info.db?mode=rwc"
start info "$INFO_URL" 18183 unset
INFO_KEY=$(agent_key "$INFO_URL")
CACHED_SIZE=$(curl -sf -H "Authorization: Bearer $INFO_KEY" "http://127.0.0.1:18183$PROMPT" | wc -c)
example bare 127.0.0.1:18190 "$CACHED_SIZE"
{
  cached sqlite/bare "http://127.0.0.1:18190$PROMPT"
  cached "sqlite/loadout-${BENCH_LOG:-warn}" "http://127.0.0.1:18181$PROMPT" "$SQLITE_KEY"
  cached sqlite/loadout-unset "http://127.0.0.1:18183$PROMPT" "$INFO_KEY"
} >"$WORK/cached"
echo
echo "cached: GET $PROMPT (cache warm), body $CACHED_SIZE bytes, wrk -t2 -c64 -d${SECONDS_EACH}s;"
echo "loadout-unset is started with RUST_LOG unset (default info level, stderr to a file)"
table "$WORK/cached" sqlite/bare "vs bare"
echo "  loadout-unset wrote $(wc -l <"$WORK/info.err") log lines, $(wc -c <"$WORK/info.err") bytes"

[ "${BENCH_RSS:-0}" = 1 ] || exit 0

echo
echo "RSS flood (a): 100000 distinct users against loadout on SQLite"
echo "  before: $(rss "$PID_sqlite")"
RATE=$(awk '$1 == "sqlite/loadout" {print $2}' "$WORK/miss")
TOTAL=0 ROUND=0
while [ "$TOTAL" -lt 100000 ]; do
  # The rest at the last rate seen, plus a tenth and a second; at most 2 minutes a chunk.
  CHUNK=$(( (100000 - TOTAL) * 11 / (10 * (RATE > 0 ? RATE : 1)) + 1 ))
  CHUNK=$(( CHUNK > 120 ? 120 : CHUNK ))
  ROUND=$((ROUND + 1))
  wrk_run "flood-a-$ROUND" -t2 -c64 -d"${CHUNK}s" --latency -s bench/users.lua "http://127.0.0.1:18181" -- "$SQLITE_KEY" users "flood$ROUND-" >"$WORK/flood-a"
  read -r _ RATE p50 p99 errors sock requests <"$WORK/flood-a"
  TOTAL=$((TOTAL + requests))
  echo "  wrk -d${CHUNK}s: $requests requests, $RATE req/s, p50 $p50 ms, p99 $p99 ms, non-2xx $errors, socket errors $sock (total $TOTAL)"
done
echo "  after:  $(rss "$PID_sqlite")"

echo
echo "RSS flood (b): user 'flood' with large instructions, every channel x ~70 time zones"
ADMIN_KEY=$(admin_key "$SQLITE_URL")
python3 - "$ADMIN_KEY" <<'PY'
import json, sys, urllib.error, urllib.request
key = sys.argv[1]
def put(size):
    body = json.dumps({"instructions": ("Flood instructions. " * (size // 20 + 1))[:size]}).encode()
    req = urllib.request.Request("http://127.0.0.1:18181/v1/agents/assistant/users/flood/instructions",
        method="PUT", data=body, headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status
    except urllib.error.HTTPError as e:
        if e.code != 413:
            sys.exit(f"PUT {size} bytes: {e.code} {e.read()[:300]!r}")
        return e.code
size = 1 << 20
if put(size) == 413:
    lo, hi = 0, size  # lo is accepted, hi is refused: find the largest accepted size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if put(mid) != 413 else (lo, mid)
    put(lo)
    print(f"  1048576 bytes refused with 413; largest accepted: {lo} bytes")
else:
    print(f"  instructions: {size} bytes accepted")
PY
echo "  before: $(rss "$PID_sqlite")"
wrk_run flood-b -t2 -c64 -d"${SECONDS_EACH}s" --latency -s bench/users.lua "http://127.0.0.1:18181" -- "$SQLITE_KEY" zones >"$WORK/flood-b"
read -r _ rps p50 p99 errors sock requests <"$WORK/flood-b"
FLOOD_SIZE=$(curl -sf -H "Authorization: Bearer $SQLITE_KEY" "http://127.0.0.1:18181$PROMPT&user_id=flood&tz=Europe%2FBerlin" | wc -c)
echo "  wrk -d${SECONDS_EACH}s: $requests requests, $rps req/s, p50 $p50 ms, p99 $p99 ms, non-2xx $errors, socket errors $sock; body ~$FLOOD_SIZE bytes"
echo "  after:  $(rss "$PID_sqlite")"
