#!/usr/bin/env bash
# Policies against the cached fetch (issue 50), on one seeded SQLite server:
#   1. the cached GET /v1/agents/assistant/prompt?channel=web alone (wrk -t1 -c4);
#   2. the same while FLOODERS clients POST policy/validate in a loop, each with the
#      largest policy a save accepts (1,000 rules) and tests at their bound of work
#      (5 tests of 1,000 items: 999,005 rule evaluations);
#   3. the same while FLOODERS clients POST dry-run calls of 1,000 items under that
#      policy, saved (199,801 rule evaluations each: just under a call's bound);
#   4. dry-run calls of an `auto` tool, wrk -t1 -c32, with no policy and then under
#      a 100-rule policy: the ratio of their throughputs (same run).
# Prints req/s, p50 and p99 of each, and what the floods were answered.
#
# Usage, from the repository root:
#   cargo build --release -p loadout --bin loadout
#   bench/policy_flood.sh target/release/loadout      # FLOODERS=2 SECONDS_EACH=10
# Needs: wrk, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$1
FLOODERS=${FLOODERS:-2}
SECONDS_EACH=${SECONDS_EACH:-10}
PORT=${PORT:-$((18950 + RANDOM % 500))}
D=$(mktemp -d)
trap 'kill $PID 2>/dev/null || true; wait $PID 2>/dev/null || true; rm -rf "$D"' EXIT
DB="sqlite://$D/p.db?mode=rwc"
DATABASE_URL="$DB" RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$PORT" >"$D/out" 2>"$D/err" &
PID=$!
for _ in $(seq 1 100); do grep -q listening "$D/err" 2>/dev/null && break; sleep 0.1; done
grep -q listening "$D/err" || { echo "policy_flood: the server did not start:" >&2; cat "$D/err" >&2; exit 1; }
KEY=$(tail -n 1 "$D/out")
AGENT=$("$BIN" --database-url "$DB" keys create --role agent --name bench-agent | tail -n 1)
BASE="http://127.0.0.1:$PORT"
URL="$BASE/v1/agents/assistant/prompt?channel=web"
post() { curl -sf -o /dev/null -X "$1" -H "Authorization: Bearer $KEY" -H 'content-type: application/json' --data-binary "$3" "$BASE$2"; }

# A list tool, linked to the assistant.
post POST /v1/tools '{"name": "create_refunds", "description": "Refund orders.", "approval_tier": "user_configurable",
  "parameters": {"type": "object", "additionalProperties": false, "required": ["refunds"], "properties": {"refunds":
  {"type": "array", "items": {"type": "object", "additionalProperties": false, "required": ["amount", "reason"],
  "properties": {"amount": {"type": "integer"}, "reason": {"type": "string"}}}}}}}'
curl -sf -o /dev/null -X PUT -H "Authorization: Bearer $KEY" "$BASE/v1/agents/assistant/links/create_refunds"

python3 - "$D" <<'PY'
import json, sys
d = sys.argv[1]
# The costliest policy a save accepts: 1,000 rules on the list tool, 199 of them
# reading each item, 801 reading only the call's principal.
rules = []
for i in range(199):
    rules.append(f'@id("item-{i}") @requireApproval permit (principal, action == Action::"create_refunds", resource) when {{ context.item.amount > {1000 + i} }};')
for i in range(801):
    rules.append(f'@id("user-{i}") forbid (principal == User::"banned-{i}", action == Action::"create_refunds", resource);')
largest = "\n".join(rules)
items = [{"amount": i % 500, "reason": "late"} for i in range(1000)]
tests = [{"tool": "create_refunds", "arguments": {"refunds": items}, "user": "u1", "expect": "tier"} for _ in range(5)]
json.dump({"policy": largest, "tests": tests}, open(f"{d}/validate.json", "w"))
json.dump({"policy": largest}, open(f"{d}/largest.json", "w"))
json.dump({"tool": "create_refunds", "arguments": {"refunds": items}, "conversation_id": "c", "user_id": "u1",
           "dry_run": True}, open(f"{d}/call.json", "w"))
