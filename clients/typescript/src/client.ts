/**
 * The client: loadout's agent API with a cache in front of the fetches (as the Python
 * client's `Client`). Fetch-only: it runs in Node, Deno, Bun, Workers and edge runtimes;
 * the disk copies (`cacheDir`) need Node's file system and are loaded only when asked for.
 */

import * as errors from './errors.js';
import type { components } from './openapi.js';
import type {
  Decision,
  Format,
  Loadout,
  Prompt,
  Proposal,
  Source,
  ToolDefinition,
  ToolResult,
  Tools,
} from './results.js';
import { attach, detach, type ChangeEvent, type Listener, type StreamState, type Subscriber } from './listen.js';
import type { DiskStore } from './store.js';
import { loadTrace, record } from './tracing.js';

type Schemas = components['schemas'];
type Kind = 'prompt' | 'tools' | 'loadout';
type Result = Prompt | Tools | Loadout;
type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** loadout's address, e.g. `http://127.0.0.1:8080`; `LOADOUT_URL` when absent. */
  baseUrl?: string;
  /** An agent key (or an admin or operator key); `LOADOUT_API_KEY` when absent. */
  apiKey?: string;
  /** Seconds a fetched copy is served from memory without a request (60). */
  ttl?: number;
  /**
   * Past the TTL, serve the copy held while one background request revalidates it
   * (`true`, the default), or revalidate before answering (`false`).
   */
  staleWhileRevalidate?: boolean;
  /** Node only: where last-known-good copies are kept, for when loadout cannot be reached (also after a restart). */
  cacheDir?: string;
  /** Seconds one request may take before loadout counts as unreachable (10). */
  timeout?: number;
  /** Span attributes when `@opentelemetry/api` is installed (`true`). */
  tracing?: boolean;
  /** Copies held in memory at most (1024); the oldest goes first. */
  maxEntries?: number;
  /** A `fetch` of your own (a proxy, a recorder); the global one when absent. */
  fetch?: FetchLike;
  /**
   * Listen to loadout's change stream (`false`, the default: no stream). While it is up,
   * a copy is served until an event names it (`source: "live"`) instead of for `ttl`
   * seconds; while it is down, copies expire by their TTL as without it. One stream per
   * process for each address and key, shared by every client listening with them; call
   * `close()` when done, or it keeps the process running.
   */
  listen?: boolean;
}

export interface PromptOptions {
  /** Brings the user's instructions into the prompt; the subject a running rollout assigns by. */
  userId?: string;
  /** IANA time zone for `$current_time`; UTC when absent. */
  tz?: string;
  /** The label whose revision to serve; `production` when absent. */
  label?: string;
  /** The subject a running rollout assigns by when there is no `userId`. */
  conversationId?: string;
  /** Served (marked `fallback`) when loadout cannot be reached and no copy is held. */
  fallback?: string;
}

export interface ToolsOptions {
  format?: Format;
  label?: string;
  userId?: string;
  conversationId?: string;
  fallback?: readonly ToolDefinition[];
}

export interface LoadoutOptions extends Omit<PromptOptions, 'fallback'> {
  format?: Format;
  fallback?: { prompt: string; tools: readonly ToolDefinition[] };
}

export interface CallOptions {
  conversationId: string;
  userId?: string;
  messageId?: string;
  /** Sent with the call so a retry never runs it twice; a fresh one when absent. */
  idempotencyKey?: string;
  /** The revision the tools came from (`Tools.revision`). */
  revision?: number | null;
}

export interface OutcomeOptions {
  revision: number;
  conversationId: string;
  outcome: Schemas['OutcomeKind'];
  userId?: string;
  score?: number;
}

/** Thrown inside: loadout could not answer (unreachable or 5xx); `error` is what to throw when nothing can be served. */
class Offline extends Error {
  constructor(readonly error: errors.LoadoutError) {
    super(error.message);
  }
}

/** The parameters of one cached fetch, in a fixed order (the key in memory and on disk). */
interface Wanted {
  kind: Kind;
  agent: string;
  channel?: string | undefined;
  userId?: string | undefined;
  tz?: string | undefined;
  label?: string | undefined;
  format?: string | undefined;
  conversationId?: string | undefined;
}

