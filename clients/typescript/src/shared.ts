/** What both SDK adapters share: an OpenAI tool's parts, and what the model reads back. */

import { LoadoutError } from './errors.js';
import type { Proposal, ToolDefinition, ToolResult } from './results.js';

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
export function relay(outcome: ToolResult | Proposal): string {
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
export function relayError(error: unknown): string {
  if (error instanceof LoadoutError) {
    return JSON.stringify({ status: 'error', code: error.code, message: error.message, details: error.details ?? null });
  }
  throw error;
}
