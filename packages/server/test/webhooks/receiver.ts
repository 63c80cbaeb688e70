import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** One request a receiver got. */
export interface Received {
  index: number;
  path: string;
  headers: http.IncomingHttpHeaders;
  /** `webhook-id`. */
  id: string;
  raw: string;
  json: { type: string; id: string; createdAt: string; projectId: string; data: any };
  /** The status the receiver answered (undefined while held). */
  status?: number;
}

export interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Never answer (the request hangs until the sender gives up or the server closes). */
  hold?: boolean;
}

/**
 * A real HTTP webhook receiver on 127.0.0.1. `answer` decides each response; `until` resolves
 * when a condition over the received requests holds (checked after every request).
 */
export class Receiver {
  readonly requests: Received[] = [];
  private waiters: { check: () => boolean; resolve: () => void }[] = [];
  private held: http.ServerResponse[] = [];
  private constructor(
    private server: http.Server,
    public answer: (r: Received) => Answer,
  ) {}

  static async start(answer: (r: Received) => Answer = () => ({ status: 200 })) {
    const server = http.createServer();
    const receiver = new Receiver(server, answer);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const r: Received = {
          index: receiver.requests.length,
          path: req.url ?? '',
          headers: req.headers,
          id: String(req.headers['webhook-id']),
          raw,
          json: JSON.parse(raw),
        };
        const a = receiver.answer(r);
        receiver.requests.push(r);
        if (a.hold) receiver.held.push(res);
        else {
          r.status = a.status;
          res.writeHead(a.status, a.headers ?? {});
          res.end(a.body ?? '');
        }
        receiver.notify();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get url() {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }

  /** Requests answered with a 2xx. */
  get successes() {
    return this.requests.filter((r) => r.status !== undefined && r.status < 300);
  }

  private notify() {
    this.waiters = this.waiters.filter((w) => {
      if (!w.check()) return true;
      w.resolve();
      return false;
    });
  }

  /** Resolves once `check()` is true; rejects after `timeoutMs` with `what`. */
  until(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w.check !== check);
        reject(new Error(`timed out waiting for ${what} (got ${this.requests.length} requests)`));
      }, timeoutMs);
      this.waiters.push({
        check,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }

  /** Answers the oldest held request with `status`. */
  releaseOne(status = 200) {
    const res = this.held.shift();
    if (res && !res.destroyed) res.writeHead(status).end();
  }

  /** Answers every held request with `status`. */
  release(status = 200) {
    for (const res of this.held.splice(0)) {
      if (!res.destroyed) res.writeHead(status).end();
    }
  }

  async close() {
    for (const res of this.held.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Verifies a received webhook with the independent `standardwebhooks` package. */
export function verifyStandard(secret: string, r: Received): unknown {
  return new Webhook(secret).verify(r.raw, {
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  });
}

/** Polls `read` until `accept` holds (for store state no receiver can observe). */
export async function eventually<T>(
  read: () => Promise<T>,
  accept: (value: T) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 500)}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}