/** A fetch in progress, and whether a change it may predate named it while it ran. */
interface Flight {
  wanted: Wanted;
  named: boolean;
}

/** A cached answer; `cached` is the result a hit serves, built once. */
class Entry {
  retryAt = 0;
  /** The stream's epoch it was fetched in (`Listener.epoch`): 0 when not listening or not yet ready. */
  epoch = 0;
  private readonly results = new Map<Source, Result>();
  readonly cached: Result;

  constructor(
    readonly wanted: Wanted,
    readonly body: string,
    readonly etag: string | null,
    public expires: number,
    public origin: 'network' | 'disk' = 'network',
  ) {
    this.cached = parse(wanted, body, etag, 'cached');
    this.results.set('cached', this.cached);
  }

  result(source: Source): Result {
    let found = this.results.get(source);
    if (found === undefined) {
      found = withSource(this.cached, source);
      this.results.set(source, found);
    }
    return found;
  }

  stale(): Result {
    return this.result(this.origin === 'disk' ? 'disk' : 'stale');
  }
}

const now = (): number => performance.now() / 1000;
const textOf = function (this: Prompt): string {
  return this.text;
};

function makePrompt(fields: Omit<Prompt, 'toString'>): Prompt {
  return Object.freeze({ ...fields, toString: textOf });
}

/** A 200's body as the result of `source`; the shapes are the generated types' (src/openapi.ts). */
function parse(wanted: Wanted, body: string, etag: string | null, source: Source): Result {
  const data = JSON.parse(body) as Record<string, unknown> | null;
  const prompt = (agent: string, p: Schemas['PromptBody']): Prompt =>
    makePrompt({
      agent,
      channel: p.provenance.channel,
      text: p.text,
      revision: p.provenance.revision,
      label: p.provenance.label,
      provenance: p.provenance,
      source,
      etag,
    });
  const shaped = (ok: boolean) => {
    if (!ok) throw new Error(`a ${wanted.kind} answer of an unexpected shape`);
  };
  if (wanted.kind === 'prompt') {
    const view = data as Schemas['PromptView'];
    shaped(typeof view?.text === 'string' && typeof view.provenance === 'object');
    return prompt(view.agent, view);
  }
  if (wanted.kind === 'tools') {
    const view = data as Schemas['ToolsView'];
    shaped(Array.isArray(view?.tools) && typeof view.revision === 'number');
    return Object.freeze({
      agent: view.agent,
      format: view.format,
      tools: view.tools,
      revision: view.revision,
      label: view.label,
      source,
      etag,
    });
  }
  const view = data as Schemas['LoadoutView'];
  shaped(Array.isArray(view?.tools) && typeof view.prompt?.provenance === 'object');
  const p = prompt(view.agent, view.prompt);
  const tools: Tools = Object.freeze({
    agent: view.agent,
    format: view.format,
    tools: view.tools,
    revision: p.revision,
    label: p.label,
    source,
    etag,
  });
  return Object.freeze({
    agent: view.agent,
    prompt: p,
    tools,
    revision: p.revision,
    label: p.label,
    source,
    etag,
    model: view.model ?? null,
  });
}

function withSource(result: Result, source: Source): Result {
  if ('prompt' in result) {
    return Object.freeze({
      ...result,
      source,
      prompt: makePrompt({ ...result.prompt, source }),
      tools: Object.freeze({ ...result.tools, source }),
    });
  }
  if ('text' in result) return makePrompt({ ...result, source });
  return Object.freeze({ ...result, source });
}

