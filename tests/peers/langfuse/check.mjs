// The Langfuse JS SDK (@langfuse/client 5.11.1, on node 24) reads loadout's prompts
// through the Langfuse-compatible API, unchanged: `prompt.get` by name, label and
// version, with the agent key as the secret key of the pair. Prints `ok`/`FAIL` lines
// as the Python peers do; exits 1 on a failed check.

import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// @langfuse/client lives in ../.peers/node_modules (tests/peers/install), which ESM
// resolution from this directory does not search: import its ESM entry from there.
const here = path.dirname(fileURLToPath(import.meta.url));
const entry = path.join(here, '..', '.peers', 'node_modules', '@langfuse', 'client', 'dist', 'index.mjs');
const { LangfuseClient } = await import(pathToFileURL(entry).href);

const URL_ = process.env.LOADOUT_URL;
const AGENT = process.env.LOADOUT_AGENT || 'assistant';
const AGENT_KEY = process.env.LOADOUT_AGENT_KEY;
const ADMIN_KEY = process.env.LOADOUT_ADMIN_KEY;
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

async function rest(method, route, body, key = ADMIN_KEY) {
  const res = await fetch(URL_ + route, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return res.json();
}

// The SDK logs a failed fetch at ERROR on its own; those lines are expected here.
console.error = () => {};

try {
  const marker = `langfuse-js-${process.pid}-${Date.now() % 1e8}`;
  const template = `$identity\n\n$soul\n\nPeer marker: ${marker}.\n\n$channel_guidance`;
  await rest('PUT', `/v1/agents/${AGENT}/prompt-template`, { template });
  const served = await rest('GET', `/v1/agents/${AGENT}/prompt?channel=web`, undefined, AGENT_KEY);
  const lf = new LangfuseClient({ publicKey: 'pk-lf-loadout', secretKey: AGENT_KEY, baseUrl: URL_ });

  const got = await lf.prompt.get(`${AGENT}/web`, { cacheTtlSeconds: 0 });
  check('AGENT/CHANNEL is the revision production serves', got.version === served.provenance.revision,
    `version ${got.version}, REST ${served.provenance.revision}`);
  check("AGENT/CHANNEL is loadout's rendered prompt", got.prompt === served.text, `prompt ${JSON.stringify(got.prompt).slice(0, 200)}`);
  check('not a fallback, with the labels at that revision', !got.isFallback && got.labels.includes('production'),
    `isFallback ${got.isFallback}, labels ${got.labels}`);

  const raw = await lf.prompt.get(AGENT, { cacheTtlSeconds: 0 });
  const filled = raw.compile({ identity: 'I', soul: 'S', channel_guidance: 'G' });
  check("AGENT is the template in Langfuse's syntax, filled by compile", filled === `I\n\nS\n\nPeer marker: ${marker}.\n\nG`,
    `compiled ${JSON.stringify(filled)}`);

  const byVersion = await lf.prompt.get(`${AGENT}/web`, { version: served.provenance.revision, cacheTtlSeconds: 0 });
  check('a version is that revision', byVersion.version === served.provenance.revision && byVersion.prompt.includes(marker),
    `version ${byVersion.version}`);
  const latest = await lf.prompt.get(`${AGENT}/web`, { label: 'latest', cacheTtlSeconds: 0 });
  check('a label is the revision it points at', latest.labels.includes('latest'), `labels ${latest.labels}`);

  try {
    await lf.prompt.get('nobody/web', { cacheTtlSeconds: 0, maxRetries: 0 });
    check('what loadout does not have is not found', false, 'no error');
  } catch (e) {
    check("what loadout does not have is the SDK's 404 in Langfuse's shape",
      e.statusCode === 404 && e.body?.error === 'LangfuseNotFoundError', `${e.constructor.name} ${e.statusCode} ${JSON.stringify(e.body)}`);
  }
  const wrong = new LangfuseClient({ publicKey: 'pk-lf-wrong', secretKey: 'lo_not_a_key', baseUrl: URL_ });
  try {
    await wrong.prompt.get(`${AGENT}/web`, { cacheTtlSeconds: 0, maxRetries: 0 });
    check('a wrong secret key is refused', false, 'no error');
  } catch (e) {
    check('a wrong secret key is refused (401, UnauthorizedError)',
      e.statusCode === 401 && e.body?.error === 'UnauthorizedError', `${e.constructor.name} ${e.statusCode} ${JSON.stringify(e.body)}`);
  }
  const fallback = await lf.prompt.get('nobody/web', { fallback: 'fallback text', cacheTtlSeconds: 0, maxRetries: 0 });
  check("the SDK's fallback serves what loadout does not have", fallback.isFallback && fallback.prompt === 'fallback text',
    `isFallback ${fallback.isFallback}`);
} catch (e) {
  check('the peer ran', false, e.stack);
}
console.log(`@langfuse/client 5.11.1 (JS): ${count - failed.length} of ${count} checks passed`);
process.exit(failed.length ? 1 : 0);
