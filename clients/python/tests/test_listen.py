"""Listening to loadout's change stream (`listen=True`) against a real loadout: an admin edit
is seen at once whatever the TTL, an event drops exactly the copies it names, a cut stream
resumes from `Last-Event-ID`, a stopped server leaves the copies on their TTL (then stale, then
disk), one stream per process, and a client that does not listen is unchanged. A TCP proxy in
the test sits between the client and loadout where the test needs to see or cut the wire; a
fake event stream checks what loadout never sends (a frame over 64 KiB)."""

import asyncio
import re
import socket
import threading
import time

import pytest
from conftest import AGENT, free_port, set_marker, wait_for

from loadout import AsyncClient, Client, errors
from loadout import _listen


class Proxy:
    """A TCP proxy to `upstream` that keeps what each connection's client sent (to read the
    request heads), can cut the change-stream connections, and can refuse new ones."""

    def __init__(self, upstream):
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", free_port()))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.refuse_streams = False
        self.connections = []  # [sent bytes (a bytearray), client socket, upstream socket, open flag]
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client):
        first = b""
        while b"\r\n\r\n" not in first:
            chunk = client.recv(65536)
            if not chunk:
                client.close()
                return
            first += chunk
        if self.refuse_streams and first.startswith(b"GET /v1/changes"):
            with self.lock:
                self.connections.append([bytearray(first), None, None, False])
            client.close()
            return
        upstream = socket.create_connection(self.upstream)
        conn = [bytearray(first), client, upstream, True]
        with self.lock:
            self.connections.append(conn)
        upstream.sendall(first)
        threading.Thread(target=self._pump, args=(upstream, client, None, conn), daemon=True).start()
        self._pump(client, upstream, conn[0], conn)

    def _pump(self, src, dst, record, conn):
        try:
            while True:
                chunk = src.recv(65536)
                if not chunk:
                    break
                if record is not None:
                    with self.lock:
                        record += chunk
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            conn[3] = False
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def heads(self, path="/v1/changes"):
        """The heads of the requests for `path` the clients sent, oldest first, as {name: value}
        with a "request" item for the request line."""
        found = []
        with self.lock:
            sent = [bytes(c[0]) for c in self.connections]
        for data in sent:
            for m in re.finditer(rb"(GET|POST|PUT) (\S+) HTTP/1\.1\r\n(.*?)\r\n\r\n", data, re.S):
                if m.group(2).decode().split("?")[0] != path:
                    continue
                head = {"request": m.group(2).decode()}
                for line in m.group(3).decode().split("\r\n"):
                    name, _, value = line.partition(":")
                    head[name.strip().lower()] = value.strip()
                found.append(head)
        return found

    def open_streams(self):
        with self.lock:
            return [c for c in self.connections if c[3] and bytes(c[0]).startswith(b"GET /v1/changes")]

    def cut_streams(self):
        for conn in self.open_streams():
            for s in (conn[1], conn[2]):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()
        with self.lock:
            conns = list(self.connections)
        for conn in conns:
            for s in (conn[1], conn[2]):
                if s is not None:
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


@pytest.fixture
def proxy(live):
    p = Proxy(live.url)
    yield p
    p.close()


def until(fetch, condition, timeout, what):
    """Calls `fetch` until `condition` holds of its answer (every 10 ms): the answer and how long it took."""
    t0 = time.monotonic()
    while True:
        got = fetch()
        if condition(got):
            return got, time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{what}: not within {timeout} s; last {got!r}")
        time.sleep(0.01)


def listening(live, url=None, **kw):
    """A listening client with a TTL that never runs out in a test, once its stream is live."""
    kw.setdefault("ttl", 3600)
    c = Client(url or live.url, kw.pop("key", live.agent_key), listen=True, **kw)
    wait_for(lambda: c.stream_state == "live", what="the change stream to be live")
    return c