function fallbackResult(wanted: Wanted, fallback: unknown): Result {
  const base = { agent: wanted.agent, revision: null, label: wanted.label ?? null, source: 'fallback' as const, etag: null };
  const prompt = (text: string): Prompt =>
    makePrompt({ ...base, channel: wanted.channel ?? '', text, provenance: null });
  const tools = (list: readonly ToolDefinition[]): Tools =>
    Object.freeze({ ...base, format: (wanted.format ?? 'openai') as Format, tools: [...list] });
  if (wanted.kind === 'prompt') return prompt(String(fallback));
  if (wanted.kind === 'tools') return tools(fallback as readonly ToolDefinition[]);
  const given = fallback as { prompt: string; tools: readonly ToolDefinition[] };
  return Object.freeze({ ...base, prompt: prompt(given.prompt), tools: tools(given.tools), model: null });
}

function segment(name: string): string {
  return encodeURIComponent(name);
}

function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.[name];
}

/** loadout's agent API with a cache in front of the fetches. */
export class Client {
  readonly baseUrl: string;
  readonly ttl: number;
  readonly staleWhileRevalidate: boolean;
  readonly timeout: number;
  /** After a failed refresh, none for this long (so an outage is not a request per call). */
  readonly backoff: number;
  private readonly headers: Record<string, string>;
  private readonly apiKey: string;
  private readonly fetcher: FetchLike;
  private readonly maxEntries: number;
  private readonly mem = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<Result>>();
  private readonly refreshing = new Set<string>();
  private readonly cacheDir: string | undefined;
  private store: Promise<{ store: DiskStore; identity: string }> | undefined;
  private readonly ready: Promise<void>;
  private trace: Awaited<ReturnType<typeof loadTrace>> = null;
  private listener: Listener | undefined;
  private readonly subscriber: Subscriber | undefined;
  private readonly flights = new Set<Flight>();

  constructor(options: ClientOptions = {}) {
    const baseUrl = options.baseUrl ?? env('LOADOUT_URL');
    const apiKey = options.apiKey ?? env('LOADOUT_API_KEY');
    if (!baseUrl) throw new Error('baseUrl is required (or set LOADOUT_URL)');
    if (!apiKey) throw new Error('apiKey is required (or set LOADOUT_API_KEY)');
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.apiKey = apiKey;
    this.headers = { authorization: `Bearer ${apiKey}`, accept: 'application/json' };
    this.ttl = options.ttl ?? 60;
    this.staleWhileRevalidate = options.staleWhileRevalidate ?? true;
    this.timeout = options.timeout ?? 10;
    this.backoff = Math.max(1, Math.min(this.ttl, 30));
    this.maxEntries = options.maxEntries ?? 1024;
    this.fetcher = options.fetch ?? ((input, init) => fetch(input, init));
    this.cacheDir = options.cacheDir;
    this.ready = (options.tracing ?? true)
      ? loadTrace().then((trace) => {
          this.trace = trace;
        })
      : Promise.resolve();
    if (options.listen === true) {
      this.subscriber = { changed: (event) => this.changed(event) };
      this.listener = attach(this.baseUrl, apiKey, this.fetcher, this.timeout, this.subscriber);
    }
  }

  // -- the change stream ----------------------------------------------------------------

  /**
   * The change stream as this client sees it: `off` (not listening, or closed),
   * `connecting` (until the first stream is ready), `live` (copies are served until an
   * event names them) or `broken` (down, or refused: copies expire by their TTL while
   * it reconnects).
   */
  get streamState(): StreamState {
    return this.listener?.state ?? 'off';
  }

  /**
   * Stops listening: the stream ends when the last client listening with this address
   * and key closes. The client goes on serving, by its TTL. Without `listen`, a no-op.
   */
  close(): void {
    const listener = this.listener;
    if (listener === undefined || this.subscriber === undefined) return;
    this.listener = undefined;
    detach(listener, this.subscriber);
  }

  /** The epoch a copy is served in without a TTL: the stream's, while it is live (0: it is not). */
  private liveEpoch(): number {
    const listener = this.listener;
    return listener !== undefined && listener.state === 'live' ? listener.epoch : 0;
  }

  /** Drops the copies in memory that `event` names (the disk copies stay: they are the last known good). */
  private changed(event: ChangeEvent): void {
    const names = matcher(event);
    for (const [key, entry] of this.mem) {
      if (names(entry.wanted)) this.mem.delete(key);
    }
    for (const flight of this.flights) {
      if (names(flight.wanted)) {
        // Its answer may predate the change: not kept, and no call from now on waits for it.
        flight.named = true;
        this.inflight.delete(keyOf(flight.wanted));
      }
    }
  }

