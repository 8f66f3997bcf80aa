"""The Python MCP SDK 2.x (mcp==2.3.0) as a client of loadout: protocol 2026-07-28 (its default
`mode="auto"`: server/discover first, initialize only if the server is not modern).

Checks: the connection is 2026-07-28; the instructions are the agent's rendered prompt; tools
load; an approval-tier tool proposes, with the `_meta` user and conversation on the proposal;
subscriptions/listen delivers list_changed after an admin edit; `?channel=nope` is -32602."""

import asyncio
import os
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import (  # noqa: E402
    AGENT_KEY, PROPOSE_ARGS, PROPOSE_TOOL, URL, Checks, LogCatcher, find_error, rest, rest_tools, set_template, shape_differences, unique,
)

c = Checks("mcp 2.3.0 (2026-07-28)")
transport_log = LogCatcher("mcp.client.streamable_http")
ENDPOINT = f"{URL}/mcp?channel=web"
opened = False  # the closing check means something only after a session was opened


def client(url, mode="auto"):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {AGENT_KEY}"}, timeout=httpx2.Timeout(30, read=300))
    return http, Client(streamable_http_client(url, http_client=http), mode=mode)


def without_time(text):
    return "\n".join(line for line in (text or "").splitlines() if not line.startswith("Now: "))


async def session_checks():
    marker = unique("mcp2")
    prompt = set_template(marker)
    http, mcp = client(ENDPOINT)
    async with http, mcp:
        global opened
        opened = True
        c.eq("negotiated protocol (server/discover)", mcp.protocol_version, "2026-07-28")
        c.check("instructions present, with the template's text", marker in (mcp.instructions or ""),
                f"instructions: {mcp.instructions!r:.300}")
        c.eq("instructions are the REST prompt (channel web)", without_time(mcp.instructions), without_time(prompt))

        listed = await mcp.list_tools()
        c.eq("tools/list is the agent's tools", sorted(t.name for t in listed.tools), sorted(rest_tools()))
        listed_json = {t.name: t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools}
        diffs = shape_differences(listed_json, rest_tools())
        c.check("tools/list and GET .../tools?format=mcp agree, tool by tool", not diffs, "\n        ".join([""] + diffs[:12] + [f"... {len(diffs)} differences in all"]))

        user, conversation = unique("user"), unique("conv")
        result = await mcp.call_tool(PROPOSE_TOOL, PROPOSE_ARGS, meta={"user_id": user, "conversation_id": conversation})
        sc = result.structured_content or {}
        c.check(f"{PROPOSE_TOOL} proposes", not result.is_error and sc.get("status") == "proposed_for_approval"
                and isinstance(sc.get("proposal_id"), int), f"result: {result.model_dump(by_alias=True, exclude_none=True)}")
        if isinstance(sc.get("proposal_id"), int):
            proposal = rest("GET", f"/v1/proposals/{sc['proposal_id']}")
            c.eq("proposal has the _meta user_id", proposal.get("user_id"), user)
            c.eq("proposal has the _meta conversation_id", proposal.get("conversation_id"), conversation)

        try:
            async with mcp.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
                try:  # only what the edit below causes counts: drop anything earlier edits left
                    async with asyncio.timeout(0.5):
                        async for _ in sub:
                            pass
                except TimeoutError:
                    pass
                set_template(unique("mcp2-edit"))
                async with asyncio.timeout(5):
                    event = await anext(sub)
            c.check("subscriptions/listen delivers list_changed after an admin edit", True, "")
            print(f"      event: {event!r}")
        except TimeoutError:
            c.check("subscriptions/listen delivers list_changed after an admin edit", False,
                    "no tools or prompts list_changed within 5 s")
        except Exception as e:
            c.check("subscriptions/listen delivers list_changed after an admin edit", False, f"{type(e).__name__} {getattr(e, 'code', '')}: {e}")


async def unknown_channel(mode, name):
    """`mode="auto"` is what clients do (discover, then initialize if that fails); a pinned
    "2026-07-28" skips discover, so its tools/list is a bare per-request call."""
    http, mcp = client(f"{URL}/mcp?channel=nope", mode)
    try:
        async with http, mcp:
            await mcp.list_tools()
            c.check(name, False, f"connected ({mcp.protocol_version}) and tools/list succeeded; instructions {mcp.instructions!r:.80}")
    except Exception as e:
        if (error := find_error(e, MCPError)) is None:
            raise
        c.eq(name, error.code, -32602)


c.run("session", lambda: asyncio.run(session_checks()))
c.run("unknown channel", lambda: asyncio.run(unknown_channel("auto", "?channel=nope is -32602")))
c.run("unknown channel, no discover",
      lambda: asyncio.run(unknown_channel("2026-07-28", "?channel=nope is -32602 on a bare 2026-07-28 tools/list")))
closing = [m for m in transport_log.messages if "termination" in m]
if opened:
    c.check("session close accepted (DELETE answered 200 or 204)", not closing, f"the SDK logged: {closing}")
c.done()
