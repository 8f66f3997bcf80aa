// Listening to the change stream (`listen: true`): an admin edit is seen at once whatever
// the TTL; a cut stream resumes from Last-Event-ID (through a TCP proxy that can cut it);
// a stopped server leaves the client on its stale copies; a client that does not listen
// opens no stream; one stream per address and key; a refused key stops listening. Then,
// over a scripted stream (a `fetch` of the test's own): which copies each event drops,
// the parser (split chunks, CRLF, a character split in two, a frame over 64 KiB), the
// back-off and the server's `retry:`, and a 429's Retry-After.

import assert from 'node:assert/strict';
import { connect, createServer } from 'node:net';
import { after, before, test } from 'node:test';

import { Client } from '../dist/index.js';
import { AGENT, Server, recorder, sleep, waitFor } from './harness.mjs';

let server;
before(async () => {
  server = await Server.make();
});
after(async () => {
  await server?.close();
});

const isStream = (request) => new URL(request.url).pathname === '/v1/changes';
const listening = (t, options = {}) => {
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey, ttl: 3600, listen: true, ...options });
  t.after(() => c.close());
  return c;
};
const marker = (text) => /Marker: ([^.]*)\./.exec(text)?.[1];

test('an admin edit is seen by a listening client within seconds, whatever its TTL', async (t) => {
  await server.live();
  await server.setMarker('listen-before');
  const seen = recorder();
  const c = listening(t, { fetch: seen.fetch });
  assert.equal(c.streamState, 'connecting');
  await waitFor(() => c.streamState === 'live', 'the stream to be live');
  const first = await c.prompt(AGENT, 'web');
  assert.equal(first.source, 'fresh');
  assert.equal(marker(first.text), 'listen-before');
  const hit = await c.prompt(AGENT, 'web');
  assert.equal(hit.source, 'live', 'a hit while the stream is up');
  assert.equal(hit.text, first.text);
  const stream = seen.requests.find(isStream);
  assert.equal(stream.headers.accept, 'text/event-stream');
  assert.equal(stream.headers.authorization, `Bearer ${server.agentKey}`);
  assert.equal(stream.headers['last-event-id'], undefined, 'a first connect resumes nothing');
  assert.match(seen.requests.at(-1).headers['loadout-generation'], /^"g\d+"$/, "the ready frame's etag");

  const t0 = performance.now();
  await server.setMarker('listen-after');
  let edited;
  await waitFor(async () => {
    edited = await c.prompt(AGENT, 'web');
    return marker(edited.text) === 'listen-after';
  }, 'the edit', 5);
  const took = (performance.now() - t0) / 1000;
  assert.equal(edited.source, 'fresh');
  assert.ok(took < 5, `seen ${took.toFixed(2)} s after the edit`);
  const fetches = seen.requests.filter((r) => !isStream(r));
  // One fetch before the edit and one after it (two if a second event of the edit came
  // between them): no polling.
  assert.ok(fetches.length === 2 || fetches.length === 3, `${fetches.length} fetches`);
  const generation = fetches[1].headers['loadout-generation'];
  assert.match(generation, /^"g\d+"$/);
  assert.ok(Number(generation.slice(2, -1)) > Number(fetches[0].headers['loadout-generation'].slice(2, -1)), 'the edit\'s generation');
  assert.equal((await c.prompt(AGENT, 'web')).source, 'live');
  await server.setMarker('start');
});

