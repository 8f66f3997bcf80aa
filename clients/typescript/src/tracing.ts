/**
 * OpenTelemetry, when `@opentelemetry/api` is installed: the active span gets the prompt's
 * name (`gen_ai.prompt.name`, the agent), its version (`gen_ai.prompt.version`, the revision
 * as a string), `loadout.label` and `loadout.source`. A fallback names no prompt and no
 * version (it has neither), only its source. Loaded with a dynamic import, so nothing is
 * imported when the package is absent, and nothing is recorded when no span is recording.
 */

import type { Loadout, Prompt, Tools } from './results.js';

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

/**
 * Records what was served on the active span. A `Tools` names no prompt (and in a turn that
 * fetches both, would overwrite the prompt's `loadout.source`), so only prompts and loadouts
 * are recorded; a fallback records only its source (as the Python client).
 */
export function record(trace: TraceApi, served: Prompt | Tools | Loadout): void {
  if (!('text' in served) && !('prompt' in served)) return;
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return;
  if (served.revision === null) {
    span.setAttributes({ 'loadout.source': served.source });
    return;
  }
  const attributes: Record<string, string> = {
    'gen_ai.prompt.name': served.agent,
    'gen_ai.prompt.version': String(served.revision),
    'loadout.source': served.source,
  };
  if (served.label !== null) attributes['loadout.label'] = served.label;
  span.setAttributes(attributes);
}
