"""The synchronous client."""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any

import httpx

from . import errors
from ._core import LOADOUT, PROMPT, TOOLS, Core, Entry, Offline, _segment, monotonic
from ._listen import StreamState
from .results import Decision, Loadout, Prompt, Proposal, Tools, ToolResult


class Client:
    """loadout's agent API with a cache in front of the fetches.

    `ttl`: seconds a fetched copy is served from memory without a request. Past it the copy
    is served stale while one background thread revalidates it with its ETag
    (`stale_while_revalidate=True`, the default), or revalidated before answering (`False`).
    `cache_dir`: where last-known-good copies are kept, for when loadout cannot be reached
    (also right after a restart). `http_client`: an `httpx.Client` of your own (its
    `event_hooks`, transport, proxies); the client sends the full URL and the key itself.
    `listen=True`: the client listens to loadout's change stream (one stream per base URL and
    key in the process, shared by its clients, on a daemon thread with its own `httpx.Client`):
    an edit drops the copies it names at once, and while the stream is up copies are served
    without TTL (`source="live"`); while it is down, by the TTL as without it (`stream_state`).
    """

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, ttl: float = 60.0,
                 stale_while_revalidate: bool = True, cache_dir: str | os.PathLike[str] | None = None,
                 timeout: float = 10.0, tracing: bool = True, max_entries: int = 1024, listen: bool = False,
                 http_client: httpx.Client | None = None) -> None:
        self._core = Core(base_url, api_key, ttl=ttl, stale_while_revalidate=stale_while_revalidate,
                          cache_dir=cache_dir, timeout=timeout, tracing=tracing, max_entries=max_entries,
                          listen=listen)
        self._own_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        # A client never closed stops listening when it is collected.
        self._unlisten = weakref.finalize(self, self._core.stop_listening) if listen else None

    @property
    def base_url(self) -> str:
        return self._core.base_url

    @property
    def stream_state(self) -> StreamState:
        """The change stream's state: `off` (not listening), `connecting`, `live` (copies are
        served without TTL, as `live`) or `broken` (copies expire by the TTL until it is back)."""
        return self._core.stream_state

    def close(self) -> None:
        """Closes the HTTP client made here and, listening, leaves the change stream (the last
        client of the process to leave it ends it)."""
        if self._unlisten is not None:
            self._unlisten()
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    # -- fetching ----------------------------------------------------------------------------

    def prompt(self, agent: str, channel: str, *, user_id: str | None = None, tz: str | None = None,
               label: str | None = None, conversation_id: str | None = None,
               fallback: str | None = None) -> Prompt:
        """The agent's rendered prompt for `channel` (and the user's instructions, with `user_id`)."""
        key = self._core.key(PROMPT, agent, channel, user_id, tz, label, None, conversation_id)
        entry = self._core._mem.get(key)
        if entry is not None:
            if entry.trusted and self._core.live:
                live: Prompt = self._core.served(entry.live(key))
                return live
            if monotonic() < entry.expires:
                hit: Prompt = self._core.served(entry.cached)
                return hit
        got: Prompt = self._get(key, entry, fallback)
        return got

    def tools(self, agent: str, format: str = "openai", *, label: str | None = None,
              user_id: str | None = None, conversation_id: str | None = None,
              fallback: list[dict[str, Any]] | None = None) -> Tools:
        """The agent's active tools as `openai`, `anthropic` or `mcp` definitions."""
        key = self._core.key(TOOLS, agent, None, user_id, None, label, format, conversation_id)
        entry = self._core._mem.get(key)
        if entry is not None:
            if entry.trusted and self._core.live:
                live: Tools = entry.live(key)
                return live
            if monotonic() < entry.expires:
                cached: Tools = entry.cached
                return cached
        got: Tools = self._get(key, entry, fallback)
        return got

    def loadout(self, agent: str, channel: str, *, format: str = "openai", user_id: str | None = None,
                tz: str | None = None, label: str | None = None, conversation_id: str | None = None,
                fallback: Any = None) -> Loadout:
        """Prompt and tools of one revision in one round trip. `fallback`: `{"prompt": str, "tools": [...]}`."""
        key = self._core.key(LOADOUT, agent, channel, user_id, tz, label, format, conversation_id)
        entry = self._core._mem.get(key)
        if entry is not None:
            if entry.trusted and self._core.live:
                live: Loadout = self._core.served(entry.live(key))
                return live
            if monotonic() < entry.expires:
                hit: Loadout = self._core.served(entry.cached)
                return hit
        got: Loadout = self._get(key, entry, fallback)
        return got

    def _get(self, key: tuple[Any, ...], entry: Entry | None, fallback: Any) -> Any:
        # The result of the key's kind (a Prompt, Tools or Loadout): the callers name its type.
        core = self._core
        if entry is not None:  # held, past its TTL
            now = monotonic()
            if core.stale_while_revalidate or now < entry.retry_at:
                if core.needs_refresh(entry, now) and core.begin_refresh(key):
                    threading.Thread(target=self._refresh, args=(key,), daemon=True,
                                     name="loadout-refresh").start()
                return core.served(entry.stale(key))
        try:
            return core.served(self._fetch(key, entry))
        except Offline as offline:
            return core.served(core.offline(key, entry, fallback, offline))

    def _fetch(self, key: tuple[Any, ...], entry: Entry | None) -> Any:
        path, params = self._core.request_of(key)
        token = self._core.token()
        try:
            r = self._http.get(self._core.base_url + path, params=params, headers=self._core.conditional(entry))
        except httpx.TransportError as e:
            raise self._core.unreachable(e) from e
        return self._core.on_answer(key, entry, r.status_code, r.headers, r.content, token)

    def _refresh(self, key: tuple[Any, ...]) -> None:
        try:
            self._fetch(key, self._core._mem.get(key))
        except errors.NotFound:
            pass  # evicted
        except (Offline, errors.LoadoutError, ValueError) as e:
            self._core.refresh_failed(key, e)
        finally:
            self._core.end_refresh(key)

    def clear_cache(self) -> None:
        """Forgets what memory holds (the disk copies stay)."""
        self._core.clear()

    # -- tool calls --------------------------------------------------------------------------

    def call_tool(self, agent: str, tool: str, arguments: Any, *, conversation_id: str,
                  user_id: str | None = None, message_id: str | None = None, idempotency_key: str | None = None,
                  revision: int | None = None) -> ToolResult | Proposal:
        """Calls a tool through loadout: a `ToolResult` when it ran, a `Proposal` when it waits for
        approval. Raises `InvalidArguments`, `ToolCallFailed`, `ProposalDeclined`..."""
        request = self._core.call_request(agent, tool, arguments, conversation_id, user_id, message_id,
                                          idempotency_key, revision)
        return self._send_call(agent, request)

    def decide(self, agent: str, tool: str, arguments: Any, *, conversation_id: str,
               user_id: str | None = None, revision: int | None = None) -> Decision:
        """How loadout would decide this call now (its policy, else the tier and the user's
        preference), without writing or running anything: for an SDK's `needs_approval`."""
        request = self._core.decide_request(tool, arguments, conversation_id, user_id, revision)
        r = self._post(f"/v1/agents/{_segment(agent)}/tool-calls", request)
        return self._core.decide_answer(tool, r.status_code, r.headers, r.content)

    def _send_call(self, agent: str, request: dict[str, Any]) -> ToolResult | Proposal:
        r = self._post(f"/v1/agents/{_segment(agent)}/tool-calls", request)
        return self._core.call_answer(agent, request, r.status_code, r.headers, r.content)

    def wait(self, proposal: Proposal | ToolResult, timeout: float = 300.0, interval: float = 0.5) -> ToolResult:
        """Waits until the proposal is decided and has run: its `ToolResult`. Raises
        `ProposalDeclined`, `ProposalExpired`, `ToolCallFailed`, or `WaitTimeout` after `timeout` s."""
        if isinstance(proposal, ToolResult):
            return proposal
        deadline = monotonic() + timeout
        current = proposal
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0:
                raise errors.WaitTimeout(f"proposal {proposal.proposal_id} ({proposal.tool}) still "
                                         f"{current.status} after {timeout} s", code="timeout",
                                         details={"proposal_id": proposal.proposal_id})
            time.sleep(min(interval, remaining))
            interval = min(interval * 1.5, 5.0)
            answer = self._send_call(proposal.agent, proposal.request)
            if isinstance(answer, ToolResult):
                return answer
            current = answer

    def report_outcome(self, agent: str, *, revision: int, conversation_id: str, outcome: str,
                       user_id: str | None = None, score: float | None = None) -> dict[str, Any]:
        """Reports how a conversation served by `revision` went (`success` or `failure`), for
        rollouts: the stored outcome."""
        body = self._core.outcome_request(revision, conversation_id, outcome, user_id, score)
        r = self._post(f"/v1/agents/{_segment(agent)}/outcomes", body)
        stored: dict[str, Any] = self._core.json_answer(r.status_code, r.headers, r.content, ok=(200, 201))
        return stored

    def _post(self, path: str, body: Any) -> httpx.Response:
        try:
            return self._http.post(self._core.base_url + path, json=body, headers=self._core._headers)
        except httpx.TransportError as e:
            raise errors.Unreachable(f"loadout could not be reached: {e}", code="unreachable") from e
