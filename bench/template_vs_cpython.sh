#!/usr/bin/env bash
# The engine against CPython's string.Template.safe_substitute on the same inputs,
# in the same run: bench/data/template_8k.txt (8 KiB, 10 placeholders, two `$$`)
# and bench/data/template_8k_dollars.txt (the same among 64 `$$`), with the values
# in bench/data/vars.json. Prints ns per render for each, the ratio, and the
# engine's throughput, and the floor: the time to merely copy the template. Usage, from the repository root: bench/template_vs_cpython.sh
set -euo pipefail
cd "$(dirname "$0")/.."

cargo bench -p loadout --bench prompt -- 'template/' >/dev/null 2>&1

python3 - <<'PY'
import json, platform, string, timeit
values = json.load(open("bench/data/vars.json"))
print(f"CPython {platform.python_version()} (timeit, best of 7) vs loadout (criterion mean), same machine, same run")
for name, path in [("8k_10", "bench/data/template_8k.txt"), ("8k_10_dollars", "bench/data/template_8k_dollars.txt")]:
    text = open(path).read()
    tpl = string.Template(text)
    assert tpl.get_identifiers() == list(values), f"{path}: the placeholders changed"
    timer = timeit.Timer(lambda: tpl.safe_substitute(values))
    n, _ = timer.autorange()
    py = min(timer.repeat(repeat=7, number=n)) / n * 1e9
    ns = lambda bench: json.load(open(f"target/criterion/template/{bench}/new/estimates.json"))["mean"]["point_estimate"]
    size = len(text.encode())
    gib = lambda t: size / t * 1e9 / 2**30
    rows = [
        ("loadout, HashMap<String, String> values", ns(f"safe_substitute_{name}")),
        ("loadout, values by match (as the builder)", ns(f"safe_substitute_{name}_match")),
        ("CPython, dict values", py),
    ]
    print(f"{path}: {size} bytes, {text.count('$')} '$'")
    for label, t in rows:
        print(f"  {label:44} {t:7.0f} ns/render {gib(t):6.2f} GiB/s  CPython/this = {py / t:5.1f}x")
    scan, copy = ns(f"scan_{name}"), ns(f"copy_{name}")
    print(f"  floor: memchr over the template {scan:.0f} ns + copying it {copy:.0f} ns = {scan + copy:.0f} ns, so a scan-then-copy engine tops out near {py / (scan + copy):.0f}x")
PY
