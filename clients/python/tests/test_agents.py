"""The OpenAI Agents SDK adapter: loadout's tools as function tools whose calls go through
loadout (approval tiers hold), the prompt as instructions. No model is called."""

import json

from agents import Agent, FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext
from conftest import AGENT

from loadout import AsyncClient, Client
from loadout.agents import build_agent, function_tools, instructions


def invoke(tool, arguments):
    raw = json.dumps(arguments)
    ctx = ToolContext(context={"user": "ann"}, tool_name=tool.name, tool_call_id="call-1", tool_arguments=raw)
    return tool.on_invoke_tool(ctx, raw)


async def test_the_adapter_lists_the_agents_tools_as_strict_function_tools(live):
    c = AsyncClient(live.url, live.agent_key)
    tools = await function_tools(c, AGENT, conversation_id="conv-agents")
    listed = await c.tools(AGENT)
    assert [t.name for t in tools] == [t["function"]["name"] for t in listed.tools]
    assert all(isinstance(t, FunctionTool) and t.strict_json_schema for t in tools)
    agent = Agent(name="assistant", tools=tools)
    assert sorted(t.name for t in await agent.get_all_tools(RunContextWrapper(context=None))) == sorted(
        t.name for t in tools)
    await c.aclose()


async def test_a_call_through_the_adapter_is_proposed_and_invalid_arguments_come_back_as_output(live):
    c = AsyncClient(live.url, live.agent_key)
    tools = {t.name: t for t in await function_tools(c, AGENT, conversation_id=lambda ctx: "conv-agents",
                                                        user_id=lambda ctx: ctx.context["user"])}
    proposed = json.loads(await invoke(tools["delete_tasks"], {"ids": ["t-1"]}))
    assert proposed["status"] == "proposed_for_approval" and isinstance(proposed["proposal_id"], int)
    assert "approval" in proposed["message"]
    seen = live.rest("GET", f"/v1/proposals/{proposed['proposal_id']}", live.approver)
    assert (seen["tool"], seen["conversation_id"], seen["user_id"], seen["state"]) == (
        "delete_tasks", "conv-agents", "ann", "proposed")
    bad = json.loads(await invoke(tools["delete_tasks"], {"ids": "t-1"}))
    assert bad["status"] == "error" and bad["code"] == "invalid_arguments" and bad["details"]["path"] == "/ids"
    await c.aclose()


async def test_the_prompt_is_the_agents_instructions_fetched_through_the_cache(live, recorder):
    c = Client(live.url, live.agent_key, ttl=60, http_client=recorder.http())
    agent = Agent(name="assistant", instructions=instructions(c, AGENT, "web"))
    first = await agent.get_system_prompt(RunContextWrapper(context=None))
    again = await agent.get_system_prompt(RunContextWrapper(context=None))
    assert first == again == c.prompt(AGENT, "web").text
    assert recorder.count() == 1


POLICY = """
@id("ann-instructions")
permit (principal == User::"ann", action == Action::"update_instructions", resource);

@id("no-links")
@reason("instructions may not carry links")
forbid (principal, action == Action::"update_instructions", resource)
when { context.arguments.instructions like "*http*" };
"""


async def test_needs_approval_asks_loadout_how_it_would_decide_under_the_agents_policy(live):
    live.rest("PUT", f"/v1/agents/{AGENT}/policy", live.operator, {"policy": POLICY})
    c = AsyncClient(live.url, live.agent_key)
    try:
        tools = {t.name: t for t in await function_tools(c, AGENT, conversation_id="conv-policy",
                                                            user_id=lambda ctx: "ann", needs_approval=True)}
        check = tools["update_instructions"].needs_approval
        ctx = RunContextWrapper(context=None)
        assert await check(ctx, {"instructions": "Be brief."}, "call-1") is False
        assert await check(ctx, {"instructions": "See http://x"}, "call-2") is True
        decided = await c.decide(AGENT, "update_instructions", {"instructions": "See http://x"},
                                 conversation_id="conv-policy", user_id="ann")
        assert (decided.decision, decided.policy, decided.reason) == (
            "deny", "no-links", "instructions may not carry links")
        # A dry run wrote nothing: no proposal in that conversation.
        listed = live.rest("GET", "/v1/conversations/conv-policy/proposals", live.approver)
        assert listed["proposals"] == []
        sync = Client(live.url, live.agent_key)
        assert sync.decide(AGENT, "update_instructions", {"instructions": "Be brief."},
                           conversation_id="conv-policy", user_id="ann").decision == "auto"
        without = {t.name: t for t in await function_tools(c, AGENT, conversation_id="conv-policy")}
        assert without["update_instructions"].needs_approval is False, "opt-in only"
    finally:
        live.rest("PUT", f"/v1/agents/{AGENT}/policy", live.operator, {"policy": None})
        await c.aclose()


async def test_build_agent_carries_the_revisions_model_settings_and_response_schema(live):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    settings = {"model": "gpt-4.1", "parameters": {"temperature": 0.3, "max_tokens": 500,
                                                   "provider_options": {"seed": 7}},
                "response_schema": schema, "channels": {"web": {"parameters": {"max_tokens": 120}}}}
    live.rest("PUT", f"/v1/agents/{AGENT}/model", live.operator, settings)
    c = AsyncClient(live.url, live.agent_key)
    try:
        fetched = await c.loadout(AGENT, "web", conversation_id="conv-model")
        assert fetched.model is not None
        assert (fetched.model.name, fetched.model.temperature, fetched.model.max_tokens) == ("gpt-4.1", 0.3, 120)
        assert fetched.model.provider_options == {"seed": 7}
        assert fetched.model.response_schema == schema
        agent = await build_agent(c, AGENT, "web", conversation_id="conv-model")
        assert agent.model == "gpt-4.1"
        assert (agent.model_settings.temperature, agent.model_settings.max_tokens) == (0.3, 120)
        assert agent.model_settings.extra_args == {"seed": 7}
        assert agent.output_type is not None and agent.output_type.json_schema() == schema
        assert agent.output_type.is_strict_json_schema()
        assert {t.name for t in agent.tools} >= {"update_instructions"}
        # A revision without settings leaves the SDK's defaults.
        live.rest("PUT", f"/v1/agents/{AGENT}/model", live.operator, {})
        plain = await build_agent(c, AGENT, "telegram", conversation_id="conv-model-2")
        assert plain.output_type is None and plain.model_settings.temperature is None
    finally:
        live.rest("PUT", f"/v1/agents/{AGENT}/model", live.operator, {})
        await c.aclose()
