// Tool calls, approvals and outcomes against a real loadout; errors as typed exceptions.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Client, InvalidArguments, LoadoutError, ProposalDeclined, Unauthorized, Unreachable, WaitTimeout } from '../dist/index.js';
import { AGENT, Server } from './harness.mjs';

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

test("errors are typed and carry loadout's code, message, status and details", async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const invalid = await c.callTool(AGENT, 'create_tasks', { title: 42 }, { conversationId: 'c-err' }).then(() => null, (e) => e);
  assert.ok(invalid instanceof InvalidArguments, String(invalid));
  assert.equal(invalid.status, 422);
  assert.equal(invalid.code, 'invalid_arguments');
  assert.ok(Array.isArray(invalid.details.errors) && invalid.details.errors.length > 0, JSON.stringify(invalid.details));
  const revoked = new Client({ baseUrl: server.url, apiKey: 'lo_not_a_key' });
  const unauthorized = await revoked.prompt(AGENT, 'web', { fallback: 'unused: a 401 is not an outage' }).then(() => null, (e) => e);
  assert.ok(unauthorized instanceof Unauthorized, String(unauthorized));
  assert.equal(unauthorized.status, 401);
});

test('a call to a stopped loadout throws Unreachable, never a fetch TypeError', async () => {
  const c = new Client({ baseUrl: 'http://127.0.0.1:9', apiKey: 'lo_x', timeout: 2 });
  const error = await c.callTool(AGENT, 'get_tasks', {}, { conversationId: 'c' }).then(() => null, (e) => e);
  assert.ok(error instanceof Unreachable, String(error));
  assert.equal(error.code, 'unreachable');
});

test('reportOutcome stores the outcome of a served revision', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const prompt = await c.prompt(AGENT, 'web');
  const stored = await c.reportOutcome(AGENT, { revision: prompt.revision, conversationId: `o-${Date.now()}`, outcome: 'success' });
  assert.equal(stored.outcome, 'success');
  assert.equal(stored.revision, prompt.revision);
});

test('decide asks loadout how it would decide a call, writing nothing', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const decided = await c.decide(AGENT, 'update_instructions', { instructions: 'x' }, { conversationId: 'c-d', userId: `n${Date.now()}` });
  assert.equal(decided.decision, 'approval');
  assert.equal(decided.needsApproval, true);
});
