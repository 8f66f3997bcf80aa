// Error answers become one typed hierarchy, whatever their body (no server needed), as the
// Python client's loadout.errors.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as errors from '../dist/errors.js';

const body = (code, message = 'm', details = null) => JSON.stringify({ error: { code, message, details } });

const cases = [
  [400, 'bad_request', errors.BadRequest],
  [401, 'unauthorized', errors.Unauthorized],
  [403, 'forbidden', errors.Forbidden],
  [404, 'label_not_found', errors.NotFound],
  [409, 'conflict', errors.Conflict],
  [413, 'payload_too_large', errors.PayloadTooLarge],
  [422, 'lint_errors', errors.Unprocessable],
  [422, 'invalid_arguments', errors.InvalidArguments],
  [424, 'not_connected', errors.NotConnected],
  [429, 'too_many_failures', errors.TooManyRequests],
  [500, 'internal', errors.ServerError],
  [503, 'unavailable', errors.ServerError],
];

for (const [status, code, Class] of cases) {
  test(`${status} ${code} is a ${Class.name} carrying loadout's code, message and details`, () => {
    const e = errors.fromResponse(status, body(code, 'why', { k: 1 }), null);
    assert.equal(e.constructor, Class);
    assert.ok(e instanceof errors.LoadoutError && e instanceof Error);
    assert.deepEqual([e.status, e.code, e.message, e.details, e.name], [status, code, 'why', { k: 1 }, Class.name]);
  });
}

test('retry-after is read, and a body of another shape still gives the status', () => {
  const e = errors.fromResponse(503, '<html>bad gateway</html>', '2');
  assert.deepEqual([e.constructor, e.code, e.retryAfter, e.status], [errors.ServerError, 'http_503', 2, 503]);
  assert.equal(String(e), '503 http_503: HTTP 503');
  assert.equal(errors.fromResponse(418, '', null).code, 'http_418');
  assert.equal(errors.fromResponse(418, 'null', null).constructor, errors.LoadoutError);
  assert.equal(errors.fromResponse(500, JSON.stringify({ error: { code: 7 } }), null).code, 'http_500');
});

test('an invalid_arguments answer is also Unprocessable', () => {
  assert.ok(errors.fromResponse(422, body('invalid_arguments'), null) instanceof errors.Unprocessable);
});
