"""Listening to loadout's change stream (`GET /v1/changes`, Server-Sent Events), for the
clients made with `listen=True`.

One `Listener` per (base URL, API key) per process, whatever the number of clients: a daemon
thread holding one streaming GET, shared by every `Client` and `AsyncClient` of that key (the
registry counts them; the last one to close stops it). Each event names what changed; the
listener hands it to every client's `Core`, which drops exactly the entries it names.

Its states: `connecting` (until the first `ready`), `live` (`ready` received, the connection
up), `broken` (the connection lost, being made again, or refused for good on a 401 or 403).
While `live` a client serves its copies without TTL; otherwise by the TTL, as without a stream.

Continuity: after the first `ready`, every reconnect sends `Last-Event-ID` (the `id` of the
last frame, `ready` frames included) and the server replays what was missed (or one
`everything`), so a copy fetched at any time after that first `ready` is known to be dropped
by any later change. A copy fetched before it, or during a fetch that an event naming it
overtook, is not trusted: it is served by the TTL (and revalidated at once when that is all
that stands between it and trust)."""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx

if TYPE_CHECKING:
    from ._core import Core

log = logging.getLogger("loadout")

StreamState = Literal["off", "connecting", "live", "broken"]

PATH = "/v1/changes"
# The server sends a comment every 15 s while idle: three missed mean the connection is gone.
READ_TIMEOUT = 45.0
# The largest frame accepted (its lines together); a larger one drops the connection.
MAX_FRAME = 64 * 1024
# Reconnection delays: the server's `retry:` (1 s without one), doubled per failed attempt, at most this.
FIRST_DELAY = 1.0
MAX_DELAY = 30.0


@dataclass(frozen=True, slots=True)
class Names:
    """Which cache entries an event names: `agent` None names every entry; `label` (None:
    every label) and `user` (None: every user) narrow it; `kinds` (None: every kind) too."""

    agent: str | None = None
    label: str | None = None
    user: str | None = None
    kinds: frozenset[str] | None = None

    def names(self, key: tuple[Any, ...]) -> bool:
        _, _, kind, agent, _, user_id, _, label, _, _ = key
        if self.agent is None:
            return True
        if agent != self.agent:
            return False
        if self.kinds is not None and kind not in self.kinds:
            return False
        if self.label is not None and (label or "production") != self.label:
            return False
        return self.user is None or user_id == self.user


EVERYTHING = Names()
LABEL_CHANGES = frozenset({"label.moved", "rollout.started", "rollout.changed", "rollout.held", "rollout.aborted",
                           "rollout.completed"})


def names_of(data: dict[str, Any]) -> Names | None:
    """What a `refetchEvaluation` event names (None: nothing, for an event of another type)."""
    if data.get("type") != "refetchEvaluation":
        return None
    change, agent = data.get("change"), data.get("agent")
    if not isinstance(agent, str) or change == "everything":
        return EVERYTHING
    if change in LABEL_CHANGES:
        label = data.get("label")
        return Names(agent=agent, label=label if isinstance(label, str) else None)
    if change == "instructions.changed":
        user = data.get("user")
        if isinstance(user, str):
            return Names(agent=agent, user=user, kinds=frozenset({"prompt", "loadout"}))
        return Names(agent=agent)
    # agent.deleted, and a change this client does not know: that agent's every entry.
    return Names(agent=agent)


class FrameTooLarge(Exception):
    pass


class Stop(Exception):
    """Internal: the stream is refused for good (401, 403)."""


def frames(chunks: Iterator[bytes], limit: int = MAX_FRAME) -> Iterator[list[tuple[str, str]]]:
    """The stream's frames, each its (field, value) lines (comments left out), read line by line
    with at most `limit` bytes held for one frame; a larger frame raises `FrameTooLarge`."""
    buffer = bytearray()
    fields: list[tuple[str, str]] = []
    size = 0
    for chunk in chunks:
        buffer += chunk
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                if size + len(buffer) > limit:
                    raise FrameTooLarge(f"a frame of more than {limit} bytes")
                break
            raw = bytes(buffer[:end])
            del buffer[:end + 1]
            size += end + 1
            if size > limit:
                raise FrameTooLarge(f"a frame of more than {limit} bytes")
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if not raw:
                if fields:
                    yield fields
                fields, size = [], 0
                continue
            if raw.startswith(b":"):
                continue
            line = raw.decode("utf-8", errors="replace")
            name, _, value = line.partition(":")
            fields.append((name, value[1:] if value.startswith(" ") else value))


