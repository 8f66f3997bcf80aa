// Tool calls, approvals and outcomes against a real loadout; errors as typed exceptions.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  BadRequest,
  Client,
  Forbidden,
  InvalidArguments,
  LoadoutError,
  NotFound,
  ProposalDeclined,
  Unauthorized,
  Unprocessable,
  Unreachable,
  WaitTimeout,
} from '../dist/index.js';
import { AGENT, Server, freePort } from './harness.mjs';

let server;
before(async () => {
  server = await Server.make();
});
after(async () => {
  await server?.close();
});

// update_instructions is user_configurable and builtin: proposed for a user who did not
// allow it, and run inside loadout once approved.
const propose = (c, user) =>
  c.callTool(AGENT, 'update_instructions', { instructions: `${user} likes tea.` }, { conversationId: `conv-${user}`, userId: user });
const later = (seconds, fn) => setTimeout(() => void fn(), seconds * 1000);

test('a proposal approved by an approver ends wait with its result', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const user = `u${Date.now()}`;
  const proposal = await propose(c, user);
  assert.equal(proposal.kind, 'proposal');
  assert.equal(proposal.status, 'proposed_for_approval');
  assert.match(proposal.description, /^Update instructions/);
  later(0.5, () => server.rest('POST', `/v1/proposals/${proposal.proposalId}/approve`, server.approver));
  const done = await c.wait(proposal, { timeout: 30 });
  assert.equal(done.kind, 'result');
  assert.equal(done.proposalId, proposal.proposalId);
  const shown = await server.rest('GET', `/v1/agents/${AGENT}/users/${user}/instructions`, server.operator);
  assert.match(JSON.stringify(shown), new RegExp(`${user} likes tea.`));
});

test('a declined proposal throws ProposalDeclined from wait', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const proposal = await propose(c, `d${Date.now()}`);
  later(0.3, () => server.rest('POST', `/v1/proposals/${proposal.proposalId}/decline`, server.approver));
  const error = await c.wait(proposal, { timeout: 30 }).then(() => null, (e) => e);
  assert.ok(error instanceof ProposalDeclined, String(error));
  assert.ok(error instanceof LoadoutError);
  assert.deepEqual(error.details, { proposal_id: proposal.proposalId });
});

test('wait gives up after its timeout and the proposal goes on waiting', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const proposal = await propose(c, `t${Date.now()}`);
  const t0 = performance.now();
  await assert.rejects(c.wait(proposal, { timeout: 1, interval: 0.2 }), WaitTimeout);
  const took = (performance.now() - t0) / 1000;
  assert.ok(took > 0.9 && took < 5, `${took} s`);
  const shown = await server.rest('GET', `/v1/proposals/${proposal.proposalId}`, server.approver);
  assert.equal(shown.state, 'proposed');
});

const thrown = (promise) => promise.then(() => assert.fail('it did not throw'), (e) => e);

test("errors are typed and carry loadout's code, message, status and details", async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const invalid = await thrown(c.callTool(AGENT, 'delete_tasks', { ids: 'not-a-list' }, { conversationId: 'c-err' }));
  assert.ok(invalid instanceof InvalidArguments && invalid instanceof Unprocessable, String(invalid));
  assert.deepEqual([invalid.status, invalid.code], [422, 'invalid_arguments']);
  assert.equal(invalid.details.errors[0].path, '/ids', JSON.stringify(invalid.details));
  const agent = await thrown(c.prompt('no-such-agent', 'web'));
  assert.ok(agent instanceof NotFound, String(agent));
  assert.deepEqual([agent.status, agent.code], [404, 'not_found']);
  const channel = await thrown(c.prompt(AGENT, 'no-such-channel'));
  assert.ok(channel instanceof NotFound && channel.details.known_channels.includes('web'), JSON.stringify(channel.details));
  const tz = await thrown(c.prompt(AGENT, 'web', { tz: 'Mars/Olympus' }));
  assert.ok(tz instanceof BadRequest && tz.status === 400 && /time zone/.test(tz.message), String(tz));
  const revoked = new Client({ baseUrl: server.url, apiKey: 'lo_not_a_key' });
  const unauthorized = await thrown(revoked.prompt(AGENT, 'web', { fallback: 'unused: a 401 is not an outage' }));
  assert.ok(unauthorized instanceof Unauthorized && unauthorized.status === 401, String(unauthorized));
  const approver = new Client({ baseUrl: server.url, apiKey: server.approver });
  const forbidden = await thrown(approver.callTool(AGENT, 'delete_tasks', { ids: ['x'] }, { conversationId: 'c' }));
  assert.ok(forbidden instanceof Forbidden && forbidden.status === 403, String(forbidden));
});

test('a stopped loadout throws Unreachable from every call, never a fetch TypeError', async () => {
  // A port bound once, then closed: nothing listens there.
  const c = new Client({ baseUrl: `http://127.0.0.1:${await freePort()}`, apiKey: 'lo_any_key', timeout: 2 });
  const waiting = {
    kind: 'proposal',
    agent: AGENT,
    tool: 'delete_tasks',
    proposalId: 1,
    status: 'proposed_for_approval',
    description: '',
    preview: null,
    request: { tool: 'delete_tasks', arguments: {}, conversation_id: 'c' },
  };
  for (const call of [
    () => c.callTool(AGENT, 'delete_tasks', { ids: ['t-1'] }, { conversationId: 'c' }),
    () => c.wait(waiting, { timeout: 5, interval: 0.01 }),
    () => c.reportOutcome(AGENT, { revision: 1, conversationId: 'c', outcome: 'success' }),
  ]) {
    const error = await thrown(call());
    assert.ok(error instanceof Unreachable && error instanceof LoadoutError, String(error));
    assert.deepEqual([error.code, error.status], ['unreachable', undefined]);
    assert.match(error.message, /^loadout could not be reached/);
  }
});

test('reportOutcome stores the outcome of a served revision', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const prompt = await c.prompt(AGENT, 'web');
  const conversationId = `o-${Date.now()}`;
  const stored = await c.reportOutcome(AGENT, { revision: prompt.revision, conversationId, userId: 'ann', outcome: 'success', score: 0.9 });
  assert.deepEqual(
    [stored.outcome, stored.revision, stored.conversation_id, stored.user_id, stored.agent, stored.score],
    ['success', prompt.revision, conversationId, 'ann', AGENT, 0.9],
  );
  const unknown = await thrown(c.reportOutcome(AGENT, { revision: 1e6, conversationId, outcome: 'failure' }));
  assert.ok(unknown instanceof NotFound && unknown.code === 'revision_not_found', String(unknown));
});

test('decide asks loadout how it would decide a call, writing nothing', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const decided = await c.decide(AGENT, 'update_instructions', { instructions: 'x' }, { conversationId: 'c-d', userId: `n${Date.now()}` });
  assert.equal(decided.decision, 'approval');
  assert.equal(decided.needsApproval, true);
});
