/**
 * One error hierarchy for everything the client throws. loadout answers every error as
 * `{"error": {"code", "message", "details"}}`; each becomes a `LoadoutError` subclass
 * chosen by status, carrying `code`, `message`, `status`, `details` and `retryAfter`
 * (as the Python client's `loadout.errors`).
 */

import type { components } from './openapi.js';

export interface ErrorFields {
  code?: string | undefined;
  status?: number | undefined;
  details?: unknown;
  retryAfter?: number | undefined;
}

/** Anything loadout answered with an error, or that kept the client from an answer. */
export class LoadoutError extends Error {
  readonly code: string;
  readonly status: number | undefined;
  readonly details: unknown;
  readonly retryAfter: number | undefined;

  constructor(message: string, fields: ErrorFields = {}) {
    super(message);
    this.name = new.target.name;
    this.code = fields.code ?? 'error';
    this.status = fields.status;
    this.details = fields.details;
    this.retryAfter = fields.retryAfter;
  }

  override toString(): string {
    return `${this.status !== undefined ? `${this.status} ` : ''}${this.code}: ${this.message}`;
  }
}

/** 400: the request was malformed (an unknown query parameter, a missing channel...). */
export class BadRequest extends LoadoutError {}
/** 401: no key, or a revoked or unknown one. */
export class Unauthorized extends LoadoutError {}
/** 403: the key's role may not do this. */
export class Forbidden extends LoadoutError {}
/** 404: no such agent, channel, label, tool or proposal (or the key does not reach it). */
export class NotFound extends LoadoutError {}
/** 409: a stale version, a taken name, or a proposal already decided. */
export class Conflict extends LoadoutError {}
/** 413: the body or a text is over its limit. */
export class PayloadTooLarge extends LoadoutError {}
/** 422: lint errors, a check that would fail, or invalid arguments. */
export class Unprocessable extends LoadoutError {}
/** 422 `invalid_arguments`: the arguments fail the tool's schema (`details.errors`). */
export class InvalidArguments extends Unprocessable {}
/** 424: the tool has nothing to run it (no connector). */
export class NotConnected extends LoadoutError {}
/** 429: too many failed authentications from this address; `retryAfter` says when to retry. */
export class TooManyRequests extends LoadoutError {}
/** 5xx: loadout failed (500) or its database is unavailable (503; `retryAfter`). */
export class ServerError extends LoadoutError {}
/** loadout could not be reached (refused, timed out, TLS...), with nothing to serve instead. */
export class Unreachable extends LoadoutError {}
/** An approver declined the proposal `wait` was waiting for. */
export class ProposalDeclined extends LoadoutError {}
/** The proposal expired undecided. */
export class ProposalExpired extends LoadoutError {}
/** The call ran and failed; `details` is its result (`{error, retryable}`). */
export class ToolCallFailed extends LoadoutError {}
/** `wait` gave up before the proposal was decided; the proposal goes on waiting. */
export class WaitTimeout extends LoadoutError {}

const BY_STATUS: Record<number, typeof LoadoutError> = {
  400: BadRequest,
  401: Unauthorized,
  403: Forbidden,
  404: NotFound,
  409: Conflict,
  413: PayloadTooLarge,
  422: Unprocessable,
  424: NotConnected,
  429: TooManyRequests,
};

/** The typed error for an error answer (any body: loadout's one shape, or not). */
export function fromResponse(status: number, body: string, retryAfterHeader?: string | null): LoadoutError {
  let code = `http_${status}`;
  let message = `HTTP ${status}`;
  let details: unknown;
  try {
    // Any body may come (a proxy's HTML page, nothing): every field is checked, not assumed.
    const error = (JSON.parse(body) as Partial<components['schemas']['ErrorBody']> | null)?.error as
      | Partial<components['schemas']['ErrorDetail']>
      | undefined;
    if (error && typeof error === 'object') {
      if (typeof error.code === 'string') code = error.code;
      if (typeof error.message === 'string') message = error.message;
      details = error.details ?? undefined;
    }
  } catch {
    // another shape: the status says enough
  }
  const seconds = retryAfterHeader ? Number(retryAfterHeader) : Number.NaN;
  const retryAfter = Number.isFinite(seconds) ? seconds : undefined;
  let Class = BY_STATUS[status] ?? (status >= 500 ? ServerError : LoadoutError);
  if (status === 422 && code === 'invalid_arguments') Class = InvalidArguments;
  return new Class(message, { code, status, details, retryAfter });
}
