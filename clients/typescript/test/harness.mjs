// A real `loadout serve` for the client's tests (as clients/python/tests/conftest.py): the
// binary in LOADOUT_BIN, the database in LOADOUT_TEST_DATABASE_URL or a temporary SQLite
// file, on a free 127.0.0.1 port, with keys made by `loadout keys create`. `stop` is an
// outage (SIGKILL), `pause` a hang (SIGSTOP); `start` brings it back on the same port.

import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const AGENT = 'assistant';
// No $current_time: the body (and so the ETag) stays the same from one minute to the next.
export const template = (marker) =>
  `$identity\n\n$soul\n\nMarker: ${marker}.\n\n$channel_guidance\n\n$user_instructions`;

export const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

export async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export class Server {
  static async make() {
    const binary = process.env.LOADOUT_BIN;
    if (!binary) throw new Error('LOADOUT_BIN must name the loadout binary (service/tests/typescript_client.rs sets it)');
    const work = mkdtempSync(join(tmpdir(), 'loadout-tsclient-'));
    const url = process.env.LOADOUT_TEST_DATABASE_URL || `sqlite://${work}/loadout.db?mode=rwc`;
    const server = new Server(binary, url, work, await freePort());
    await server.start();
    server.operator = server.key('operator');
    server.approver = server.key('approver');
    server.agentKey = server.key('agent', AGENT);
    await server.setMarker('start');
    return server;
  }

  constructor(binary, databaseUrl, work, port) {
    Object.assign(this, { binary, databaseUrl, work, port, proc: null, paused: false });
    this.url = `http://127.0.0.1:${port}`;
  }

  async start() {
    const log = openSync(join(this.work, 'serve.log'), 'a');
    this.proc = spawn(this.binary, ['--database-url', this.databaseUrl, 'serve', '--bind', `127.0.0.1:${this.port}`], {
      stdio: ['ignore', log, log],
      detached: true,
      env: { ...process.env, RUST_LOG: 'warn' },
    });
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null) throw new Error(`loadout serve exited:\n${this.log()}`);
      try {
        const r = await fetch(`${this.url}/health`, { signal: AbortSignal.timeout(2000) });
        if (r.status === 200) return;
      } catch {
        await sleep(0.1);
      }
    }
    throw new Error(`loadout serve not ready after 60 s:\n${this.log()}`);
  }

  /** An outage: SIGKILL (a graceful stop waits for the clients' idle connections). */
  async stop() {
    this.resume();
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      process.kill(-this.proc.pid, 'SIGKILL');
      await exited;
    }
    this.proc = null;
  }

  running() {
    return this.proc !== null && this.proc.exitCode === null;
  }

  pause() {
    process.kill(-this.proc.pid, 'SIGSTOP');
    this.paused = true;
  }

  resume() {
    if (this.paused && this.proc) process.kill(-this.proc.pid, 'SIGCONT');
    this.paused = false;
  }

  /** The server running again (a test before may have stopped or paused it). */
  async live() {
    this.resume();
    if (!this.running()) await this.start();
    return this;
  }

  async close() {
    await this.stop();
    if (!process.env.TSCLIENT_KEEP) rmSync(this.work, { recursive: true, force: true });
  }

  log() {
    try {
      return readFileSync(join(this.work, 'serve.log'), 'utf8').slice(-4000);
    } catch {
      return '';
    }
  }

  key(role, agent) {
    const name = `tsclient-${role}-${randomBytes(4).toString('hex')}`;
    const args = ['--database-url', this.databaseUrl, 'keys', 'create', '--role', role, '--name', name];
    if (agent) args.push('--agent', agent);
    const out = execFileSync(this.binary, args, { encoding: 'utf8', timeout: 60_000 });
    return out.trim().split('\n').at(-1);
  }

  /** One REST call (an admin's or approver's, beside the client under test); the JSON answer. */
  async rest(method, path, key, body) {
    const r = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 400) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  setMarker(marker) {
    return this.rest('PUT', `/v1/agents/${AGENT}/prompt-template`, this.operator, { template: template(marker) });
  }
}

/** A `fetch` that counts what the client sends and the statuses it gets. */
export function recorder() {
  const seen = { requests: [], statuses: [] };
  seen.fetch = async (input, init) => {
    seen.requests.push({ url: String(input), headers: { ...(init?.headers ?? {}) } });
    const response = await fetch(input, init);
    seen.statuses.push(response.status);
    return response;
  };
  seen.count = () => seen.requests.length;
  return seen;
}

export async function waitFor(condition, what, timeout = 10) {
  const deadline = Date.now() + timeout * 1000;
  while (Date.now() < deadline) {
    if (await condition()) return;
    await sleep(0.02);
  }
  throw new Error(`timed out waiting for ${what}`);
}
