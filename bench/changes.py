#!/usr/bin/env python3
"""The change stream, measured (issue 53, item 4). Two replicas of one loadout binary on
one fresh PostgreSQL database, HAProxy in front of them (deploy/haproxy.cfg's settings,
with this run's ports), and:

  latency   EDITS edits, each a PATCH of the assistant's soul sent to replica A directly;
            one client holds the change stream through HAProxy, which puts it on replica
            B. Per edit: the time from sending the PATCH to the stream's label.moved of
            `production` naming the new revision (event), and to a fetch through HAProxy,
            sent with the event's etag as Loadout-Generation, answering that revision
            (fetch). p50, p99, max; and the PATCH's own time.
  fanout    STREAMS streams opened on replica B directly: B's memory per stream (RSS
            after - before, over STREAMS), B's CPU while they idle for IDLE seconds (15 s
            heartbeats included), and, for one edit on replica A, the time until every
            stream has the event (p50, p99, last).
  fetch     the cached fetch (GET /v1/agents/assistant/prompt?channel=web, an agent
            key, wrk -t1 -c64 for SECONDS) on replica B with no stream open, with the
            STREAMS streams open, and with none again: req/s and p99, and the ratio of
            "with" to the mean of the two "without" runs (same run, same machine).

Usage, from the repository root:
  cargo build --release -p loadout --bin loadout
  bench/changes.py                        # target/release/loadout, 1000 edits, 10000 streams
  bench/changes.py --edits 200 --streams 2000 --seconds 5
Needs: haproxy, wrk, psql and PostgreSQL on 127.0.0.1:5432 (trust). Raises its own
open-file limit (and the servers'); 10,000 streams need about 20,000 descriptors.
"""

import argparse
import asyncio
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

PG = "postgres://postgres@127.0.0.1:5432"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def wait_ready(port, proc, log):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"a process ended early:\n{open(log).read()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"not ready:\n{open(log).read()[-3000:]}")


