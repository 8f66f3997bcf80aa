"""FastMCP (fastmcp==4.2.3) as the remote of a loadout `mcp` connector (stdlib only: it drives
loadout over REST and reads what the FastMCP server, started by run.py, recorded).

Checks: sync adds every remote tool (optional parameters, defaults, nested models, as FastMCP
publishes them) and refuses none; the stored schemas are strict; a `delete_` tool the server
marks `readOnlyHint: true` is not `auto`, a `get_` one is; a call of a synced tool reaches the
server with only what it declared (no `null` for what the call left out), directly (`auto`) and
after an approval."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import AGENT, AGENT_KEY, Checks, HttpError, rest, short, unique  # noqa: E402

FASTMCP_URL, RECORD = os.environ["FASTMCP_URL"], os.environ["FASTMCP_RECORD"]
CONNECTOR = "peerfm"
TOOLS = {"get_notes": "get_peerfm_notes", "delete_notes": "delete_peerfm_notes", "create_notes": "create_peerfm_notes"}
c = Checks("fastmcp 4.2.3 (remote)")


def received(remote_tool):
    """The arguments the FastMCP server last received for `remote_tool`, raw from the wire."""
    if not os.path.exists(RECORD):
        return None
    calls = [json.loads(line) for line in open(RECORD) if line.strip()]
    calls = [call for call in calls if call["tool"] == remote_tool]
    return calls[-1]["arguments"] if calls else None


def strict_problems(schema, path="", root=None):
    """Where `schema` is not strict: an object level without `additionalProperties: false` or a full `required`."""
    root = root or schema
    if not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return strict_problems((root.get("$defs") or root.get("definitions") or {}).get(name), path, root)
    problems = []
    if "properties" in schema:
        if schema.get("additionalProperties") is not False:
            problems.append(f"{path or '/'}: additionalProperties is {schema.get('additionalProperties')!r}")
        missing = set(schema["properties"]) - set(schema.get("required", []))
        if missing:
            problems.append(f"{path or '/'}: not required: {sorted(missing)}")
        for name, sub in schema["properties"].items():
            problems += strict_problems(sub, f"{path}/{name}", root)
    for key in ("items", "anyOf", "oneOf", "allOf"):
        subs = schema.get(key)
        for sub in subs if isinstance(subs, list) else [subs] if subs else []:
            problems += strict_problems(sub, path + ("/*" if key == "items" else ""), root)
    return problems


def with_nulls(schema, value, root=None):
    """`value` as a strict-mode model sends it: every required property it leaves out is `null`."""
    root = root or schema
    if isinstance(schema, dict) and "$ref" in schema:
        schema = (root.get("$defs") or root.get("definitions") or {}).get(schema["$ref"].split("/")[-1], {})
    if not isinstance(schema, dict):
        return value
    branches = [schema] + [b for key in ("anyOf", "oneOf") for b in schema.get(key, [])]
    if isinstance(value, dict):
        obj = next((b for b in branches if isinstance(b, dict) and "properties" in b), None)
        if obj is None:
            return value
        out = {name: None for name in obj.get("required", [])}
        out.update({k: with_nulls(obj["properties"].get(k, {}), v, root) for k, v in value.items()})
        return out
    if isinstance(value, list):
        arr = next((b for b in branches if isinstance(b, dict) and "items" in b), None)
        return [with_nulls(arr["items"], v, root) for v in value] if arr else value
    return value


def sync():
    try:
        rest("POST", "/v1/connectors", {"name": CONNECTOR, "kind": "mcp", "url": FASTMCP_URL, "trusted": True})
    except HttpError as e:
        if e.status != 409:
            raise
        rest("PATCH", f"/v1/connectors/{CONNECTOR}", {"url": FASTMCP_URL})
    report = rest("POST", f"/v1/connectors/{CONNECTOR}/sync", {"agent": AGENT})
    synced = {e["remote"]: e["name"] for key in ("added", "updated", "unchanged") for e in report.get(key, [])}
    c.eq("sync takes every remote tool", synced, TOOLS)
    c.eq("sync refuses none", report.get("refused"), [])
    return report


def tiers_and_schemas():
    for remote, name in TOOLS.items():
        try:
            tool = rest("GET", f"/v1/tools/{name}")
        except HttpError as e:
            c.check(f"{name} is in the registry", False, str(e))
            continue
        problems = strict_problems(tool["parameters"])
        c.check(f"{name}: stored schema is strict", not problems, "; ".join(problems))
        if remote == "delete_notes":
            c.check(f"{name} (readOnlyHint: true on a delete) is not auto", tool["approval_tier"] != "auto",
                    f"approval_tier {tool['approval_tier']!r}")
        if remote == "get_notes":
            c.eq(f"{name} (readOnlyHint: true on a get) is auto", tool["approval_tier"], "auto")


def call(name, arguments):
    tool = rest("GET", f"/v1/tools/{name}")
    body = {"tool": name, "arguments": with_nulls(tool["parameters"], arguments), "conversation_id": unique("fastmcp")}
    print(f"      calling {name} with {short(body['arguments'])}")
    return rest("POST", f"/v1/agents/{AGENT}/tool-calls", body, key=AGENT_KEY)


def call_auto():
    answer = call("get_peerfm_notes", {"query": "peer query", "filters": {"status": "done"}})
    c.eq("get_peerfm_notes runs now (auto)", answer.get("status"), "succeeded")
    c.eq("the server received only what the call set (get)", received("get_notes"),
         {"query": "peer query", "filters": {"status": "done"}})
    result = json.dumps(answer.get("result"))
    c.check("the result is the server's", '"peer query"' in result, f"answer: {short(answer)}")


def call_approved(name, arguments):
    remote = next(r for r, n in TOOLS.items() if n == name)
    answer = call(name, arguments)
    if not c.eq(f"{name} proposes", answer.get("status"), "proposed_for_approval"):
        return
    c.eq(f"{name}: the server is not called before approval", received(remote), None)
    if "proposal_id" in answer:
        done = rest("POST", f"/v1/proposals/{answer['proposal_id']}/approve")
        c.eq(f"{name}: the approved proposal succeeds", done.get("state"), "succeeded")
        c.eq(f"{name}: the server received only what the call set", received(remote), arguments)


c.run("sync", sync)
c.run("tiers and schemas", tiers_and_schemas)
c.run("call get_peerfm_notes", call_auto)
c.run("call delete_peerfm_notes", call_approved, "delete_peerfm_notes", {"ids": ["note-1"]})
c.run("call create_peerfm_notes", call_approved, "create_peerfm_notes", {"notes": [{"text": "from the peer matrix"}]})
c.done()