def test_an_admin_edit_is_seen_at_once_not_after_the_ttl(live, recorder):
    c = listening(live, http_client=recorder.http())
    try:
        first = c.prompt(AGENT, "web")
        held = c.prompt(AGENT, "web")
        assert (first.source, held.source) == ("fresh", "live")  # no TTL while the stream is live
        marker = f"listen-{time.time_ns()}"
        set_marker(live, marker)  # a direct release: production moves to the new revision
        edited, took = until(lambda: c.prompt(AGENT, "web"), lambda p: f"Marker: {marker}." in p.text, 5.0,
                             "the template edit")
        assert edited.source == "fresh" and edited.revision > first.revision, (edited, took)
        # The refetch carried the newest event's generation, for a replica that has not seen it yet.
        generation = recorder.requests[-1].headers.get("loadout-generation")
        assert generation is not None and re.fullmatch(r'"g\d+"', generation), generation
        assert c.prompt(AGENT, "web").source == "live"

        # Moving the production label back to the first revision: the revision served goes back.
        moved = live.rest("PUT", f"/v1/agents/{AGENT}/labels/production", live.operator,
                          {"revision": first.revision})
        assert moved is not None
        back, took = until(lambda: c.prompt(AGENT, "web"), lambda p: p.revision == first.revision, 5.0,
                           "the label move")
        assert back.source == "fresh" and back.text == first.text
    finally:
        set_marker(live, f"after-listen-{time.time_ns()}")  # production at the newest revision again
        c.close()
    assert c.stream_state == "off"


async def test_the_async_client_listens_the_same_way(live):
    c = AsyncClient(live.url, live.agent_key, ttl=3600, listen=True)
    try:
        for _ in range(500):
            if c.stream_state == "live":
                break
            await asyncio.sleep(0.01)
        assert c.stream_state == "live"
        first = await c.loadout(AGENT, "web")
        assert (await c.loadout(AGENT, "web")).source == "live"
        marker = f"async-{time.time_ns()}"
        set_marker(live, marker)
        t0 = time.monotonic()
        while f"Marker: {marker}." not in (got := await c.loadout(AGENT, "web")).prompt.text:
            assert time.monotonic() - t0 < 5.0, f"the edit not seen within 5 s: {got}"
            await asyncio.sleep(0.01)
        assert got.source == "fresh" and got.revision > first.revision
    finally:
        await c.aclose()


def test_an_event_drops_exactly_the_copies_it_names(live):
    c = listening(live)
    ann, bob = f"ann-{time.time_ns()}", f"bob-{time.time_ns()}"
    try:
        for user in (ann, bob):
            c.prompt(AGENT, "web", user_id=user)
        c.tools(AGENT, user_id=ann)
        c.prompt(AGENT, "web")
        assert {c.prompt(AGENT, "web", user_id=u).source for u in (ann, bob)} == {"live"}
        live.rest("PUT", f"/v1/agents/{AGENT}/users/{ann}/instructions", live.operator,
                  {"instructions": "Answer in French."})
        got, _ = until(lambda: c.prompt(AGENT, "web", user_id=ann), lambda p: "Answer in French." in p.text, 5.0,
                       "ann's instructions")
        assert got.source == "fresh"
        # Bob's prompt, ann's tools (instructions change no tools) and the prompt with no user stay.
        assert c.prompt(AGENT, "web", user_id=bob).source == "live"
        assert c.tools(AGENT, user_id=ann).source == "live"
        assert c.prompt(AGENT, "web").source == "live"
    finally:
        c.close()


