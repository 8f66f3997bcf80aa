#!/usr/bin/env python3
"""loadout's peer matrix: drives one loadout with software loadout did not write, at pinned versions.

    python3 tests/peers/run.py --loadout target/debug/loadout --database-url URL [--only NAME]...

Installs the peers (./install, quick when installed), starts `loadout serve` on a free loopback
port with the given database, makes its keys with the CLI, starts the conformance proxy and the
FastMCP server, runs each peer as a subprocess with a timeout, and prints the matrix; a failing
peer's output follows it. Exits 1 if any peer failed. Everything stays on 127.0.0.1.
PEERS_KEEP=1 keeps the work directory (logs, generated clients, conformance results).
Stdlib only; runs under the system python3."""

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(HERE, ".peers")
VENV = {name: os.path.join(PEERS, f"venv-{name}", "bin", "python") for name in ("mcp1", "mcp2", "fastmcp", "openapi", "webhooks", "langfuse", "ofrep")}
NODE = os.path.join(PEERS, "node_modules", ".bin", "node")

# name, version, protocol, command
MATRIX = [
    ("conformance-2025-11-25", "@modelcontextprotocol/conformance 0.2.0-alpha.12", "2025-11-25",
     [sys.executable, "conformance/suite.py", "2025-11-25"]),
    ("conformance-2026-07-28", "@modelcontextprotocol/conformance 0.2.0-alpha.12", "2026-07-28",
     [sys.executable, "conformance/suite.py", "2026-07-28"]),
    ("mcp-python-1", "mcp 1.30.0", "2025-11-25", [VENV["mcp1"], "mcp-python/client_v1.py"]),
    ("mcp-python-2", "mcp 2.3.0", "2026-07-28", [VENV["mcp2"], "mcp-python/client_v2.py"]),
    ("openai-agents", "openai-agents 0.24.0 (mcp 2.3.0)", "2026-07-28", [VENV["mcp2"], "openai-agents/check.py"]),
    ("fastmcp-remote", "fastmcp 4.2.3", "remote of an mcp connector", [sys.executable, "fastmcp/check.py"]),
    ("openapi-python-client", "openapi-python-client 0.29.1", "OpenAPI 3.1", [VENV["openapi"], "openapi/python_client.py"]),
    ("openapi-typescript", "openapi-typescript 7.13.0, typescript 5.9.3", "OpenAPI 3.1", [sys.executable, "openapi/typescript.py"]),
    ("standardwebhooks", "standardwebhooks 1.1.0", "Standard Webhooks", [VENV["webhooks"], "webhooks/receiver.py"]),
    ("langfuse-python", "langfuse 5.0.4", "Langfuse prompt API", [VENV["langfuse"], "langfuse/check.py"]),
    ("langfuse-js", "@langfuse/client 5.11.1 (node 24.21.0)", "Langfuse prompt API", [NODE, "langfuse/check.mjs"]),
    ("ofrep-python", "openfeature-provider-ofrep 0.3.0 (openfeature-sdk 0.10.0)", "OFREP 0.3", [VENV["ofrep"], "ofrep/check.py"]),
    ("ofrep-js", "@openfeature/ofrep-provider 0.1.3, @openfeature/ofrep-web-provider 0.4.3 (node 24.21.0)",
     "OFREP 0.3", [NODE, "--experimental-eventsource", "ofrep/check.mjs"]),
]
PEER_TIMEOUT = 120
# The secrets key serve gets on Postgres (base64 of 32 bytes; a test key, not a secret).
PEERS_SECRETS_KEY = "cGVlcnMtc2VjcmV0cy1rZXktMzItYnl0ZXMtbG9uZyE="

children = []


def start(argv, log, **kw):
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kw)
    children.append(proc)
    return proc


def stop_children(*_):
    for proc in children:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for proc in children:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    children.clear()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, ready, proc, log_path, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"peers: {what} exited ({proc.returncode}) before it was ready:\n{open(log_path).read()[-5000:]}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"peers: {what} not ready after {timeout} s:\n{open(log_path).read()[-5000:]}")


def accepts(port):
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


