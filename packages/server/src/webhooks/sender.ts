import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { PinnedTarget } from './ssrf.ts';

/** How much of a receiver's answer is kept (and read at all). */
export const RESPONSE_BODY_LIMIT_BYTES = 2048;

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

/**
 * POSTs webhooks over keep-alive connections. Connections go only to the address that was
 * checked (the name is never resolved again, so DNS rebinding cannot redirect them), redirects
 * are not followed (a 3xx is a failure), and the whole attempt is bounded by `timeoutMs`.
 */
export class WebhookSender {
  private httpAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  private httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 64 });

  send(options: SendOptions): Promise<SendResult> {
    const { target, timeoutMs } = options;
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const secure = target.url.protocol === 'https:';
    const pinned: LookupFunction = (_hostname, lookupOptions, callback) => {
      if (lookupOptions.all) {
        (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
          { address: target.address, family: target.family },
        ]);
      } else callback(null, target.address, target.family);
    };
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      const finish = (result: Omit<SendResult, 'latencyMs'>) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ ...result, latencyMs: elapsed() });
      };
      const request = (secure ? https : http).request({
        method: 'POST',
        protocol: target.url.protocol,
        hostname: target.url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: target.url.port || (secure ? 443 : 80),
        path: `${target.url.pathname}${target.url.search}`,
        agent: secure ? this.httpsAgent : this.httpAgent,
        lookup: pinned,
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(options.body)),
          'user-agent': 'Svc-Webhooks/1.0',
          ...options.headers,
        },
      });
      const timer = setTimeout(() => {
        request.destroy(new Error(`timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      request.on('error', (err) => finish({ error: err.message || String(err) }));
      request.on('response', (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const done = () =>
          finish({
            statusCode: response.statusCode,
            body: Buffer.concat(chunks).toString('utf8'),
            retryAfterMs: parseRetryAfter(
              response.headers['retry-after'] as string | undefined,
              options.nowMs,
            ),
          });
        response.on('data', (chunk: Buffer) => {
          if (size < RESPONSE_BODY_LIMIT_BYTES) {
            chunks.push(chunk.subarray(0, RESPONSE_BODY_LIMIT_BYTES - size));
          }
          size += chunk.length;
          // Never read more than the limit: drop the connection instead of draining it.
          if (size > RESPONSE_BODY_LIMIT_BYTES) {
            done();
            response.destroy();
          }
        });
        response.on('end', done);
        response.on('error', done);
        response.on('close', done);
      });
      request.end(options.body);
    });
  }

  close() {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
