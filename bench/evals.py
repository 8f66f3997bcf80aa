#!/usr/bin/env python3
"""The evaluation benchmark: what a run costs beyond the model's own time, and whether a
run in progress slows the prompt fetch. Every figure comes from this run.

A stand-in model on 127.0.0.1 (stdlib, threaded) answers every chat completion after
DELAY ms without using the CPU, so the model's own time is known exactly. loadout
(release, SQLite, default logging) runs a dataset of CASES cases against it:

  overhead  (the run's wall time - the model's time) / cases, the model's time being
            the sum of what the cases' latencies say (the client's view of each call).
  fetch     wrk -t1 -c64 on the cached prompt fetch (bench/fetch.py's `cached` path),
            SECONDS each: alone, then while a run of many cases is in progress; the
            ratio of the two, ROUNDS times interleaved.

Usage, from the repository root:
  cargo build --release -p loadout --bin loadout
  bench/evals.py [--exe target/release/loadout] [--cases 200] [--delay-ms 50] [--rounds 3]
Needs: wrk and curl.
"""

import argparse
import http.server
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetch import Server, log, wrk  # noqa: E402

PORT = 18600


def stand_in(delay_ms):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("content-length", 0))
            self.rfile.read(length)
            time.sleep(delay_ms / 1000)
            body = json.dumps({"id": "x", "object": "chat.completion", "model": "stand-in",
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": "Paris is the capital of France."}}],
                               "usage": {"prompt_tokens": 100, "completion_tokens": 8}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def call(port, method, path, key, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    req.add_header("Authorization", f"Bearer {key}")
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def keys(exe, url, role, name, agent=None):
    argv = [exe, "--database-url", url, "keys", "create", "--role", role, "--name", name]
    if agent:
        argv += ["--agent", agent]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    return out.strip().splitlines()[-1]


def wait(port, key, run_id, timeout=3600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        view = call(port, "GET", f"/v1/eval-runs/{run_id}", key)
        if view["state"] not in ("queued", "running"):
            return view
        time.sleep(0.05)
    sys.exit(f"bench: run {run_id} did not end")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exe", default="target/release/loadout")
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--delay-ms", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    model = stand_in(args.delay_ms)
    model_url = f"http://127.0.0.1:{model.server_address[1]}/v1"
    work = tempfile.mkdtemp(prefix="loadout-bench-evals-")
    url = f"sqlite://{work}/loadout.db?mode=rwc"
    env = dict(os.environ)
    env.pop("RUST_LOG", None)
    server = Server([args.exe, "--database-url", url, "serve", "--bind", f"127.0.0.1:{PORT}",
                     "--connector-allow", "127.0.0.1", "--eval-token-budget", "1000000000"],
                    env, os.path.join(work, "serve.log"))
    try:
        op = keys(args.exe, url, "operator", "bench-operator")
        agent = keys(args.exe, url, "agent", "bench-agent", "assistant")
        call(PORT, "POST", "/v1/model-connections", op,
             {"name": "standin", "base_url": model_url, "models": ["stand-in"]})
        case = {"channel": "web", "messages": [{"role": "user", "content": "What is the capital of France?"}],
                "assert": [{"type": "icontains", "value": "paris"}, {"type": "regex", "value": "capital"},
                           {"type": "not-contains", "value": "London"}]}
        call(PORT, "PUT", "/v1/agents/assistant/datasets/overhead", op, {"cases": [case] * args.cases})
        # Overhead per case: a run alone.
        started = call(PORT, "POST", "/v1/agents/assistant/eval-runs", op,
                       {"dataset": "overhead", "connection": "standin"})
        t0 = time.time()
        done = wait(PORT, op, started["id"])
        wall_ms = (time.time() - t0) * 1000
        cases = call(PORT, "GET", f"/v1/eval-runs/{started['id']}/cases", op)["cases"]
        model_ms = sum(c["latency_ms"] for c in cases)
        per_case = (wall_ms - model_ms) / len(cases)
        print(f"run: {len(cases)} cases, state {done['state']}, wall {wall_ms:.0f} ms, "
              f"model {model_ms} ms (stand-in delay {args.delay_ms} ms), "
              f"overhead {per_case:.2f} ms per case")
        # The fetch alone and during a run, interleaved.
        get_ok = call(PORT, "GET", "/v1/agents/assistant/prompt?channel=web", agent)
        assert get_ok["text"]
        ratios = []
        for r in range(args.rounds):
            alone, _ = wrk(PORT, agent, args.seconds)
            running = call(PORT, "POST", "/v1/agents/assistant/eval-runs", op,
                           {"dataset": "overhead", "connection": "standin"})
            time.sleep(0.5)
            during, p99 = wrk(PORT, agent, args.seconds)
            view = call(PORT, "GET", f"/v1/eval-runs/{running['id']}", op)
            call(PORT, "POST", f"/v1/eval-runs/{running['id']}/cancel", op)
            ratios.append(during / alone)
            print(f"round {r + 1}: fetch alone {alone:.0f} req/s, during a run {during:.0f} req/s "
                  f"(p99 {p99:.1f} ms; the run did {view['done']} cases meanwhile), ratio {during / alone:.3f}")
            wait(PORT, op, running["id"])
        print(f"fetch during a run / alone, median of {args.rounds}: {statistics.median(ratios):.3f}")
    finally:
        server.stop()
        model.shutdown()


if __name__ == "__main__":
    main()