def request(port, method, path, key, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("authorization", f"Bearer {key}")
    req.add_header("content-type", "application/json")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, dict(r.headers), r.read()


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(name, values_ms):
    return (f"{name}: p50 {statistics.median(values_ms):.1f} ms, p99 {pct(values_ms, 99):.1f} ms, "
            f"max {max(values_ms):.1f} ms (n={len(values_ms)})")


class Stream:
    """A change stream over a raw socket: frames as (id, data)."""

    def __init__(self, port, key, query=""):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall((f"GET /v1/changes{query} HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer {key}\r\n"
                           "Accept: text/event-stream\r\n\r\n").encode())
        self.buffer = b""
        head = self._until(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            sys.exit(f"the stream was refused: {head!r}")

    def _until(self, marker):
        while marker not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                sys.exit("the stream ended")
            self.buffer += chunk
        before, self.buffer = self.buffer.split(marker, 1)
        return before

    def event(self):
        """The next frame with data, as a dict (chunk-size lines and comments skipped)."""
        while True:
            frame = self._until(b"\n\n").decode()
            for line in frame.splitlines():
                if line.startswith("data: "):
                    return json.loads(line[6:])


def latency(args, a, b, haproxy_port, operator, agent):
    stream = Stream(haproxy_port, agent, "?agent=assistant&label=production")
    ready = stream.event()
    assert ready["type"] == "ready", ready
    events, fetches, writes = [], [], []
    for i in range(args.edits):
        t0 = time.perf_counter()
        request(a, "PATCH", "/v1/agents/assistant", operator, {"soul": f"Edit number {i} of the change benchmark."})
        writes.append((time.perf_counter() - t0) * 1000)
        while True:
            event = stream.event()
            if event.get("change") == "label.moved":
                break
        events.append((time.perf_counter() - t0) * 1000)
        wanted = event["revision"]
        _, headers, _ = request(haproxy_port, "GET", "/v1/agents/assistant/prompt?channel=web", agent,
                                headers={"loadout-generation": event["etag"]})
        served = int(headers.get("loadout-revision") or headers.get("Loadout-Revision"))
        if served != wanted:
            sys.exit(f"edit {i}: the fetch after the event served revision {served}, not {wanted}")
        fetches.append((time.perf_counter() - t0) * 1000)
    print(summary("edit on A -> event on B's stream, through HAProxy", events))
    print(summary("edit on A -> fetch through HAProxy serves the new revision", fetches))
    print(summary("the PATCH itself (A)", writes))


async def open_streams(port, key, count):
    async def one():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write((f"GET /v1/changes?agent=assistant&label=production HTTP/1.1\r\nHost: b\r\n"
                      f"Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n\r\n").encode())
        await writer.drain()
        await reader.readuntil(b"\"type\":\"ready\"")
        await reader.readuntil(b"\n\n")
        return reader, writer
    streams = []
    for start in range(0, count, 500):
        streams += await asyncio.gather(*(one() for _ in range(min(500, count - start))))
    return streams


async def until_event(streams):
    async def one(reader):
        await reader.readuntil(b"\"change\":\"label.moved\"")
        return time.perf_counter()
    return await asyncio.gather(*(one(r) for r, _ in streams))


def wrk(port, key, seconds):
    out = subprocess.run(["wrk", "-t1", "-c64", f"-d{seconds}s", "--latency", "-H", f"Authorization: Bearer {key}",
                          f"http://127.0.0.1:{port}/v1/agents/assistant/prompt?channel=web"],
                         capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    return rps, float(p99.group(1)) * scale


def fanout_and_fetch(args, a, b, b_pid, operator, agent):
    def fetch_run(label):
        rps, p99 = wrk(b, agent, args.seconds)
        print(f"cached fetch on B, {label}: {rps:.0f} req/s, p99 {p99:.2f} ms")
        return rps, p99

    fetch_run("warm-up")
    before = fetch_run("no stream open")
    loop = asyncio.new_event_loop()
    rss0 = rss_mib(b_pid)
    t = time.perf_counter()
    streams = loop.run_until_complete(open_streams(b, agent, args.streams))
    opened = time.perf_counter() - t
    time.sleep(1)
    rss1 = rss_mib(b_pid)
    print(f"{args.streams} streams open on B in {opened:.1f} s: RSS {rss0:.1f} -> {rss1:.1f} MiB, "
          f"{(rss1 - rss0) * 1024 / args.streams:.1f} KiB per stream")
    cpu0, t0 = cpu_seconds(b_pid), time.perf_counter()
    time.sleep(args.idle)
    idle = (cpu_seconds(b_pid) - cpu0) / (time.perf_counter() - t0)
    print(f"B's CPU with {args.streams} idle streams over {args.idle} s: {idle * 100:.2f} % of one core")
    during = fetch_run(f"{args.streams} streams open")
    waiting = loop.create_task(until_event(streams))
    loop.run_until_complete(asyncio.sleep(0.2))
    t0 = time.perf_counter()
    request(a, "PATCH", "/v1/agents/assistant", operator, {"soul": "One edit for every stream."})
    arrivals = loop.run_until_complete(waiting)
    times = [(x - t0) * 1000 for x in arrivals]
    print(summary(f"edit on A -> all {args.streams} streams on B have the event", times))
    for _, writer in streams:
        writer.close()
    loop.run_until_complete(asyncio.sleep(1))
    loop.close()
    after = fetch_run("streams closed")
    base_rps = (before[0] + after[0]) / 2
    base_p99 = (before[1] + after[1]) / 2
    print(f"cached fetch with the streams open / without (same run): req/s {during[0] / base_rps:.3f}, "
          f"p99 {during[1] / base_p99:.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", default="target/release/loadout")
    parser.add_argument("--edits", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=10000)
    parser.add_argument("--idle", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    raise_nofile()
    exe = os.path.abspath(args.binary)
    work = tempfile.mkdtemp(prefix="loadout-changes-")
    name = f"loadout_changes_{os.getpid()}"
    subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-c", f"CREATE DATABASE {name}"], check=True)
    url = f"{PG}/{name}"
    procs = []
    try:
        a, b, h = free_port(), free_port(), free_port()
        env = dict(os.environ, RUST_LOG="warn", LOADOUT_SECRETS_KEY="Y2hhbmdlcy1iZW5jaC1rZXktMzItYnl0ZXMtbG9uZyE=")
        flags = ["--trusted-proxy", "127.0.0.1", "--max-connections", "40000", "--max-connections-per-address", "40000",
                 "--max-streams", "30000", "--max-streams-per-tenant", "30000"]
        for port in (a, b):
            log = os.path.join(work, f"{port}.log")
            procs.append(subprocess.Popen([exe, "--database-url", url, "serve", "--bind", f"127.0.0.1:{port}", *flags],
                                          env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                                          preexec_fn=raise_nofile))
            wait_ready(port, procs[-1], log)
        keys = {}
        for role in ("operator", "agent"):
            out = subprocess.run([exe, "--database-url", url, "keys", "create", "--role", role, "--name", f"bench-{role}"],
                                 capture_output=True, text=True, check=True, env=env)
            keys[role] = out.stdout.strip().splitlines()[-1]
        config = open("deploy/haproxy.cfg").read()
        config = config.replace("bind 127.0.0.1:8080", f"bind 127.0.0.1:{h}")
        config = re.sub(r"(?m)^\s*server .*\n", "", config)
        # B first: round robin puts the stream (the first connection) on B.
        config += f"    server b 127.0.0.1:{b} check\n    server a 127.0.0.1:{a} check\n"
        cfg = os.path.join(work, "haproxy.cfg")
        open(cfg, "w").write(config)
        hlog = os.path.join(work, "haproxy.log")
        procs.append(subprocess.Popen(["haproxy", "-f", cfg], stdout=open(hlog, "w"), stderr=subprocess.STDOUT))
        wait_ready(h, procs[-1], hlog)
        time.sleep(1.5)  # both servers pass their health checks
        print(f"loadout {exe}: replicas A :{a}, B :{b} on {name}; HAProxy :{h}")
        latency(args, a, b, h, keys["operator"], keys["agent"])
        fanout_and_fetch(args, a, b, procs[1].pid, keys["operator"], keys["agent"])
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-c", f"DROP DATABASE IF EXISTS {name}"])


if __name__ == "__main__":
    main()
