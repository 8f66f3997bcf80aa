/**
 * What the fetch methods return: the prompt's text or the tools, the revision served, the
 * provenance, and `source`, where the copy came from:
 *
 * - `fresh`: fetched now (a 200);
 * - `cached`: from memory, inside its TTL (no request was made);
 * - `live`: from memory while the client listens to the change stream and it is up (no
 *   request was made, and no TTL: the copy stands until an event names it);
 * - `revalidated`: fetched now as a 304, so the cached copy was confirmed current;
 * - `stale`: from memory past its TTL, because loadout could not be reached or while a
 *   background refresh runs;
 * - `disk`: the last-known-good copy from `cacheDir`, because loadout could not be reached;
 * - `fallback`: the `fallback` given in code (no revision, no provenance).
 */

import type { components } from './openapi.js';

export type Source = 'fresh' | 'cached' | 'live' | 'revalidated' | 'stale' | 'disk' | 'fallback';
export type Provenance = components['schemas']['Provenance'];
export type ServedModel = components['schemas']['ServedModel'];
export type Format = 'openai' | 'anthropic' | 'mcp';
/** A tool definition in the format asked for, as plain JSON ready for that SDK. */
export type ToolDefinition = Record<string, unknown>;

/** An agent's rendered prompt. `String(prompt)` is its text. */
export interface Prompt {
  readonly agent: string;
  readonly channel: string;
  readonly text: string;
  readonly revision: number | null;
  readonly label: string | null;
  readonly provenance: Provenance | null;
  readonly source: Source;
  readonly etag: string | null;
  toString(): string;
}

/** An agent's active tools in one wire format. */
export interface Tools {
  readonly agent: string;
  readonly format: Format;
  readonly tools: readonly ToolDefinition[];
  readonly revision: number | null;
  readonly label: string | null;
  readonly source: Source;
  readonly etag: string | null;
}

/** Prompt and tools of one revision, fetched in one round trip, with the revision's model settings for the channel. */
export interface Loadout {
  readonly agent: string;
  readonly prompt: Prompt;
  readonly tools: Tools;
  readonly revision: number | null;
  readonly label: string | null;
  readonly source: Source;
  readonly etag: string | null;
  /** `null` when the revision sets none (the application chooses). */
  readonly model: ServedModel | null;
}

/** A tool call that ran and succeeded: `result` is what its executor answered. */
export interface ToolResult {
  readonly kind: 'result';
  readonly tool: string;
  readonly proposalId: number;
  readonly result: unknown;
}

/**
 * A tool call waiting for a person (`proposed_for_approval`), approved and not yet run
 * (`approved`), or running (`executing`). `wait(proposal)` waits for its end.
 */
export interface Proposal {
  readonly kind: 'proposal';
  readonly agent: string;
  readonly tool: string;
  readonly proposalId: number;
  readonly status: string;
  readonly description: string;
  readonly preview: unknown;
  /** The call as sent, idempotency key included: `wait` sends it again to read the state. */
  readonly request: Readonly<components['schemas']['ToolCall']>;
}

/**
 * How loadout would decide a call (a dry run: nothing written, nothing run): `auto` runs at
 * once, `approval` waits for an approver, `deny` is refused by a policy.
 */
export interface Decision {
  readonly tool: string;
  readonly decision: components['schemas']['Outcome'];
  readonly revision: number;
  readonly policy: string | null;
  readonly reason: string | null;
  /** Whether the call would not run at once (it waits, or is refused). */
  readonly needsApproval: boolean;
}
