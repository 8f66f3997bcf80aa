#!/usr/bin/env bash
# A flood of configuration plans against the cached fetch (issue 35, item 4): one
# seeded SQLite server; the assistant's soul is first made LINES lines long
# (applied), then FLOODERS clients plan a different soul of as many lines in a loop
# while wrk measures the cached GET /v1/agents/assistant/prompt?channel=web. Prints
# the fetch's req/s, p50 and p99 without the flood and with it, and how many plans
# were answered. Plans per key are raised (--plans-per-minute) so the CPU gate, not
# the rate limit, is what is measured.
#
# Usage, from the repository root:
#   cargo build --release -p loadout --bin loadout
#   bench/plan_flood.sh target/release/loadout            # LINES=36000 FLOODERS=4 SECONDS_EACH=10
#   LINES=9000 bench/plan_flood.sh target/release/loadout # under the 20,000-line cap: diffed
# Needs: wrk, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$1
LINES=${LINES:-36000}
FLOODERS=${FLOODERS:-4}
SECONDS_EACH=${SECONDS_EACH:-10}
PORT=${PORT:-$((18450 + RANDOM % 500))}
D=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$D"' EXIT
DATABASE_URL="sqlite://$D/p.db?mode=rwc" RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$PORT" \
  --plans-per-minute 100000 >"$D/out" 2>"$D/err" &
PID=$!
for _ in $(seq 1 100); do grep -q listening "$D/err" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$D/err" || { echo "plan_flood: the server did not start:" >&2; cat "$D/err" >&2; exit 1; }
KEY=$(tail -n 1 "$D/out")
BASE="http://127.0.0.1:$PORT"
URL="$BASE/v1/agents/assistant/prompt?channel=web"
curl -sf -H "Authorization: Bearer $KEY" "$BASE/v1/config" >"$D/config.json"
python3 - "$D" "$LINES" <<'PY'
import json, random, sys
d, lines = sys.argv[1], int(sys.argv[2])
config = json.load(open(f"{d}/config.json"))
def soul(seed):
    r = random.Random(seed)
    return "".join(r.choice("abcdefgh") + "\n" for _ in range(lines))
for name, seed in (("apply", 1), ("plan", 2)):
    c = json.loads(json.dumps(config))
    for a in c["agents"]:
        if a["name"] == "assistant":
            a["soul"] = soul(seed)
    c.pop("state", None)
    json.dump({"configuration": c}, open(f"{d}/{name}.json", "w"))
PY
curl -sf -o /dev/null -X POST -H "Authorization: Bearer $KEY" -H 'content-type: application/json' \
  --data-binary @"$D/apply.json" "$BASE/v1/config/apply"
curl -sf -o /dev/null -H "Authorization: Bearer $KEY" "$URL"
measure() {
  wrk -t1 -c4 -d"${SECONDS_EACH}s" --latency -H "Authorization: Bearer $KEY" "$URL" \
    | awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {printf "%8.0f req/s  p50 %s  p99 %s", rps, p50, p99}'
}
printf "%-28s %s\n" "fetch alone" "$(measure)"
: >"$D/plans"
for _ in $(seq 1 "$FLOODERS"); do
  ( end=$((SECONDS + SECONDS_EACH + 1))
    while [ $SECONDS -lt $end ]; do
      curl -s -o /dev/null -w '%{http_code} %{time_total}\n' -X POST -H "Authorization: Bearer $KEY" \
        -H 'content-type: application/json' --data-binary @"$D/plan.json" "$BASE/v1/config/plan" >>"$D/plans"
    done ) &
done
sleep 0.5
printf "%-28s %s\n" "fetch under $FLOODERS plan loops" "$(measure)"
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null || true
awk '{n++; if ($1==200) ok++; t+=$2} END {printf "plans answered: %d (200: %d), mean %.2f s each\n", n, ok, (n? t/n : 0)}' "$D/plans"
