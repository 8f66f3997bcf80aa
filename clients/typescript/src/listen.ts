/**
 * The change stream (`GET /v1/changes`, Server-Sent Events), read with `fetch` alone: no
 * `EventSource` (Node 20 has none) and no `node:` module, so it runs wherever the core does.
 *
 * One stream per process for each (address, API key): every `Client` created with
 * `listen: true` attaches to the same `Listener`, and the last one's `close()` ends it.
 * A listener reconnects with back-off (the server's `retry:`, 1 s, doubling to 30 s;
 * at least a 429's `Retry-After`), resuming with `Last-Event-ID` so that what was sent
 * while it was away is replayed (or one `everything`); a 401 or 403 ends it for good.
 * It is `live` from a stream's `ready` frame until that stream ends; while it is not, the
 * clients serve by their TTL.
 */

export type StreamState = 'off' | 'connecting' | 'live' | 'broken';

/** A change a stream announced: what the cached copies it names are to be dropped for. */
export interface ChangeEvent {
  /** `label.moved`, `rollout.*`, `instructions.changed`, `agent.deleted`, `everything`, or one not known yet. */
  readonly change: string;
  readonly agent: string | null;
  readonly label: string | null;
  /** The user whose instructions changed (`instructions.changed`). */
  readonly user: string | null;
  /** The configuration generation it committed at (`"g58"`). */
  readonly etag: string | null;
}

/** What a listener tells each client attached to it. */
export interface Subscriber {
  changed(event: ChangeEvent): void;
}

type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** The largest frame read; a bigger one ends the connection (and a reconnect follows). */
export const MAX_FRAME = 64 * 1024;
/** The longest wait between two connection attempts (unless the server asks for longer). */
const MAX_DELAY = 30_000;
/** A stream silent this long is taken as dead (the server sends a comment every 15 s). */
const IDLE = 45_000;

const listeners = new Map<string, Listener>();

/** The process's listener for this address and key (started by the first client), with `subscriber` attached. */
export function attach(
  baseUrl: string,
  apiKey: string,
  fetcher: FetchLike,
  timeout: number,
  subscriber: Subscriber,
): Listener {
  const id = `${baseUrl}\u0000${apiKey}`;
  let listener = listeners.get(id);
  if (listener === undefined) {
    listener = new Listener(id, baseUrl, apiKey, fetcher, timeout);
    listeners.set(id, listener);
    listener.subscribers.add(subscriber);
    listener.start();
  } else {
    listener.subscribers.add(subscriber);
  }
  return listener;
}

/** Detaches `subscriber`; the last one to go ends the stream. */
export function detach(listener: Listener, subscriber: Subscriber): void {
  listener.subscribers.delete(subscriber);
  if (listener.subscribers.size === 0) {
    listener.stop();
    if (listeners.get(listener.id) === listener) listeners.delete(listener.id);
  }
}

export class Listener {
  state: StreamState = 'connecting';
  /**
   * Bumped by the `ready` of a stream that did not resume (no `Last-Event-ID`): a copy
   * fetched under the same epoch has been covered by every event since, so while the
   * stream is live it needs no TTL. 0: no stream has been ready yet.
   */
  epoch = 0;
  /** The newest `etag` the stream sent (`ready` frames included): sent as `Loadout-Generation`. */
  generation: string | null = null;
  /** The `id` of the last frame received: `Last-Event-ID` on a reconnect. */
  lastEventId: string | null = null;
  readonly subscribers = new Set<Subscriber>();
  private newest = -Infinity;
  private retry = 1000;
  private failures = 0;
  private stopped = false;
  private resumed = false;
  private controller: AbortController | null = null;
  private watchdog: ReturnType<typeof setTimeout> | undefined;
  private pause: { timer: ReturnType<typeof setTimeout>; done: () => void } | null = null;

  constructor(
    readonly id: string,
    private readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly fetcher: FetchLike,
    private readonly timeout: number,
  ) {}

