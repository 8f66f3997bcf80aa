"""OpenTelemetry, when it is installed: the current span gets the prompt's name
(`gen_ai.prompt.name`, the agent), its version (`gen_ai.prompt.version`, the revision as a
string), `loadout.label` and `loadout.source`. A fallback names no prompt and no version (it
has neither), only its source. When `opentelemetry` is not installed nothing is imported and
nothing recorded.

The SDK validates and locks per attribute (about 3 µs each), so the attributes are the few
that identify what was served, and a second fetch of the same copy inside the same span sets
nothing again (BENCHMARKS.md, the Python client)."""

from __future__ import annotations

from typing import Any

from .results import Tools

try:
    from opentelemetry import trace as _trace
except ImportError:  # the `otel` extra is not installed: `record` is never called
    available = False
else:
    available = True

# The span and the result recorded last: the same pair again has nothing new to say.
_last: tuple[Any, Any] = (None, None)


def record(result: Any) -> None:
    global _last
    if isinstance(result, Tools):  # names no prompt
        return
    span = _trace.get_current_span()
    if not span.is_recording():
        return
    last_span, last_result = _last
    if last_span is span and last_result is result:
        return
    if result.revision is None:
        attributes: dict[str, Any] = {"loadout.source": result.source}
    else:
        attributes = {"gen_ai.prompt.name": result.agent, "gen_ai.prompt.version": str(result.revision),
                      "loadout.label": result.label, "loadout.source": result.source}
    span.set_attributes(attributes)
    _last = (span, result)
