"""A real `loadout serve` for the client's tests: started once per session on a free
127.0.0.1 port (the binary in LOADOUT_BIN, the database in LOADOUT_TEST_DATABASE_URL or a
temporary SQLite file), with keys made by `loadout keys create`, as tests/peers/run.py does.
Tests that stop or pause it get it back running before the next test."""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import httpx
import pytest

AGENT = "assistant"
# No $current_time: the body (and so the ETag) stays the same from one minute to the next.
TEMPLATE = "$identity\n\n$soul\n\nMarker: {marker}.\n\n$channel_guidance\n\n$user_instructions"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One loadout serve; `stop`/`start` keep its port and database, `pause`/`resume` freeze it."""

    def __init__(self, binary, database_url, work):
        self.binary, self.database_url, self.work = binary, database_url, work
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None
        self.paused = False

    def start(self):
        log = open(os.path.join(self.work, "serve.log"), "a")
        self.proc = subprocess.Popen(
            [self.binary, "--database-url", self.database_url, "serve", "--bind", f"127.0.0.1:{self.port}"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, "RUST_LOG": "warn"})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"loadout serve exited:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"loadout serve not ready after 60 s:\n{self.log()}")

    def stop(self, graceful=False):
        """An outage (SIGKILL: a graceful stop waits for the clients' idle connections)."""
        self.resume()
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def pause(self):
        os.killpg(self.proc.pid, signal.SIGSTOP)
        self.paused = True

    def resume(self):
        if self.paused and self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGCONT)
        self.paused = False

    def log(self):
        with open(os.path.join(self.work, "serve.log")) as f:
            return f.read()[-4000:]

    def key(self, role, agent=None):
        name = f"pyclient-{role}-{secrets.token_hex(4)}"
        argv = [self.binary, "--database-url", self.database_url, "keys", "create", "--role", role, "--name", name]
        argv += ["--agent", agent] if agent else []
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True)
        return out.stdout.strip().splitlines()[-1]

    def rest(self, method, path, key, body=None):
        """One REST call (an admin's or approver's, beside the client under test); the JSON answer."""
        r = httpx.request(method, self.url + path, json=body, headers={"authorization": f"Bearer {key}"}, timeout=30)
        if r.status_code >= 400:
            raise AssertionError(f"{method} {path}: {r.status_code} {r.text}")
        return r.json() if r.content else None


@pytest.fixture(scope="session")
def server():
    binary = os.environ.get("LOADOUT_BIN")
    if not binary:
        pytest.fail("LOADOUT_BIN must name the loadout binary (service/tests/python_client.rs sets it)")
    work = tempfile.mkdtemp(prefix="loadout-pyclient-")
    url = os.environ.get("LOADOUT_TEST_DATABASE_URL") or f"sqlite://{work}/loadout.db?mode=rwc"
    srv = Server(binary, url, work)
    srv.start()
    srv.operator = srv.key("operator")
    srv.approver = srv.key("approver")
    srv.agent_key = srv.key("agent", AGENT)
    srv.rest("PUT", f"/v1/agents/{AGENT}/prompt-template", srv.operator, {"template": TEMPLATE.format(marker="start")})
    try:
        yield srv
    finally:
        srv.stop(graceful=True)
        if os.environ.get("PYCLIENT_KEEP"):
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def live(server):
    """The session's server, running (a test before may have stopped or paused it)."""
    server.resume()
    if not server.running():
        server.start()
    yield server
    server.resume()


class Recorder:
    """Every request the client sends and every answer's status, from httpx's event hooks."""

    def __init__(self):
        self.requests, self.statuses = [], []
        self.lock = threading.Lock()

    def on_request(self, request):
        with self.lock:
            self.requests.append(request)

    def on_response(self, response):
        with self.lock:
            self.statuses.append(response.status_code)

    def hooks(self):
        return {"request": [self.on_request], "response": [self.on_response]}

    def http(self, timeout=5.0):
        return httpx.Client(event_hooks=self.hooks(), timeout=timeout)

    def count(self):
        with self.lock:
            return len(self.requests)


@pytest.fixture
def recorder():
    return Recorder()


def wait_for(condition, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def set_marker(server, marker):
    server.rest("PUT", f"/v1/agents/{AGENT}/prompt-template", server.operator, {"template": TEMPLATE.format(marker=marker)})


def openapi(server):
    with urllib.request.urlopen(f"{server.url}/openapi.json", timeout=10) as r:
        return json.loads(r.read())
