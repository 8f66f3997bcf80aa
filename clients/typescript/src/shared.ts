/** What both SDK adapters share: an OpenAI tool's parts, and what the model reads back. */

import type { CallOptions, Client } from './client.js';
import { LoadoutError } from './errors.js';
import type { Proposal, ToolDefinition, ToolResult } from './results.js';

/**
 * What a tool does with a call that needs a person: `false` (the default) tells the model at
 * once that it awaits approval; `true` or `{ timeout, interval }` waits for the decision
 * (`Client.wait`) and gives the model the result, or the refusal or the time-out as an error.
 */
export type WaitForApproval = boolean | { timeout?: number; interval?: number };

/** One call through loadout, as the text the model reads: never a throw for loadout's answers. */
export async function callText(
  client: Client,
  agent: string,
  tool: string,
  input: unknown,
  call: CallOptions,
  wait: WaitForApproval | undefined,
): Promise<string> {
  try {
    const outcome = await client.callTool(agent, tool, input ?? {}, call);
    if (outcome.kind === 'proposal' && wait) return relay(await client.wait(outcome, wait === true ? {} : wait));
    return relay(outcome);
  } catch (error) {
    return relayError(error);
  }
}

export interface FunctionParts {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The name, description and strict JSON schema of an `openai`-format tool. */
export function functionParts(definition: ToolDefinition): FunctionParts {
  const fn = (definition.function ?? definition) as Record<string, unknown>;
  return {
    name: String(fn.name),
    description: String(fn.description ?? ''),
    parameters: (fn.parameters ?? { type: 'object', properties: {}, additionalProperties: false }) as Record<string, unknown>,
  };
}

/** What the model reads as a call's output: the result, or that a person must approve it. */
function relay(outcome: ToolResult | Proposal): string {
  if (outcome.kind === 'proposal') {
    return JSON.stringify({
      status: outcome.status,
      proposal_id: outcome.proposalId,
      description: outcome.description,
      message: 'This call awaits a person\'s approval; it has not run. Tell the user what was proposed.',
    });
  }
  return JSON.stringify({ status: 'succeeded', result: outcome.result });
}

/** A loadout error as the tool's output, so the model can correct itself (never a throw). */
function relayError(error: unknown): string {
  if (error instanceof LoadoutError) {
    return JSON.stringify({ status: 'error', code: error.code, message: error.message, details: error.details ?? null });
  }
  throw error;
}
