#!/usr/bin/env python3
"""What a cached `prompt()` of the Python client costs, beside a bare dict lookup in the same run.

    tests/peers/.peers/venv-pyclient/bin/python bench/python_client.py --loadout target/debug/loadout [-n 200000]

Starts `loadout serve` on a temporary SQLite database (127.0.0.1, a free port), makes an
agent key, fetches the assistant's web prompt once, then times N cached `prompt()` calls
(best of 7 rounds, per call) with tracing off, on with no span current, and with a recording
span of the OpenTelemetry SDK current (again in one span; the first call in a new span adds
the SDK's `set_attributes`, timed on its own), against `d[key]` on a dict. Nothing but the first fetch touches the network."""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import timeit
import urllib.request

from loadout import Client


def serve(binary, work):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = f"sqlite://{work}/bench.db?mode=rwc"
    proc = subprocess.Popen([binary, "--database-url", db, "serve", "--bind", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                break
        except OSError:
            time.sleep(0.1)
    key = subprocess.run([binary, "--database-url", db, "keys", "create", "--role", "agent", "--name", "bench",
                          "--agent", "assistant"], capture_output=True, text=True, check=True).stdout.split()[-1]
    return proc, url, key


def per_call(fn, n):
    return min(timeit.repeat(fn, number=n, repeat=7)) / n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loadout", required=True)
    parser.add_argument("-n", type=int, default=200_000)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="loadout-bench-")
    proc, url, key = serve(os.path.abspath(args.loadout), work)
    try:
        traced = Client(url, key, ttl=3600)
        plain = Client(url, key, ttl=3600, tracing=False)
        for c in (traced, plain):
            assert c.prompt("assistant", "web").source == "fresh"
            assert c.prompt("assistant", "web").source == "cached"
        d = {("assistant", "web"): "text"}
        k = ("assistant", "web")
        rows = [
            ("baseline: d[key] on a dict", per_call(lambda: d[k], args.n)),
            ("client.prompt(agent, channel), cached, tracing off", per_call(lambda: plain.prompt("assistant", "web"), args.n)),
            ("client.prompt(agent, channel), cached, tracing on", per_call(lambda: traced.prompt("assistant", "web"), args.n)),
            ("client.prompt(agent, channel, user_id=, tz=), cached",
             per_call(lambda: traced.prompt("assistant", "web", user_id="ann", tz="Europe/Berlin"), args.n)),
        ]
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
        except ImportError:
            pass
        else:
            trace.set_tracer_provider(TracerProvider())
            tracer = trace.get_tracer("bench")
            with tracer.start_as_current_span("turn"):
                rows.append(("client.prompt(agent, channel), cached, again inside one recording span",
                             per_call(lambda: traced.prompt("assistant", "web"), args.n)))

            # The first call in a new span also sets the attributes: the SDK validates and locks
            # per attribute. Timed directly (span creation is 40-60 µs and too noisy to subtract).
            attributes = {"gen_ai.prompt.name": "assistant", "gen_ai.prompt.version": "1",
                          "loadout.label": "production", "loadout.source": "cached"}
            with tracer.start_as_current_span("turn") as span:
                rows.append(("the SDK's span.set_attributes of those 4 (what a new span adds)",
                             per_call(lambda: span.set_attributes(attributes), args.n // 10)))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    print(f"python {sys.version.split()[0]}, {args.n} calls per round, best of 7 rounds")
    for name, seconds in rows:
        print(f"{seconds * 1e9:10.0f} ns  {name}")


if __name__ == "__main__":
    main()
