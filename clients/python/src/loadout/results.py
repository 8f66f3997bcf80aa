"""What the fetch methods return: the prompt's text or the tools, the revision served, the
provenance, and `source`, where the copy came from:

- `fresh`: fetched now (a 200);
- `cached`: from memory, inside its TTL (no request was made);
- `live`: from memory while the client listens to loadout's change stream and the stream is up,
  so no change has been made to it since (no request was made; no TTL applies);
- `revalidated`: fetched now as a 304, so the cached copy was confirmed current;
- `stale`: from memory past its TTL, because loadout could not be reached or while a
  background refresh runs;
- `disk`: the last-known-good copy from `cache_dir`, because loadout could not be reached;
- `fallback`: the `fallback=` given in code (no revision, no provenance)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from .models import Provenance

Source = Literal["fresh", "cached", "live", "revalidated", "stale", "disk", "fallback"]
SOURCES: tuple[Source, ...] = ("fresh", "cached", "live", "revalidated", "stale", "disk", "fallback")


@dataclass(frozen=True, slots=True)
class Prompt:
    """An agent's rendered prompt. `str(prompt)` is its text."""

    agent: str
    channel: str
    text: str
    revision: int | None
    label: str | None
    provenance: Provenance | None
    source: Source
    etag: str | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Tools:
    """An agent's active tools in one wire format (`openai`, `anthropic` or `mcp`), as plain
    JSON objects ready for that SDK."""

    agent: str
    format: str
    tools: list[dict[str, Any]]
    revision: int | None
    label: str | None
    source: Source
    etag: str | None = field(default=None, repr=False)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)


@dataclass(frozen=True, slots=True)
class Model:
    """The model settings a revision serves for the channel: the model's name, its parameters and
    the response JSON schema, all optional (`None`: the application chooses)."""

    name: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    provider_options: dict[str, Any] = field(default_factory=dict)
    response_schema: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Model | None:
        """The `model` of a loadout answer (`None` when it has none)."""
        if not data:
            return None
        parameters = data.get("parameters") or {}
        return cls(name=data.get("model"), temperature=parameters.get("temperature"),
                   max_tokens=parameters.get("max_tokens"), top_p=parameters.get("top_p"),
                   provider_options=dict(parameters.get("provider_options") or {}),
                   response_schema=data.get("response_schema"))


@dataclass(frozen=True, slots=True)
class Loadout:
    """Prompt and tools of one revision, fetched in one round trip, with the model settings the
    revision serves for the channel (`model`, `None` when it has none)."""

    agent: str
    prompt: Prompt
    tools: Tools
    revision: int | None
    label: str | None
    source: Source
    etag: str | None = field(default=None, repr=False)
    model: Model | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool call that ran and succeeded: `result` is what its executor answered."""

    tool: str
    proposal_id: int
    result: Any


@dataclass(frozen=True, slots=True)
class Decision:
    """How loadout would decide a call, asked with `decide` (a dry run: nothing written, nothing
    run): `auto` runs at once, `approval` waits for an approver, `deny` is refused by a policy.
    `policy` and `reason` name the rule of the agent's policy that decided (`None`: the tier did)."""

    tool: str
    decision: str
    revision: int
    policy: str | None = None
    reason: str | None = None

    @property
    def needs_approval(self) -> bool:
        """Whether the call would not run at once (it waits, or is refused)."""
        return self.decision != "auto"


@dataclass(frozen=True, slots=True)
class Proposal:
    """A tool call waiting for a person (`proposed_for_approval`), approved and not yet run
    (`approved`), or running (`executing`). `wait(proposal)` waits for its end."""

    agent: str
    tool: str
    proposal_id: int
    status: str
    description: str
    preview: Any
    # The call as sent, idempotency key included: `wait` sends it again to read the state
    # (loadout answers a repeated call with the first call's proposal as it is now).
    request: dict[str, Any] = field(repr=False)
