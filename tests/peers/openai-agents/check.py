"""The OpenAI Agents SDK (openai-agents==0.24.0, on mcp 2.3.0): its `MCPServerStreamableHttp`
lists and calls loadout's tools, and an `Agent` turns them into strict function tools. No model
is called and nothing leaves 127.0.0.1.

Checks: the tools are the agent's; every tool converts to a strict function tool; an
approval-tier call proposes; the server's instructions reach the SDK."""

import asyncio
import json
import os
import sys

from agents import Agent, RunContextWrapper
from agents.mcp import MCPServerStreamableHttp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from peerlib import AGENT_KEY, PROPOSE_ARGS, PROPOSE_TOOL, URL, Checks, rest_tools, set_template, unique  # noqa: E402

c = Checks("openai-agents 0.24.0")


async def main():
    marker = unique("agents")
    set_template(marker)
    server = MCPServerStreamableHttp(
        {"url": f"{URL}/mcp?channel=web", "headers": {"Authorization": f"Bearer {AGENT_KEY}"}, "timeout": 30},
        name="loadout",
        client_session_timeout_seconds=30,
        use_structured_content=True,
    )
    async with server:
        session = server.session
        print(f"      negotiated protocol: {getattr(session, 'protocol_version', '?')}")
        instructions = getattr(session, "instructions", None)
        c.check("the server's instructions reach the SDK", marker in (instructions or ""), f"instructions: {instructions!r:.200}")

        tools = await server.list_tools()
        names = sorted(t.name for t in tools)
        c.eq("list_tools is the agent's tools", names, sorted(rest_tools()))

        agent = Agent(name="peer", mcp_servers=[server], mcp_config={"convert_schemas_to_strict": True})
        function_tools = await agent.get_mcp_tools(RunContextWrapper(context=None))
        loose = [t.name for t in function_tools if not getattr(t, "strict_json_schema", False)]
        c.eq("function tools", sorted(t.name for t in function_tools), names)
        c.check("every tool is a strict function tool", not loose, f"not strict: {loose}")

        result = await server.call_tool(PROPOSE_TOOL, PROPOSE_ARGS)
        dumped = result.model_dump(by_alias=True, exclude_none=True)
        sc = dumped.get("structuredContent") or {}
        c.check(f"call_tool {PROPOSE_TOOL} proposes", not dumped.get("isError") and sc.get("status") == "proposed_for_approval"
                and isinstance(sc.get("proposal_id"), int), f"result: {json.dumps(dumped)[:400]}")

        bad = await server.call_tool(PROPOSE_TOOL, {"ids": "not-a-list"})
        bad = bad.model_dump(by_alias=True, exclude_none=True)
        text = json.dumps(bad)
        c.check("invalid arguments are isError naming the path", bad.get("isError") is True and "/ids" in text, f"result: {text[:400]}")


c.run("session", lambda: asyncio.run(main()))
c.done()
