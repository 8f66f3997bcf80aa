"""The OpenAI Agents SDK adapter (`pip install "loadout-client[agents]"`): an agent's loadout
tools as SDK `FunctionTool`s whose invocations go through loadout's tool-call route, so the
approval tiers hold (a proposal comes back as the tool's output, saying it awaits approval),
and the prompt as the agent's instructions, fetched per run through the client's cache.

    from agents import Agent
    from loadout import AsyncClient
    from loadout.agents import function_tools, instructions

    client = AsyncClient("http://127.0.0.1:8080", agent_key)
    agent = Agent(name="assistant", instructions=instructions(client, "assistant", "web"),
                  tools=await function_tools(client, "assistant", conversation_id="c-1"))

`user_id` and `conversation_id` may be strings, or functions of the run's context (the
`RunContextWrapper`) for one agent object serving many users.

`build_agent` makes the whole `Agent` from one loadout: the prompt as instructions, the tools,
and the model settings the revision serves (model, temperature, max tokens, top_p, provider
options, and the response schema as the agent's output type)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Union

from agents import Agent, AgentOutputSchemaBase, FunctionTool, ModelSettings, RunContextWrapper, Tool

from . import errors
from .aio import AsyncClient
from .client import Client
from .results import Loadout, Model, Prompt, Proposal, ToolResult

Per = Union[str, None, Callable[[RunContextWrapper[Any]], Union[str, None]]]


def _resolve(value: Per, ctx: RunContextWrapper[Any]) -> str | None:
    return value(ctx) if callable(value) else value


async def _call(client: Client | AsyncClient, method: str, *args: Any, **kwargs: Any) -> Any:
    """Calls the sync client in a thread (it would block the event loop), the async one directly."""
    fn = getattr(client, method)
    if isinstance(client, AsyncClient):
        return await fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


def instructions(client: Client | AsyncClient, agent: str, channel: str, *, user_id: Per = None,
                 tz: Per = None, label: str | None = None,
                 fallback: str | None = None) -> Callable[[RunContextWrapper[Any], Any], Any]:
    """An `instructions=` for `Agent`: the agent's prompt, fetched (through the cache) on every run."""

    async def fetch(ctx: RunContextWrapper[Any], _agent: Any) -> str:
        prompt: Prompt = await _call(client, "prompt", agent, channel, user_id=_resolve(user_id, ctx),
                                     tz=_resolve(tz, ctx), label=label, fallback=fallback)
        return prompt.text

    return fetch


def relay(outcome: ToolResult | Proposal) -> str:
    """What the model reads as the tool's output."""
    if isinstance(outcome, Proposal):
        return json.dumps({"status": outcome.status, "proposal_id": outcome.proposal_id,
                           "description": outcome.description,
                           "message": "This call awaits a person's approval; it has not run. Tell the user what "
                                      "was proposed."})
    return json.dumps({"status": "succeeded", "result": outcome.result}, default=str)


