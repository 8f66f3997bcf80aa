// OpenFeature's JavaScript SDKs with the official OFREP providers (on node 24) evaluate
// loadout's flags, unchanged:
// - the server SDK (@openfeature/server-sdk 1.23.0) with @openfeature/ofrep-provider 0.1.3:
//   one POST /ofrep/v1/evaluate/flags/{key} per evaluation, the agent key as a static header;
// - the web SDK (@openfeature/web-sdk 1.10.0) with @openfeature/ofrep-web-provider 0.4.3:
//   bulk POST /ofrep/v1/evaluate/flags, kept by its ETag (If-None-Match, 304) and refreshed
//   by polling. Its event stream is the runtime's EventSource, which sends no key, so against
//   loadout it polls (changeDetection 'polling'; node has no EventSource without a flag anyway).
// Prints `ok`/`FAIL` lines as the Python peers do; exits 1 on a failed check.

import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// The packages live in ../.peers/node_modules (tests/peers/install), which ESM resolution
// from this directory does not search: import them from there. The providers are CommonJS
// and require the SDKs' CommonJS builds, so the SDKs are imported as those same files (one
// copy of each module; `default` is the module's exports).
const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, '..', '.peers', 'node_modules', '@openfeature');
const load = async (file) => (await import(pathToFileURL(path.join(modules, file)).href)).default;
const server = await load('server-sdk/dist/cjs/index.js');
const { OFREPProvider } = await load('ofrep-provider/index.cjs.js');
const web = await load('web-sdk/dist/cjs/index.js');
const { OFREPWebProvider } = await load('ofrep-web-provider/index.cjs.js');