  // -- fetching -------------------------------------------------------------------------

  /** The agent's rendered prompt for `channel` (and the user's instructions, with `userId`). */
  prompt(agent: string, channel: string, options: PromptOptions = {}): Promise<Prompt> {
    const wanted: Wanted = {
      kind: 'prompt',
      agent,
      channel,
      userId: options.userId,
      tz: options.tz,
      label: options.label,
      conversationId: options.conversationId,
    };
    return this.get(wanted, options.fallback) as Promise<Prompt>;
  }

  /** The agent's active tools as `openai` (the default), `anthropic` or `mcp` definitions. */
  tools(agent: string, options: ToolsOptions = {}): Promise<Tools> {
    const wanted: Wanted = {
      kind: 'tools',
      agent,
      userId: options.userId,
      label: options.label,
      format: options.format ?? 'openai',
      conversationId: options.conversationId,
    };
    return this.get(wanted, options.fallback) as Promise<Tools>;
  }

  /** Prompt and tools of one revision in one round trip. */
  loadout(agent: string, channel: string, options: LoadoutOptions = {}): Promise<Loadout> {
    const wanted: Wanted = {
      kind: 'loadout',
      agent,
      channel,
      userId: options.userId,
      tz: options.tz,
      label: options.label,
      format: options.format ?? 'openai',
      conversationId: options.conversationId,
    };
    return this.get(wanted, options.fallback) as Promise<Loadout>;
  }

  /** Forgets every copy held in memory (the disk copies stay). */
  clearCache(): void {
    this.mem.clear();
  }

  private async get(wanted: Wanted, fallback: unknown): Promise<Result> {
    const key = keyOf(wanted);
    const entry = this.mem.get(key);
    if (entry !== undefined) {
      const live = this.liveEpoch();
      if (live !== 0 && entry.epoch === live) return this.served(entry.result('live'));
      const t = now();
      if (t < entry.expires) {
        // Held from before this stream was ready: inside its TTL, and confirmed once in the background.
        if (live !== 0) this.revalidate(key, wanted, entry, t);
        return this.served(entry.cached);
      }
      if (this.staleWhileRevalidate || t < entry.retryAt) {
        this.revalidate(key, wanted, entry, t);
        return this.served(entry.stale());
      }
    }
    // Only the first call per key waits on the network; the others wait on its answer.
    let pending = this.inflight.get(key);
    if (pending === undefined) {
      const started: Promise<Result> = this.load(key, wanted, entry, fallback).finally(() => {
        if (this.inflight.get(key) === started) this.inflight.delete(key);
      });
      pending = started;
      this.inflight.set(key, pending);
    }
    return this.served(await pending);
  }

  private async load(key: string, wanted: Wanted, entry: Entry | undefined, fallback: unknown): Promise<Result> {
    await this.ready;
    try {
      return await this.fetchOne(key, wanted, entry);
    } catch (error) {
      if (!(error instanceof Offline)) throw error;
      return this.offline(key, wanted, this.mem.get(key), fallback, error);
    }
  }

  /** One background refresh per key, none inside the back-off after a failed one. */
  private revalidate(key: string, wanted: Wanted, entry: Entry, t: number): void {
    if (t >= entry.retryAt && !this.refreshing.has(key)) {
      this.refreshing.add(key);
      void this.refresh(key, wanted);
    }
  }

  private async refresh(key: string, wanted: Wanted): Promise<void> {
    try {
      await this.fetchOne(key, wanted, this.mem.get(key));
    } catch (error) {
      if (!(error instanceof errors.NotFound)) {
        const held = this.mem.get(key);
        if (held !== undefined) held.retryAt = now() + this.backoff;
      }
    } finally {
      this.refreshing.delete(key);
    }
  }

  private served<T extends Result>(result: T): T {
    if (this.trace !== null) record(this.trace, result);
    return result;
  }

