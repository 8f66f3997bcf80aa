// The cache against a real loadout: TTL, 304s, stale-while-revalidate, the disk copy after a
// restart, the code fallback, timeouts, one request per key, and keys per user.

import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Client, NotFound, Unreachable } from '../dist/index.js';
import { AGENT, Server, recorder, sleep, waitFor } from './harness.mjs';

let server;
before(async () => {
  server = await Server.make();
});
after(async () => {
  await server?.close();
});

const client = (seen, options = {}) =>
  new Client({ baseUrl: server.url, apiKey: server.agentKey, fetch: seen.fetch, ...options });
const tempDir = () => mkdtempSync(join(tmpdir(), 'tsclient-cache-'));

test('a second fetch inside the TTL makes no request', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen, { ttl: 60 });
  const first = await c.prompt(AGENT, 'web');
  const second = await c.prompt(AGENT, 'web');
  assert.equal(first.source, 'fresh');
  assert.equal(second.source, 'cached');
  assert.equal(second.text, first.text);
  assert.equal(String(second), first.text);
  assert.equal(seen.count(), 1);
  assert.ok(first.revision >= 1 && first.label === 'production' && first.provenance.channel === 'web');
});

test('after the TTL a 304 revalidates the copy', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen, { ttl: 0.2, staleWhileRevalidate: false });
  const first = await c.prompt(AGENT, 'web');
  await sleep(0.3);
  const again = await c.prompt(AGENT, 'web');
  assert.equal(again.source, 'revalidated');
  assert.equal(again.text, first.text);
  assert.deepEqual(seen.statuses, [200, 304]);
  assert.equal(seen.requests[1].headers['if-none-match'], first.etag);
});

test('past the TTL the stale copy is served while one background refresh revalidates it', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen, { ttl: 0.2 });
  await c.prompt(AGENT, 'web');
  await sleep(0.3);
  const stale = await Promise.all(Array.from({ length: 50 }, () => c.prompt(AGENT, 'web')));
  assert.deepEqual(new Set(stale.map((p) => p.source)), new Set(['stale']));
  await waitFor(() => seen.statuses.length === 2, 'the background refresh');
  await sleep(0.1);
  assert.deepEqual(seen.statuses, [200, 304], 'one refresh for the 50 stale calls');
  assert.equal((await c.prompt(AGENT, 'web')).source, 'cached');
});

test('an admin edit is seen after the TTL', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen, { ttl: 0.3, staleWhileRevalidate: false });
  await server.setMarker('before-edit');
  assert.match((await c.prompt(AGENT, 'web')).text, /Marker: before-edit\./);
  await server.setMarker('after-edit');
  assert.match((await c.prompt(AGENT, 'web')).text, /Marker: before-edit\./, 'inside the TTL: the copy');
  await sleep(0.4);
  const edited = await c.prompt(AGENT, 'web');
  assert.equal(edited.source, 'fresh');
  assert.match(edited.text, /Marker: after-edit\./);
  await server.setMarker('start');
});

