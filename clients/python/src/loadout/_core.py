"""What the sync and the async client share: cache keys, entries, parsing answers into
results, and the rules for what is served when (the clients only add the I/O)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections import deque
from dataclasses import replace
from typing import Any

from . import _listen, _tracing, errors, models
from ._listen import Names, StreamState
from ._store import DiskStore
from .results import Decision, Loadout, Model, Prompt, Proposal, Source, Tools, ToolResult

log = logging.getLogger("loadout")
monotonic = time.monotonic

# A fetch's kinds, the third item of a cache key.
PROMPT, TOOLS, LOADOUT = "prompt", "tools", "loadout"
# How many of the latest events a listening client keeps, to tell whether one overtook a fetch.
RECENT_EVENTS = 256

# Taken before a fetch while listening: whether the stream was anchored, and the events seen so far.
Token = tuple[bool, int] | None


class Offline(Exception):
    """Internal: loadout could not be reached, or answered 5xx; `error` is what to raise when
    there is nothing to serve instead."""

    def __init__(self, error: errors.LoadoutError) -> None:
        super().__init__(str(error))
        self.error = error


class Entry:
    """A cached answer. `cached` is the result served inside the TTL, built once so a hit
    costs a dict lookup and a clock read. `trusted`: listening, any later change to it is
    known to drop it, so it is served without TTL while the stream is live."""

    __slots__ = ("kind", "body", "etag", "expires", "retry_at", "origin", "trusted", "cached", "_results")

    def __init__(self, kind: str, key: tuple[Any, ...], body: bytes, etag: str | None, expires: float,
                 origin: str = "network") -> None:
        self.kind, self.body, self.etag, self.expires = kind, body, etag, expires
        self.retry_at = 0.0  # no refresh before this (after a failed one)
        self.origin = origin  # "network", or "disk" for a copy read back from cache_dir
        self.trusted = False
        self._results: dict[str, Any] = {}
        self.cached = self.result("cached", key)

    def result(self, source: Source, key: tuple[Any, ...]) -> Any:
        found = self._results.get(source)
        if found is None:
            first = getattr(self, "cached", None)
            found = parse(self.kind, key, self.body, self.etag, source) if first is None else with_source(first, source)
            self._results[source] = found
        return found

    def stale(self, key: tuple[Any, ...]) -> Any:
        return self.result("disk" if self.origin == "disk" else "stale", key)

    def live(self, key: tuple[Any, ...]) -> Any:
        return self.result("live", key)


def parse(kind: str, key: tuple[Any, ...], body: bytes, etag: str | None, source: Source) -> Any:
    """A 200's body as the result of `source`. The shapes are the generated models'; a body
    of another shape is a `ValueError`."""
    try:
        return _parse(kind, body, etag, source)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"a {kind} answer of an unexpected shape: {e!r}") from e


def _parse(kind: str, body: bytes, etag: str | None, source: Source) -> Any:
    if kind == PROMPT:
        view = models.PromptView.model_validate_json(body)
        return _prompt(view.agent, view.text, view.provenance, source, etag)
    data = json.loads(body)
    if kind == TOOLS:
        return Tools(agent=data["agent"], format=data["format"], tools=data["tools"], revision=data["revision"],
                     label=data["label"], source=source, etag=etag)
    prompt = models.PromptBody.model_validate(data["prompt"])
    p = _prompt(data["agent"], prompt.text, prompt.provenance, source, etag)
    tools = Tools(agent=data["agent"], format=data["format"], tools=data["tools"], revision=p.revision,
                  label=p.label, source=source, etag=etag)
    return Loadout(agent=data["agent"], prompt=p, tools=tools, revision=p.revision, label=p.label, source=source,
                   etag=etag, model=Model.from_json(data.get("model")))


def with_source(result: Any, source: Source) -> Any:
    """The same answer, marked as coming from `source`."""
    if isinstance(result, Loadout):
        return replace(result, source=source, prompt=replace(result.prompt, source=source),
                       tools=replace(result.tools, source=source))
    return replace(result, source=source)


def _prompt(agent: str, text: str, provenance: models.Provenance, source: Source, etag: str | None) -> Prompt:
    return Prompt(agent=agent, channel=provenance.channel, text=text, revision=provenance.revision,
                  label=provenance.label, provenance=provenance, source=source, etag=etag)


def fallback_result(kind: str, key: tuple[Any, ...], fallback: Any) -> Any:
    """The code's fallback as a result marked `fallback` (no revision, no provenance)."""
    _, _, _, agent, channel, _, _, label, fmt, _ = key
    if kind == PROMPT:
        return Prompt(agent=agent, channel=channel, text=str(fallback), revision=None, label=label,
                      provenance=None, source="fallback")
    if kind == TOOLS:
        return Tools(agent=agent, format=fmt, tools=list(fallback), revision=None, label=label, source="fallback")
    text, tools = (fallback["prompt"], fallback["tools"]) if isinstance(fallback, dict) else fallback
    p = Prompt(agent=agent, channel=channel, text=str(text), revision=None, label=label, provenance=None,
               source="fallback")
    t = Tools(agent=agent, format=fmt, tools=list(tools), revision=None, label=label, source="fallback")
    return Loadout(agent=agent, prompt=p, tools=t, revision=None, label=label, source="fallback")


