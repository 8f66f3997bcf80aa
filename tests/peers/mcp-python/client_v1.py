"""The Python MCP SDK 1.x (mcp==1.30.0) as a client of loadout: protocol 2025-11-25, initialize.

Checks: the instructions are the agent's rendered prompt; tools/list is the agent's tools; an
approval-tier tool proposes, with the `_meta` user and conversation on the proposal; a
list_changed notification arrives after an admin edit; `?channel=nope` is -32602."""

import asyncio
import os
import sys

import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import (  # noqa: E402
    AGENT_KEY, PROPOSE_ARGS, PROPOSE_TOOL, URL, Checks, LogCatcher, find_error, rest, rest_tools, set_template, shape_differences, unique,
)

c = Checks("mcp 1.30.0 (2025-11-25)")
transport_log = LogCatcher("mcp.client.streamable_http")
ENDPOINT = f"{URL}/mcp?channel=web"
opened = False  # the closing check means something only after a session was opened


def http():
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {AGENT_KEY}"}, timeout=httpx.Timeout(30, read=300))


def without_time(text):
    return "\n".join(line for line in (text or "").splitlines() if not line.startswith("Now: "))


async def session_checks():
    marker = unique("mcp1")
    prompt = set_template(marker)
    changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, (types.ToolListChangedNotification, types.PromptListChangedNotification)
        ):
            changed.set()

    async with http() as client, streamable_http_client(ENDPOINT, http_client=client) as (read, write, _):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            global opened
            opened = True
            c.eq("negotiated protocol", init.protocolVersion, "2025-11-25")
            c.check("instructions present, with the template's text", marker in (init.instructions or ""),
                    f"instructions: {init.instructions!r:.300}")
            c.eq("instructions are the REST prompt (channel web)", without_time(init.instructions), without_time(prompt))

            listed = await session.list_tools()
            names = sorted(t.name for t in listed.tools)
            c.eq("tools/list is the agent's tools", names, sorted(rest_tools()))
            listed_json = {t.name: t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools}
            diffs = shape_differences(listed_json, rest_tools())
            c.check("tools/list and GET .../tools?format=mcp agree, tool by tool", not diffs, "\n        ".join([""] + diffs[:12] + [f"... {len(diffs)} differences in all"]))

            user, conversation = unique("user"), unique("conv")
            result = await session.call_tool(PROPOSE_TOOL, PROPOSE_ARGS, meta={"user_id": user, "conversation_id": conversation})
            sc = result.structuredContent or {}
            c.check(f"{PROPOSE_TOOL} proposes", not result.isError and sc.get("status") == "proposed_for_approval"
                    and isinstance(sc.get("proposal_id"), int), f"result: {result.model_dump(exclude_none=True)}")
            if isinstance(sc.get("proposal_id"), int):
                proposal = rest("GET", f"/v1/proposals/{sc['proposal_id']}")
                c.eq("proposal has the _meta user_id", proposal.get("user_id"), user)
                c.eq("proposal has the _meta conversation_id", proposal.get("conversation_id"), conversation)

            await asyncio.sleep(0.5)  # the standalone GET stream is open by now
            changed.clear()  # only what the edit below causes counts
            set_template(unique("mcp1-edit"))
            try:
                await asyncio.wait_for(changed.wait(), 5)
                c.check("list_changed after an admin edit", True)
            except TimeoutError:
                c.check("list_changed after an admin edit", False, "no tools or prompts list_changed within 5 s")


async def unknown_channel():
    try:
        async with http() as client, streamable_http_client(f"{URL}/mcp?channel=nope", http_client=client) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
        c.check("?channel=nope is -32602", False, "initialize and tools/list succeeded")
    except Exception as e:
        if (error := find_error(e, McpError)) is None:
            raise
        c.eq("?channel=nope is -32602", error.error.code, -32602)


c.run("session", lambda: asyncio.run(session_checks()))
c.run("unknown channel", lambda: asyncio.run(unknown_channel()))
closing = [m for m in transport_log.messages if "termination" in m]
if opened:
    c.check("session close accepted (DELETE answered 200 or 204)", not closing, f"the SDK logged: {closing}")
c.done()