test("a user's instructions drop that user's prompt and loadout, not the tools nor another user's", async (t) => {
  await server.live();
  const c = listening(t);
  await waitFor(() => c.streamState === 'live', 'the stream to be live');
  const calls = {
    adaPrompt: () => c.prompt(AGENT, 'web', { userId: 'listen-ada' }),
    adaLoadout: () => c.loadout(AGENT, 'web', { userId: 'listen-ada' }),
    adaTools: () => c.tools(AGENT, { userId: 'listen-ada' }),
    bobPrompt: () => c.prompt(AGENT, 'web', { userId: 'listen-bob' }),
    plain: () => c.prompt(AGENT, 'web'),
  };
  for (const call of Object.values(calls)) await call();
  await server.rest('PUT', `/v1/agents/${AGENT}/users/listen-ada/instructions`, server.operator, { instructions: 'Ada reads Latin.' });
  await waitFor(async () => (await calls.adaPrompt()).text.includes('Ada reads Latin'), "Ada's instructions", 2);
  const sources = {};
  for (const [name, call] of Object.entries(calls)) sources[name] = (await call()).source;
  assert.deepEqual(sources, { adaPrompt: 'live', adaLoadout: 'fresh', adaTools: 'live', bobPrompt: 'live', plain: 'live' });
  assert.match((await calls.adaLoadout()).prompt.text, /Ada reads Latin/);
});

