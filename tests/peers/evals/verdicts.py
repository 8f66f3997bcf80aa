#!/usr/bin/env python3
"""promptfoo's verdicts, one JSON line per test, for comparing with loadout's on the same cases.

    python3 tests/peers/evals/verdicts.py OUT.json      # OUT.json: promptfoo eval ... -o OUT.json

promptfoo writes its results in the order they finished, not the tests' order; they are sorted here
by (testIdx, promptIdx). Each line is

    {"description": ..., "output": ..., "assertions": [{"type": ..., "pass": ...}, ...]}

in the order of the test's `assert` list. "output" is the string promptfoo's string assertions
(equals, contains, regex, is-json, ...) saw: the reply's content as it came, or, when the model
answered with tool calls (the content is then dropped), those calls as JavaScript's JSON.stringify
writes them (no spaces). A test whose provider call failed (promptfoo's failureReason 2) has
"error" too and no assertions. Stdlib only."""

import json
import sys


def as_promptfoo_string(output):
    # promptfoo's coerceString: strings as they are, anything else JSON.stringify'd.
    if isinstance(output, str):
        return output
    return json.dumps(output, separators=(",", ":"), ensure_ascii=False)


def verdicts(doc):
    results = doc["results"]["results"]
    for r in sorted(results, key=lambda r: (r.get("testIdx", 0), r.get("promptIdx", 0))):
        test = r.get("testCase") or {}
        response = r.get("response") or {}
        line = {
            "description": test.get("description") or r.get("description"),
            "output": as_promptfoo_string(response.get("output", "")),
            "assertions": [
                {"type": c.get("assertion", {}).get("type"), "pass": bool(c.get("pass"))}
                for c in ((r.get("gradingResult") or {}).get("componentResults") or [])
            ],
        }
        if r.get("failureReason") == 2:
            line["error"] = r.get("error")
        yield line


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2].strip())
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    for line in verdicts(doc):
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main()
