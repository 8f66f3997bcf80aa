"""One exception hierarchy for everything the client raises.

loadout answers every error as `{"error": {"code", "message", "details"}}`; each becomes a
`LoadoutError` subclass chosen by status, carrying `code`, `message`, `status` and `details`."""

from __future__ import annotations

import json
from typing import Any


class LoadoutError(Exception):
    """Anything loadout answered with an error, or that kept the client from an answer."""

    def __init__(self, message: str, *, code: str = "error", status: int | None = None,
                 details: Any = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.details = details
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.message}"


class BadRequest(LoadoutError):
    """400: the request was malformed (an unknown query parameter, a missing channel...)."""


class Unauthorized(LoadoutError):
    """401: no key, or a revoked or unknown one."""


class Forbidden(LoadoutError):
    """403: the key's role may not do this."""


class NotFound(LoadoutError):
    """404: no such agent, channel, label, tool or proposal (or the key does not reach it)."""


class Conflict(LoadoutError):
    """409: a stale version, a taken name, or a proposal already decided."""


class PayloadTooLarge(LoadoutError):
    """413: the body or a text is over its limit."""


class Unprocessable(LoadoutError):
    """422: lint errors, a check that would fail, or invalid arguments."""


class InvalidArguments(Unprocessable):
    """422 `invalid_arguments`: a tool call's arguments fail the tool's schema
    (`details["errors"]` lists `{path, keyword, message}`)."""


class NotConnected(LoadoutError):
    """424: the tool has nothing to run it (no connector)."""


class TooManyRequests(LoadoutError):
    """429: too many failed authentications from this address; `retry_after` says when to retry."""


class ServerError(LoadoutError):
    """5xx: loadout failed (500) or its database is unavailable (503; `retry_after`)."""


class Unreachable(LoadoutError):
    """loadout could not be reached (connection refused, timeout, TLS...), and there was no
    cached, stored or fallback copy to serve instead."""


class ProposalDeclined(LoadoutError):
    """An approver declined the proposal `wait` was waiting for."""


class ProposalExpired(LoadoutError):
    """The proposal expired undecided."""


class ToolCallFailed(LoadoutError):
    """The call ran and failed; `details` is its result (`{error, retryable}`)."""


class WaitTimeout(LoadoutError, TimeoutError):
    """`wait` gave up before the proposal was decided; the proposal goes on waiting."""


_BY_STATUS: dict[int, type[LoadoutError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    413: PayloadTooLarge, 422: Unprocessable, 424: NotConnected, 429: TooManyRequests,
}


def from_response(status: int, body: bytes, headers: Any = None) -> LoadoutError:
    """The typed exception for an error answer (any body: loadout's one shape, or not)."""
    code, message, details = f"http_{status}", f"HTTP {status}", None
    try:
        error = json.loads(body)["error"]
        code, message, details = error.get("code", code), error.get("message", message), error.get("details")
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    retry_after = None
    if headers is not None and headers.get("retry-after"):
        try:
            retry_after = float(headers["retry-after"])
        except ValueError:
            pass
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else LoadoutError)
    if status == 422 and code == "invalid_arguments":
        cls = InvalidArguments
    return cls(message, code=code, status=status, details=details, retry_after=retry_after)