def key_identity(api_key: str) -> str:
    """Names the API key in cache keys and on disk without revealing it."""
    return hashlib.sha256(b"loadout-client-key\0" + api_key.encode()).hexdigest()[:32]


class Core:
    """The state and the rules; `Client` and `AsyncClient` do the requests."""

    def __init__(self, base_url: str | None, api_key: str | None, *, ttl: float,
                 stale_while_revalidate: bool, cache_dir: str | os.PathLike[str] | None, timeout: float,
                 tracing: bool, max_entries: int, listen: bool = False) -> None:
        base_url = base_url or os.environ.get("LOADOUT_URL")
        api_key = api_key or os.environ.get("LOADOUT_API_KEY")
        if not base_url:
            raise ValueError("base_url is required (or set LOADOUT_URL)")
        if not api_key:
            raise ValueError("api_key is required (or set LOADOUT_API_KEY)")
        self.base_url = base_url.rstrip("/")
        self._headers = {"authorization": f"Bearer {api_key}", "accept": "application/json"}
        self._key_id = key_identity(api_key)
        self.ttl = float(ttl)
        self.stale_while_revalidate = stale_while_revalidate
        self.timeout = timeout
        # After a failed refresh, none for this long (so an outage is not a refresh per call).
        self.backoff = max(1.0, min(self.ttl, 30.0))
        self._store = DiskStore(cache_dir) if cache_dir is not None else None
        self._tracing = tracing and _tracing.available
        self._max_entries = max_entries
        self._mem: dict[tuple[Any, ...], Entry] = {}
        self._lock = threading.Lock()
        self._inflight: set[tuple[Any, ...]] = set()
        # Listening (`listen=True`): the process's stream for this URL and key, whether it is live
        # (set by the stream's thread), the events applied and the latest of them.
        self.live = False
        self._seen = 0
        self._recent: deque[tuple[int, Names]] = deque(maxlen=RECENT_EVENTS)
        self.stream: _listen.Listener | None = None
        if listen:
            self.stream = _listen.acquire(self, self.base_url, api_key, self._key_id, timeout)

    # -- the change stream -------------------------------------------------------------------

    @property
    def stream_state(self) -> StreamState:
        stream = self.stream
        return "off" if stream is None else stream.state

    def stop_listening(self) -> None:
        _listen.release(self)

    def drop(self, names: Names) -> None:
        """An event: forgets the copies in memory it names (the disk copies stay)."""
        with self._lock:
            self._seen += 1
            self._recent.append((self._seen, names))
            for key in [k for k in self._mem if names.names(k)]:
                del self._mem[key]

    def on_anchored(self) -> None:
        """The stream's first `ready`: copies fetched before it are revalidated at their next use."""
        now = monotonic()
        with self._lock:
            for entry in self._mem.values():
                if not entry.trusted and entry.expires > now:
                    entry.expires = now

    def token(self) -> Token:
        """Taken before a fetch, for `on_answer` to tell whether its copy is trusted."""
        stream = self.stream
        return None if stream is None else (stream.anchored, self._seen)

    def _trusted(self, key: tuple[Any, ...], token: Token) -> bool:
        # Under the lock, with the copy's store: no event can come between the two.
        if token is None or not token[0]:
            return False
        seen = token[1]
        if seen == self._seen:
            return True
        if not self._recent or self._recent[0][0] > seen + 1:
            return False  # more events than are kept went by
        return not any(names.names(key) for n, names in self._recent if n > seen)

    # -- keys and requests ------------------------------------------------------------------

    def key(self, kind: str, agent: str, channel: str | None, user_id: str | None, tz: str | None,
            label: str | None, fmt: str | None, conversation_id: str | None = None) -> tuple[Any, ...]:
        """Everything an answer depends on, so one user's prompt never serves another (and a
        rollout's subject: the user, or the conversation when there is no user)."""
        return (self.base_url, self._key_id, kind, agent, channel, user_id, tz, label, fmt, conversation_id)

    @staticmethod
    def request_of(key: tuple[Any, ...]) -> tuple[str, dict[str, str]]:
        _, _, kind, agent, channel, user_id, tz, label, fmt, conversation_id = key
        names = ("channel", "user_id", "tz", "label", "format", "conversation_id")
        values = (channel, user_id, tz, label, fmt, conversation_id)
        params = {n: v for n, v in zip(names, values) if v is not None}
        return f"/v1/agents/{_segment(agent)}/{kind}", params

    def conditional(self, entry: Entry | None) -> dict[str, str]:
        headers = self._headers
        stream = self.stream
        if stream is not None and stream.etag is not None:
            # The newest event's generation: a replica that has not heard of it yet reads it first.
            headers = {**headers, "loadout-generation": stream.etag}
        if entry is None or entry.etag is None:
            return headers
        return {**headers, "if-none-match": entry.etag}

    # -- what a hit serves -------------------------------------------------------------------

    def served(self, result: Any) -> Any:
        if self._tracing:
            _tracing.record(result)
        return result

    def needs_refresh(self, entry: Entry, now: float) -> bool:
        return now >= entry.retry_at

    def begin_refresh(self, key: tuple[Any, ...]) -> bool:
        """Claims the one background refresh of `key`; False when one is running."""
        with self._lock:
            if key in self._inflight:
                return False
            self._inflight.add(key)
            return True

    def end_refresh(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._inflight.discard(key)

    def refresh_failed(self, key: tuple[Any, ...], error: BaseException) -> None:
        entry = self._mem.get(key)
        if entry is not None:
            entry.retry_at = monotonic() + self.backoff
        log.warning("loadout: refreshing %s %s failed, serving the copy held: %s", key[2], key[3], error)

    # -- answers -----------------------------------------------------------------------------

    def on_answer(self, key: tuple[Any, ...], entry: Entry | None, status: int, headers: Any, body: bytes,
                  token: Token = None) -> Any:
        """The result of a fetch's answer (`token`: taken before it); raises the typed error or `Offline`."""
        if status == 200:
            etag = headers.get("etag")
            fresh = Entry(key[2], key, body, etag, monotonic() + self.ttl)
            self._put(key, fresh, token)
            if self._store is not None:
                try:
                    self._store.write(key, etag, body)
                except OSError as e:
                    log.warning("loadout: could not store the last-known-good copy in %s: %s",
                                self._store.directory, e)
            return fresh.result("fresh", key)
        if status == 304 and entry is not None:
            entry.expires = monotonic() + self.ttl
            entry.retry_at = 0.0
            entry.origin = "network"
            self._put(key, entry, token)
            return entry.result("revalidated", key)
        error = errors.from_response(status, body, headers)
        if status == 404:
            self.evict(key)
        if status >= 500:
            raise Offline(error)
        raise error

    def unreachable(self, exc: BaseException) -> Offline:
        return Offline(errors.Unreachable(f"loadout could not be reached: {exc}", code="unreachable"))

    def offline(self, key: tuple[Any, ...], entry: Entry | None, fallback: Any, offline: Offline) -> Any:
        """What is served when loadout cannot answer: the stale copy, the disk copy, the fallback."""
        now = monotonic()
        if entry is not None:
            entry.retry_at = now + self.backoff
            return entry.stale(key)
        if self._store is not None:
            stored = self._store.read(key)
            if stored is not None:
                etag, body = stored
                try:
                    disk = Entry(key[2], key, body, etag, expires=now, origin="disk")
                except ValueError as e:  # a copy in an older shape: not servable
                    log.warning("loadout: ignoring the stored copy of %s %s: %s", key[2], key[3], e)
                else:
                    disk.retry_at = now + self.backoff
                    self._put(key, disk)
                    return disk.result("disk", key)
        if fallback is not None:
            return fallback_result(key[2], key, fallback)
        raise offline.error

    def evict(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._mem.pop(key, None)
        if self._store is not None:
            self._store.delete(key)

    def _put(self, key: tuple[Any, ...], entry: Entry, token: Token = None) -> None:
        with self._lock:
            stream = self.stream
            if stream is not None:
                entry.trusted = self._trusted(key, token)
                if not entry.trusted and stream.anchored:
                    # An event overtook the fetch (or the stream came up meanwhile): revalidate it next time.
                    entry.expires = min(entry.expires, monotonic())
            self._mem[key] = entry
            while len(self._mem) > self._max_entries:
                del self._mem[next(iter(self._mem))]

    def clear(self) -> None:
        """Forgets every copy held in memory (the disk copies stay)."""
        with self._lock:
            self._mem.clear()

    # -- tool calls --------------------------------------------------------------------------

    def call_request(self, agent: str, tool: str, arguments: Any, conversation_id: str, user_id: str | None,
                     message_id: str | None, idempotency_key: str | None, revision: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"tool": tool, "arguments": arguments, "conversation_id": conversation_id,
                                "idempotency_key": idempotency_key or f"py-{uuid.uuid4().hex}"}
        if user_id is not None:
            body["user_id"] = user_id
        if message_id is not None:
            body["message_id"] = message_id
        if revision is not None:
            body["revision"] = revision
        return body

    @staticmethod
    def decide_request(tool: str, arguments: Any, conversation_id: str, user_id: str | None,
                       revision: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"tool": tool, "arguments": arguments, "conversation_id": conversation_id,
                                "dry_run": True}
        if user_id is not None:
            body["user_id"] = user_id
        if revision is not None:
            body["revision"] = revision
        return body

    @staticmethod
    def decide_answer(tool: str, status: int, headers: Any, body: bytes) -> Decision:
        """A dry run's answer: the `Decision`, or the typed error (404 for a tool the agent lacks or
        a policy hides from this caller)."""
        if status != 200:
            raise errors.from_response(status, body, headers)
        data = json.loads(body)
        by = data.get("decided_by") or {}
        return Decision(tool=tool, decision=data["decision"], revision=data["revision"],
                        policy=by.get("policy"), reason=by.get("reason"))

    @staticmethod
    def call_answer(agent: str, request: dict[str, Any], status: int, headers: Any,
                    body: bytes) -> ToolResult | Proposal:
        """A tool call's answer: a `ToolResult`, a `Proposal`, or the typed error."""
        if status != 200:
            raise errors.from_response(status, body, headers)
        data = json.loads(body)
        state, pid = data["status"], data["proposal_id"]
        if state == "succeeded":
            return ToolResult(tool=request["tool"], proposal_id=pid, result=data.get("result"))
        if state == "failed":
            result = data.get("result") or {}
            message = result.get("error", "the call failed") if isinstance(result, dict) else "the call failed"
            raise errors.ToolCallFailed(f"{request['tool']} (proposal {pid}) failed: {message}", code="failed",
                                        details=result)
        if state == "declined":
            raise errors.ProposalDeclined(f"proposal {pid} ({request['tool']}) was declined", code="declined",
                                          details={"proposal_id": pid})
        if state == "expired":
            raise errors.ProposalExpired(f"proposal {pid} ({request['tool']}) expired undecided", code="expired",
                                         details={"proposal_id": pid})
        return Proposal(agent=agent, tool=request["tool"], proposal_id=pid, status=state,
                        description=data.get("description", ""), preview=data.get("preview"), request=request)

    @staticmethod
    def outcome_request(revision: int, conversation_id: str, outcome: str, user_id: str | None,
                        score: float | None) -> dict[str, Any]:
        body: dict[str, Any] = {"revision": revision, "conversation_id": conversation_id, "outcome": outcome}
        if user_id is not None:
            body["user_id"] = user_id
        if score is not None:
            body["score"] = score
        return body

    @staticmethod
    def json_answer(status: int, headers: Any, body: bytes, ok: tuple[int, ...] = (200, 201)) -> Any:
        if status not in ok:
            raise errors.from_response(status, body, headers)
        return json.loads(body) if body else None


def _segment(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")
