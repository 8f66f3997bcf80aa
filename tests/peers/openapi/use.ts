// A typed use of the types openapi-typescript generates from loadout's /openapi.json (./schema.d.ts,
// written next to a copy of this file by typescript.py). `tsc --noEmit` must accept it: tool
// arguments, parameters and input schemas are free-form JSON objects, ETag and If-None-Match are
// declared, and a prompt's `channel` is required.
import type { paths } from "./schema";

type Json<T> = T extends { content: { "application/json": infer B } } ? B : never;

// A tool call's arguments: any JSON object the tool's schema takes.
type ToolCall = Json<paths["/v1/agents/{agent}/tool-calls"]["post"]["requestBody"]>;
export const call: ToolCall = {
  tool: "create_tasks",
  arguments: { tasks: [{ title: "Buy milk", due: null, tags: ["home"], priority: 2 }] },
  conversation_id: "c1",
  user_id: "alice",
};

// A new tool's parameters: a JSON Schema object.
type NewTool = Json<paths["/v1/tools"]["post"]["requestBody"]>;
export const tool: NewTool = {
  name: "create_notes",
  type: "api",
  approval_tier: "requires_approval",
  description: "Save notes for the user.",
  parameters: {
    type: "object",
    additionalProperties: false,
    required: ["notes"],
    properties: { notes: { type: "array", items: { type: "string" } } },
  },
};

// The tools route, in each format: the schema inside each tool is a free-form object.
type Tools = Json<paths["/v1/agents/{agent}/tools"]["get"]["responses"][200]>;
type AnyTool = Tools["tools"][number];
const idsSchema = {
  type: "object",
  additionalProperties: false,
  required: ["ids"],
  properties: { ids: { type: "array", items: { type: "string" } } },
};
export const mcpInput: Extract<AnyTool, { inputSchema: unknown }>["inputSchema"] = idsSchema;
export const anthropicInput: Extract<AnyTool, { input_schema: unknown }>["input_schema"] = idsSchema;
export const openaiParameters: Extract<AnyTool, { function: unknown }>["function"]["parameters"] = idsSchema;

// A proposal as an approver reads it: its arguments are the call's.
type Proposal = Json<paths["/v1/proposals/{id}"]["get"]["responses"][200]>;
export function firstId(p: Proposal): unknown {
  const args: Record<string, unknown> = p.arguments;
  return Array.isArray(args.ids) ? args.ids[0] : undefined;
}

// Conditional fetches: If-None-Match goes out, ETag comes back.
type GetPrompt = paths["/v1/agents/{agent}/prompt"]["get"];
export const headers: NonNullable<GetPrompt["parameters"]["header"]> = { "If-None-Match": '"abc"' };
export function etag(h: GetPrompt["responses"][200]["headers"]): string {
  return h["ETag"]; // declared and required: a string (undeclared is `unknown`, optional is `string | undefined`: both fail here)
}

// `channel` is required on the prompt route.
type PromptQuery = NonNullable<GetPrompt["parameters"]["query"]>;
export const query: PromptQuery = { channel: "web", tz: "Europe/Berlin" };
// @ts-expect-error a prompt query without a channel does not type-check
export const noChannel: PromptQuery = { tz: "Europe/Berlin" };