/** A TCP proxy between a client and the server that records request heads and can cut or refuse the stream. */
class Proxy {
  static async start(port) {
    const proxy = new Proxy(port);
    await new Promise((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    proxy.url = `http://127.0.0.1:${proxy.server.address().port}`;
    return proxy;
  }

  constructor(port) {
    this.connections = new Set();
    this.heads = []; // every /v1/changes request head, as sent
    this.refuse = false;
    this.server = createServer((client) => {
      const upstream = connect(port, '127.0.0.1');
      const conn = { client, upstream, stream: false, down: '' };
      this.connections.add(conn);
      client.on('data', (chunk) => {
        const text = chunk.toString('latin1');
        if (/^[A-Z]+ \/v1\/changes[ ?]/.test(text)) {
          this.heads.push(text.split('\r\n\r\n')[0]);
          if (this.refuse) {
            client.destroy();
            upstream.destroy();
            return;
          }
          conn.stream = true;
        } else if (/^[A-Z]+ \//.test(text)) {
          conn.stream = false; // a keep-alive connection's next request
        }
        upstream.write(chunk);
      });
      upstream.on('data', (chunk) => {
        if (conn.stream) conn.down += chunk.toString('utf8');
        client.write(chunk);
      });
      const gone = () => {
        client.destroy();
        upstream.destroy();
        this.connections.delete(conn);
      };
      client.on('close', gone);
      upstream.on('close', gone);
      client.on('error', () => {});
      upstream.on('error', () => {});
    });
  }

  streams() {
    return [...this.connections].filter((c) => c.stream);
  }

  /** The `id` of the last whole frame the server sent on the open stream. */
  lastId() {
    const [conn] = this.streams();
    return [...conn.down.matchAll(/^id: (\S+)\ndata: [^\n]*\n\n/gm)].at(-1)?.[1];
  }

  cut() {
    for (const conn of this.streams()) {
      conn.client.destroy();
      conn.upstream.destroy();
    }
  }

  async close() {
    for (const conn of this.connections) conn.client.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

test('a stream cut mid-way resumes from Last-Event-ID and gets what was sent while it was cut', async (t) => {
  await server.live();
  await server.setMarker('cut-1');
  const proxy = await Proxy.start(server.port);
  t.after(() => proxy.close());
  const c = new Client({ baseUrl: proxy.url, apiKey: server.agentKey, ttl: 3600, listen: true });
  t.after(() => c.close());
  await waitFor(() => c.streamState === 'live', 'the stream to be live');
  assert.equal(marker((await c.prompt(AGENT, 'web')).text), 'cut-1');
  // An edit the stream carries, so that the id to resume from is an event's, not only ready's.
  await server.setMarker('cut-2');
  await waitFor(async () => marker((await c.prompt(AGENT, 'web')).text) === 'cut-2', 'the first edit', 2);
  assert.equal((await c.prompt(AGENT, 'web')).source, 'live');
  const before = proxy.lastId();
  assert.match(before, /^\d+$/);
  assert.equal(proxy.heads.length, 1);
  assert.doesNotMatch(proxy.heads[0], /last-event-id/i);

  proxy.refuse = true;
  proxy.cut();
  await waitFor(() => c.streamState === 'broken', 'the client to see the stream broken');
  await server.setMarker('cut-3');
  const held = await c.prompt(AGENT, 'web');
  assert.deepEqual([held.source, marker(held.text)], ['cached', 'cut-2'], 'broken: the copy, by its TTL');
  proxy.refuse = false;
  await waitFor(() => c.streamState === 'live', 'the stream to be live again', 20);

  const after = await c.prompt(AGENT, 'web');
  assert.deepEqual([after.source, marker(after.text)], ['fresh', 'cut-3'], 'the replayed edit dropped the copy before ready');
  const resumed = proxy.heads.at(-1);
  assert.match(resumed, new RegExp(`^last-event-id: ${before}$`, 'im'), resumed);
  assert.equal((await c.prompt(AGENT, 'web')).source, 'live');
  await server.setMarker('start');
});

test('a stopped server leaves the client on its stale copies, and it listens again when the server is back', async (t) => {
  await server.live();
  const c = listening(t, { ttl: 0.3, timeout: 2 });
  await waitFor(() => c.streamState === 'live', 'the stream to be live');
  const fresh = await c.prompt(AGENT, 'web');
  await sleep(0.4);
  assert.equal((await c.prompt(AGENT, 'web')).source, 'live', 'no TTL while the stream is up');

  await server.stop();
  await waitFor(() => c.streamState === 'broken', 'the stream to be broken');
  for (let i = 0; i < 5; i++) {
    const stale = await c.prompt(AGENT, 'web');
    assert.equal(stale.source, 'stale');
    assert.equal(stale.text, fresh.text);
    assert.equal(stale.revision, fresh.revision);
    await sleep(0.1);
  }
  assert.equal(c.streamState, 'broken');

  await server.live();
  await waitFor(() => c.streamState === 'live', 'the stream to be live again', 40);
  await waitFor(async () => (await c.prompt(AGENT, 'web')).source === 'live', 'the copy served live again');
});

test('a client that does not listen makes no stream request', async () => {
  await server.live();
  // Every request the process makes: the recorder's go through the global fetch too.
  const original = globalThis.fetch;
  const everything = [];
  globalThis.fetch = (input, init) => {
    everything.push(new URL(String(input)).pathname);
    return original(input, init);
  };
  const seen = recorder();
  try {
    const c = new Client({ baseUrl: server.url, apiKey: server.agentKey, ttl: 3600, fetch: seen.fetch });
    const plain = new Client({ baseUrl: server.url, apiKey: server.agentKey, ttl: 3600 });
    assert.equal((await c.prompt(AGENT, 'web')).source, 'fresh');
    assert.equal((await c.prompt(AGENT, 'web')).source, 'cached');
    assert.equal((await plain.tools(AGENT)).source, 'fresh');
    await sleep(0.5);
    assert.equal(c.streamState, 'off');
    assert.equal(plain.streamState, 'off');
    c.close(); // not listening: nothing to end
    plain.close();
  } finally {
    globalThis.fetch = original;
  }
  assert.deepEqual(everything, [`/v1/agents/${AGENT}/prompt`, `/v1/agents/${AGENT}/tools`]);
  assert.ok(seen.requests.every((r) => r.headers['loadout-generation'] === undefined));
});

test('one stream per address and key, shared by the clients listening; the last close ends it', async () => {
  await server.live();
  const proxy = await Proxy.start(server.port);
  try {
    const make = () => new Client({ baseUrl: proxy.url, apiKey: server.agentKey, listen: true });
    const one = make();
    const two = make();
    await waitFor(() => one.streamState === 'live' && two.streamState === 'live', 'both live');
    const other = new Client({ baseUrl: proxy.url, apiKey: server.key('agent', AGENT), listen: true });
    await waitFor(() => other.streamState === 'live', 'another key live');
    assert.equal(proxy.heads.length, 2, 'one stream per key');
    other.close();
    await waitFor(() => proxy.streams().length === 1, "the other key's stream to end");
    one.close();
    assert.equal(one.streamState, 'off');
    assert.equal(two.streamState, 'live');
    await sleep(0.2);
    assert.equal(proxy.streams().length, 1, 'one client left listening');
    assert.equal((await one.prompt(AGENT, 'web')).source, 'fresh', 'a closed client goes on serving');
    two.close();
    assert.equal(two.streamState, 'off');
    await waitFor(() => proxy.streams().length === 0, 'the stream to end with the last client');
    two.close(); // twice: nothing
    const again = make(); // a new one after the last: a new stream
    await waitFor(() => again.streamState === 'live', 'a new stream');
    again.close();
    assert.equal(proxy.heads.length, 3);
  } finally {
    await proxy.close();
  }
});

test('a refused key stops listening for good, says so once, and serves by its TTL', async (t) => {
  await server.live();
  const seen = recorder();
  const warnings = t.mock.method(console, 'warn', () => {});
  const c = new Client({ baseUrl: server.url, apiKey: 'not-a-key', listen: true, fetch: seen.fetch });
  t.after(() => c.close());
  await waitFor(() => c.streamState === 'broken', 'the stream to be refused');
  await sleep(1.5); // past a reconnect's back-off
  assert.equal(seen.requests.filter(isStream).length, 1, 'no reconnect after a 401');
  assert.deepEqual(seen.statuses, [401]);
  assert.equal(warnings.mock.callCount(), 1);
  assert.match(String(warnings.mock.calls[0].arguments[0]), /change stream was refused \(401/);
  assert.equal(c.streamState, 'broken');
});

// -- a scripted stream ----------------------------------------------------------------------

const encoder = new TextEncoder();
const frame = (id, data) => `id: ${id}\ndata: ${JSON.stringify(data)}\n\n`;
const ready = (id, generation) => frame(id, { type: 'ready', etag: `"g${generation}"`, generation });
const change = (id, generation, fields) =>
  frame(id, { type: 'refetchEvaluation', etag: `"g${generation}"`, generation, lastModified: 1765130000, ...fields });

/**
 * A `fetch` answering the cached fetches itself (each answer's text counts the answers) and
 * `/v1/changes` with a stream the test writes to (or with `reply(n)`, for the n-th connect).
 */
function scripted() {
  let answers = 0;
  const fake = { requests: [], streams: [], reply: () => null };
  fake.fetch = async (input, init = {}) => {
    const url = new URL(String(input));
    const headers = { ...(init.headers ?? {}) };
    fake.requests.push({ url: String(input), headers, at: performance.now() });
    if (url.pathname === '/v1/changes') {
      const replied = fake.reply(fake.streams.length);
      const conn = { headers, at: performance.now(), sent: [], aborted: false, cancelled: false };
      fake.streams.push(conn);
      if (replied) return replied;
      const body = new ReadableStream({
        start(controller) {
          conn.send = (text) => controller.enqueue(typeof text === 'string' ? encoder.encode(text) : text);
          conn.end = () => controller.close();
        },
        cancel() {
          conn.cancelled = true;
        },
      });
      init.signal?.addEventListener('abort', () => {
        conn.aborted = true;
      });
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
    }
    const [, agent, kind] = /^\/v1\/agents\/([^/]+)\/(\w+)$/.exec(url.pathname);
    const label = url.searchParams.get('label') ?? 'production';
    const format = url.searchParams.get('format') ?? 'openai';
    const n = ++answers;
    const provenance = { channel: url.searchParams.get('channel') ?? '', revision: 1, label };
    const body =
      kind === 'prompt'
        ? { agent, text: `answer ${n}`, provenance }
        : kind === 'tools'
          ? { agent, format, tools: [], revision: 1, label }
          : { agent, format, tools: [], prompt: { agent, text: `answer ${n}`, provenance }, model: null };
    return new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json', etag: `"a${n}"` } });
  };
  return fake;
}

let keys = 0;
const scriptedClient = (t, fake, options = {}) => {
  const c = new Client({ baseUrl: 'http://scripted.invalid', apiKey: `key-${++keys}`, ttl: 3600, tracing: false, listen: true, fetch: fake.fetch, ...options });
  t.after(() => c.close());
  return c;
};

test('each change drops exactly the copies it names', async (t) => {
  const fake = scripted();
  const c = scriptedClient(t, fake);
  await waitFor(() => fake.streams.length === 1, 'the stream request');
  const stream = fake.streams[0];
  stream.send('retry: 1000\n\n');
  stream.send(ready(10, 5));
  await waitFor(() => c.streamState === 'live', 'live');
  const calls = {
    plain: () => c.prompt('a', 'web'),
    production: () => c.prompt('a', 'web', { label: 'production' }),
    latest: () => c.prompt('a', 'web', { label: 'latest' }),
    tools: () => c.tools('a'),
    latestTools: () => c.tools('a', { label: 'latest', format: 'mcp' }),
    adaLoadout: () => c.loadout('a', 'web', { userId: 'ada' }),
    adaPrompt: () => c.prompt('a', 'telegram', { userId: 'ada', tz: 'Europe/Berlin' }),
    adaTools: () => c.tools('a', { userId: 'ada' }),
    bobPrompt: () => c.prompt('a', 'web', { userId: 'bob' }),
    other: () => c.prompt('b', 'web'),
  };
  for (const call of Object.values(calls)) assert.equal((await call()).source, 'fresh');
  let id = 10;
  let generation = 5;
  // Events are applied in order: once the sentinel's copy is dropped, the one before it was.
  await c.prompt('sentinel', 'web');
  const dropped = async (fields) => {
    id += 1;
    generation += 1;
    stream.send(typeof fields === 'string' ? `id: ${id}\ndata: ${fields}\n\n` : change(id, generation, fields));
    stream.send(change(++id, ++generation, { change: 'agent.deleted', agent: 'sentinel' }));
    await waitFor(async () => (await c.prompt('sentinel', 'web')).source === 'fresh', 'the sentinel');
    const out = [];
    for (const [name, call] of Object.entries(calls)) if ((await call()).source === 'fresh') out.push(name);
    return out;
  };
  const all = Object.keys(calls);
  const production = ['plain', 'production', 'tools', 'adaLoadout', 'adaPrompt', 'adaTools', 'bobPrompt'];
  assert.deepEqual(await dropped({ change: 'label.moved', agent: 'a', label: 'production', revision: 8 }), production);
  assert.deepEqual(await dropped({ change: 'label.moved', agent: 'a', label: 'latest', revision: 9 }), ['latest', 'latestTools']);
  for (const rollout of ['rollout.started', 'rollout.changed', 'rollout.held', 'rollout.aborted', 'rollout.completed']) {
    assert.deepEqual(await dropped({ change: rollout, agent: 'a', label: 'production', revision: 8, candidate: 9, share: 10 }), production, rollout);
  }
  assert.deepEqual(await dropped({ change: 'label.moved', agent: 'a', label: 'staging', revision: 9 }), []);
  assert.deepEqual(await dropped({ change: 'instructions.changed', agent: 'a', user: 'ada' }), ['adaLoadout', 'adaPrompt']);
  assert.deepEqual(await dropped({ change: 'instructions.changed', agent: 'b', user: 'ada' }), []);
  assert.deepEqual(await dropped({ change: 'agent.deleted', agent: 'b' }), ['other']);
  assert.deepEqual(await dropped({ change: 'everything', reason: 'history' }), all);
  // Forward compatible: an unknown type is ignored; an unknown change drops the agent's copies, or all.
  assert.deepEqual(await dropped({ type: 'somethingNew', change: 'everything' }), []);
  assert.deepEqual(await dropped({ change: 'agent.renamed', agent: 'a' }), all.filter((n) => n !== 'other'));
  assert.deepEqual(await dropped({ change: 'tenant.moved' }), all);
  assert.deepEqual(await dropped('not json'), all);

  // The next fetch carries the newest event's etag.
  const last = fake.requests.at(-1);
  assert.equal(last.headers['loadout-generation'], `"g${generation}"`);
  assert.equal(c.streamState, 'live');
  assert.equal(fake.streams.length, 1);
});

test('a copy a change names while it is fetched is not kept', async (t) => {
  const fake = scripted();
  let release;
  const gate = new Promise((resolve) => (release = resolve));
  const slow = async (input, init) => {
    if (new URL(String(input)).pathname !== '/v1/changes') await gate;
    return fake.fetch(input, init);
  };
  const c = scriptedClient(t, fake, { fetch: slow });
  await waitFor(() => fake.streams.length === 1, 'the stream request');
  fake.streams[0].send(ready(1, 1));
  await waitFor(() => c.streamState === 'live', 'live');
  const pending = c.prompt('a', 'web');
  const joined = c.prompt('a', 'web'); // waits for the same request
  await sleep(0.05);
  fake.streams[0].send(change(2, 2, { change: 'label.moved', agent: 'a', label: 'production' }));
  await sleep(0.05);
  const later = c.prompt('a', 'web'); // asked after the change: a request of its own
  release();
  const [first, second, third] = await Promise.all([pending, joined, later]);
  assert.equal(first.source, 'fresh', 'the caller still gets its answer');
  assert.equal(second.text, first.text);
  assert.notEqual(third.text, first.text);
  assert.equal(fake.requests.filter((r) => !isStream(r)).length, 2);
  assert.equal((await c.prompt('a', 'web')).source, 'live', 'the answer asked after the change is kept');
  assert.equal((await c.prompt('a', 'web')).text, third.text);
});

test('a copy held from before the stream was ready is confirmed once, then served live', async (t) => {
  const fake = scripted();
  const c = scriptedClient(t, fake);
  await waitFor(() => fake.streams.length === 1, 'the stream request');
  assert.equal(c.streamState, 'connecting');
  assert.equal((await c.prompt('a', 'web')).source, 'fresh');
  assert.equal((await c.prompt('a', 'web')).source, 'cached', 'not live yet: by the TTL');
  fake.streams[0].send(ready(1, 1));
  await waitFor(() => c.streamState === 'live', 'live');
  assert.equal((await c.prompt('a', 'web')).source, 'cached', 'inside its TTL, while one request confirms it');
  await waitFor(async () => (await c.prompt('a', 'web')).source === 'live', 'served live');
  assert.equal(fake.requests.filter((r) => !isStream(r)).length, 2);
});

test('the parser: chunks split anywhere, CRLF and CR, comments, a character split in two, ids kept across frames', async (t) => {
  const fake = scripted();
  const c = scriptedClient(t, fake);
  await waitFor(() => fake.streams.length === 1, 'the stream request');
  const stream = fake.streams[0];
  const label = 'prüfung-ß';
  assert.equal((await c.prompt('a', 'web', { label })).source, 'fresh');
  const text =
    '\uFEFF: hello\r\nretry: 40\r\n\r\n' +
    ready(7, 3).replaceAll('\n', '\r\n') +
    ': ping\n\n' +
    `id: 8\rdata: {"type":"refetchEvaluation","etag":"\\"g4\\"","generation":4,\rdata: "change":"label.moved","agent":"a","label":"${label}"}\r\r` +
    'data: {"type":"somethingNew"}\n\n';
  const bytes = encoder.encode(text);
  for (let i = 0; i < bytes.length; i += 3) stream.send(bytes.slice(i, i + 3)); // CRLFs and ü split too
  await waitFor(() => c.streamState === 'live', 'live');
  await waitFor(async () => (await c.prompt('a', 'web', { label })).source === 'fresh', 'the multi-line, CR-ended event');
  assert.equal(fake.requests.at(-1).headers['loadout-generation'], '"g4"');
  // The stream ends: the reconnect (after `retry: 40`, not 1 s) resumes from the last id, 8
  // (the last frame had none of its own).
  const ended = performance.now();
  stream.end();
  await waitFor(() => fake.streams.length === 2, 'the reconnect');
  const waited = fake.streams[1].at - ended;
  assert.ok(waited < 500, `reconnected after ${waited.toFixed(0)} ms with retry: 40`);
  assert.equal(fake.streams[1].headers['last-event-id'], '8');
});

test('a frame over 64 KiB ends the connection, and the reconnect resumes from the last whole frame', async (t) => {
  const fake = scripted();
  const c = scriptedClient(t, fake);
  await waitFor(() => fake.streams.length === 1, 'the stream request');
  const stream = fake.streams[0];
  stream.send('retry: 50\n\n');
  stream.send(ready(20, 1));
  await waitFor(() => c.streamState === 'live', 'live');
  await c.prompt('a', 'web');
  // Just under the bound (id line, data line and the blank line: 65536 bytes): read.
  const head = 'id: 21\ndata: ';
  const event = { type: 'refetchEvaluation', etag: '"g2"', generation: 2, change: 'agent.deleted', agent: 'a', pad: '' };
  const size = encoder.encode(head + JSON.stringify(event) + '\n\n').length;
  event.pad = 'x'.repeat(65536 - size);
  stream.send(head + JSON.stringify(event) + '\n\n');
  await waitFor(async () => (await c.prompt('a', 'web')).source === 'fresh', 'the 64 KiB frame');
  assert.equal(fake.streams.length, 1);
  // Longer, in pieces and without its end: refused as it comes.
  event.pad += 'x'.repeat(16);
  const big = encoder.encode(`id: 22\ndata: ${JSON.stringify(event)}`);
  for (let i = 0; i < big.length; i += 8192) stream.send(big.slice(i, i + 8192));
  await waitFor(() => stream.cancelled && c.streamState !== 'live', 'the connection refused');
  await waitFor(() => fake.streams.length === 2, 'the reconnect');
  assert.equal(fake.streams[1].headers['last-event-id'], '21');
  fake.streams[1].send(ready(22, 3));
  await waitFor(() => c.streamState === 'live', 'live again');
});

test('reconnects back off from the retry given, doubling; a 429 waits its Retry-After', async (t) => {
  const fake = scripted();
  const problem = (status, headers = {}) =>
    new Response(JSON.stringify({ error: { code: 'x', message: 'x', details: null } }), {
      status,
      headers: { 'content-type': 'application/json', ...headers },
    });
  // The first connect says retry: 100 and ends; then a 429 asking for 1 s, then 500, 500, 503.
  fake.reply = (n) => [null, problem(429, { 'retry-after': '1' }), problem(500), problem(500), problem(503)][n] ?? null;
  const c = scriptedClient(t, fake);
  await waitFor(() => fake.streams.length === 1, 'the stream request');
  fake.streams[0].send('retry: 100\n\n');
  fake.streams[0].send(ready(1, 1));
  await waitFor(() => c.streamState === 'live', 'live');
  const ended = performance.now();
  fake.streams[0].end();
  await waitFor(() => fake.streams.length === 6, 'five reconnects', 15);
  const at = fake.streams.map((s) => s.at);
  const gaps = [at[1] - ended, at[2] - at[1], at[3] - at[2], at[4] - at[3], at[5] - at[4]].map(Math.round);
  // 100 ms after the stream ended (its retry:, spread 80-100 %), each failure doubling it,
  // but the 429's Retry-After (1 s) over its 200 ms.
  const [first, after429, second, third, fourth] = gaps;
  assert.ok(first >= 75 && first < 500, `${gaps}`);
  assert.ok(after429 >= 990 && after429 < 1600, `${gaps}`);
  assert.ok(second >= 310 && second < 900, `${gaps}`);
  assert.ok(third >= 630 && third < 1400, `${gaps}`);
  assert.ok(fourth >= 1270 && fourth < 2500, `${gaps}`);
  assert.equal(c.streamState, 'broken');
  assert.ok(fake.streams.slice(1).every((s) => s.headers['last-event-id'] === '1'));
  fake.streams[5].send(ready(1, 1));
  await waitFor(() => c.streamState === 'live', 'live again');
});
