"""OpenTelemetry, when it is installed: the current span gets the prompt's name
(`gen_ai.prompt.name`, the agent), its version (`gen_ai.prompt.version`, the revision), and
`loadout.label`, `loadout.channel`, `loadout.source`. A fallback names no version (it has
none). When `opentelemetry` is not installed nothing is imported and nothing recorded."""

from __future__ import annotations

from typing import Any

from .results import Tools

try:
    from opentelemetry import trace as _trace
except ImportError:  # the `otel` extra is not installed
    _trace = None

available = _trace is not None


def record(result: Any) -> None:
    if isinstance(result, Tools):  # names no prompt
        return
    span = _trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {"loadout.source": result.source}
    if result.label is not None:
        attributes["loadout.label"] = result.label
    channel = getattr(result, "channel", None) or getattr(getattr(result, "prompt", None), "channel", None)
    if channel is not None:
        attributes["loadout.channel"] = channel
    if result.revision is not None:
        attributes["gen_ai.prompt.name"] = result.agent
        attributes["gen_ai.prompt.version"] = str(result.revision)
        attributes["loadout.revision"] = result.revision
    span.set_attributes(attributes)
