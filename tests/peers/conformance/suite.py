"""The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json)
against loadout, through proxy.mjs (which adds the agent key), at one protocol revision:

    python3 suite.py 2025-11-25|2026-07-28      (the proxy's URL in CONFORMANCE_URL)

Runs the server scenarios that apply to a server without the suite's own fixture tools, prompts
and resources, reads each scenario's checks.json, and fails on any FAILURE but those listed in
NOT_APPLICABLE. WARNINGs (SHOULDs) are printed, not failed."""

import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from peerlib import WORK, Checks  # noqa: E402

MODULES = os.path.join(os.path.dirname(HERE), ".peers", "node_modules")
SCENARIOS = {
    "2025-11-25": ["server-initialize", "server-session-lifecycle", "ping", "tools-list", "prompts-list",
                   "server-sse-polling", "server-sse-multiple-streams", "dns-rebinding-protection"],
    "2026-07-28": ["server-stateless", "tools-list", "prompts-list", "caching", "http-header-validation",
                   "server-sse-multiple-streams", "dns-rebinding-protection"],
}
# Checks that need what only the suite's fixture server has. Everything else must pass.
NOT_APPLICABLE = {
    "server-stateless:sep-2575-server-rejects-undeclared-capability": "needs the fixture tool test_missing_capability",
    "server-stateless:sep-2575-missing-capability-http-400": "needs the fixture tool test_missing_capability",
    "server-stateless:sep-2575-http-server-no-independent-requests-on-stream": "needs the fixture tool test_streaming_elicitation",
    "server-stateless:sep-2575-server-no-log-without-loglevel": "needs the fixture tool test_logging_tool",
    "caching:sep-2549-resources-list-caching-hints": "loadout offers no resources (and does not advertise them)",
    "caching:sep-2549-resources-templates-list-caching-hints": "loadout offers no resources (and does not advertise them)",
}


def run(version, scenario, c):
    out_dir = os.path.join(WORK, version, scenario)
    proc = subprocess.run(
        [os.path.join(MODULES, ".bin", "node"), os.path.join(MODULES, "@modelcontextprotocol", "conformance", "dist", "index.js"),
         "server", "--url", os.environ["CONFORMANCE_URL"], "--scenario", scenario, "--spec-version", version,
         "--timeout", "20000", "-o", out_dir],
        capture_output=True, text=True, timeout=90,
    )
    found = glob.glob(os.path.join(out_dir, "**", "checks.json"), recursive=True)
    if not found:
        c.check(f"{scenario}", False, f"no checks.json; exit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        return
    checks = json.load(open(found[0]))
    for k in checks:
        key = f"{scenario}:{k['id']}"
        detail = f"{k.get('errorMessage') or k.get('description')} {json.dumps(k.get('details'), default=str)[:500]}"
        if k["status"] == "FAILURE" and key in NOT_APPLICABLE:
            print(f"n/a   {key}: {NOT_APPLICABLE[key]}")
        elif k["status"] in ("SUCCESS", "FAILURE"):
            c.check(key, k["status"] == "SUCCESS", detail)
        elif k["status"] == "WARNING":
            print(f"warn  {key}: {detail}")


def main():
    version = sys.argv[1]
    c = Checks(f"conformance {version}")
    for scenario in SCENARIOS[version]:
        c.run(scenario, run, version, scenario, c)
    c.done()


main()
