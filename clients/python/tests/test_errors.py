"""Error answers become one typed hierarchy, whatever their body (no server needed)."""

import json

import pytest

from loadout import errors


def body(code, message="m", details=None):
    return json.dumps({"error": {"code": code, "message": message, "details": details}}).encode()


@pytest.mark.parametrize("status, code, cls", [
    (400, "bad_request", errors.BadRequest), (401, "unauthorized", errors.Unauthorized),
    (403, "forbidden", errors.Forbidden), (404, "label_not_found", errors.NotFound),
    (409, "conflict", errors.Conflict), (413, "payload_too_large", errors.PayloadTooLarge),
    (422, "lint_errors", errors.Unprocessable), (422, "invalid_arguments", errors.InvalidArguments),
    (424, "not_connected", errors.NotConnected), (429, "too_many_failures", errors.TooManyRequests),
    (500, "internal", errors.ServerError), (503, "unavailable", errors.ServerError),
])
def test_each_status_has_its_class_carrying_loadouts_code(status, code, cls):
    e = errors.from_response(status, body(code, "why", {"k": 1}), {})
    assert type(e) is cls and isinstance(e, errors.LoadoutError)
    assert (e.status, e.code, e.message, e.details) == (status, code, "why", {"k": 1})


def test_retry_after_is_read_and_a_body_of_another_shape_still_gives_the_status():
    e = errors.from_response(503, b"<html>bad gateway</html>", {"retry-after": "2"})
    assert (type(e), e.code, e.retry_after, e.status) == (errors.ServerError, "http_503", 2.0, 503)
    assert str(e) == "503 http_503: HTTP 503"
    assert errors.from_response(418, b"", {}).code == "http_418"


def test_wait_timeout_is_also_a_timeout_error():
    assert issubclass(errors.WaitTimeout, TimeoutError) and issubclass(errors.WaitTimeout, errors.LoadoutError)