test('with the server stopped: stale, then after a restart the disk copy, then the fallback', async () => {
  await server.live();
  const dir = tempDir();
  const seen = recorder();
  const c = client(seen, { ttl: 0.1, cacheDir: dir, timeout: 2 });
  const revalidating = client(recorder(), { ttl: 0.1, staleWhileRevalidate: false, timeout: 2 });
  const fresh = await c.prompt(AGENT, 'web');
  const tools = await c.tools(AGENT);
  const both = await c.loadout(AGENT, 'web', { userId: 'disk-user' });
  await revalidating.prompt(AGENT, 'web');
  await server.stop();
  await sleep(0.2);
  for (const held of [c, revalidating]) {
    const stale = await held.prompt(AGENT, 'web');
    assert.equal(stale.source, 'stale');
    assert.equal(stale.text, fresh.text);
    assert.equal(stale.revision, fresh.revision);
  }

  // A new process: nothing in memory, the disk copy from before.
  const restarted = client(recorder(), { cacheDir: dir, timeout: 2 });
  const disk = await restarted.prompt(AGENT, 'web');
  assert.equal(disk.source, 'disk');
  assert.equal(disk.text, fresh.text);
  assert.equal(disk.revision, fresh.revision);
  assert.deepEqual((await restarted.tools(AGENT)).tools, tools.tools);
  const diskBoth = await restarted.loadout(AGENT, 'web', { userId: 'disk-user' });
  assert.equal(diskBoth.source, 'disk');
  assert.equal(diskBoth.prompt.source, 'disk');
  assert.equal(diskBoth.prompt.text, both.prompt.text);

  const empty = client(recorder(), { cacheDir: tempDir(), timeout: 2 });
  const fallback = await empty.prompt(AGENT, 'web', { fallback: 'You are a helpful assistant.' });
  assert.equal(fallback.source, 'fallback');
  assert.equal(fallback.text, 'You are a helpful assistant.');
  assert.equal(fallback.revision, null);
  assert.equal(fallback.provenance, null);
  const noTools = await empty.tools(AGENT, { fallback: [] });
  assert.deepEqual([noTools.source, noTools.tools], ['fallback', []]);
  await assert.rejects(empty.prompt(AGENT, 'telegram'), (e) => e instanceof Unreachable && e.code === 'unreachable');
  await server.live();
});

test('after a failed refresh no other is tried for the back-off, max(1, min(ttl, 30)) s', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen, { ttl: 0.1, timeout: 2 });
  await c.prompt(AGENT, 'web');
  await server.stop();
  await sleep(0.2);
  const end = performance.now() + 600; // inside the 1 s back-off
  while (performance.now() < end) {
    assert.equal((await c.prompt(AGENT, 'web')).source, 'stale');
    await sleep(0.02);
  }
  assert.equal(seen.count(), 2, 'the first fetch and one failed refresh');
  await sleep(0.6); // past the back-off: one more try
  await c.prompt(AGENT, 'web');
  await waitFor(() => seen.count() === 3, 'the refresh after the back-off');
  await server.live();
});

test('every fresh answer rewrites the disk copy, which never holds the API key', async () => {
  await server.live();
  const dir = join(tempDir(), 'made-by-the-client');
  const c = client(recorder(), { ttl: 0, staleWhileRevalidate: false, cacheDir: dir });
  await c.prompt(AGENT, 'web', { userId: 'ada' });
  assert.equal(statSync(dir).mode & 0o777, 0o700, 'the copies are readable by this user only');
  await server.setMarker('rewritten');
  await c.prompt(AGENT, 'web', { userId: 'ada' });
  const files = readdirSync(dir);
  assert.equal(files.length, 1, `one file per key and no temporary file: ${files}`);
  const text = readFileSync(join(dir, files[0]), 'utf8');
  assert.ok(!text.includes(server.agentKey), 'the key is not on disk');
  assert.match(JSON.parse(text).body, /Marker: rewritten\./);
  await server.setMarker('start');
});

test("one user's prompt never serves another, and the API key is never on disk", async () => {
  await server.live();
  await server.rest('PUT', `/v1/agents/${AGENT}/users/ada/instructions`, server.operator, { instructions: 'Ada likes tea.' });
  await server.rest('PUT', `/v1/agents/${AGENT}/users/bob/instructions`, server.operator, { instructions: 'Bob likes coffee.' });
  const dir = tempDir();
  const seen = recorder();
  const c = client(seen, { cacheDir: dir });
  const ada = await c.prompt(AGENT, 'web', { userId: 'ada' });
  const bob = await c.prompt(AGENT, 'web', { userId: 'bob' });
  assert.match(ada.text, /Ada likes tea/);
  assert.doesNotMatch(ada.text, /Bob/);
  assert.match(bob.text, /Bob likes coffee/);
  assert.doesNotMatch(bob.text, /Ada/);
  assert.equal(bob.source, 'fresh');
  assert.equal((await c.prompt(AGENT, 'web', { userId: 'bob' })).text, bob.text);
  assert.equal(seen.count(), 2);
  // Another key over the same directory: its own copies, never this key's.
  const otherKey = server.key('agent', AGENT);
  const other = new Client({ baseUrl: server.url, apiKey: otherKey, cacheDir: dir });
  assert.equal((await other.prompt(AGENT, 'web', { userId: 'ada' })).source, 'fresh');
  const files = readdirSync(dir);
  assert.equal(files.length, 3, `one file per key and user: ${files}`);
  for (const name of files) {
    const stored = readFileSync(join(dir, name), 'utf8');
    assert.ok(!stored.includes(server.agentKey) && !stored.includes(otherKey), `${name} holds an API key`);
    assert.ok(!stored.includes('Bearer'), `${name} holds an authorization header`);
  }
});

