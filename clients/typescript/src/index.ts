export { Client } from './client.js';
export type { CallOptions, ClientOptions, LoadoutOptions, OutcomeOptions, PromptOptions, ToolsOptions } from './client.js';
export type { StreamState } from './listen.js';
export * as errors from './errors.js';
export {
  BadRequest,
  Conflict,
  Forbidden,
  InvalidArguments,
  LoadoutError,
  NotConnected,
  NotFound,
  PayloadTooLarge,
  ProposalDeclined,
  ProposalExpired,
  ServerError,
  ToolCallFailed,
  TooManyRequests,
  Unauthorized,
  Unprocessable,
  Unreachable,
  WaitTimeout,
} from './errors.js';
export type {
  Decision,
  Format,
  Loadout,
  Prompt,
  Proposal,
  Provenance,
  ServedModel,
  Source,
  ToolDefinition,
  ToolResult,
  Tools,
} from './results.js';
export type { components, paths } from './openapi.js';
