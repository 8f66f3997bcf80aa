"""openapi-python-client (0.29.1) generates a client from loadout's /openapi.json, with no warning,
and the generated client parses real responses of the main routes into typed models.

Run with the venv-openapi python (its bin/ holds the generator and ruff, which the generator runs)."""

import importlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import ADMIN_KEY, AGENT, AGENT_KEY, URL, WORK, Checks, rest, short, unique  # noqa: E402

c = Checks("openapi-python-client 0.29.1")
PACKAGE = "loadout_client"


def generate():
    spec = os.path.join(WORK, "openapi.json")
    with open(spec, "w") as f:
        f.write(rest("GET", "/openapi.json", raw=True))
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"], COLUMNS="200")
    out = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "openapi-python-client"), "generate", "--path", spec,
         "--meta", "none", "--output-path", os.path.join(WORK, PACKAGE), "--overwrite"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    output = (out.stdout + out.stderr).strip()
    # A clean run prints "Generating loadout_client" and nothing else.
    noise = [line for line in output.splitlines() if line.strip() and not line.startswith("Generating ")]
    c.check("generates with no warning", out.returncode == 0 and not noise, f"exit {out.returncode}, output:\n{output}")


def op(module, name, **kwargs):
    """Call a generated operation; check the 200 parsed into a typed model that kept every field."""
    return c.run(name, call_op, module, name, kwargs)


def call_op(module, name, kwargs):
    try:
        mod = importlib.import_module(f"{PACKAGE}.api.{module}")
    except Exception as e:  # noqa: BLE001 - an import failure is what this checks
        c.check(f"{name}: module {module} imports", False, f"{type(e).__name__}: {e}")
        return None
    key = kwargs.pop("key", ADMIN_KEY)
    client = importlib.import_module(PACKAGE).AuthenticatedClient(base_url=URL, token=key, raise_on_unexpected_status=False)
    with client:
        resp = mod.sync_detailed(client=client, **kwargs)
    raw = json.loads(resp.content) if resp.content else None
    parsed = resp.parsed
    if not c.eq(f"{name}: status", int(resp.status_code), 200):
        print(f"      body: {short(raw)}")
        return None
    typed = parsed is not None and hasattr(parsed, "to_dict") and type(parsed).__name__ != "ErrorBody"
    if not c.check(f"{name}: parsed into a typed model", typed, f"parsed is {type(parsed).__name__}: {short(repr(parsed))}"):
        return raw
    extra = getattr(parsed, "additional_properties", {})
    c.check(f"{name}: every field is declared", not extra, f"undeclared fields: {sorted(extra)}")
    c.eq(f"{name}: no field lost", sorted(parsed.to_dict()), sorted(raw))
    return raw


def main():
    generate()
    sys.path.insert(0, WORK)
    models = importlib.import_module(f"{PACKAGE}.models")
    agent_key = {"key": AGENT_KEY, "agent": AGENT}
    op("agents.get_prompt", "prompt", channel="web", **agent_key)
    for fmt in ("openai", "anthropic", "mcp"):
        op("agents.get_tools", f"tools ({fmt})", format_=models.Format(fmt), **agent_key)
    op("agents.get_loadout", "loadout", channel="web", format_=models.Format("openai"), **agent_key)

    conversation = unique("openapi")
    call = models.ToolCall.from_dict({"tool": "update_instructions", "arguments": {"instructions": "Be brief."},
                                      "conversation_id": conversation, "user_id": "openapi-user"})
    proposed = op("proposals.tool_call", "tool call (proposes)", body=call, **agent_key)
    if not proposed:  # still check the proposal routes, on a proposal made over plain REST
        proposed = rest("POST", f"/v1/agents/{AGENT}/tool-calls", call.to_dict(), key=AGENT_KEY)
    c.eq("the tool call proposes", proposed.get("status"), "proposed_for_approval")
    op("proposals.conversation_proposals", "conversation's proposals", conversation_id=conversation)
    if proposed and isinstance(proposed.get("proposal_id"), int):
        op("proposals.get_proposal", "proposal", id=proposed["proposal_id"])
        approved = op("proposals.approve", "approve", id=proposed["proposal_id"])
        c.eq("approve runs the call", (approved or {}).get("state"), "succeeded")
    op("keys.list_keys", "keys")


c.run("generated client", main)
c.done()
