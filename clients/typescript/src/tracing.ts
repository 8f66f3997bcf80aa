/**
 * OpenTelemetry, when `@opentelemetry/api` is installed: the active span gets the prompt's
 * name (`gen_ai.prompt.name`, the agent), its version (`gen_ai.prompt.version`, the revision
 * as a string), `loadout.label` and `loadout.source`. A fallback names no version (it has
 * none), only its source. Loaded with a dynamic import, so nothing is imported when the
 * package is absent, and nothing is recorded when no span is recording.
 */

import type { Source } from './results.js';

interface Span {
  isRecording(): boolean;
  setAttributes(attributes: Record<string, string>): unknown;
}
interface TraceApi {
  getActiveSpan(): Span | undefined;
}

/** `@opentelemetry/api`'s `trace`, or `null` when it is not installed. */
export async function loadTrace(): Promise<TraceApi | null> {
  try {
    const name = '@opentelemetry/api';
    const api = (await import(name)) as { trace?: TraceApi };
    return api.trace ?? null;
  } catch {
    return null;
  }
}

export interface Served {
  readonly agent: string;
  readonly revision: number | null;
  readonly label: string | null;
  readonly source: Source;
}

export function record(trace: TraceApi, served: Served): void {
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return;
  const attributes: Record<string, string> = { 'loadout.source': served.source };
  if (served.source !== 'fallback') attributes['gen_ai.prompt.name'] = served.agent;
  if (served.revision !== null) attributes['gen_ai.prompt.version'] = String(served.revision);
  if (served.label !== null) attributes['loadout.label'] = served.label;
  span.setAttributes(attributes);
}
