#!/usr/bin/env python3
"""The fetch benchmark: loadout loaded the way agents load it, every figure a ratio to a
baseline measured in the same run.

For each loadout binary given (default: target/release/loadout) and each backend, one
prepared database (migrated and seeded by `serve`, optionally grown with `--size`), then
ROUNDS rounds, each running every server in turn, so a drift of the shared machine hits
all of them alike:

  cached    GET /v1/agents/assistant/prompt?channel=web with an agent key, cache warm,
            default logging (RUST_LOG unset: one `served` line per request), against the
            bare handler (examples/bare: a fixed body of the same size, no auth, no log).
  warn      the same with RUST_LOG=warn (no per-request line).
  user      the same route with a new `user_id` on every request (bench/users.lua), so
            no response cache answers: against the floor (examples/floor: one indexed
            SELECT through raw sqlx, one render), on SQLite and on Postgres.

wrk -t1 -c64 (keep-alive) for SECONDS each. Prints req/s, p99 and the ratio per round,
then the median ratio per binary. `--callgrind` adds instructions per request (server
side, all threads) for the cached and the per-user path under valgrind's callgrind,
which counts instructions, steady on a shared machine.

`--size N` grows each instance with `loadout apply` before it is measured: N agents,
10 * N tools, 10 tools linked to each agent (N = 1: the seeded instance), and times one
template save over the API (median of 5). Binaries without `apply` only run at size 1.

Usage, from the repository root:
  cargo build --release -p loadout --bin loadout --example bare --example floor
  bench/fetch.py                                    # target/release/loadout
  bench/fetch.py --rounds 3 /tmp/a=old /tmp/b=new   # two builds interleaved
  bench/fetch.py --size 1000 --callgrind
Needs: wrk, curl, psql and PostgreSQL on 127.0.0.1:5432 (trust); valgrind for --callgrind.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

PG_ADMIN = "postgres://postgres@127.0.0.1:5432/postgres"
PROMPT = "/v1/agents/assistant/prompt?channel=web"
PORT = 18500


def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Server:
    """A process that prints `listening` on stderr once it serves."""

    def __init__(self, argv, env, err_path, timeout=120, out_path=os.devnull):
        self.err_path = err_path
        started = time.time()
        with open(err_path, "wb") as err, open(out_path, "wb") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err)
        deadline = started + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            with open(err_path, "rb") as f:
                if b"listening" in f.read():
                    self.start_s = time.time() - started
                    return
            time.sleep(0.02)
        self.stop()
        sys.exit(f"bench: {argv[0]} did not start:\n{open(err_path).read()[-2000:]}")

    def rss_mib(self):
        """VmRSS and VmHWM (peak) in MiB."""
        fields = {}
        for line in open(f"/proc/{self.proc.pid}/status"):
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
        return fields.get("VmRSS", 0), fields.get("VmHWM", 0)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def get(port, path, key, timeout=30):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def wrk(port, key, seconds, users_prefix=None):
    argv = ["wrk", "-t1", "-c64", f"-d{seconds}s", "--latency"]
    if users_prefix is None:
        argv += ["-H", f"Authorization: Bearer {key or 'none'}", f"http://127.0.0.1:{port}{PROMPT}"]
    else:
        argv += ["-s", "bench/users.lua", f"http://127.0.0.1:{port}", "--", key or "none", "users", users_prefix]
    text = subprocess.run(argv, check=True, capture_output=True, text=True).stdout

    def ms(v):
        n, unit = re.match(r"([\d.]+)(us|ms|s|m)", v).groups()
        return float(n) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]

    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if bad:
        sys.exit(f"bench: {bad.group(1)} answers were not 2xx:\n{text}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    p99 = ms(re.search(r"^\s*99%\s+(\S+)", text, re.M).group(1))
    return rps, p99


class Instance:
    """One binary on one backend: a prepared database and an agent key."""

    def __init__(self, bench, exe, name, backend, index):
        self.bench, self.exe, self.name, self.backend = bench, exe, name, backend
        self.dir = os.path.join(bench.work, f"{index}-{backend}")
        os.makedirs(self.dir)
        if backend == "sqlite":
            self.url = f"sqlite://{self.dir}/loadout.db?mode=rwc"
        else:
            db = f"loadout_fetch_bench_{index}"
            bench.pg_databases.append(db)
            psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            psql(f"CREATE DATABASE {db}")
            self.url = f"postgres://postgres@127.0.0.1:5432/{db}"
        # The first start migrates and seeds; its stdout is the first operator key.
        first = self.start(log_level="warn", out=os.path.join(self.dir, "first.out"))
        first.stop()
        self.admin = open(os.path.join(self.dir, "first.out")).read().split()[-1]
        self.key = self.cli("keys", "create", "--role", "agent", "--name", "bench-agent").split()[-1]
        self.save_ms = None
        self.start_s, self.rss = 0.0, (0, 0)
        if bench.size > 1:
            self.grow(bench.size)

    def env(self, log_level):
        env = dict(os.environ, DATABASE_URL=self.url, LOADOUT_SECRETS_KEY="A" * 43 + "=")
        env.pop("RUST_LOG", None)
        if log_level is not None:
            env["RUST_LOG"] = log_level
        return env

    def cli(self, *args):
        out = subprocess.run([self.exe, *args], env=self.env("warn"), capture_output=True, text=True)
        if out.returncode not in (0, 2):
            sys.exit(f"bench: {self.exe} {' '.join(args)}: {out.stderr[-2000:]}")
        return out.stdout

    def start(self, log_level=None, out=os.devnull, wrap=(), timeout=120):
        argv = [*wrap, self.exe, "serve", "--bind", f"127.0.0.1:{PORT}"]
        err = os.path.join(self.dir, "serve.err")
        return Server(argv, self.env(log_level), err, timeout=timeout, out_path=out)

    def grow(self, n):
        """N agents and 10 N tools by `loadout apply`, then one template save timed."""
        folder = os.path.join(self.dir, "bundle")
        self.cli("export", folder)
        generate(folder, n)
        t = time.time()
        self.cli("apply", folder)
        log(f"  {self.name}/{self.backend}: applied {n} agents, {10 * n} tools in {time.time() - t:.1f} s")

    def measure_save(self):
        """One template save of one agent over the API, median of 5 (ms)."""
        times = []
        for i in range(5):
            body = json.dumps({"template": f"$identity\n\n$soul\n\nSave {i}.\n$tool_guidance"}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{PORT}/v1/agents/assistant/prompt-template",
                                         data=body, method="PUT")
            req.add_header("Authorization", f"Bearer {self.admin}")
            req.add_header("Content-Type", "application/json")
            t = time.perf_counter()
            with urllib.request.urlopen(req, timeout=120) as r:
                r.read()
            times.append((time.perf_counter() - t) * 1000)
        return statistics.median(times)


CONSOLE_PAGES = ["/console/", "/console/tools", "/console/agents/assistant",
                 "/console/agents/assistant/tools", "/console/agents/assistant/releases",
                 "/console/agents/assistant/versions"]


def console_pages(port, key):
    """Each console page an operator opens: (path, status, bytes, ms)."""
    body = f"key={key}".encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/console/sign-in", data=body, method="POST")
    req.add_header("Content-Type", "application/x-www-form-urlencoded")

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        reply = opener.open(req, timeout=60)
        headers = reply.headers
    except urllib.error.HTTPError as e:  # the 303 after signing in
        headers = e.headers
    cookie = next(c.split(";")[0] for c in headers.get_all("Set-Cookie") or [] if c.startswith("loadout_session="))
    out = []
    for path in CONSOLE_PAGES:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
        req.add_header("Cookie", cookie)
        t = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                size, status = len(r.read()), r.status
        except urllib.error.HTTPError as e:
            size, status = len(e.read()), e.code
        out.append((path, status, size, (time.perf_counter() - t) * 1000))
    return out


def generate(folder, n):
    """Grow an exported folder to n agents (copies of assistant) and 10 n tools."""
    schema = {"additionalProperties": False, "type": "object", "required": ["id"],
              "properties": {"id": {"description": "The record.", "type": "string"}}}
    have = len(os.listdir(f"{folder}/tools"))
    names = [f"get_bench{i:05d}" for i in range(max(0, 10 * n - have))]
    for name in names:
        with open(f"{folder}/tools/{name}.json", "w") as f:
            json.dump({"active": True, "approval_tier": "auto", "connector": None,
                       "description": f"Reads record {name}.", "parameters": schema,
                       "prompt_section": None, "strict": True, "type": "api"}, f, indent=2, sort_keys=True)
    src = f"{folder}/agents/assistant"
    for i in range(n - 1):
        dst = f"{folder}/agents/bench{i:04d}"
        shutil.copytree(src, dst)
        text = open(f"{dst}/agent.toml").read()
        head, _, rest = text.partition("tools = [")
        _, _, rest = rest.partition("]")
        links = ", ".join('"%s"' % names[(i * 10 + j) % len(names)] for j in range(10)) if names else ""
        sep = ", " if links else ""
        open(f"{dst}/agent.toml", "w").write(f'{head}tools = [{links}{sep}"update_instructions"]{rest}')
    text = open(f"{folder}/loadout.toml").read()
    open(f"{folder}/loadout.toml", "w").write(text.split("[state]")[0])


def psql(sql):
    env = dict(os.environ, PGOPTIONS="-c client_min_messages=warning")
    subprocess.run(["psql", "-q", PG_ADMIN, "-c", sql], check=True, env=env, capture_output=True)


def keepalive(port, key, paths):
    """Requests over one kept-alive connection; every answer must be 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {key}"}
    for path in paths:
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            sys.exit(f"bench: {path}: {r.status}")
    conn.close()