  private async fetchOne(key: string, wanted: Wanted, entry: Entry | undefined): Promise<Result> {
    const url = this.baseUrl + requestPath(wanted);
    let headers = entry?.etag ? { ...this.headers, 'if-none-match': entry.etag } : this.headers;
    // Listening: served at the newest generation the stream named, or later, by any replica.
    const generation = this.listener?.generation;
    if (generation) headers = { ...headers, 'loadout-generation': generation };
    const epoch = this.listener?.epoch ?? 0;
    const flight: Flight = { wanted, named: false };
    let response: Response;
    let body: string;
    this.flights.add(flight);
    try {
      response = await this.fetcher(url, { headers, signal: AbortSignal.timeout(this.timeout * 1000) });
      body = await response.text();
    } catch (error) {
      throw new Offline(unreachable(error));
    } finally {
      this.flights.delete(flight);
    }
    if (response.status === 200) {
      const etag = response.headers.get('etag');
      const fresh = new Entry(wanted, body, etag, now() + this.ttl);
      fresh.epoch = epoch;
      // A change named it while it was fetched: the answer may predate it, so it is not kept.
      if (!flight.named) this.put(key, fresh);
      if (this.cacheDir !== undefined) {
        try {
          const { store, identity } = await this.disk();
          await store.write(diskKey(this.baseUrl, identity, wanted), etag, body);
        } catch (error) {
          console.warn(`loadout: could not store the last-known-good copy in ${this.cacheDir}: ${String(error)}`);
        }
      }
      return fresh.result('fresh');
    }
    if (response.status === 304 && entry !== undefined) {
      entry.expires = now() + this.ttl;
      entry.retryAt = 0;
      entry.origin = 'network';
      entry.epoch = epoch;
      if (!flight.named) this.put(key, entry);
      return entry.result('revalidated');
    }
    const error = errors.fromResponse(response.status, body, response.headers.get('retry-after'));
    if (response.status === 404) await this.evict(key, wanted);
    if (response.status >= 500) throw new Offline(error);
    throw error;
  }

  /** What is served when loadout cannot answer: the stale copy, the disk copy, the fallback. */
  private async offline(
    key: string,
    wanted: Wanted,
    entry: Entry | undefined,
    fallback: unknown,
    offline: Offline,
  ): Promise<Result> {
    const t = now();
    if (entry !== undefined) {
      entry.retryAt = t + this.backoff;
      return entry.stale();
    }
    if (this.cacheDir !== undefined) {
      const stored = await this.disk().then(
        ({ store, identity }) => store.read(diskKey(this.baseUrl, identity, wanted)),
        () => null, // no file system here (an edge runtime given a cacheDir): no copy
      );
      if (stored !== null) {
        try {
          const disk = new Entry(wanted, stored.body, stored.etag, t, 'disk');
          disk.retryAt = t + this.backoff;
          this.put(key, disk);
          return disk.result('disk');
        } catch {
          // a copy in an older shape: not servable
        }
      }
    }
    if (fallback !== undefined && fallback !== null) return fallbackResult(wanted, fallback);
    throw offline.error;
  }

  private disk(): Promise<{ store: DiskStore; identity: string }> {
    this.store ??= import('./store.js').then(({ DiskStore, keyIdentity }) => ({
      store: new DiskStore(this.cacheDir as string),
      identity: keyIdentity(this.apiKey),
    }));
    return this.store;
  }

  private async evict(key: string, wanted: Wanted): Promise<void> {
    this.mem.delete(key);
    if (this.cacheDir !== undefined) {
      const { store, identity } = await this.disk();
      await store.delete(diskKey(this.baseUrl, identity, wanted));
    }
  }

  private put(key: string, entry: Entry): void {
    this.mem.delete(key);
    this.mem.set(key, entry);
    while (this.mem.size > this.maxEntries) {
      const oldest = this.mem.keys().next().value;
      if (oldest === undefined) break;
      this.mem.delete(oldest);
    }
  }

  // -- tool calls -----------------------------------------------------------------------

