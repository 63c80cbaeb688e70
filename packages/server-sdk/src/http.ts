import { errorFromResponse, readJsonBody, SvcError } from '@svc/client';

export type FetchFn = typeof globalThis.fetch;

/** How a {@link Transport} retries. */
export interface RetryPolicy {
  /** Attempts after the first, for idempotent requests only (default 2). */
  retries: number;
  /** The first backoff; each retry doubles it, with full jitter (default 200 ms). */
  baseDelayMs: number;
  /** The longest wait between attempts, `Retry-After` included (default 5000 ms). */
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { retries: 2, baseDelayMs: 200, maxDelayMs: 5000 };

/** Statuses worth another attempt: rate limited, or the server or a proxy briefly unable to answer. */
const RETRY_STATUSES = new Set([429, 502, 503, 504]);
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

export interface TransportOptions {
  apiBase: string;
  headers: Record<string, string>;
  timeoutMs: number;
  retry: RetryPolicy;
  fetch: FetchFn;
  /** Waits between attempts (tests inject their own). */
  sleep?: (ms: number) => Promise<void>;
}

/**
 * Sends requests to `<base>/v1…` with a timeout per attempt. Idempotent requests (GET, DELETE)
 * are retried on network errors, timeouts, 429, 502, 503 and 504, with exponential backoff and
 * full jitter, honouring `Retry-After`; other requests are sent once. Failures reject with
 * {@link SvcError}: the server's registry code, or `network_error` / `timeout`.
 */
export class Transport {
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly options: TransportOptions) {
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  async request<T>(
    method: string,
    path: string,
    options: { body?: unknown; query?: object; headers?: Record<string, string> } = {},
  ): Promise<T> {
    const url = `${this.options.apiBase}${path}${queryString(options.query)}`;
    const attempts = IDEMPOTENT.has(method) ? 1 + this.options.retry.retries : 1;
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await this.options.fetch(url, {
          method,
          headers: {
            accept: 'application/json',
            ...this.options.headers,
            ...options.headers,
            ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: options.body === undefined ? undefined : JSON.stringify(options.body),
          signal: AbortSignal.timeout(this.options.timeoutMs),
        });
      } catch (err) {
        const timedOut = (err as Error).name === 'TimeoutError';
        const error = new SvcError(
          timedOut ? 'timeout' : 'network_error',
          timedOut
            ? `${method} ${path}: no answer within ${this.options.timeoutMs} ms`
            : `${method} ${path}: ${causeOf(err)}`,
        );
        if (attempt >= attempts) throw error;
        await this.sleep(this.backoff(attempt, undefined));
        continue;
      }
      if (res.ok) return readJsonBody<T>(res, method, path);
      if (attempt < attempts && RETRY_STATUSES.has(res.status)) {
        await res.body?.cancel();
        await this.sleep(this.backoff(attempt, res.headers.get('retry-after')));
        continue;
      }
      throw await errorFromResponse(res);
    }
  }

  private backoff(attempt: number, retryAfter: string | null | undefined): number {
    const { baseDelayMs, maxDelayMs } = this.options.retry;
    const seconds = retryAfter ? Number(retryAfter) : Number.NaN;
    if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, maxDelayMs);
    return Math.random() * Math.min(baseDelayMs * 2 ** (attempt - 1), maxDelayMs);
  }
}

function causeOf(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message;
}

/** `?a=1&b=x` from the defined members of `query` ('' when none). */
function queryString(query: object | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const text = params.toString();
  return text ? `?${text}` : '';
}
