#!/usr/bin/env bash
# Configuration as code at size (issue 27): an instance of 100 agents and 1,000 tools
# (the seeded one plus 99 agents, each linked to 10 of 1,000 made-up tools), timed:
#   apply   the folder to an empty database (everything created, one transaction)
#   plan    the folder against it right after (nothing to change, exit 0)
#   plan'   after one template edit (exit 2)
#   apply'  that edit (one agent updated; every agent's revision checked)
#   export  the instance to a folder (a second export must be byte-identical)
# Prints seconds per step (best of RUNS runs, default 3).
#
# Usage, from the repository root:
#   cargo build --release -p loadout --bin loadout
#   bench/config.sh                       # SQLite
#   DB=postgres://postgres@127.0.0.1:5432/postgres bench/config.sh   # Postgres (a scratch database is made and dropped)
# Needs: python3 (to write the folder); psql for Postgres.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/loadout}
RUNS=${RUNS:-3}
export LOADOUT_SECRETS_KEY=${LOADOUT_SECRETS_KEY:-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=}
export RUST_LOG=warn
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

fresh_db() { # $1: run number; prints a database URL, migrated, never seeded
  if [ -n "${DB:-}" ]; then
    local name="loadout_bench_config_$1"
    psql "$DB" -qc "DROP DATABASE IF EXISTS $name" -qc "CREATE DATABASE $name" >/dev/null
    echo "${DB%/*}/$name"
  else
    echo "sqlite://$W/run$1.db?mode=rwc"
  fi
}

# The folder: the seeded instance's export, grown to 100 agents and 1,000 tools.
SEED="sqlite://$W/seed.db?mode=rwc"
"$BIN" --database-url "$SEED" migrate up >/dev/null
"$BIN" --database-url "$SEED" seed >/dev/null
"$BIN" --database-url "$SEED" export "$W/big" 2>/dev/null
python3 - "$W/big" <<'EOF'
import json, os, shutil, sys
root = sys.argv[1]
schema = {"additionalProperties": False, "properties": {"id": {"description": "The record.", "type": "string"}},
          "required": ["id"], "type": "object"}
have = len(os.listdir(f"{root}/tools"))
names = [f"get_bench{n:04d}" for n in range(1000 - have)]
for name in names:
    with open(f"{root}/tools/{name}.json", "w") as f:
        f.write(json.dumps({"active": True, "approval_tier": "auto", "connector": None,
                            "description": f"Reads record {name}.", "parameters": schema,
                            "prompt_section": None, "strict": True, "type": "api"},
                           indent=2, sort_keys=True) + "\n")
src = f"{root}/agents/assistant"
for n in range(99):
    dst = f"{root}/agents/bench{n:02d}"
    shutil.copytree(src, dst)
    text = open(f"{dst}/agent.toml").read()
    head, _, rest = text.partition("tools = [")
    _, _, rest = rest.partition("]")
    links = ", ".join('"%s"' % names[(n * 10 + i) % len(names)] for i in range(10))
    open(f"{dst}/agent.toml", "w").write(f"{head}tools = [{links}, \"update_instructions\"]{rest}")
# The export's state names the seed instance, not the empty ones applied to.
text = open(f"{root}/loadout.toml").read()
open(f"{root}/loadout.toml", "w").write(text.split("[state]")[0])
EOF
echo "folder: $(ls "$W/big/agents" | wc -l) agents, $(ls "$W/big/tools" | wc -l) tools, $(du -sh "$W/big" | cut -f1)"

time_of() { # runs "$@", prints wall seconds; the exit status must be 0 or 2
  local start end code=0
  start=$(date +%s.%N)
  "$@" >"$W/out" 2>"$W/err" || code=$?
  end=$(date +%s.%N)
  if [ "$code" != 0 ] && [ "$code" != 2 ]; then cat "$W/err" >&2; exit 1; fi
  echo "$end - $start" | bc
}

best() { sort -n | head -1; }
declare -A T
for run in $(seq 1 "$RUNS"); do
  URL=$(fresh_db "$run")
  "$BIN" --database-url "$URL" migrate up >/dev/null
  rm -rf "$W/work" && cp -r "$W/big" "$W/work"
  T[apply]+="$(time_of "$BIN" --database-url "$URL" apply "$W/work")"$'\n'
  T[plan]+="$(time_of "$BIN" --database-url "$URL" plan "$W/work")"$'\n'
  echo "Be brief." >> "$W/work/agents/bench42/template.md"
  T[plan_edit]+="$(time_of "$BIN" --database-url "$URL" plan "$W/work")"$'\n'
  T[apply_edit]+="$(time_of "$BIN" --database-url "$URL" apply "$W/work")"$'\n'
  T[export]+="$(time_of "$BIN" --database-url "$URL" export "$W/again")"$'\n'
  "$BIN" --database-url "$URL" export "$W/again2" 2>/dev/null
  diff -r "$W/again" "$W/again2" >/dev/null || { echo "two exports differ" >&2; exit 1; }
  rm -rf "$W/again" "$W/again2"
  if [ -n "${DB:-}" ]; then psql "$DB" -qc "DROP DATABASE loadout_bench_config_$run" >/dev/null; fi
done
for step in apply plan plan_edit apply_edit export; do
  printf '%-11s %6.2f s (best of %s)\n' "$step" "$(printf '%s' "${T[$step]}" | best)" "$RUNS"
done
