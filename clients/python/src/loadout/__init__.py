"""loadout's Python client: an agent's prompt and tools in two lines, cached with ETag
revalidation, served stale or from a last-known-good copy on disk when loadout is down,
traced by revision; tool calls and approvals.

    from loadout import Client
    client = Client("http://127.0.0.1:8080", api_key)
    prompt = client.prompt("assistant", "web")
"""

from . import errors
from .aio import AsyncClient
from .client import Client
from .errors import (
    BadRequest, Conflict, Forbidden, InvalidArguments, LoadoutError, NotConnected, NotFound, PayloadTooLarge,
    ProposalDeclined, ProposalExpired, ServerError, TooManyRequests, ToolCallFailed, Unauthorized, Unprocessable,
    Unreachable, WaitTimeout,
)
from .results import Decision, Loadout, Model, Prompt, Proposal, Tools, ToolResult

__all__ = [
    "AsyncClient", "BadRequest", "Client", "Conflict", "Decision", "Forbidden", "InvalidArguments", "Loadout", "LoadoutError", "Model",
    "NotConnected", "NotFound", "PayloadTooLarge", "Prompt", "Proposal", "ProposalDeclined", "ProposalExpired",
    "ServerError", "TooManyRequests", "ToolCallFailed", "ToolResult", "Tools", "Unauthorized", "Unprocessable",
    "Unreachable", "WaitTimeout", "errors",
]