def test_a_cut_stream_resumes_from_the_last_event_id_and_replays_what_it_missed(live, proxy):
    c = listening(live, url=proxy.url)
    try:
        before = c.prompt(AGENT, "web")
        assert c.prompt(AGENT, "web").source == "live"
        last = c._core.stream.last_id
        assert last is not None and last.isdigit()
        (head,) = proxy.heads()
        assert "last-event-id" not in head and head["accept"] == "text/event-stream"

        proxy.refuse_streams = True  # cut, and no stream until the edit is made
        proxy.cut_streams()
        wait_for(lambda: c.stream_state == "broken", what="the stream to break")
        marker = f"resume-{time.time_ns()}"
        set_marker(live, marker)
        time.sleep(0.5)
        held = c.prompt(AGENT, "web")  # the stream is down: the copy, on its TTL
        assert held.source == "cached" and held.text == before.text
        proxy.refuse_streams = False

        after, _ = until(lambda: c.prompt(AGENT, "web"), lambda p: f"Marker: {marker}." in p.text, 15.0,
                         "the edit made while the stream was cut")
        assert after.source == "fresh" and after.revision > before.revision
        wait_for(lambda: c.stream_state == "live", what="the stream to be live again")
        heads = proxy.heads()
        assert len(heads) >= 2
        assert all(h.get("last-event-id") == last for h in heads[1:]), (last, heads)
    finally:
        c.close()


def test_a_stopped_server_leaves_the_clients_on_their_stale_and_disk_copies(live, tmp_path):
    c = listening(live, ttl=0.5, cache_dir=tmp_path, timeout=2)
    other = None
    try:
        first = c.prompt(AGENT, "web", tz="Europe/Paris")
        assert c.prompt(AGENT, "web", tz="Europe/Paris").source == "live"
        live.stop()
        wait_for(lambda: c.stream_state == "broken", what="the stream to break")
        time.sleep(0.6)  # past the TTL: the stream is down, so the TTL counts again
        stale = c.prompt(AGENT, "web", tz="Europe/Paris")
        assert stale.source == "stale" and stale.text == first.text and stale.revision == first.revision
        # A new client of the same key (the same stream, still down) has only the disk copy.
        other = Client(live.url, live.agent_key, ttl=0.5, cache_dir=tmp_path, timeout=2, listen=True)
        assert other.stream_state == "broken"
        disk = other.prompt(AGENT, "web", tz="Europe/Paris")
        assert disk.source == "disk" and disk.text == first.text
        time.sleep(1.5)  # reconnecting, refused: still broken, still the copies
        assert c.stream_state == other.stream_state == "broken"
        assert c.prompt(AGENT, "web", tz="Europe/Paris").source == "stale"
    finally:
        c.close()
        if other is not None:
            other.close()


def test_a_client_that_does_not_listen_makes_no_stream_request(live, proxy):
    c = Client(proxy.url, live.agent_key, ttl=60)
    assert c.stream_state == "off"
    first = c.prompt(AGENT, "web")
    assert (first.source, c.prompt(AGENT, "web").source) == ("fresh", "cached")
    assert c.tools(AGENT).source == "fresh"
    time.sleep(0.5)
    assert proxy.heads() == []
    assert proxy.heads(f"/v1/agents/{AGENT}/prompt") != []  # the proxy does see the client
    assert not any(url == proxy.url for url, _ in _listen._registry)
    c.close()


async def test_one_stream_per_process_ends_with_its_last_client(live, proxy):
    a = Client(proxy.url, live.agent_key, listen=True)
    b = Client(proxy.url, live.agent_key, listen=True)
    d = AsyncClient(proxy.url, live.agent_key, listen=True)
    for _ in range(500):
        if d.stream_state == "live":
            break
        await asyncio.sleep(0.01)
    assert a.stream_state == b.stream_state == d.stream_state == "live"
    assert len(proxy.heads()) == 1 and len(proxy.open_streams()) == 1
    a.close()
    await d.aclose()
    await asyncio.sleep(0.2)
    assert b.stream_state == "live" and len(proxy.open_streams()) == 1
    b.close()
    for _ in range(500):
        if not proxy.open_streams():
            break
        await asyncio.sleep(0.01)
    assert proxy.open_streams() == [] and len(proxy.heads()) == 1
    assert (a.stream_state, b.stream_state) == ("off", "off")


def test_a_refused_key_stops_listening_for_good(live, proxy):
    c = Client(proxy.url, "not-a-key", listen=True, ttl=60)
    try:
        wait_for(lambda: c.stream_state == "broken", what="the 401")
        with pytest.raises(errors.Unauthorized):
            c.prompt(AGENT, "web")
        time.sleep(2.5)  # past two reconnection delays: none was tried
        assert len(proxy.heads()) == 1 and c.stream_state == "broken"
    finally:
        c.close()