  start(): void {
    void this.run();
  }

  /** Ends the stream and every reconnection (no client is attached any more). */
  stop(): void {
    this.stopped = true;
    this.state = 'off';
    this.controller?.abort();
    this.disarm();
    if (this.pause !== null) {
      clearTimeout(this.pause.timer);
      this.pause.done();
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let retryAfter = 0;
      try {
        retryAfter = await this.connect();
      } catch {
        // unreachable, reset, aborted (too big a frame, silent too long): reconnect
      }
      if (this.stopped) return;
      this.state = 'broken';
      if (this.refused) return;
      const base = this.retry;
      const backoff = Math.min(base * 2 ** this.failures, Math.max(MAX_DELAY, base));
      this.failures += 1;
      // Spread out (80-100 %) so that the clients a restart cut off do not all come back at once.
      await this.sleep(Math.max(retryAfter, backoff * (0.8 + 0.2 * Math.random())));
    }
  }

  /** Set by a 401 or 403: listening stopped for good (the state stays `broken`). */
  private refused = false;

  /** One connection, until it ends: the `Retry-After` of a 429 in ms (0 otherwise). */
  private async connect(): Promise<number> {
    const controller = new AbortController();
    this.controller = controller;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.apiKey}`,
      accept: 'text/event-stream',
      'cache-control': 'no-cache',
    };
    this.resumed = this.lastEventId !== null;
    if (this.lastEventId !== null) headers['last-event-id'] = this.lastEventId;
    this.arm(controller, this.timeout * 1000);
    try {
      const response = await this.fetcher(`${this.baseUrl}/v1/changes`, { headers, signal: controller.signal });
      const type = response.headers.get('content-type') ?? '';
      if (response.status !== 200 || !type.startsWith('text/event-stream') || response.body === null) {
        const text = await response.text().catch(() => '');
        if (response.status === 401 || response.status === 403) {
          this.refused = true;
          console.warn(
            `loadout: the change stream was refused (${response.status}${code(text)}): no longer listening; cached copies expire by their TTL`,
          );
        }
        if (response.status === 429) return retryAfterMs(response.headers.get('retry-after'));
        return 0;
      }
      this.arm(controller, IDLE);
      const frames = new Frames(
        this.lastEventId,
        (data, id) => this.frame(data, id),
        (ms) => {
          this.retry = ms;
        },
      );
      const reader = response.body.getReader();
      // A `fetch` of one's own may not end the body on abort: the reader is cancelled too.
      controller.signal.addEventListener('abort', () => void reader.cancel().catch(() => {}), { once: true });
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done || this.stopped) break;
          this.arm(controller, IDLE);
          if (!frames.push(value)) break; // a frame over MAX_FRAME: refused, reconnect
        }
      } finally {
        reader.cancel().catch(() => {});
      }
      return 0;
    } finally {
      this.disarm();
      controller.abort();
      if (this.controller === controller) this.controller = null;
    }
  }

  /** One frame: its `data` (null: none) and the last `id` received (in it or before it). */
  private frame(data: string | null, id: string | null): void {
    this.lastEventId = id;
    if (data === null) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      // Not the shape the contract promises: something changed that cannot be named.
      this.tell({ change: 'everything', agent: null, label: null, user: null, etag: null });
      return;
    }
    const fields = parsed as Record<string, unknown>;
    const etag = typeof fields.etag === 'string' ? fields.etag : null;
    if (etag !== null) {
      const generation = typeof fields.generation === 'number' ? fields.generation : null;
      if (generation === null || generation >= this.newest) {
        this.generation = etag;
        if (generation !== null) this.newest = generation;
      }
    }
    if (fields.type === 'ready') {
      if (!this.resumed || this.epoch === 0) this.epoch += 1;
      this.failures = 0;
      this.state = 'live';
      return;
    }
    if (fields.type !== 'refetchEvaluation') return; // a type not known yet: ignored
    const text = (name: string): string | null => {
      const value = fields[name];
      return typeof value === 'string' ? value : null;
    };
    this.tell({
      change: text('change') ?? '',
      agent: text('agent'),
      label: text('label'),
      user: text('user') ?? text('user_id'),
      etag,
    });
  }

  private tell(event: ChangeEvent): void {
    for (const subscriber of [...this.subscribers]) {
      try {
        subscriber.changed(event);
      } catch (error) {
        console.warn(`loadout: a change could not be applied: ${String(error)}`);
      }
    }
  }

  /** Aborts the connection after `ms` without a byte (the response headers first, then a frame or comment). */
  private arm(controller: AbortController, ms: number): void {
    this.disarm();
    this.watchdog = setTimeout(() => controller.abort(), ms);
  }

  private disarm(): void {
    if (this.watchdog !== undefined) clearTimeout(this.watchdog);
    this.watchdog = undefined;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.pause = null;
        resolve();
      };
      this.pause = { timer: setTimeout(done, ms), done };
    });
  }
}

function code(body: string): string {
  try {
    const found = (JSON.parse(body) as { error?: { code?: unknown } }).error?.code;
    return typeof found === 'string' ? ` ${found}` : '';
  } catch {
    return '';
  }
}

/** `Retry-After` (seconds, or an HTTP date) in ms; 0 when absent or unreadable. */
function retryAfterMs(value: string | null): number {
  if (value === null) return 0;
  const seconds = Number(value.trim());
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? 0 : Math.max(0, at - Date.now());
}

/**
 * The event-stream parser (the WHATWG rules): lines end in `\n`, `\r\n` or `\r`; a blank
 * line ends a frame; `data:` lines join with `\n`; `id:` is kept until the next one
 * (without a NUL); `retry:` takes digits only; a line starting with `:` is a comment.
 * Bytes are split into lines before decoding (UTF-8 never has a CR or LF inside a
 * character), so a frame's size is counted in bytes: `push` answers false past `MAX_FRAME`.
 */
export class Frames {
  private parts: Uint8Array[] = [];
  private partBytes = 0;
  private frameBytes = 0;
  private data: string[] = [];
  private cr = false;
  private first = true;
  private readonly decoder = new TextDecoder();

  /** `id`: the last event id received before this stream (it stands until a frame sets another). */
  constructor(
    private id: string | null,
    private readonly onFrame: (data: string | null, id: string | null) => void,
    private readonly onRetry: (ms: number) => void,
  ) {}

  push(chunk: Uint8Array): boolean {
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i];
      if (this.cr) {
        this.cr = false;
        if (byte === 0x0a) {
          start = i + 1; // the LF of a CRLF
          continue;
        }
      }
      if (byte !== 0x0a && byte !== 0x0d) continue;
      this.cr = byte === 0x0d;
      if (!this.keep(chunk.subarray(start, i))) return false;
      this.frameBytes += this.partBytes + 1;
      this.line();
      start = i + 1;
    }
    return this.keep(chunk.slice(start));
  }

  private keep(piece: Uint8Array): boolean {
    if (piece.length > 0) {
      this.parts.push(piece);
      this.partBytes += piece.length;
    }
    return this.frameBytes + this.partBytes <= MAX_FRAME;
  }

  private line(): void {
    const bytes = this.parts.length === 1 ? this.parts[0] : concat(this.parts, this.partBytes);
    this.parts = [];
    this.partBytes = 0;
    let text = bytes === undefined ? '' : this.decoder.decode(bytes);
    if (this.first) {
      this.first = false;
      if (text.startsWith('\uFEFF')) text = text.slice(1);
    }
    if (text === '') {
      this.frameBytes = 0;
      const data = this.data;
      this.data = [];
      this.onFrame(data.length > 0 ? data.join('\n') : null, this.id);
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'id') {
      if (!value.includes('\u0000')) this.id = value;
    } else if (field === 'retry') {
      if (/^\d+$/.test(value)) this.onRetry(Number(value));
    }
  }
}

function concat(parts: Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
