"""openapi-typescript (7.13.0) generates types from loadout's /openapi.json with no warning, and
`tsc --noEmit` (typescript 5.9.3) accepts use.ts, a typed use of them. Stdlib only."""

import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from peerlib import WORK, Checks, rest  # noqa: E402

c = Checks("openapi-typescript 7.13.0 + typescript 5.9.3")
MODULES = os.path.join(os.path.dirname(HERE), ".peers", "node_modules")
NODE = os.path.join(MODULES, ".bin", "node")


def node(*args):
    out = subprocess.run([NODE, *args], capture_output=True, text=True, cwd=WORK, timeout=120)
    return out.returncode, (out.stdout + out.stderr).strip()


def main():
    with open(os.path.join(WORK, "openapi.json"), "w") as f:
        f.write(rest("GET", "/openapi.json", raw=True))
    code, output = node(os.path.join(MODULES, "openapi-typescript", "bin", "cli.js"), "openapi.json", "-o", "schema.d.ts")
    # A clean run prints its banner and one "openapi.json → schema.d.ts" line.
    noise = [line for line in output.splitlines() if line.strip() and "openapi-typescript" not in line and "→" not in line]
    c.check("generates with no warning", code == 0 and not noise, f"exit {code}, output:\n{output}")
    if code != 0:
        return
    for name in ("use.ts", "tsconfig.json"):
        shutil.copy(os.path.join(HERE, name), WORK)
    code, output = node(os.path.join(MODULES, "typescript", "bin", "tsc"), "-p", "tsconfig.json")
    c.check("tsc --noEmit accepts use.ts", code == 0, f"exit {code}:\n{output}")


c.run("typescript", main)
c.done()