const URL_ = process.env.LOADOUT_URL;
const AGENT = process.env.LOADOUT_AGENT || 'assistant';
const AGENT_KEY = process.env.LOADOUT_AGENT_KEY;
const ADMIN_KEY = process.env.LOADOUT_ADMIN_KEY;
const DEFAULT = 'the code default';
const POLL_MS = 500;
const failed = [];
let count = 0;
const check = (name, ok, detail = '') => {
  count += 1;
  if (ok) console.log(`ok    ${name}`);
  else {
    failed.push(name);
    console.log(`FAIL  ${name}: ${detail}`);
  }
};
const short = (v, n = 300) => {
  const text = typeof v === 'string' ? v : JSON.stringify(v);
  return text && text.length > n ? `${text.slice(0, n)}...` : text;
};
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
// The rendered prompt ends with the current minute: compare all but that line.
const butTime = (text) => (typeof text === 'string' ? text.split('Now:').slice(0, -1).join('Now:') : text);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function rest(method, route, body, key = ADMIN_KEY) {
  const res = await fetch(URL_ + route, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return res.json();
}
const restPrompt = (user) => rest('GET', `/v1/agents/${AGENT}/prompt?channel=web&user_id=${user}`, undefined, AGENT_KEY);
const restTools = (user) => rest('GET', `/v1/agents/${AGENT}/tools?format=openai&user_id=${user}`, undefined, AGENT_KEY);
async function useTemplate(marker) {
  const template = `$identity\n\nPeer marker: ${marker}.\n\nUser: $user_instructions\n\n$channel_guidance\n\nNow: $current_time`;
  await rest('PUT', `/v1/agents/${AGENT}/prompt-template`, { template });
  return (await restPrompt('alice')).provenance.revision;
}

// The SDKs log a provider's errors at ERROR on their own; those lines are expected here.
console.error = () => {};

async function serverProvider(wish) {
  const marker = `ofrep-js-${process.pid}-${Date.now() % 1e8}`;
  const revision = await useTemplate(marker);
  const served = await restPrompt('alice');
  const OpenFeature = server.OpenFeature;
  await OpenFeature.setProviderAndWait(new OFREPProvider({ baseUrl: URL_, headers: { Authorization: `Bearer ${AGENT_KEY}` } }));
  const client = OpenFeature.getClient();
  const alice = { targetingKey: 'alice' };

  const got = await client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT, alice);
  check('server: the string flag is no error', got.errorCode === undefined, `${got.errorCode}: ${got.errorMessage}`);
  check("server: AGENT:prompt:web for alice is REST's prompt for alice (but the time line)",
    butTime(got.value) === butTime(served.text) && got.value.includes(wish) && got.value.includes(marker),
    `value ${short(got.value)}, REST ${short(served.text)}`);
  check("server: its variant is REST's revision, its reason STATIC", got.variant === String(revision) && got.reason === 'STATIC',
    `variant ${got.variant}, reason ${got.reason}, REST revision ${revision}`);
  check('server: its metadata names the agent, label and revision',
    same(got.flagMetadata, { agent: AGENT, label: 'production', revision }), `metadata ${short(got.flagMetadata)}`);

  const tools = await client.getObjectDetails(`${AGENT}:tools:openai`, {}, alice);
  const want = await restTools('alice');
  check("server: AGENT:tools:openai is REST's tools body (format=openai, user alice)",
    tools.errorCode === undefined && same(tools.value, want) && want.tools.length > 0,
    `error ${tools.errorCode} (${tools.errorMessage}), value ${short(tools.value)}, REST ${short(want)}`);

  const next = `ofrep-js-next-${process.pid}-${Date.now() % 1e8}`;
  const nextRevision = await useTemplate(next);
  const after = await client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT, alice);
  check('server: a template edit is the next evaluation (no cache)',
    nextRevision > revision && after.variant === String(nextRevision) && after.value.includes(next),
    `variant ${after.variant}, REST revision ${nextRevision} (was ${revision})`);

  const unknown = await client.getStringDetails(`${AGENT}:nothing:web`, DEFAULT, alice);
  check('server: an unknown key is FLAG_NOT_FOUND and the code default',
    unknown.errorCode === 'FLAG_NOT_FOUND' && unknown.value === DEFAULT && unknown.reason === 'ERROR',
    `error ${unknown.errorCode} (${unknown.errorMessage}), reason ${unknown.reason}, value ${short(unknown.value, 100)}`);
  const unreached = await client.getStringDetails('nobody:prompt:web', DEFAULT, alice);
  check('server: a flag of an agent the key does not reach is FLAG_NOT_FOUND and the code default',
    unreached.errorCode === 'FLAG_NOT_FOUND' && unreached.value === DEFAULT,
    `error ${unreached.errorCode} (${unreached.errorMessage}), value ${short(unreached.value, 100)}`);
  const invalid = await client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT, { targetingKey: 'alice', label: 'Not A Label' });
  check('server: a malformed label is INVALID_CONTEXT and the code default',
    invalid.errorCode === 'INVALID_CONTEXT' && invalid.value === DEFAULT,
    `error ${invalid.errorCode} (${invalid.errorMessage}), value ${short(invalid.value, 100)}`);
  // Documented: this provider predates OFREP's optional `value` (the code default, ADR 6), so
  // it reads a DISABLED answer without one as malformed (GENERAL) and serves the default anyway.
  const settings = (await rest('GET', `/v1/agents/${AGENT}/model`)).settings;
  const model = await client.getObjectDetails(`${AGENT}:model:web`, { model: 'code-default' }, alice);
  if (settings === null) {
    check('server: AGENT:model:web without model settings is the code default (the provider: GENERAL)',
      same(model.value, { model: 'code-default' }) && model.errorCode === 'GENERAL',
      `error ${model.errorCode} (${model.errorMessage}), reason ${model.reason}, value ${short(model.value, 100)}`);
  } else {
    check('server: AGENT:model:web with model settings is an object', model.errorCode === undefined, short(model));
  }

  await OpenFeature.setProviderAndWait('wrong-key', new OFREPProvider({ baseUrl: URL_, headers: { Authorization: 'Bearer lo_not_a_key' } }));
  const refused = await OpenFeature.getClient('wrong-key').getStringDetails(`${AGENT}:prompt:web`, DEFAULT, alice);
  check('server: a wrong key (401) is GENERAL and the code default', refused.errorCode === 'GENERAL' && refused.value === DEFAULT,
    `error ${refused.errorCode} (${refused.errorMessage}), value ${short(refused.value, 100)}`);
  await OpenFeature.close();
}