def callgrind(instance, requests):
    """Instructions per request (all threads) for the cached and the per-user path,
    less what the same server does idle for as long."""
    out = os.path.join(instance.dir, "cg.out")
    # Instrumented from the start and zeroed at each window's start: toggling
    # instrumentation off and on (`-i off` / `-i on`) makes the next dump's totals
    # wrap below zero (valgrind 3.19).
    wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
    server = instance.start(log_level=None, wrap=wrap, timeout=600)
    pid = str(server.proc.pid)
    key = instance.key

    def window(paths):
        for f in os.listdir(instance.dir):
            if f.startswith("cg.out."):
                os.remove(os.path.join(instance.dir, f))
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
        t = time.time()
        if paths:
            keepalive(PORT, key, paths)
        else:
            time.sleep(window.last)
        window.last = time.time() - t
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        total = 0
        for f in os.listdir(instance.dir):
            if f.startswith("cg.out."):
                m = re.search(r"^(?:summary|totals): (\d+)", open(os.path.join(instance.dir, f)).read(), re.M)
                total += int(m.group(1)) if m else 0
        return total

    window.last = 0
    try:
        keepalive(PORT, key, [PROMPT] * 50 + [f"{PROMPT}&user_id=warm{i}" for i in range(50)])
        cached = window([PROMPT] * requests)
        idle = window(None)
        cached_per = (cached - idle) / requests
        users = window([f"{PROMPT}&user_id=cg{i}" for i in range(requests)])
        idle = window(None)
        user_per = (users - idle) / requests
    finally:
        server.stop()
    return cached_per, user_per


