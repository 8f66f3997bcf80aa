#!/usr/bin/env python3
"""Answers template questions with CPython's own string.Template.

Used by tests/python_parity.rs. Reads one JSON object a line on stdin:

    {"id": 7, "t": "<template>", "v": [["name", "value"], ...]}

and writes one JSON object a line on stdout (ASCII only, so that no newline
translation or Unicode line separator can disturb the framing):

    {"id": 7,
     "safe": "<safe_substitute output>",
     "strict": {"kind": "ok", "text": "..."}
             | {"kind": "key", "name": "...", "line": L, "column": C}
             | {"kind": "invalid", "line": L, "column": C,
                "py_line": L, "py_column": C},
     "ids": [...], "valid": true,
     "ph": [["named", "name", start, end], ...]}

Offsets in "ph" are code point indices. "line"/"column" is the true 1-based
position of the offending "$", computed here independently of Python's own
ValueError message; "py_line"/"py_column" is what that message said.
On any surprise the answer is {"id": 7, "oracle_error": "..."}.
"""

import json
import re
import string
import sys

if sys.version_info < (3, 11):
    sys.exit(
        "template_oracle.py needs CPython >= 3.11 (Template.get_identifiers); "
        "found " + sys.version
    )

PATTERN = string.Template.pattern
VALUE_ERROR = re.compile(r"Invalid placeholder in string: line (\d+), col (\d+)")


def true_position(text, index):
    """1-based (line, column in code points) of text[index]."""
    lines = text[:index].splitlines(keepends=True)
    if not lines:
        return 1, 1
    last = lines[-1]
    if last.splitlines()[0] != last:
        # The prefix ends with a line break: index starts a new line.
        return len(lines) + 1, 1
    return len(lines), len(last) + 1


def kind_of(mo):
    if mo.group("escaped") is not None:
        return "escaped", ""
    if mo.group("named") is not None:
        return "named", mo.group("named")
    if mo.group("braced") is not None:
        return "braced", mo.group("braced")
    if mo.group("invalid") is not None:
        return "invalid", ""
    raise AssertionError("match with no group: %r" % (mo,))


class OracleError(Exception):
    pass


def answer(request):
    text = request["t"]
    mapping = dict((k, v) for k, v in request["v"])
    template = string.Template(text)

    matches = [(mo, *kind_of(mo)) for mo in PATTERN.finditer(text)]
    problem = next(
        (
            (mo, kind, name)
            for mo, kind, name in matches
            if kind == "invalid" or (kind in ("named", "braced") and name not in mapping)
        ),
        None,
    )

    try:
        strict = {"kind": "ok", "text": template.substitute(mapping)}
        if problem is not None:
            raise OracleError("substitute succeeded despite %r" % (problem[0],))
    except KeyError as error:
        if problem is None or problem[1] == "invalid" or problem[2] != error.args[0]:
            raise OracleError("KeyError %r but first problem %r" % (error, problem))
        line, column = true_position(text, problem[0].start())
        strict = {"kind": "key", "name": error.args[0], "line": line, "column": column}
    except ValueError as error:
        found = VALUE_ERROR.fullmatch(str(error))
        if found is None or problem is None or problem[1] != "invalid":
            raise OracleError("ValueError %r but first problem %r" % (error, problem))
        line, column = true_position(text, problem[0].start())
        strict = {
            "kind": "invalid",
            "line": line,
            "column": column,
            "py_line": int(found.group(1)),
            "py_column": int(found.group(2)),
        }

    return {
        "id": request["id"],
        "safe": template.safe_substitute(mapping),
        "strict": strict,
        "ids": template.get_identifiers(),
        "valid": template.is_valid(),
        "ph": [[kind, name, mo.start(), mo.end()] for mo, kind, name in matches],
    }


def main():
    sys.stdin.reconfigure(encoding="ascii")
    sys.stdout.reconfigure(encoding="ascii")
    # A handshake line so the test can report which Python it is talking to.
    print(json.dumps({"python": sys.version.split()[0]}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            response = answer(request)
        except Exception as error:  # reported to the test, which fails on it
            response = {"id": request.get("id"), "oracle_error": repr(error)}
        sys.stdout.write(json.dumps(response, ensure_ascii=True) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
