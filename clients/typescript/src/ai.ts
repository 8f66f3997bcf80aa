/**
 * The Vercel AI SDK adapter (`ai`): an agent's loadout tools as AI SDK `tool()`s with
 * loadout's strict JSON schemas, whose `execute` goes through loadout's tool-call route, so
 * approval tiers and policies hold.
 *
 *     import { generateText } from 'ai';
 *     import { Client } from '@loadout/client';
 *     import { aiTools } from '@loadout/client/ai';
 *
 *     const client = new Client({ baseUrl, apiKey });
 *     const prompt = await client.prompt('assistant', 'web');
 *     await generateText({ model, system: prompt.text, prompt: 'What is on today?',
 *                          tools: await aiTools(client, 'assistant', { conversationId: 'c-1' }) });
 */

import { jsonSchema, type Tool, tool } from 'ai';

import type { Client } from './client.js';
import { callText, functionParts, type WaitForApproval } from './shared.js';
import type { ToolDefinition } from './results.js';

export type { WaitForApproval } from './shared.js';

export interface AiToolsOptions {
  conversationId: string;
  userId?: string;
  label?: string;
  fallback?: readonly ToolDefinition[];
  /** Ask loadout (a dry run) whether each call needs a person, as the AI SDK's `needsApproval`. */
  needsApproval?: boolean;
  /** Wait for a proposal's decision inside the call (`false`: answer that it awaits approval). */
  wait?: WaitForApproval;
}

/** The agent's tools by name, ready for `generateText({ tools })`. */
export async function aiTools(client: Client, agent: string, options: AiToolsOptions): Promise<Record<string, Tool>> {
  const listed = await client.tools(agent, {
    format: 'openai',
    conversationId: options.conversationId,
    ...(options.userId !== undefined ? { userId: options.userId } : {}),
    ...(options.label !== undefined ? { label: options.label } : {}),
    ...(options.fallback !== undefined ? { fallback: options.fallback } : {}),
  });
  const call = {
    conversationId: options.conversationId,
    revision: listed.revision,
    ...(options.userId !== undefined ? { userId: options.userId } : {}),
  };
  const tools: Record<string, Tool> = {};
  for (const definition of listed.tools) {
    const { name, description, parameters } = functionParts(definition);
    tools[name] = tool({
      description,
      inputSchema: jsonSchema<Record<string, unknown>>(parameters),
      execute: (input: Record<string, unknown>) => callText(client, agent, name, input, call, options.wait),
      ...(options.needsApproval
        ? {
            needsApproval: async (input: Record<string, unknown>) => {
              try {
                return (await client.decide(agent, name, input, call)).needsApproval;
              } catch {
                return true;
              }
            },
          }
        : {}),
    }) as Tool;
  }
  return tools;
}
