import type { LookupFunction } from 'node:net';
import { type Dispatcher, Pool } from 'undici';
import type { PinnedTarget } from './ssrf.ts';

/** How much of a receiver's answer is kept (and read at all). */
export const RESPONSE_BODY_LIMIT_BYTES = 2048;
/** Connections per destination at most (attempts beyond wait for one). */
const CONNECTIONS_PER_ORIGIN = 64;
/** Destinations whose pools are kept open at most (the least recently used closes first). */
const MAX_POOLS = 1000;

/** What came of one attempt. `statusCode` is absent when no response arrived. */
export interface SendResult {
  statusCode?: number;
  /** Network error or timeout, in words. */
  error?: string;
  /** The answer's first bytes (at most RESPONSE_BODY_LIMIT_BYTES), as text. */
  body?: string;
  /** From `Retry-After` (seconds or an HTTP date), when present and sane. */
  retryAfterMs?: number;
  latencyMs: number;
  /** Set by the worker when the address check refused the target (nothing was sent). */
  refused?: boolean;
}

export interface SendOptions {
  target: PinnedTarget;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  nowMs: number;
}

/** Parses `Retry-After` (delta seconds or HTTP date) into milliseconds from now; capped at 1 day. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  let ms: number;
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000;
  else {
    const at = Date.parse(trimmed);
    if (Number.isNaN(at)) return undefined;
    ms = at - nowMs;
  }
  return Math.min(Math.max(0, ms), 86_400_000);
}

/** One request in flight: undici's handler, settled once (answer, error or timeout). */
class Attempt implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null;
  private statusCode: number | undefined;
  private retryAfter: string | undefined;
  private chunks: Buffer[] = [];
  private size = 0;
  settled = false;
  readonly startedAt = performance.now();
  /** When this attempt times out (performance.now() ms). */
  readonly deadline: number;

  constructor(
    readonly timeoutMs: number,
    private nowMs: number,
    private done: (attempt: Attempt, result: SendResult) => void,
  ) {
    this.deadline = this.startedAt + timeoutMs;
  }

  private finish(result: Omit<SendResult, 'latencyMs'>) {
    if (this.settled) return;
    this.settled = true;
    this.done(this, { ...result, latencyMs: Math.round(performance.now() - this.startedAt) });
  }

  /** Ends the attempt now with `error` (a timeout): the connection is dropped. */
  abort(error: string) {
    this.finish({ error });
    this.controller?.abort(new Error(error));
  }

  onRequestStart(controller: Dispatcher.DispatchController) {
    this.controller = controller;
    if (this.settled) controller.abort(new Error('attempt ended'));
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ) {
    if (statusCode < 200) return;
    this.statusCode = statusCode;
    const retryAfter = headers['retry-after'];
    this.retryAfter = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer) {
    if (this.size < RESPONSE_BODY_LIMIT_BYTES) {
      this.chunks.push(chunk.subarray(0, RESPONSE_BODY_LIMIT_BYTES - this.size));
    }
    this.size += chunk.length;
    // Never read more than the limit: drop the connection instead of draining it.
    if (this.size > RESPONSE_BODY_LIMIT_BYTES) {
      this.answered();
      controller.abort(new Error('answer longer than the limit'));
    }
  }

  onResponseEnd() {
    this.answered();
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error) {
    // After the status line, an answer cut short still counts as that answer.
    if (this.statusCode !== undefined) this.answered();
    else this.finish({ error: err.message || String(err) });
  }

  private answered() {
    this.finish({
      statusCode: this.statusCode,
      // NUL cannot be stored in a PostgreSQL text column.
      body: Buffer.concat(this.chunks).toString('utf8').replaceAll('\0', '\uFFFD'),
      retryAfterMs: parseRetryAfter(this.retryAfter, this.nowMs),
    });
  }
}

/**
 * POSTs webhooks over keep-alive connections (undici, one connection pool per destination).
 * Connections go only to the address that was checked (the name is never resolved again, so DNS
 * rebinding cannot redirect them), redirects are not followed (a 3xx is a failure), and the whole
 * attempt is bounded by `timeoutMs`. Timeouts share one timer per sender, not one per attempt.
 */
export class WebhookSender {
  private pools = new Map<string, { address: string; pool: Pool }>();
  private inFlight = new Set<Attempt>();
  private sweeper: NodeJS.Timeout | null = null;

  send(options: SendOptions): Promise<SendResult> {
    const { target, timeoutMs } = options;
    return new Promise<SendResult>((resolve) => {
      const attempt = new Attempt(timeoutMs, options.nowMs, (a, result) => {
        this.inFlight.delete(a);
        resolve(result);
      });
      this.inFlight.add(attempt);
      this.sweep(timeoutMs);
      try {
        this.pool(target).dispatch(
          {
            method: 'POST',
            path: `${target.url.pathname}${target.url.search}`,
            headers: {
              'content-type': 'application/json',
              'user-agent': 'Svc-Webhooks/1.0',
              ...options.headers,
            },
            body: options.body,
          },
          attempt,
        );
      } catch (err) {
        attempt.abort(err instanceof Error ? err.message : String(err));
      }
    });
  }

  /** The pool for the target's origin, connecting only to its checked address. */
  private pool(target: PinnedTarget): Pool {
    const origin = target.url.origin;
    const known = this.pools.get(origin);
    if (known && known.address === target.address) {
      // Most recently used last: the first entry is the one to close when there are too many.
      this.pools.delete(origin);
      this.pools.set(origin, known);
      return known.pool;
    }
    // A new address (the name resolved elsewhere): new connections; the old ones finish.
    if (known) void known.pool.close();
    const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
      if (lookupOptions.all) {
        (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
          { address: target.address, family: target.family },
        ]);
      } else callback(null, target.address, target.family);
    };
    const pool = new Pool(origin, {
      connections: CONNECTIONS_PER_ORIGIN,
      connect: { lookup: pinned },
      // The sender's own timer bounds the whole attempt.
      headersTimeout: 0,
      bodyTimeout: 0,
    });
    this.pools.set(origin, { address: target.address, pool });
    if (this.pools.size > MAX_POOLS) {
      const [oldest, entry] = this.pools.entries().next().value as [string, { pool: Pool }];
      this.pools.delete(oldest);
      void entry.pool.close();
    }
    return pool;
  }

  /** Runs while attempts are in flight: ends those past their deadline. */
  private sweep(timeoutMs: number) {
    if (this.sweeper) return;
    const every = Math.min(250, Math.max(10, Math.floor(timeoutMs / 20)));
    this.sweeper = setInterval(() => {
      const now = performance.now();
      for (const a of this.inFlight) {
        if (a.deadline <= now) a.abort(`timed out after ${a.timeoutMs} ms`);
      }
      if (this.inFlight.size === 0 && this.sweeper) {
        clearInterval(this.sweeper);
        this.sweeper = null;
      }
    }, every);
    this.sweeper.unref();
  }

  close() {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    for (const { pool } of this.pools.values()) void pool.destroy();
    this.pools.clear();
  }
}