async function webProvider(wish) {
  const marker = `ofrep-web-${process.pid}-${Date.now() % 1e8}`;
  const revision = await useTemplate(marker);
  // Every request the provider makes, with what it sent and what came back.
  const seen = [];
  const recording = async (request, init) => {
    const sent = JSON.parse((await request.clone().text()) || '{}');
    const entry = { url: request.url, user: sent.context?.targetingKey, ifNoneMatch: request.headers.get('if-none-match') };
    seen.push(entry);
    const response = await fetch(request, init);
    entry.status = response.status;
    entry.etag = response.headers.get('etag');
    if (response.status === 200) entry.body = await response.clone().json();
    return response;
  };
  const OpenFeature = web.OpenFeature;
  const changed = [];
  OpenFeature.addHandler(web.ProviderEvents.ConfigurationChanged, (event) => changed.push(event));
  await OpenFeature.setContext({ targetingKey: 'alice' });
  const provider = new OFREPWebProvider({
    baseUrl: URL_,
    headers: [['Authorization', `Bearer ${AGENT_KEY}`]],
    cacheMode: 'disabled',
    changeDetection: 'polling',
    pollInterval: POLL_MS,
    timeoutMs: 10000,
    fetchImplementation: recording,
  });
  await OpenFeature.setProviderAndWait(provider);
  const client = OpenFeature.getClient();

  const first = seen[0];
  check('web: the first request is the bulk evaluation, answered 200 with a strong ETag',
    first?.url === `${URL_}/ofrep/v1/evaluate/flags` && first.status === 200 && /^"[^"]+"$/.test(first.etag ?? ''),
    `first request ${short(first)}`);
  const stream = first?.body?.eventStreams?.[0];
  check('web: the bulk answer names the change stream for the agent, with a stream token',
    first?.body?.eventStreams?.length === 1 && stream.type === 'sse' && stream.inactivityDelaySec === 120
      && stream.endpoint?.requestUri?.startsWith(`/v1/changes?agent=${AGENT}&token=`),
    `eventStreams ${short(first?.body?.eventStreams)}`);

  const served = await restPrompt('alice');
  const got = client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  check("web: AGENT:prompt:web for alice is REST's prompt for alice (but the time line)",
    got.errorCode === undefined && butTime(got.value) === butTime(served.text) && got.value.includes(wish) && got.value.includes(marker),
    `error ${got.errorCode}, value ${short(got.value)}, REST ${short(served.text)}`);
  check("web: its variant is REST's revision, its reason STATIC", got.variant === String(revision) && got.reason === 'STATIC',
    `variant ${got.variant}, reason ${got.reason}, REST revision ${revision}`);
  const tools = client.getObjectDetails(`${AGENT}:tools:openai`, {});
  const want = await restTools('alice');
  check("web: AGENT:tools:openai is REST's tools body (format=openai, user alice)",
    tools.errorCode === undefined && same(tools.value, want) && want.tools.length > 0,
    `error ${tools.errorCode} (${tools.errorMessage}), value ${short(tools.value)}, REST ${short(want)}`);
  const model = client.getObjectDetails(`${AGENT}:model:web`, { model: 'code-default' });
  const settings = (await rest('GET', `/v1/agents/${AGENT}/model`)).settings;
  if (settings === null) {
    check('web: AGENT:model:web without model settings is DISABLED and the code default',
      model.reason === 'DISABLED' && model.errorCode === undefined && same(model.value, { model: 'code-default' }),
      `reason ${model.reason}, error ${model.errorCode}, value ${short(model.value, 100)}`);
  }
  const unknown = client.getStringDetails(`${AGENT}:nothing:web`, DEFAULT);
  check('web: a key not in the bulk answer is FLAG_NOT_FOUND and the code default',
    unknown.errorCode === 'FLAG_NOT_FOUND' && unknown.value === DEFAULT, `error ${unknown.errorCode}, value ${short(unknown.value, 100)}`);

  // Polling with the ETag: unchanged is 304 (unless the minute in the prompt turned meanwhile).
  await sleep(POLL_MS * 3 + 200);
  const polls = seen.slice(1);
  check('web: it polls with If-None-Match, and an unchanged evaluation is 304',
    polls.length >= 2 && polls.every((p) => p.ifNoneMatch && p.user === 'alice') && polls.some((p) => p.status === 304 && p.ifNoneMatch === p.etag),
    `polls ${short(polls.map(({ user, ifNoneMatch, status, etag }) => ({ user, ifNoneMatch, status, etag })), 600)}`);

  const next = `ofrep-web-next-${process.pid}-${Date.now() % 1e8}`;
  const nextRevision = await useTemplate(next);
  const edited = Date.now();
  let after = client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  while (!after.value.includes(next) && Date.now() - edited < 5000) {
    await sleep(50);
    after = client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  }
  const took = Date.now() - edited;
  check(`web: polling picks up a template edit within 5 s (took ${took} ms)`,
    after.value.includes(next) && after.variant === String(nextRevision),
    `variant ${after.variant}, REST revision ${nextRevision}, value ${short(after.value, 200)}`);
  check('web: the change is a ConfigurationChanged event naming the prompt flag',
    changed.some((e) => (e.flagsChanged ?? []).includes(`${AGENT}:prompt:web`)), `events ${short(changed, 400)}`);
  check('web: the refresh was a 200 to an If-None-Match that no longer matched',
    seen.some((p) => p.ifNoneMatch && p.status === 200 && p.etag !== p.ifNoneMatch), `requests ${short(seen.map((p) => p.status))}`);

  // A new context is a new bulk evaluation, without the old ETag (another user's answer).
  const before = seen.length;
  await OpenFeature.setContext({ targetingKey: 'bob' });
  const bob = client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  const forBob = await restPrompt('bob');
  check("web: a new context (bob) is re-evaluated: REST's prompt for bob, without alice's instructions",
    butTime(bob.value) === butTime(forBob.text) && !bob.value.includes(wish), `value ${short(bob.value)}`);
  const asked = seen.slice(before).find((p) => p.user === 'bob');
  check("web: bob's first request carries no If-None-Match", asked?.ifNoneMatch === null && asked?.status === 200,
    `request ${short(asked)}`);

  const refusedWith = [];
  const wrong = new OFREPWebProvider({
    baseUrl: URL_, headers: [['Authorization', 'Bearer lo_not_a_key']], cacheMode: 'disabled', changeDetection: 'polling',
    fetchImplementation: async (request, init) => {
      const response = await fetch(request, init);
      refusedWith.push(response.status);
      return response;
    },
  });
  let initError = null;
  try {
    await OpenFeature.setProviderAndWait('wrong-key', wrong);
  } catch (e) {
    initError = e;
  }
  const refused = OpenFeature.getClient('wrong-key').getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  check('web: a wrong key (401) fails initialization for good (PROVIDER_FATAL) and serves the code default',
    same(refusedWith, [401]) && initError !== null && refused.errorCode === 'PROVIDER_FATAL' && refused.value === DEFAULT,
    `statuses ${refusedWith}, init error ${initError}, error ${refused.errorCode}, value ${short(refused.value, 100)}`);

  await OpenFeature.close();
  const total = seen.length;
  await sleep(POLL_MS * 2);
  check('web: closing stops its polling', seen.length === total, `${seen.length - total} requests after close`);
}