# 100 rules over the seeded tools, as service/benches/policy.rs: per tool a forbid by
# user, a permit by group, a forbid by tenant and an approval by member.
tools = ["get_tasks", "get_reminders", "get_schedules", "search_gmail", "get_gmail", "search_memories",
         "get_memories", "get_entities", "search_entities", "get_context", "create_tasks", "create_reminders",
         "create_memories", "update_tasks", "update_memories", "link_memories", "set_project", "delete_tasks",
         "delete_reminders", "delete_memories", "delete_schedules", "create_schedules", "update_instructions"]
hundred = []
for i in range(100):
    t = tools[i % len(tools)]
    hundred.append([
        f'@id("hide-{i}") forbid (principal == User::"banned-{i}", action == Action::"{t}", resource);',
        f'@id("ops-{i}") permit (principal in Group::"ops-{i}", action == Action::"{t}", resource);',
        f'@id("tenant-{i}") forbid (principal, action == Action::"{t}", resource) when {{ context.tenant == "closed-{i}" }};',
        f'@id("member-{i}") @requireApproval permit (principal, action == Action::"{t}", resource) when {{ context.member == "intern-{i}" }};',
    ][i % 4])
json.dump({"policy": "\n".join(hundred)}, open(f"{d}/hundred.json", "w"))
body = json.dumps({"tool": "get_gmail", "arguments": {"message_id": "m1"}, "conversation_id": "c",
                   "user_id": "alice", "dry_run": True})
open(f"{d}/call.lua", "w").write(
    'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
    f'wrk.body = {json.dumps(body)}\n')
PY

curl -sf -o /dev/null -H "Authorization: Bearer $AGENT" "$URL"
measure() {
  wrk -t1 -c4 -d"${SECONDS_EACH}s" --latency -H "Authorization: Bearer $AGENT" "$URL" \
    | awk '/Requests\/sec/ {rps=$2} /^ +Latency +[0-9]/ {avg=$2; max=$4} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} END {printf "%8.0f req/s  p50 %s  p99 %s  mean %s  max %s", rps, p50, p99, avg, max}'
}
flood() { # $1: path, $2: body file, $3: key, $4: out file
  for _ in $(seq 1 "$FLOODERS"); do
    ( end=$((SECONDS + SECONDS_EACH + 1))
      while [ $SECONDS -lt $end ]; do
        curl -s -m 60 -o /dev/null -w '%{http_code} %{time_total}\n' -X POST -H "Authorization: Bearer $3" \
          -H 'content-type: application/json' --data-binary @"$2" "$BASE$1" >>"$4"
      done ) &
    FLOOD+=($!)
  done
  sleep 0.5
}
answered() { awk -v what="$1" '{n++; c[$1]++; t+=$2} END {printf "%s answered: %d (", what, n; for (k in c) printf "%s: %d ", k, c[k]; printf "), mean %.2f s each\n", (n? t/n : 0)}' "$2"; }
FLOOD=()
settle() { wait "${FLOOD[@]}"; FLOOD=(); }

printf "%-34s %s\n" "fetch alone" "$(measure)"
: >"$D/validates"
flood /v1/agents/assistant/policy/validate "$D/validate.json" "$KEY" "$D/validates"
printf "%-34s %s\n" "fetch under $FLOODERS validate loops" "$(measure)"
settle
answered validates "$D/validates"

post PUT /v1/agents/assistant/policy @"$D/largest.json"
: >"$D/calls"
flood /v1/agents/assistant/tool-calls "$D/call.json" "$AGENT" "$D/calls"
printf "%-34s %s\n" "fetch under $FLOODERS 1,000-item calls" "$(measure)"
settle
answered "1,000-item calls" "$D/calls"

calls() {
  wrk -t1 -c32 -d"${SECONDS_EACH}s" --latency -s "$D/call.lua" -H "Authorization: Bearer $AGENT" \
    "$BASE/v1/agents/assistant/tool-calls" | awk '/Requests\/sec/ {print $2}'
}
post PUT /v1/agents/assistant/policy '{"policy": null}'
none=$(calls)
post PUT /v1/agents/assistant/policy @"$D/hundred.json"
hundred=$(calls)
printf "%-34s %8.0f req/s\n" "dry-run call, no policy" "$none"
printf "%-34s %8.0f req/s  (%.2f of no policy)\n" "dry-run call, 100 rules" "$hundred" "$(python3 -c "print($hundred / $none)")"
