// The checked-in types are what scripts/generate.mjs makes from this server's /openapi.json.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';

import { generate } from '../scripts/generate.mjs';
import { Server } from './harness.mjs';

let server;
before(async () => {
  server = await Server.make();
});
after(async () => {
  await server?.close();
});

test('the types regenerate identically from the server\'s /openapi.json', async () => {
  const checkedIn = readFileSync(new URL('../src/openapi.ts', import.meta.url), 'utf8');
  const generated = await generate(server.url);
  assert.ok(generated.includes('PromptView: {'), 'the generated types name the prompt view');
  assert.equal(generated, checkedIn, 'src/openapi.ts is stale: run `node scripts/generate.mjs URL` against this loadout');
});