// The web provider's SSE path: the runtime's EventSource (node's behind
// --experimental-eventsource, as run.py runs this) opens eventStreams' URL, which
// carries loadout's stream token; an edit comes as refetchEvaluation and the
// provider re-fetches with flagConfigEtag, without polling.
async function webStream() {
  if (typeof EventSource === 'undefined') {
    check('web (SSE): this node has EventSource (run with --experimental-eventsource)', false, 'no EventSource');
    return;
  }
  const marker = `ofrep-sse-${process.pid}-${Date.now() % 1e8}`;
  await useTemplate(marker);
  const seen = [];
  const recording = async (request, init) => {
    seen.push(request.url ?? String(request));
    return fetch(request, init);
  };
  const OpenFeature = web.OpenFeature;
  await OpenFeature.setContext('sse', { targetingKey: 'alice' });
  const provider = new OFREPWebProvider({
    baseUrl: URL_, headers: [['Authorization', `Bearer ${AGENT_KEY}`]], cacheMode: 'disabled',
    changeDetection: 'sse', pollInterval: 0, timeoutMs: 10000, fetchImplementation: recording,
  });
  await OpenFeature.setProviderAndWait('sse', provider);
  const client = OpenFeature.getClient('sse');
  check('web (SSE): the prompt is served', client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT).value.includes(marker));
  await sleep(1000); // the stream connects (its ready frame)
  const next = `ofrep-sse-next-${process.pid}-${Date.now() % 1e8}`;
  const nextRevision = await useTemplate(next);
  const edited = Date.now();
  let after = client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  while (!after.value.includes(next) && Date.now() - edited < 5000) {
    await sleep(20);
    after = client.getStringDetails(`${AGENT}:prompt:web`, DEFAULT);
  }
  const took = Date.now() - edited;
  check(`web (SSE): an edit reaches the provider through the change stream (took ${took} ms, no polling)`,
    after.value.includes(next) && after.variant === String(nextRevision), `variant ${after.variant}, value ${short(after.value, 200)}`);
  check("web (SSE): the re-fetch carried the event's etag as flagConfigEtag",
    seen.some((url) => /flagConfigEtag=%22g\d+%22/.test(url)), `requests ${short(seen, 600)}`);
  await OpenFeature.clearProviders();
}

try {
  const wish = `alice-wish-${process.pid}-${Date.now() % 1e8}`;
  await rest('PUT', `/v1/agents/${AGENT}/users/alice/instructions`, { instructions: `Alice wants ${wish}.` });
  try {
    await serverProvider(wish);
  } catch (e) {
    check('the server provider ran', false, e.stack);
  }
  try {
    await webProvider(wish);
  } catch (e) {
    check('the web provider ran', false, e.stack);
  }
  try {
    await webStream();
  } catch (e) {
    check('the web provider over SSE ran', false, e.stack);
  }
} catch (e) {
  check('the peer ran', false, e.stack);
}
console.log(`@openfeature/ofrep-provider 0.1.3, @openfeature/ofrep-web-provider 0.4.3 (JS): ${count - failed.length} of ${count} checks passed`);
process.exit(failed.length ? 1 : 0);
