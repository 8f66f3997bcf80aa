/**
 * The OpenAI Agents SDK adapter (`@openai/agents`): an agent's loadout tools as SDK function
 * tools whose calls go through loadout's tool-call route, so approval tiers and policies hold
 * (a proposal comes back as the tool's output, saying it awaits approval), and the prompt as
 * the agent's instructions, fetched per run through the client's cache.
 *
 *     import { Agent } from '@openai/agents';
 *     import { Client } from '@loadout/client';
 *     import { loadoutInstructions, loadoutTools } from '@loadout/client/agents';
 *
 *     const client = new Client({ baseUrl, apiKey });
 *     const agent = new Agent({
 *       name: 'assistant',
 *       instructions: loadoutInstructions(client, 'assistant', 'web'),
 *       tools: await loadoutTools(client, 'assistant', { conversationId: 'c-1' }),
 *     });
 */

import { type FunctionTool, type RunContext, tool } from '@openai/agents';

import type { Client } from './client.js';
import { callText, functionParts, type WaitForApproval } from './shared.js';
import type { ToolDefinition } from './results.js';

export type { WaitForApproval } from './shared.js';

/** A value, or a function of the run's context (one agent object serving many users). */
export type Per = string | undefined | ((context: RunContext<unknown> | undefined) => string | undefined);

const resolve = (value: Per, context: RunContext<unknown> | undefined): string | undefined =>
  typeof value === 'function' ? value(context) : value;

export interface InstructionsOptions {
  userId?: Per;
  tz?: Per;
  label?: string;
  fallback?: string;
}

/** An `instructions` for `Agent`: the agent's prompt, fetched (through the cache) on every run. */
export function loadoutInstructions(
  client: Client,
  agent: string,
  channel: string,
  options: InstructionsOptions = {},
): (context: RunContext<unknown>) => Promise<string> {
  return async (context) => {
    const prompt = await client.prompt(agent, channel, {
      ...defined('userId', resolve(options.userId, context)),
      ...defined('tz', resolve(options.tz, context)),
      ...defined('label', options.label),
      ...defined('fallback', options.fallback),
    });
    return prompt.text;
  };
}

export interface ToolsOptions {
  conversationId: Per;
  userId?: Per;
  label?: string;
  fallback?: readonly ToolDefinition[];
  /**
   * Give each tool the SDK's `needsApproval`: loadout decides the call without running it
   * (`decide`, a dry run under the agent's policy, tier and the user's preference), and the
   * run is interrupted for the calls loadout would not run at once.
   */
  needsApproval?: boolean;
  /** Wait for a proposal's decision inside the call (`false`: answer that it awaits approval). */
  wait?: WaitForApproval;
}

/**
 * The agent's loadout tools (OpenAI strict schemas) as SDK function tools. Each call is
 * `callTool` on loadout with the revision the tools came from; a proposal (or, with `wait`,
 * its result), invalid arguments or a failed call come back to the model as the tool's
 * output (JSON), never as a throw.
 */
export async function loadoutTools(client: Client, agent: string, options: ToolsOptions): Promise<FunctionTool<unknown>[]> {
  // A rollout assigns by user, else by conversation: given as strings, they pick the tools of
  // the revision this subject's prompt comes from.
  const listed = await client.tools(agent, {
    format: 'openai',
    ...defined('label', options.label),
    ...defined('fallback', options.fallback),
    ...defined('userId', typeof options.userId === 'string' ? options.userId : undefined),
    ...defined('conversationId', typeof options.conversationId === 'string' ? options.conversationId : undefined),
  });
  const revision = listed.revision;
  const subject = (context: RunContext<unknown> | undefined) => ({
    conversationId: resolve(options.conversationId, context) ?? 'agents-sdk',
    ...defined('userId', resolve(options.userId, context)),
    revision,
  });
  return listed.tools.map((definition) => {
    const { name, description, parameters } = functionParts(definition);
    return tool({
      name,
      description,
      // loadout's schemas are already strict (OpenAI's form); the SDK passes them on as they are.
      parameters: parameters as never,
      strict: true,
      execute: (input: unknown, context?: RunContext<unknown>) =>
        callText(client, agent, name, input, subject(context), options.wait),
      ...(options.needsApproval
        ? {
            needsApproval: async (context: RunContext<unknown>, input: unknown) => {
              try {
                return (await client.decide(agent, name, input ?? {}, subject(context))).needsApproval;
              } catch {
                return true; // what cannot be decided is never run unasked
              }
            },
          }
        : {}),
    }) as FunctionTool<unknown>;
  });
}

function defined<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