  /**
   * Calls a tool through loadout: a `ToolResult` when it ran, a `Proposal` when it waits for
   * approval. Throws `InvalidArguments`, `ToolCallFailed`, `ProposalDeclined`...
   */
  async callTool(agent: string, tool: string, args: unknown, options: CallOptions): Promise<ToolResult | Proposal> {
    const request: Schemas['ToolCall'] = {
      tool,
      arguments: args as Schemas['ToolCall']['arguments'],
      conversation_id: options.conversationId,
      idempotency_key: options.idempotencyKey ?? `ts-${crypto.randomUUID()}`,
    };
    if (options.userId !== undefined) request.user_id = options.userId;
    if (options.messageId !== undefined) request.message_id = options.messageId;
    if (options.revision !== undefined && options.revision !== null) request.revision = options.revision;
    return this.sendCall(agent, request);
  }

  /**
   * How loadout would decide this call now (its policy, else the tier and the user's
   * preference), without writing or running anything: for an SDK's `needsApproval`.
   */
  async decide(agent: string, tool: string, args: unknown, options: Omit<CallOptions, 'messageId' | 'idempotencyKey'>): Promise<Decision> {
    const request: Schemas['ToolCall'] = {
      tool,
      arguments: args as Schemas['ToolCall']['arguments'],
      conversation_id: options.conversationId,
      dry_run: true,
    };
    if (options.userId !== undefined) request.user_id = options.userId;
    if (options.revision !== undefined && options.revision !== null) request.revision = options.revision;
    const data = (await this.post(`/v1/agents/${segment(agent)}/tool-calls`, request, [200])) as Schemas['CallDecision'];
    return Object.freeze({
      tool,
      decision: data.decision,
      revision: data.revision,
      policy: data.decided_by?.policy ?? null,
      reason: data.decided_by?.reason ?? null,
      needsApproval: data.decision !== 'auto',
    });
  }

  /**
   * Waits until the proposal is decided and has run: its `ToolResult`. Throws
   * `ProposalDeclined`, `ProposalExpired`, `ToolCallFailed`, or `WaitTimeout` after
   * `timeout` seconds (the proposal goes on waiting).
   */
  async wait(proposal: Proposal | ToolResult, options: { timeout?: number; interval?: number } = {}): Promise<ToolResult> {
    if (proposal.kind === 'result') return proposal;
    const timeout = options.timeout ?? 300;
    let interval = options.interval ?? 0.5;
    const deadline = now() + timeout;
    let current: Proposal = proposal;
    for (;;) {
      const remaining = deadline - now();
      if (remaining <= 0) {
        throw new errors.WaitTimeout(
          `proposal ${proposal.proposalId} (${proposal.tool}) still ${current.status} after ${timeout} s`,
          { code: 'timeout', details: { proposal_id: proposal.proposalId } },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(interval, remaining) * 1000));
      interval = Math.min(interval * 1.5, 5);
      const answer = await this.sendCall(proposal.agent, proposal.request);
      if (answer.kind === 'result') return answer;
      current = answer;
    }
  }

  /** Reports how a conversation served by `revision` went, for rollouts: the stored outcome. */
  async reportOutcome(agent: string, options: OutcomeOptions): Promise<Schemas['OutcomeView']> {
    const body: Schemas['NewOutcome'] = {
      revision: options.revision,
      conversation_id: options.conversationId,
      outcome: options.outcome,
    };
    if (options.userId !== undefined) body.user_id = options.userId;
    if (options.score !== undefined) body.score = options.score;
    return (await this.post(`/v1/agents/${segment(agent)}/outcomes`, body, [200, 201])) as Schemas['OutcomeView'];
  }

