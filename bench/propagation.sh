#!/usr/bin/env bash
# Propagation delay between replicas (issue 22): three release `loadout serve`
# processes on one Postgres database; EDITS template PUTs through the first, each
# followed by fetching the prompt from the other two (every ~1 ms, keep-alive)
# until both serve the new text. The delay of an edit is from the PUT's response
# (the write acknowledged) until the later of the two replicas serves it.
#
# Same run, same binary, same database, one after the other:
#   before: `serve --no-listen`, the 250 ms generation poll alone (the old behaviour);
#   after:  the default, LISTEN/NOTIFY with the 1 s fallback poll.
# Edits are spaced by a random 50-300 ms so that they fall anywhere in a poll period.
#
# Needs: python3, psql, PostgreSQL on 127.0.0.1:5432 (trust).
# Usage, from the repository root: bench/propagation.sh [edits]   (default 200)
# BENCH_BIN=path uses another loadout binary instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/.."
EDITS="${1:-200}"
PG_ADMIN=postgres://postgres@127.0.0.1:5432/postgres
DB=loadout_bench_propagation
PG_URL="postgres://postgres@127.0.0.1:5432/$DB"
WORK="$(mktemp -d)"
PIDS=()
stop_all() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
cleanup() {
  stop_all
  psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "${BENCH_BIN:-}" ]; then
  cargo build --release -q -p loadout --bin loadout
  BIN=target/release/loadout
else
  BIN="$BENCH_BIN"
fi

# start NAME PORT [extra serve flags]: starts serve on the bench database, waits until it listens.
start() {
  local name=$1 port=$2; shift 2
  RUST_LOG=warn DATABASE_URL="$PG_URL" "$BIN" serve --bind "127.0.0.1:$port" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PIDS+=($!)
  for _ in $(seq 1 100); do grep -q "listening" "$WORK/$name.err" 2>/dev/null && return; sleep 0.1; done
  echo "bench: $name did not start" >&2; cat "$WORK/$name.err" >&2; exit 1
}

psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1
psql -q "$PG_ADMIN" -c "CREATE DATABASE $DB" >/dev/null
DATABASE_URL="$PG_URL" "$BIN" migrate up >/dev/null
ADMIN=$(DATABASE_URL="$PG_URL" "$BIN" keys create --role operator --name "bench-admin-$RANDOM" | tail -n 1)

# measure LABEL: EDITS edits through 18101, watched on 18102 and 18103; appends to $WORK/results.
measure() {
  python3 - "$1" "$EDITS" "$ADMIN" >>"$WORK/results" <<'PY'
import http.client, json, random, sys, threading, time
label, edits, admin = sys.argv[1], int(sys.argv[2]), sys.argv[3]
PROMPT = "/v1/agents/assistant/prompt?channel=web"
headers = {"Authorization": f"Bearer {admin}", "Content-Type": "application/json"}
def conn(port):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=10)
def get(c):
    c.request("GET", PROMPT, headers=headers)
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"GET answered {r.status}: {body[:200]!r}")
    return body
writer, readers = conn(18101), [conn(18102), conn(18103)]
for c in readers:
    get(c)  # warm
def watch(c, marker, out, i):
    while marker not in get(c):
        time.sleep(0.001)
    out[i] = time.perf_counter()
delays, puts = [], []
for n in range(edits):
    time.sleep(random.uniform(0.05, 0.3))
    marker = f"edit-{label}-{n}-{random.getrandbits(32)}".encode()
    seen = [None, None]
    threads = [threading.Thread(target=watch, args=(c, marker, seen, i)) for i, c in enumerate(readers)]
    body = json.dumps({"template": f"{marker.decode()} $soul"})
    sent = time.perf_counter()
    writer.request("PUT", "/v1/agents/assistant/prompt-template", body=body, headers=headers)
    r = writer.getresponse()
    r.read()
    acked = time.perf_counter()
    if r.status != 200:
        sys.exit(f"PUT answered {r.status}")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    delays.append(1000 * (max(seen) - acked))
    puts.append(1000 * (acked - sent))
def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
print(label, len(delays), *(f"{v:.1f}" for v in (pct(delays, 50), pct(delays, 99), max(delays), pct(puts, 50))))
PY
}

: >"$WORK/results"
for mode in before after; do
  if [ "$mode" = before ]; then flags=(--no-listen); else flags=(); fi
  for i in 1 2 3; do start "$mode-$i" "1810$i" ${flags[@]+"${flags[@]}"}; done
  measure "$mode"
  stop_all
done

echo "3 replicas on one Postgres, $EDITS edits through one, $(nproc) cores; delay = PUT answered -> both others serve the edit"
python3 - "$WORK/results" <<'PY'
import sys
print(f"{'':28} {'edits':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'PUT p50 ms':>11}")
names = {"before": "before (250 ms poll only)", "after": "after (LISTEN/NOTIFY)"}
for label, n, p50, p99, top, put in (l.split() for l in open(sys.argv[1])):
    print(f"{names[label]:28} {n:>6} {p50:>8} {p99:>8} {top:>8} {put:>11}")
PY