test('concurrent first calls for one key send one request and all get its answer', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen);
  const calls = await Promise.all(Array.from({ length: 10 }, () => c.prompt(AGENT, 'web', { userId: 'many' })));
  assert.equal(seen.count(), 1);
  assert.deepEqual(new Set(calls.map((p) => p.source)), new Set(['fresh']));
  assert.equal((await c.prompt(AGENT, 'web', { userId: 'many' })).source, 'cached');
});

test('a hanging server does not hold a call past its timeout, and only the first call per key waits', async () => {
  await server.live();
  const seen = recorder();
  const c = client(seen, { timeout: 0.5 });
  server.pause();
  try {
    const t0 = performance.now();
    const calls = await Promise.allSettled([1, 2, 3, 4].map(() => c.prompt(AGENT, 'web', { fallback: 'offline' })));
    const took = (performance.now() - t0) / 1000;
    assert.ok(took < 1.5, `answered ${took.toFixed(2)} s after a 0.5 s timeout`);
    assert.deepEqual(calls.map((r) => r.status === 'fulfilled' && r.value.source), ['fallback', 'fallback', 'fallback', 'fallback']);
    assert.equal(seen.count(), 1, 'one request for one key');
  } finally {
    server.resume();
  }
  // With a copy held, a call never waits on the network (which would take the 1 s timeout):
  // the bound only tells the two apart, with room for a loaded machine.
  const held = client(recorder(), { timeout: 1, ttl: 0.1 });
  await held.prompt(AGENT, 'web');
  server.pause();
  try {
    await sleep(0.2);
    const t0 = performance.now();
    assert.equal((await held.prompt(AGENT, 'web')).source, 'stale');
    const took = performance.now() - t0;
    assert.ok(took < 300, `a held copy took ${took.toFixed(0)} ms`);
  } finally {
    server.resume();
  }
});

test('a 404 evicts the copy from memory and disk and is thrown typed', async () => {
  await server.live();
  const name = `gone${Date.now() % 1e9}`;
  await server.rest('POST', '/v1/agents', server.operator, { name, identity: { name: 'Gone' }, soul: 'Brief.' });
  const dir = tempDir();
  const c = new Client({ baseUrl: server.url, apiKey: server.operator, ttl: 0.3, staleWhileRevalidate: false, cacheDir: dir });
  assert.equal((await c.prompt(name, 'web')).source, 'fresh');
  assert.equal(readdirSync(dir).length, 1);
  await server.rest('DELETE', `/v1/agents/${name}`, server.operator);
  await sleep(0.4);
  const gone = await c.prompt(name, 'web').then(() => null, (e) => e);
  assert.ok(gone instanceof NotFound, String(gone));
  assert.equal(gone.status, 404);
  assert.equal(gone.code, 'not_found');
  assert.deepEqual(readdirSync(dir), [], 'the copy is gone from disk');
  await assert.rejects(c.prompt(name, 'web', { fallback: 'unused: a 404 is not an outage' }), NotFound);
});

test('loadout answers prompt and tools of one revision', async () => {
  await server.live();
  const c = client(recorder());
  const both = await c.loadout(AGENT, 'web');
  assert.equal(both.source, 'fresh');
  assert.equal(both.prompt.revision, both.tools.revision);
  assert.ok(both.tools.tools.length > 0);
  assert.equal(both.tools.format, 'openai');
  assert.equal((await c.loadout(AGENT, 'web')).prompt.source, 'cached');
});
