import { Redis } from 'ioredis';
import { type RateLimitResult, type SharedState, slidingWindowResult } from './state.ts';

// KEYS[1] current window, KEYS[2] previous window; ARGV limit, fraction into window, ttl ms,
// and how many requests ask at once. Admits as many of them as the window has room for, in one
// script, so concurrent requests on any node cannot overshoot.
const SLIDING_WINDOW = `
local curr = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local weight = 1 - tonumber(ARGV[2])
local room = math.floor(tonumber(ARGV[1]) - prev * weight - curr)
local admitted = math.max(0, math.min(tonumber(ARGV[4]), room))
if admitted > 0 then
  redis.call('INCRBY', KEYS[1], admitted)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {admitted, prev, curr}
`;

/** Requests for one bucket that arrived in one turn of the event loop, decided by one script call. */
interface RateLimitBatch {
  bucket: string;
  limit: number;
  windowMs: number;
  nowMs: number;
  waiters: { resolve: (r: RateLimitResult) => void; reject: (err: unknown) => void }[];
}

type RedisWithScripts = Redis & {
  svcSlidingWindow(
    curr: string,
    prev: string,
    limit: number,
    fraction: number,
    ttlMs: number,
    asking: number,
  ): Promise<[number, number, number]>;
};

/** Shared state in Redis: every node of a fleet agrees on counters and sees every message. */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;
  private client: RedisWithScripts;
  private subscriber: Redis;
  private handlers = new Map<string, Set<(message: string) => void>>();
  private batches = new Map<string, RateLimitBatch>();

  /**
   * @param url `redis://…`
   * @param prefix prepended to every key and channel, so several deployments (or test files)
   *   can share one Redis.
   */
  constructor(
    url: string,
    private prefix = 'svc:',
  ) {
    const options = { enableAutoPipelining: true, maxRetriesPerRequest: 2, lazyConnect: false };
    this.client = new Redis(url, options) as RedisWithScripts;
    this.client.defineCommand('svcSlidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW });
    this.subscriber = new Redis(url, { ...options, enableAutoPipelining: false });
    this.subscriber.on('message', (channel: string, message: string) => {
      const set = this.handlers.get(channel);
      if (set) for (const handler of set) handler(message);
    });
    // ioredis reconnects by itself; errors are reported through ping() and readiness.
    this.client.on('error', () => {});
    this.subscriber.on('error', () => {});
  }

  /** The underlying connection, for areas that need Redis commands beyond this interface. */
  get redis(): Redis {
    return this.client;
  }

  key(name: string) {
    return this.prefix + name;
  }

  /**
   * Requests for the same bucket that arrive in one turn of the event loop share one script call (a hot key
   * under load costs one Redis round trip per turn, not one per request); the script admits as
   * many as fit, in arrival order, so the count stays exact across nodes.
   */
  rateLimit(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): Promise<RateLimitResult> {
    const id = `${limit}:${windowMs}:${bucket}`;
    let batch = this.batches.get(id);
    if (!batch) {
      batch = { bucket, limit, windowMs, nowMs, waiters: [] };
      this.batches.set(id, batch);
      // After this poll phase: every request parsed in this turn of the event loop joins.
      if (this.batches.size === 1) setImmediate(() => this.decideBatches());
    }
    const waiters = batch.waiters;
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  }

  private decideBatches() {
    const batches = [...this.batches.values()];
    this.batches.clear();
    for (const b of batches) {
      const index = Math.floor(b.nowMs / b.windowMs);
      const base = `${this.prefix}rl:{${b.bucket}}:${b.windowMs}:`;
      this.client
        .svcSlidingWindow(
          base + index,
          base + (index - 1),
          b.limit,
          (b.nowMs % b.windowMs) / b.windowMs,
          b.windowMs * 2,
          b.waiters.length,
        )
        .then(([admitted, prev, curr]) => {
          const p = Number(prev);
          const c = Number(curr);
          b.waiters.forEach((w, i) => {
            const ok = i < admitted;
            const count = ok ? c + i + 1 : c + Number(admitted);
            w.resolve(slidingWindowResult(ok, p, count, b.limit, b.windowMs, b.nowMs));
          });
        })
        .catch((err) => {
          for (const w of b.waiters) w.reject(err);
        });
    }
  }

  async publish(channel: string, message: string) {
    return this.client.publish(this.prefix + channel, message);
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    const full = this.prefix + channel;
    let set = this.handlers.get(full);
    if (!set) {
      set = new Set();
      this.handlers.set(full, set);
      await this.subscriber.subscribe(full);
    }
    set.add(handler);
    return async () => {
      const current = this.handlers.get(full);
      if (!current) return;
      current.delete(handler);
      if (current.size === 0) {
        this.handlers.delete(full);
        await this.subscriber.unsubscribe(full).catch(() => {});
      }
    };
  }

  async ping() {
    try {
      return (await this.client.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close() {
    this.handlers.clear();
    await Promise.allSettled([this.client.quit(), this.subscriber.quit()]);
  }
}