  private async sendCall(agent: string, request: Readonly<Schemas['ToolCall']>): Promise<ToolResult | Proposal> {
    const tool = request.tool;
    const data = (await this.post(`/v1/agents/${segment(agent)}/tool-calls`, request, [200])) as
      | Schemas['CallWaiting']
      | Schemas['CallRan'];
    const id = data.proposal_id;
    switch (data.status) {
      case 'succeeded':
        return Object.freeze({ kind: 'result', tool, proposalId: id, result: data.result ?? null });
      case 'failed': {
        const result = data.result;
        const message = typeof result?.error === 'string' ? result.error : 'the call failed';
        throw new errors.ToolCallFailed(`${tool} (proposal ${id}) failed: ${message}`, { code: 'failed', details: result });
      }
      case 'declined':
        throw new errors.ProposalDeclined(`proposal ${id} (${tool}) was declined`, {
          code: 'declined',
          details: { proposal_id: id },
        });
      case 'expired':
        throw new errors.ProposalExpired(`proposal ${id} (${tool}) expired undecided`, {
          code: 'expired',
          details: { proposal_id: id },
        });
      default:
        return Object.freeze({
          kind: 'proposal',
          agent,
          tool,
          proposalId: id,
          status: data.status,
          description: 'description' in data ? data.description : '',
          preview: 'preview' in data ? data.preview : null,
          request,
        });
    }
  }

  private async post(path: string, body: unknown, ok: number[]): Promise<unknown> {
    let response: Response;
    let text: string;
    try {
      response = await this.fetcher(this.baseUrl + path, {
        method: 'POST',
        headers: { ...this.headers, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeout * 1000),
      });
      text = await response.text();
    } catch (error) {
      throw unreachable(error);
    }
    if (!ok.includes(response.status)) {
      throw errors.fromResponse(response.status, text, response.headers.get('retry-after'));
    }
    return text ? JSON.parse(text) : null;
  }
}

function unreachable(error: unknown): errors.Unreachable {
  const cause = error instanceof Error ? (error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message) : String(error);
  return new errors.Unreachable(`loadout could not be reached: ${cause}`, { code: 'unreachable' });
}

/**
 * Everything an answer depends on, so one user's prompt never serves another. The address
 * and the API key are fixed per client and each client has its own Map, so the memory key
 * leaves them out (a shorter string to build on every hit); the disk key, in a directory
 * clients may share, has both (the key as its identity hash).
 */
function keyOf(w: Wanted): string {
  return [w.kind, w.agent, w.channel, w.userId, w.tz, w.label, w.format, w.conversationId]
    .map((part) => (part === undefined ? '\u0001' : part))
    .join('\u0000');
}

/** Which cached copies a change names ("production" stands for an absent label). */
function matcher(event: ChangeEvent): (w: Wanted) => boolean {
  const agent = event.agent;
  // Every change but `everything` names an agent; one that does not is taken as everything.
  if (agent === null) return () => true;
  switch (event.change) {
    case 'label.moved':
    case 'rollout.started':
    case 'rollout.changed':
    case 'rollout.held':
    case 'rollout.aborted':
    case 'rollout.completed': {
      const label = event.label;
      if (label === null) return (w) => w.agent === agent;
      return (w) => w.agent === agent && (w.label ?? 'production') === label;
    }
    case 'instructions.changed': {
      const user = event.user;
      return (w) => w.agent === agent && w.kind !== 'tools' && (user === null || w.userId === user);
    }
    case 'everything':
      return () => true;
    default:
      // agent.deleted, and (conservatively) a change not known yet: all the agent's copies.
      return (w) => w.agent === agent;
  }
}

function diskKey(baseUrl: string, identity: string, w: Wanted): unknown[] {
  return [baseUrl, identity, w.kind, w.agent, w.channel ?? null, w.userId ?? null, w.tz ?? null, w.label ?? null, w.format ?? null, w.conversationId ?? null];
}

function requestPath(w: Wanted): string {
  const query = new URLSearchParams();
  const add = (name: string, value: string | undefined) => {
    if (value !== undefined) query.set(name, value);
  };
  add('channel', w.channel);
  add('user_id', w.userId);
  add('tz', w.tz);
  add('label', w.label);
  add('format', w.format);
  add('conversation_id', w.conversationId);
  const q = query.toString();
  return `/v1/agents/${segment(w.agent)}/${w.kind}${q ? `?${q}` : ''}`;
}
