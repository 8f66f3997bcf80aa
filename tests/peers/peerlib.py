"""What every peer script shares (stdlib only, so any of the venvs can import it): the target
loadout from the environment run.py sets, a REST helper on 127.0.0.1, and named checks that are
all run and reported before the script exits non-zero on any failure."""

import json
import os
import sys
import time
import traceback
import urllib.error
import urllib.request

URL = os.environ.get("LOADOUT_URL", "")  # http://127.0.0.1:PORT
AGENT = os.environ.get("LOADOUT_AGENT", "assistant")
AGENT_KEY = os.environ.get("LOADOUT_AGENT_KEY", "")  # an agent key scoped to AGENT
ADMIN_KEY = os.environ.get("LOADOUT_ADMIN_KEY", "")
WORK = os.environ.get("PEER_WORK", "")  # a scratch directory of this peer's own

# The approval-tier catalog tool every MCP peer calls: it must come back proposed.
PROPOSE_TOOL, PROPOSE_ARGS = "delete_tasks", {"ids": ["peer-task-1"]}


class Checks:
    """Named checks; each failure is printed with what was seen, and `done()` exits 1 if any failed."""

    def __init__(self, peer):
        self.peer, self.failed, self.count = peer, [], 0

    def check(self, name, ok, detail=""):
        self.count += 1
        if ok:
            print(f"ok    {name}", flush=True)
        else:
            self.failed.append(name)
            print(f"FAIL  {name}: {detail}", flush=True)
        return ok

    def eq(self, name, got, want):
        return self.check(name, got == want, f"got {short(got)}, want {short(want)}")

    def run(self, name, fn, *args):
        """A step whose exception is a failure of its own (the remaining checks still run)."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - any exception is this step failing
            trace = "" if isinstance(e, HttpError) else "\n" + traceback.format_exc(limit=4)
            self.check(name, False, f"{type(e).__name__}: {e}{trace}")
            return None

    def done(self):
        print(f"{self.peer}: {self.count - len(self.failed)} of {self.count} checks passed", flush=True)
        sys.exit(1 if self.failed else 0)


def find_error(exc, kind):
    """The first `kind` inside `exc`, looking through exception groups and causes (anyio wraps them)."""
    if isinstance(exc, kind):
        return exc
    for inner in list(getattr(exc, "exceptions", ())) + [exc.__cause__, exc.__context__]:
        if inner is not None and (found := find_error(inner, kind)) is not None:
            return found
    return None


class LogCatcher:
    """Collects the messages a library logs at WARNING or above (a client's complaints about the server)."""

    def __init__(self, logger_name):
        import logging

        self.messages = []
        catcher = self

        class Handler(logging.Handler):
            def emit(self, record):
                catcher.messages.append(record.getMessage())

        logging.getLogger(logger_name).addHandler(Handler(logging.WARNING))


def short(value, limit=600):
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


class HttpError(Exception):
    def __init__(self, status, body):
        super().__init__(f"HTTP {status}: {short(body)}")
        self.status, self.body = status, body


def rest(method, path, body=None, key=None, raw=False):
    """One REST call to loadout (admin key unless another is given); the decoded JSON body."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {key or ADMIN_KEY}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read().decode()
    except urllib.error.HTTPError as e:
        raise HttpError(e.code, e.read().decode(errors="replace")) from None
    return text if raw else (json.loads(text) if text else None)


def set_template(marker):
    """An admin edit over REST: the agent's template, with `marker` in it. Returns the rendered web prompt."""
    template = f"$identity\n\n$soul\n\nPeer marker: {marker}.\n\n$channel_guidance\n\nNow: $current_time"
    rest("PUT", f"/v1/agents/{AGENT}/prompt-template", {"template": template})
    return rest("GET", f"/v1/agents/{AGENT}/prompt?channel=web", key=AGENT_KEY)["text"]


def rest_tools():
    """The agent's tools as REST exports them in the MCP shape, by name."""
    tools = rest("GET", f"/v1/agents/{AGENT}/tools?format=mcp", key=AGENT_KEY)["tools"]
    return {t["name"]: t for t in tools}


def shape_differences(listed, exported):
    """Where tools/list (`listed`: name -> Tool as JSON) and the REST export (format=mcp) disagree."""
    out = []
    for name in sorted(set(listed) | set(exported)):
        a, b = listed.get(name), exported.get(name)
        if a is None or b is None:
            out.append(f"{name}: only in {'REST' if a is None else 'tools/list'}")
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                out.append(f"{name}.{key}: tools/list {short(a.get(key), 120)} vs REST {short(b.get(key), 120)}")
    return out


def unique(prefix):
    return f"{prefix}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
