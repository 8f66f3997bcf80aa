// OpenTelemetry: the active span gets the prompt's name, version, label and source; a
// fallback names no version.

import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { after, before, test } from 'node:test';

import { ROOT_CONTEXT, context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';

import { Client } from '../dist/index.js';
import { AGENT, Server } from './harness.mjs';

// The smallest context manager: AsyncLocalStorage (what @opentelemetry/context-async-hooks does).
class Contexts {
  storage = new AsyncLocalStorage();
  active() {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with(ctx, fn, thisArg, ...args) {
    return this.storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind(_ctx, target) {
    return target;
  }
  enable() {
    return this;
  }
  disable() {
    this.storage.disable();
    return this;
  }
}

let server;
const exporter = new InMemorySpanExporter();
const processor = new SimpleSpanProcessor({ exporter });
before(async () => {
  context.setGlobalContextManager(new Contexts());
  trace.setGlobalTracerProvider(new TracerProvider({ spanProcessors: [processor] }));
  server = await Server.make();
});
after(async () => {
  await server?.close();
});

async function inSpan(name, fn) {
  const tracer = trace.getTracer('tsclient-test');
  await tracer.startActiveSpan(name, async (span) => {
    try {
      await fn();
    } finally {
      span.end();
    }
  });
  await processor.forceFlush(); // the SDK exports asynchronously
  return exporter.getFinishedSpans().find((s) => s.name === name).attributes;
}

test("a span records the prompt's name, revision and label", async () => {
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  let revision;
  const attributes = await inSpan('turn', async () => {
    revision = (await c.prompt(AGENT, 'web')).revision;
  });
  assert.deepEqual(attributes, {
    'gen_ai.prompt.name': AGENT,
    'gen_ai.prompt.version': String(revision),
    'loadout.label': 'production',
    'loadout.source': 'fresh',
  });
  const cached = await inSpan('second-turn', () => c.prompt(AGENT, 'web'));
  assert.equal(cached['loadout.source'], 'cached');
  assert.equal(cached['gen_ai.prompt.version'], String(revision));
  const both = await inSpan('loadout-turn', () => c.loadout(AGENT, 'telegram', { label: 'production' }));
  assert.equal(both['gen_ai.prompt.version'], String(revision));
  assert.equal(both['loadout.source'], 'fresh');
});

test('a tools fetch names no prompt, so it leaves the span alone', async () => {
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const attributes = await inSpan('tools-turn', () => c.tools(AGENT));
  assert.deepEqual(attributes, {});
});

test('a fallback names no version', async () => {
  const c = new Client({ baseUrl: 'http://127.0.0.1:9', apiKey: 'lo_x', timeout: 1 });
  const attributes = await inSpan('offline-turn', () =>
    c.prompt(AGENT, 'web', { label: 'production', fallback: 'Be helpful.' }),
  );
  assert.deepEqual(attributes, { 'loadout.source': 'fallback' });
});

test('with tracing off nothing is recorded', async () => {
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey, tracing: false });
  const attributes = await inSpan('untraced', () => c.prompt(AGENT, 'web'));
  assert.deepEqual(attributes, {});
});