class Bench:
    def __init__(self, args):
        self.args = args
        self.size = args.size
        self.work = tempfile.mkdtemp(prefix="loadout-fetch-")
        self.pg_databases = []

    def cleanup(self):
        if os.environ.get("BENCH_KEEP"):
            log(f"bench: kept {self.work} and databases {self.pg_databases} (BENCH_KEEP)")
            return
        for db in self.pg_databases:
            try:
                psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
            except subprocess.CalledProcessError:
                pass
        shutil.rmtree(self.work, ignore_errors=True)

    def example(self, name, *args):
        exe = os.path.join(self.args.examples, name)
        return Server([exe, f"127.0.0.1:{PORT}", *args], dict(os.environ), os.path.join(self.work, f"{name}.err"))

    def run(self):
        args = self.args
        bins = []
        for spec in args.binaries or ["target/release/loadout"]:
            exe, _, name = spec.partition("=")
            bins.append((os.path.abspath(exe), name or os.path.basename(exe)))
        backends = args.backends.split(",")
        log(f"preparing {len(bins)} binaries on {', '.join(backends)} (size {self.size})")
        instances = {}
        for i, (exe, name) in enumerate(bins):
            for backend in backends:
                instances[(name, backend)] = Instance(self, exe, name, backend, i)
        # Body sizes from the first binary: the bare handler and the floor answer as much.
        first = instances[(bins[0][1], backends[0])]
        server = first.start(log_level="warn")
        cached_size = len(get(PORT, PROMPT, first.key))
        user_size = len(get(PORT, f"{PROMPT}&user_id=size", first.key))
        server.stop()
        rows = []  # (round, figure, name, rps, p99, ratio)
        for rnd in range(1, args.rounds + 1):
            log(f"round {rnd}")
            bare = self.example("bare", str(cached_size))
            base_cached = wrk(PORT, None, args.seconds)
            bare.stop()
            floors = {}
            for backend in backends:
                floor = self.example("floor", first_url(instances, bins, backend), str(user_size))
                floors[backend] = wrk(PORT, None, args.seconds, users_prefix=f"f{rnd}")
                floor.stop()
            rows.append((rnd, "cached", "bare", *base_cached, 1.0))
            for backend in backends:
                rows.append((rnd, f"user/{backend}", "floor", *floors[backend], 1.0))
            for exe, name in bins:
                inst = instances[(name, backends[0])]
                for figure, level in (("cached", None), ("cached/warn", "warn")):
                    server = inst.start(log_level=level)
                    get(PORT, PROMPT, inst.key)
                    rps, p99 = wrk(PORT, inst.key, args.seconds)
                    server.stop()
                    rows.append((rnd, figure, name, rps, p99, rps / base_cached[0]))
                for backend in backends:
                    inst = instances[(name, backend)]
                    server = inst.start(log_level=None)
                    get(PORT, f"{PROMPT}&user_id=warm", inst.key)
                    rps, p99 = wrk(PORT, inst.key, args.seconds, users_prefix=f"{name}{rnd}")
                    if rnd == 1:
                        inst.start_s = server.start_s
                        inst.rss = server.rss_mib()
                        if (self.size > 1 or args.save) and inst.save_ms is None:
                            inst.save_ms = inst.measure_save()
                        if self.size > 1 or args.save:
                            inst.pages = console_pages(PORT, inst.admin)
                    server.stop()
                    rows.append((rnd, f"user/{backend}", name, rps, p99, rps / floors[backend][0]))
            for r in rows:
                if r[0] == rnd:
                    print(f"round {r[0]}  {r[1]:<15} {r[2]:<14} {r[3]:9.0f} req/s  p99 {r[4]:7.2f} ms  ratio {r[5]:.2f}", flush=True)
        print()
        print(f"median of {args.rounds} rounds; wrk -t1 -c64 -d{args.seconds}s; {os.cpu_count()} cores; "
              f"size {self.size}; cached body {cached_size} B, per-user body {user_size} B")
        print(f"{'figure':<15} {'server':<14} {'req/s':>9} {'p99 ms':>8} {'ratio':>6}  {'ratios':<20}")
        figures = sorted({(r[1], r[2]) for r in rows}, key=lambda k: (k[0], k[1] not in ("bare", "floor")))
        for figure, name in figures:
            mine = [r for r in rows if r[1] == figure and r[2] == name]
            ratios = " ".join(f"{r[5]:.2f}" for r in mine)
            print(f"{figure:<15} {name:<14} {statistics.median(r[3] for r in mine):9.0f} "
                  f"{statistics.median(r[4] for r in mine):8.2f} {statistics.median(r[5] for r in mine):6.2f}  {ratios}")
        print()
        for (name, backend), inst in instances.items():
            line = f"{name}/{backend}: start-up {inst.start_s:.2f} s, after round 1 VmRSS {inst.rss[0]:.0f} MiB (peak {inst.rss[1]:.0f})"
            if inst.save_ms is not None:
                line += f", template save {inst.save_ms:.1f} ms (median of 5)"
            print(line)
            for path, status, size, ms in getattr(inst, "pages", []):
                print(f"  console {path:<36} {status} {size / 1024:8.1f} KiB {ms:8.1f} ms")
        if args.callgrind:
            print()
            print(f"callgrind: instructions per request (server, all threads, less idle), {args.callgrind} requests")
            for exe, name in bins:
                inst = instances[(name, backends[0])]
                cached_per, user_per = callgrind(inst, args.callgrind)
                print(f"{name:<14} cached {cached_per:10.0f}   per-user {user_per:10.0f}", flush=True)


def first_url(instances, bins, backend):
    return instances[(bins[0][1], backend)].url


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binaries", nargs="*", help="loadout binaries, each PATH or PATH=NAME")
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", type=int, default=1, help="agents (10 tools each) grown by apply")
    p.add_argument("--save", action="store_true", help="time a template save also at size 1")
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--examples", default="target/release/examples", help="where bare and floor are")
    p.add_argument("--callgrind", type=int, nargs="?", const=2000, default=0,
                   help="instructions per request under callgrind (requests per window, 2000)")
    args = p.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    bench = Bench(args)
    try:
        bench.run()
    finally:
        bench.cleanup()


if __name__ == "__main__":
    main()