def healthy(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
        return r.status == 200


def make_key(loadout, database_url, role, name, agent=None):
    argv = [loadout, "--database-url", database_url, "keys", "create", "--role", role, "--name", name]
    argv += ["--agent", agent] if agent else []
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        sys.exit(f"peers: {' '.join(argv)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout.strip().splitlines()[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loadout", required=True, help="the loadout binary")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--only", action="append", help="run only this peer (repeatable): " + ", ".join(m[0] for m in MATRIX))
    parser.add_argument("--verbose", "-v", action="store_true", help="print every peer's output, not only a failing one's")
    args = parser.parse_args()
    loadout = os.path.abspath(args.loadout)
    matrix = [m for m in MATRIX if not args.only or m[0] in args.only]
    if not matrix:
        sys.exit(f"peers: no peer named {args.only}; there are {', '.join(m[0] for m in MATRIX)}")

    subprocess.run([os.path.join(HERE, "install")], check=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="loadout-peers-")
    began = time.monotonic()
    try:
        port, proxy_port, fastmcp_port = free_port(), free_port(), free_port()
        serve_log = os.path.join(work, "loadout.log")
        # Webhook secrets are sealed at rest: SQLite gets a key file beside it, Postgres this
        # fixed peers' key (the same every run, so a reused database still opens its secrets).
        serve_env = dict(os.environ)
        if not args.database_url.startswith("sqlite"):
            serve_env.setdefault("LOADOUT_SECRETS_KEY", PEERS_SECRETS_KEY)
        serve = start([loadout, "--database-url", args.database_url, "serve", "--bind", f"127.0.0.1:{port}",
                       "--connector-allow", "127.0.0.1", "--mcp-allowed-origin", f"http://127.0.0.1:{proxy_port}"],
                      open(serve_log, "w"), env=serve_env)
        wait_until("loadout serve", lambda: healthy(port), serve, serve_log)

        suffix = secrets.token_hex(3)
        env = dict(os.environ,
                   LOADOUT_URL=f"http://127.0.0.1:{port}", LOADOUT_AGENT="assistant",
                   LOADOUT_ADMIN_KEY=make_key(loadout, args.database_url, "operator", f"peers-admin-{suffix}"),
                   LOADOUT_AGENT_KEY=make_key(loadout, args.database_url, "agent", f"peers-agent-{suffix}", "assistant"),
                   CONFORMANCE_URL=f"http://127.0.0.1:{proxy_port}/mcp",
                   FASTMCP_URL=f"http://127.0.0.1:{fastmcp_port}/mcp",
                   FASTMCP_RECORD=os.path.join(work, "fastmcp-received.jsonl"),
                   PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", NO_COLOR="1")
        env.pop("DATABASE_URL", None)

        proxy_log = os.path.join(work, "proxy.log")
        proxy = start([NODE, os.path.join(HERE, "conformance", "proxy.mjs"), str(proxy_port), str(port)], open(proxy_log, "w"),
                      env=dict(env, LOADOUT_PEER_KEY=env["LOADOUT_AGENT_KEY"]))
        fastmcp_log = os.path.join(work, "fastmcp.log")
        fastmcp = start([VENV["fastmcp"], os.path.join(HERE, "fastmcp", "server.py"), str(fastmcp_port), env["FASTMCP_RECORD"]],
                        open(fastmcp_log, "w"))
        wait_until("the conformance proxy", lambda: accepts(proxy_port), proxy, proxy_log)
        wait_until("the FastMCP server", lambda: accepts(fastmcp_port), fastmcp, fastmcp_log)
        print(f"peers: loadout on 127.0.0.1:{port} ({args.database_url}), ready in {time.monotonic() - began:.1f} s", flush=True)

        results = []
        for name, version, protocol, argv in matrix:
            peer_work = os.path.join(work, name)
            os.makedirs(peer_work)
            t0 = time.monotonic()
            proc = subprocess.Popen(argv, cwd=HERE, env=dict(env, PEER_WORK=peer_work), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                output, _ = proc.communicate(timeout=PEER_TIMEOUT)
                failed = [line for line in output.splitlines() if line.startswith("FAIL")]
                result = "pass" if proc.returncode == 0 else f"FAIL ({len(failed)} checks)" if failed else f"FAIL (exit {proc.returncode})"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                output, _ = proc.communicate()
                result = f"FAIL (timeout {PEER_TIMEOUT} s)"
            results.append((name, version, protocol, result, time.monotonic() - t0, output))
            print(f"peers: {name}: {result} [{time.monotonic() - t0:.1f} s]", flush=True)

        print("\n| peer | version | protocol | result | time |\n|---|---|---|---|---|")
        for name, version, protocol, result, seconds, _ in results:
            print(f"| {name} | {version} | {protocol} | {result} | {seconds:.1f} s |")
        print(f"\npeers: {len(results)} peers in {time.monotonic() - began:.0f} s")
        bad = [r for r in results if r[3] != "pass"]
        for name, _, _, result, _, output in results:
            notes = [line for line in output.splitlines() if line.startswith(("warn ", "n/a "))]
            if result == "pass" and args.verbose:
                print(f"\n----- {name}: passed -----\n{output.rstrip()}")
            elif result == "pass" and notes:
                print(f"\n----- {name}: passed, with these warnings and not-applicable checks -----\n" + "\n".join(notes))
        for name, _, _, result, _, output in bad:
            print(f"\n===== {name}: {result} =====\n{output.rstrip()}")
        if bad:
            print(f"\n===== loadout's log (last lines) =====\n{open(serve_log).read()[-4000:]}")
        print(f"\n{len(results) - len(bad)} passed, {len(bad)} failed")
        return 1 if bad else 0
    finally:
        stop_children()
        if os.environ.get("PEERS_KEEP"):
            print(f"peers: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