class Listener:
    """One stream, shared by the `Core`s of one (base URL, key) in this process."""

    def __init__(self, base_url: str, api_key: str, timeout: float) -> None:
        self.url = base_url + PATH
        # `identity`: what is read is what is held (no compressed frame growing as it is decoded).
        self._headers = {"authorization": f"Bearer {api_key}", "accept": "text/event-stream",
                         "cache-control": "no-cache", "accept-encoding": "identity"}
        self._timeout = timeout
        self.state: StreamState = "connecting"
        self.live = False
        # After the first `ready`: every later change reaches the cores (replayed on a reconnect).
        self.anchored = False
        self.last_id: str | None = None
        self.etag: str | None = None  # the newest event's, sent as Loadout-Generation
        self._generation = -1
        self._retry = FIRST_DELAY
        self._went_live = False
        self.cores: set[Core] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="loadout-changes")

    # -- the cores ---------------------------------------------------------------------------

    def join(self, core: Core) -> None:
        with self._lock:
            self.cores.add(core)
            core.live = self.live

    def leave(self, core: Core) -> bool:
        """Whether `core` was the last one."""
        with self._lock:
            self.cores.discard(core)
            core.live = False
            return not self.cores

    def _each(self) -> list[Core]:
        with self._lock:
            return list(self.cores)

    def _set(self, state: StreamState) -> None:
        with self._lock:
            self.state = state
            self.live = state == "live"
            for core in self.cores:
                core.live = self.live

    # -- the thread --------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ends the stream (at once: its socket is shut down) and the thread."""
        self._stopped.set()
        sock = self._socket
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._set("broken")

    def _run(self) -> None:
        failures = 0
        timeout = httpx.Timeout(self._timeout, read=READ_TIMEOUT)
        try:
            with httpx.Client(timeout=timeout) as http:
                while not self._stopped.is_set():
                    self._went_live, wait = False, 0.0
                    try:
                        wait = self._connect(http)
                    except Stop:
                        return
                    except FrameTooLarge as e:
                        self._broke(f"{e}: dropped the connection")
                    except (httpx.HTTPError, OSError, ValueError) as e:
                        self._broke(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
                    except Exception as e:  # never a thread that dies and leaves the clients waiting
                        log.exception("loadout: the change stream from %s failed", self.url)
                        self._broke(type(e).__name__)
                    if self._stopped.is_set():
                        return
                    # 1 s (the server's `retry:`) after a connection that went live, doubling per failure.
                    failures = 0 if self._went_live else failures + 1
                    delay = min(self._retry * 2 ** max(failures - 1, 0), MAX_DELAY) * (1 + random.random() / 4)
                    self._stopped.wait(max(delay, wait))
        finally:
            self._set("broken")

    def _broke(self, why: str) -> None:
        if self._stopped.is_set():
            return
        if self.state != "broken":
            log.warning("loadout: the change stream from %s broke (%s): copies expire by their TTL until it is back",
                        self.url, why)
        else:
            log.debug("loadout: the change stream from %s: %s", self.url, why)
        self._set("broken")

    def _connect(self, http: httpx.Client) -> float:
        """One connection, until it ends: the least wait before the next."""
        headers = dict(self._headers)
        if self.last_id is not None:
            headers["last-event-id"] = self.last_id
        with http.stream("GET", self.url, headers=headers) as r:
            if r.status_code != 200:
                return self._refused(r)
            ctype = r.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                raise ValueError(f"a 200 of {ctype or 'no content type'}, not an event stream")
            stream = r.extensions.get("network_stream")
            self._socket = stream.get_extra_info("socket") if stream is not None else None
            try:
                if self._stopped.is_set():
                    return 0.0
                for fields in frames(r.iter_bytes()):
                    self._frame(fields)
            finally:
                self._socket = None
        self._broke("the server ended it")
        return 0.0

    def _refused(self, r: httpx.Response) -> float:
        """A non-200: raises `Stop` on 401 and 403; else the wait it asks (429's Retry-After)."""
        body = b""
        for chunk in r.iter_bytes():
            body += chunk
            if len(body) > MAX_FRAME:
                break
        try:
            error = json.loads(body).get("error") or {}
            detail = f"{error.get('code')}: {error.get('message')}"
        except (ValueError, AttributeError):
            detail = body[:200].decode("utf-8", errors="replace")
        if r.status_code in (401, 403):
            self._stopped.set()
            log.warning("loadout: the change stream from %s was refused (%s %s): not listening any more; "
                        "copies expire by their TTL", self.url, r.status_code, detail)
            self._set("broken")
            raise Stop()
        self._broke(f"{r.status_code} {detail}")
        if r.status_code in (429, 503):
            try:
                return max(0.0, float(r.headers.get("retry-after", "")))
            except ValueError:
                return 0.0
        return 0.0

    def _frame(self, fields: list[tuple[str, str]]) -> None:
        """Acts on one frame."""
        event_id: str | None = None
        data: list[str] = []
        for name, value in fields:
            if name == "data":
                data.append(value)
            elif name == "id" and "\0" not in value:
                event_id = value
            elif name == "retry" and value.isdigit():
                self._retry = min(max(int(value) / 1000, 0.1), MAX_DELAY)
        if data:
            try:
                parsed = json.loads("\n".join(data))
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                self._event(parsed)
        if event_id is not None:
            self.last_id = event_id

    def _event(self, data: dict[str, Any]) -> None:
        etag, generation = data.get("etag"), data.get("generation")
        if isinstance(etag, str):
            newer = not isinstance(generation, int) or generation >= self._generation
            if newer:
                self.etag = etag
                if isinstance(generation, int):
                    self._generation = generation
        if data.get("type") == "ready":
            first = not self.anchored
            self.anchored = True
            if first:
                for core in self._each():
                    core.on_anchored()
            if self.state != "live" and self.state != "connecting":
                log.info("loadout: the change stream from %s is back", self.url)
            self._went_live = True
            self._set("live")
            return
        names = names_of(data)
        if names is not None:
            for core in self._each():
                core.drop(names)


_registry: dict[tuple[str, str], Listener] = {}
_registry_lock = threading.Lock()


def acquire(core: Core, base_url: str, api_key: str, key_id: str, timeout: float) -> Listener:
    """The process's listener for this base URL and key (started when it is the first), joined by `core`."""
    with _registry_lock:
        listener = _registry.get((base_url, key_id))
        if listener is None:
            listener = _registry[(base_url, key_id)] = Listener(base_url, api_key, timeout)
            listener.start()
        listener.join(core)
        return listener


def release(core: Core) -> None:
    """`core` stops listening; the last one to go stops the stream."""
    listener = core.stream
    if listener is None:
        return
    core.stream = None
    with _registry_lock:
        if listener.leave(core):
            for k, v in list(_registry.items()):
                if v is listener:
                    del _registry[k]
            listener.stop()