class FakeStream:
    """An event stream that is not loadout: each connection gets `body(n)` (n counts
    connections), then is closed; the heads it was sent are kept."""

    def __init__(self, body):
        self.body = body
        self.heads = []
        self.server = socket.create_server(("127.0.0.1", free_port()))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                self.heads.append(head.decode())
                body = self.body(len(self.heads))
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n" + body)
                conn.shutdown(socket.SHUT_WR)
                time.sleep(0.05)

    def close(self):
        self.server.close()


def test_a_frame_over_64_kib_drops_the_connection(monkeypatch):
    ready = b'retry: 100\n\n: ping\n\nid: 7\ndata: {"type":"ready","etag":"\\"g7\\"","generation":7}\n\n'
    huge = b"id: 8\ndata: {\"type\":\"refetchEvaluation\",\"change\":\"everything\",\"pad\":\"" + b"x" * 70000 + b"\"}\n\n"
    fake = FakeStream(lambda n: ready + huge)
    c = Client(fake.url, "any-key", listen=True)
    try:
        wait_for(lambda: len(fake.heads) >= 3, what="reconnects")
        # The oversized frame was refused (its id never taken): each reconnect resumes from the ready's.
        assert "last-event-id" not in fake.heads[0].lower()
        assert all("last-event-id: 7" in h.lower() for h in fake.heads[1:]), fake.heads
        assert c._core.stream.etag == '"g7"'
    finally:
        c.close()
        fake.close()


def test_the_frame_reader_is_bounded_and_reads_sse():
    chunks = [b"retry: 1000\n\n: ping\n\nid: 4", b"2\r\ndata: {\"a\":", b" 1}\ndata:x\n\n", b"event: e\n\n"]
    got = list(_listen.frames(iter(chunks)))
    assert got == [[("retry", "1000")], [("id", "42"), ("data", '{"a": 1}'), ("data", "x")], [("event", "e")]]
    with pytest.raises(_listen.FrameTooLarge):
        list(_listen.frames(iter([b"data: " + b"y" * 70000])))  # no newline yet: refused all the same
    with pytest.raises(_listen.FrameTooLarge):
        list(_listen.frames(iter([b"data: y\n"] * 10000)))


def test_what_each_change_names():
    def key(kind="prompt", agent=AGENT, user=None, label=None):
        return ("u", "k", kind, agent, "web", user, None, label, None, None)

    moved = _listen.names_of({"type": "refetchEvaluation", "change": "label.moved", "agent": AGENT,
                              "label": "production"})
    assert moved.names(key()) and moved.names(key(label="production")) and moved.names(key("tools"))
    assert not moved.names(key(label="canary")) and not moved.names(key(agent="other"))
    rollout = _listen.names_of({"type": "refetchEvaluation", "change": "rollout.held", "agent": AGENT,
                                "label": "canary"})
    assert rollout.names(key(label="canary", user="u1")) and not rollout.names(key())
    instructions = _listen.names_of({"type": "refetchEvaluation", "change": "instructions.changed", "agent": AGENT,
                                     "user": "ann"})
    assert instructions.names(key(user="ann")) and instructions.names(key("loadout", user="ann", label="canary"))
    assert not instructions.names(key("tools", user="ann")) and not instructions.names(key(user="bob"))
    assert not instructions.names(key())
    for change in ("agent.deleted", "something.new"):
        gone = _listen.names_of({"type": "refetchEvaluation", "change": change, "agent": AGENT})
        assert gone.names(key("tools", label="x", user="y")) and not gone.names(key(agent="other"))
    for data in ({"type": "refetchEvaluation", "change": "everything", "reason": "history"},
                 {"type": "refetchEvaluation", "change": "something.new"}):
        assert _listen.names_of(data).names(key(agent="other"))
    assert _listen.names_of({"type": "ready"}) is None
    assert _listen.names_of({"type": "somethingElse", "agent": AGENT}) is None