async def function_tools(client: Client | AsyncClient, agent: str, *, conversation_id: Per,
                         user_id: Per = None, label: str | None = None,
                         fallback: list[dict[str, Any]] | None = None,
                         needs_approval: bool = False) -> list[Tool]:
    """The agent's loadout tools (OpenAI strict schemas) as SDK function tools. Each call is
    `call_tool` on loadout with the revision the tools came from; a proposal, invalid arguments or
    a failed call come back to the model as the tool's output (JSON), never as an exception.

    `needs_approval=True` gives each tool the SDK's `needs_approval` callable: loadout decides the
    call without running it (`decide`, a dry run under the agent's policy, tier and the user's
    preference), and the run is interrupted for the calls loadout would not run at once. loadout's
    own ledger still records and gates the call when it is made."""
    # A rollout assigns by user, else by conversation: given as strings, they pick the tools of
    # the revision this subject's prompt comes from (functions of the context are known only per call).
    subject = {name: value for name, value in (("user_id", user_id), ("conversation_id", conversation_id))
               if isinstance(value, str)}
    listed = await _call(client, "tools", agent, "openai", label=label, fallback=fallback, **subject)
    revision = listed.revision

    def invoker(name: str) -> Callable[[Any, str], Any]:
        async def invoke(ctx: Any, raw: str) -> str:
            try:
                arguments = json.loads(raw) if raw else {}
                outcome = await _call(client, "call_tool", agent, name, arguments,
                                      conversation_id=_resolve(conversation_id, ctx) or "agents-sdk",
                                      user_id=_resolve(user_id, ctx), revision=revision)
            except json.JSONDecodeError as e:
                return json.dumps({"status": "error", "code": "invalid_json", "message": str(e)})
            except errors.LoadoutError as e:
                return json.dumps({"status": "error", "code": e.code, "message": e.message, "details": e.details},
                                  default=str)
            return relay(outcome)

        return invoke

    def approval(name: str) -> Callable[[Any, dict[str, Any], str], Any]:
        async def needs(ctx: Any, params: dict[str, Any], _call_id: str) -> bool:
            try:
                decided = await _call(client, "decide", agent, name, params,
                                      conversation_id=_resolve(conversation_id, ctx) or "agents-sdk",
                                      user_id=_resolve(user_id, ctx), revision=revision)
            except errors.LoadoutError:
                return True  # what cannot be decided is never run unasked
            return bool(decided.needs_approval)

        return needs

    tools: list[Tool] = []  # Tool, not FunctionTool: what `Agent(tools=)` takes (a list is invariant)
    for tool in listed.tools:
        function = tool["function"]
        tools.append(FunctionTool(name=function["name"], description=function.get("description", ""),
                                  params_json_schema=function["parameters"], on_invoke_tool=invoker(function["name"]),
                                  strict_json_schema=bool(function.get("strict", True)),
                                  needs_approval=approval(function["name"]) if needs_approval else False))
    return tools


class ResponseSchema(AgentOutputSchemaBase):
    """The revision's response JSON schema as the agent's output type: the model is asked for it
    (strict when the schema is), and its answer is parsed as JSON."""

    def __init__(self, schema: dict[str, Any], name: str = "response") -> None:
        self._schema = schema
        self._name = name

    def is_plain_text(self) -> bool:
        return False

    def name(self) -> str:
        return self._name

    def json_schema(self) -> dict[str, Any]:
        return self._schema

    def is_strict_json_schema(self) -> bool:
        return self._schema.get("additionalProperties") is False

    def validate_json(self, json_str: str) -> Any:
        return json.loads(json_str)


def model_settings(model: Model | None) -> ModelSettings:
    """The SDK's `ModelSettings` for loadout's served settings (provider options as `extra_args`)."""
    if model is None:
        return ModelSettings()
    return ModelSettings(temperature=model.temperature, max_tokens=model.max_tokens, top_p=model.top_p,
                         extra_args=dict(model.provider_options) or None)


async def build_agent(client: Client | AsyncClient, agent: str, channel: str, *, conversation_id: Per,
                      user_id: Per = None, label: str | None = None, name: str | None = None,
                      needs_approval: bool = False) -> Agent[Any]:
    """The SDK `Agent` as the agent's revision defines it: the prompt as instructions (fetched per
    run through the cache), the tools through loadout, and the model, its settings and response
    schema from the same loadout (a revision without them leaves the SDK's defaults)."""
    subject = {key: value for key, value in (("user_id", user_id), ("conversation_id", conversation_id))
               if isinstance(value, str)}
    fetched: Loadout = await _call(client, "loadout", agent, channel, label=label, **subject)
    served = fetched.model
    tools = await function_tools(client, agent, conversation_id=conversation_id, user_id=user_id, label=label,
                                 needs_approval=needs_approval)
    output = ResponseSchema(served.response_schema) if served and served.response_schema else None
    built: Agent[Any] = Agent(name=name or agent, instructions=instructions(client, agent, channel, user_id=user_id,
                                                                          label=label),
                              tools=tools, model_settings=model_settings(served),
                              model=served.name if served else None, output_type=output)
    return built


__all__ = ["ResponseSchema", "build_agent", "function_tools", "instructions", "model_settings", "relay"]
