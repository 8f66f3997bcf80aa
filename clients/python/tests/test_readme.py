"""Every ```python example in clients/python/README.md is a whole script, as pasted: it compiles
as a module (a top-level `await` does not), everything it imports is installed, and each one
that needs only loadout runs to its end against the suite's `loadout serve`."""

import ast
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)

# The examples that are compiled (and their imports checked) but never run, matched on their
# text, with why: the Agents SDK example runs a model on OpenAI (the network, OPENAI_API_KEY).
COMPILE_ONLY = {"from agents import": "runs a model on OpenAI: needs the network and OPENAI_API_KEY"}

# What a run rewrites: the examples' address (to the suite's server) and their cache directory.
URL, CACHE_DIR = "http://127.0.0.1:8080", "/var/cache/my-agent/loadout"


def examples():
    text = README.read_text(encoding="utf-8")
    return [(f"README.md:{text.count(chr(10), 0, m.start()) + 2}", m.group(1)) for m in FENCE.finditer(text)]


EXAMPLES = examples()
IDS = [where for where, _ in EXAMPLES]


def why_not_run(source):
    return next((why for marker, why in COMPILE_ONLY.items() if marker in source), None)


def imported(source):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_the_readme_has_its_python_examples_and_one_is_compile_only():
    assert len(EXAMPLES) >= 3, f"only {len(EXAMPLES)} ```python blocks found in {README}"
    assert any(why_not_run(source) for _, source in EXAMPLES)
    assert any(not why_not_run(source) for _, source in EXAMPLES)


@pytest.mark.parametrize("where, source", EXAMPLES, ids=IDS)
def test_each_example_compiles_as_a_script_and_imports_only_what_is_installed(where, source):
    try:
        compile(source, where, "exec")  # as a module: `await` outside a function is a SyntaxError
    except SyntaxError as e:
        pytest.fail(f"{where}: not a runnable script: {e}")
    missing = [name for name in imported(source) if importlib.util.find_spec(name) is None]
    assert not missing, f"{where} imports what is not installed: {missing}"


def test_the_examples_type_check_with_mypy_strict(tmp_path):
    """The package ships py.typed, so a user's type checker reads the examples' calls as typed:
    they pass `mypy --strict` (one run over all of them, about 15 s, most of it the SDKs' code)."""
    mypy = pytest.importorskip("mypy.api", reason="mypy is pinned in tests/peers/requirements-pyclient.txt")
    paths = []
    for i, (_, source) in enumerate(EXAMPLES):
        paths.append(tmp_path / f"example_{i}.py")
        paths[-1].write_text(source, encoding="utf-8")
    out, err, status = mypy.run(["--strict", "--cache-dir", str(tmp_path / "mypy-cache"), *map(str, paths)])
    names = {f"example_{i}.py": where for i, (where, _) in enumerate(EXAMPLES)}
    assert status == 0, "".join(names.get(line.split(":")[0].rsplit("/", 1)[-1], "") + " " + line + "\n"
                                for line in (out + err).splitlines())


def decline_what_it_proposes(live, conversations, stop):
    """An approver who declines every proposal the example makes in its conversations, so a
    `wait` in it ends (as ProposalDeclined, which the example catches)."""
    def ids(conversation, state=None):
        found, after = [], None
        while True:
            page = live.rest("GET", f"/v1/conversations/{conversation}/proposals?limit=200"
                             + (f"&after={after}" if after else ""), live.approver)
            found += [p["id"] for p in page["proposals"] if state is None or p["state"] == state]
            after = page["next"]
            if after is None:
                return found

    before = {c: set(ids(c)) for c in conversations}

    def run():
        while not stop.is_set():
            for c in conversations:
                for pid in set(ids(c, "proposed")) - before[c]:
                    live.rest("POST", f"/v1/proposals/{pid}/decline", live.approver)
            stop.wait(0.1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


RUNNABLE = [(where, source) for where, source in EXAMPLES if not why_not_run(source)]


@pytest.mark.parametrize("where, source", RUNNABLE, ids=[where for where, _ in RUNNABLE])
def test_each_example_that_needs_only_loadout_runs_against_serve(live, tmp_path, where, source):
    assert URL in source, f"{where}: the examples name loadout as {URL}"
    script = tmp_path / "example.py"
    script.write_text(source.replace(URL, live.url).replace(CACHE_DIR, str(tmp_path / "cache")), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "LOADOUT_URL"}
    env["LOADOUT_API_KEY"] = live.agent_key  # an agent key scoped to the agent, as the README says
    stop = threading.Event()
    approver = decline_what_it_proposes(live, re.findall(r'conversation_id="([^"]+)"', source), stop)
    t0 = time.monotonic()
    try:
        run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=60)
    finally:
        stop.set()
        approver.join(10)
    assert run.returncode == 0, f"{where} failed after {time.monotonic() - t0:.1f} s:\n{run.stdout}{run.stderr}"
    assert run.stdout.strip(), f"{where} printed nothing"
    assert not run.stderr.strip(), f"{where} wrote to stderr:\n{run.stderr}"
