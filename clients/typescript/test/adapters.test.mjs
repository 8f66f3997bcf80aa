// The OpenAI Agents SDK and Vercel AI SDK adapters list and call the agent's tools through
// loadout, with no model call.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Agent, RunContext } from '@openai/agents';

import { Client } from '../dist/index.js';
import { loadoutInstructions, loadoutTools } from '../dist/agents.js';
import { aiTools } from '../dist/ai.js';
import { AGENT, Server, recorder } from './harness.mjs';

let server;
before(async () => {
  server = await Server.make();
});
after(async () => {
  await server?.close();
});

const restTools = async () => (await server.rest('GET', `/v1/agents/${AGENT}/tools?format=openai`, server.agentKey)).tools;

test('the Agents SDK adapter lists the agent\'s tools as strict function tools and calls one through loadout', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const tools = await loadoutTools(c, AGENT, { conversationId: 'agents-1', userId: `a${Date.now()}` });
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, (await restTools()).map((t) => t.function.name).sort());
  for (const t of tools) {
    assert.equal(t.type, 'function');
    assert.equal(t.strict, true);
    assert.equal(t.parameters.additionalProperties, false);
  }
  const update = tools.find((t) => t.name === 'update_instructions');
  const proposed = JSON.parse(await update.invoke(new RunContext({}), JSON.stringify({ instructions: 'Ada likes tea.' })));
  assert.equal(proposed.status, 'proposed_for_approval');
  assert.ok(Number.isInteger(proposed.proposal_id));
  const invalid = JSON.parse(await tools.find((t) => t.name === 'create_tasks').invoke(new RunContext({}), JSON.stringify({ title: 42 })));
  assert.equal(invalid.status, 'error');
  assert.equal(invalid.code, 'invalid_arguments');
  const agent = new Agent({ name: 'assistant', instructions: loadoutInstructions(c, AGENT, 'web'), tools });
  assert.equal(agent.tools.length, tools.length);
});

test('the instructions are the agent\'s prompt, fetched through the cache', async () => {
  await server.live();
  const seen = recorder();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey, fetch: seen.fetch });
  const instructions = loadoutInstructions(c, AGENT, 'web');
  const agent = new Agent({ name: 'assistant', instructions });
  const text = await agent.getSystemPrompt(new RunContext({}));
  assert.equal(text, (await server.rest('GET', `/v1/agents/${AGENT}/prompt?channel=web`, server.agentKey)).text);
  await agent.getSystemPrompt(new RunContext({}));
  assert.equal(seen.count(), 1, 'the second run is served from the cache');
});

const POLICY = `
@id("ann-instructions")
permit (principal == User::"ann", action == Action::"update_instructions", resource);

@id("no-links")
@reason("instructions may not carry links")
forbid (principal, action == Action::"update_instructions", resource)
when { context.arguments.instructions like "*http*" };
`;

test("needsApproval asks loadout how it would decide the call under the agent's policy", async () => {
  await server.live();
  await server.rest('PUT', `/v1/agents/${AGENT}/policy`, server.operator, { policy: POLICY });
  try {
    const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
    const tools = await loadoutTools(c, AGENT, { conversationId: 'conv-policy', userId: () => 'ann', needsApproval: true });
    const update = tools.find((t) => t.name === 'update_instructions');
    const context = new RunContext({});
    assert.equal(await update.needsApproval(context, { instructions: 'Be brief.' }, 'call-1'), false);
    assert.equal(await update.needsApproval(context, { instructions: 'See http://x' }, 'call-2'), true);
    const decided = await c.decide(AGENT, 'update_instructions', { instructions: 'See http://x' }, { conversationId: 'conv-policy', userId: 'ann' });
    assert.deepEqual([decided.decision, decided.policy, decided.reason], ['deny', 'no-links', 'instructions may not carry links']);
    const listed = await server.rest('GET', '/v1/conversations/conv-policy/proposals', server.approver);
    assert.deepEqual(listed.proposals, [], 'a dry run wrote nothing');
    const ai = await aiTools(c, AGENT, { conversationId: 'conv-policy', userId: 'ann', needsApproval: true });
    assert.equal(await ai.update_instructions.needsApproval({ instructions: 'Be brief.' }, { toolCallId: 'a', messages: [] }), false);
    assert.equal(await ai.update_instructions.needsApproval({ instructions: 'http://x' }, { toolCallId: 'b', messages: [] }), true);
  } finally {
    await server.rest('PUT', `/v1/agents/${AGENT}/policy`, server.operator, { policy: null });
  }
});

test('the AI SDK adapter gives tool() definitions with the strict schemas, executed through loadout', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const tools = await aiTools(c, AGENT, { conversationId: 'ai-1', userId: `c${Date.now()}` });
  const rest = await restTools();
  assert.deepEqual(Object.keys(tools).sort(), rest.map((t) => t.function.name).sort());
  const create = tools.create_tasks;
  const schema = rest.find((t) => t.function.name === 'create_tasks').function.parameters;
  assert.deepEqual(create.inputSchema.jsonSchema, schema);
  assert.equal(create.description, rest.find((t) => t.function.name === 'create_tasks').function.description);
  const proposed = JSON.parse(await tools.update_instructions.execute({ instructions: 'Tea.' }, { toolCallId: 'x', messages: [] }));
  assert.equal(proposed.status, 'proposed_for_approval');
  const invalid = JSON.parse(await create.execute({ title: 42 }, { toolCallId: 'y', messages: [] }));
  assert.equal(invalid.code, 'invalid_arguments');
});

test('with wait, a tool waits for the approver inside the call and gives the model the result', async () => {
  await server.live();
  const c = new Client({ baseUrl: server.url, apiKey: server.agentKey });
  const user = `w${Date.now()}`;
  const tools = await loadoutTools(c, AGENT, { conversationId: `conv-${user}`, userId: user, wait: { timeout: 30, interval: 0.1 } });
  const update = tools.find((t) => t.name === 'update_instructions');
  const approver = setInterval(async () => {
    const { proposals } = await server.rest('GET', `/v1/conversations/conv-${user}/proposals`, server.approver);
    for (const p of proposals.filter((p) => p.state === 'proposed')) {
      await server.rest('POST', `/v1/proposals/${p.id}/approve`, server.approver).catch(() => {});
    }
  }, 200);
  try {
    const done = JSON.parse(await update.invoke(new RunContext({}), JSON.stringify({ instructions: 'Tea, always.' })));
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
  } finally {
    clearInterval(approver);
  }
  const shown = await server.rest('GET', `/v1/agents/${AGENT}/users/${user}/instructions`, server.operator);
  assert.match(JSON.stringify(shown), /Tea, always\./);
  // Nobody decides: the time-out is the tool's output, and the proposal goes on waiting.
  const ai = await aiTools(c, AGENT, { conversationId: `conv-${user}-2`, userId: user, wait: { timeout: 0.3, interval: 0.1 } });
  const timedOut = JSON.parse(await ai.update_instructions.execute({ instructions: 'Coffee.' }, { toolCallId: 'z', messages: [] }));
  assert.deepEqual([timedOut.status, timedOut.code], ['error', 'timeout']);
  assert.ok(Number.isInteger(timedOut.details.proposal_id));
});
