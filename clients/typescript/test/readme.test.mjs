// The README's examples, as a reader pastes them: each ```ts block is a module run by node
// (which strips the types) against a real loadout, and all of them type-check with tsc.
// And the core as an edge runtime has it: no `node:` module and no optional package.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';

import { Server } from './harness.mjs';

const run = promisify(execFile);
const PACKAGE = new URL('..', import.meta.url).pathname;
const EXAMPLES = join(PACKAGE, 'test', '.examples');
const tsBlocks = (file) =>
  readFileSync(file, 'utf8')
    .split('```ts\n')
    .slice(1)
    .map((block) => block.split('\n```')[0]);
// The package's README, then the guide's quickstart (docs/typescript-client.md).
const readme = tsBlocks(join(PACKAGE, 'README.md'));
const blocks = [...readme, ...tsBlocks(join(PACKAGE, '..', '..', 'docs', 'typescript-client.md'))];

let server;
before(async () => {
  server = await Server.make();
  rmSync(EXAMPLES, { recursive: true, force: true });
  mkdirSync(EXAMPLES, { recursive: true });
  blocks.forEach((source, i) => writeFileSync(join(EXAMPLES, `example${i}.mts`), source));
});
after(async () => {
  rmSync(EXAMPLES, { recursive: true, force: true });
  await server?.close();
});

test('the README has its examples', () => {
  assert.ok(readme.length >= 5 && blocks.length > readme.length, `${blocks.length} examples`);
  assert.ok(blocks.every((b) => b.includes("from '@loadout/client")), 'each imports the package by its name');
});

test('each example runs against loadout as pasted', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'tsclient-readme-'));
  const env = { ...process.env, LOADOUT_URL: server.url, LOADOUT_API_KEY: server.agentKey };
  const calls = readme.findIndex((b) => b.includes('client.wait('));
  const listens = readme.findIndex((b) => b.includes('listen: true'));
  assert.ok(calls >= 0 && listens >= 0);
  try {
    for (const [i] of blocks.entries()) {
      const { stdout } = await run(process.execPath, [join(EXAMPLES, `example${i}.mts`)], { cwd, env, timeout: 60_000 })
        .catch((e) => assert.fail(`example ${i} failed:\n${blocks[i]}\n${e.stderr || e.message}`));
      assert.ok(stdout.trim().length > 0, `example ${i} printed nothing`);
      if (i === 0) assert.match(stdout, /^\d+ production fresh\n/m);
      if (i === 0) assert.match(stdout, /^cached$/m);
      if (i === calls) assert.match(stdout, /still waiting/);
      if (i === calls) assert.match(stdout, /422 invalid_arguments/);
      if (i === listens) assert.match(stdout, /^fresh (connecting|live)$/m);
      if (i === readme.length) assert.match(stdout, /^fresh revision \d+ \|[\s\S]*?\ncached\n\d+ tools\nproposal Delete tasks/m);
    }
    // The guide's quickstart again with serve stopped: the disk copies, and the typed Unreachable.
    await server.stop();
    const quickstart = join(EXAMPLES, `example${readme.length}.mts`);
    const { stdout } = await run(process.execPath, [quickstart], { cwd, env, timeout: 60_000 });
    assert.match(stdout, /^disk revision \d+ \|/m);
    assert.match(stdout, /^tool call not sent: loadout could not be reached/m);
  } finally {
    await server.live();
    rmSync(cwd, { recursive: true, force: true });
  }
});

test('the examples type-check with tsc --strict', async () => {
  const config = {
    compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true, types: ['node'], skipLibCheck: true },
    include: ['*.mts'],
  };
  writeFileSync(join(EXAMPLES, 'tsconfig.json'), JSON.stringify(config));
  const tsc = join(PACKAGE, 'node_modules', 'typescript', 'bin', 'tsc');
  await run(process.execPath, [tsc, '-p', EXAMPLES], { timeout: 120_000 }).catch((e) => assert.fail(`tsc:\n${e.stdout}${e.stderr}`));
});

test('the core runs with no node: module and no optional package, as in an edge runtime', async () => {
  // A loader hook refuses `node:*` and @opentelemetry/api to everything under dist/.
  const hooks = `
    export async function resolve(specifier, context, next) {
      const fromDist = context.parentURL?.includes('/dist/');
      if (fromDist && (specifier.startsWith('node:') || specifier === '@opentelemetry/api')) {
        throw new Error('blocked: ' + specifier);
      }
      return next(specifier, context);
    }`;
  const register = `import { register } from 'node:module'; register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hooks)}));`;
  const script = `
    const { Client } = await import(${JSON.stringify(join(PACKAGE, 'dist', 'index.js'))});
    const c = new Client({ baseUrl: process.env.LOADOUT_URL, apiKey: process.env.LOADOUT_API_KEY });
    const p = await c.prompt('assistant', 'web');
    const again = await c.prompt('assistant', 'web');
    console.log(p.source, again.source, p.text.length > 0);`;
  const env = { ...process.env, LOADOUT_URL: server.url, LOADOUT_API_KEY: server.agentKey };
  const { stdout } = await run(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(register)}`, '--input-type=module', '-e', script], { env, timeout: 60_000 });
  assert.equal(stdout.trim(), 'fresh cached true');
});
