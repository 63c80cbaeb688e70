import { Redis } from 'ioredis';
import { type RateLimitResult, type SharedState, slidingWindowResult } from './state.ts';

// KEYS[1] current window, KEYS[2] previous window; ARGV limit, fraction into window, ttl ms.
// Check and increment in one script, so concurrent requests on any node cannot overshoot.
const SLIDING_WINDOW = `
local curr = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local limit = tonumber(ARGV[1])
local weight = 1 - tonumber(ARGV[2])
if prev * weight + curr + 1 > limit then return {0, prev, curr} end
curr = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, prev, curr}
`;

type RedisWithScripts = Redis & {
  svcSlidingWindow(
    curr: string,
    prev: string,
    limit: number,
    fraction: number,
    ttlMs: number,
  ): Promise<[number, number, number]>;
};

/** Shared state in Redis: every node of a fleet agrees on counters and sees every message. */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;
  private client: RedisWithScripts;
  private subscriber: Redis;
  private handlers = new Map<string, Set<(message: string) => void>>();

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

  async rateLimit(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): Promise<RateLimitResult> {
    const index = Math.floor(nowMs / windowMs);
    const base = `${this.prefix}rl:{${bucket}}:${windowMs}:`;
    const [ok, prev, curr] = await this.client.svcSlidingWindow(
      base + index,
      base + (index - 1),
      limit,
      (nowMs % windowMs) / windowMs,
      windowMs * 2,
    );
    return slidingWindowResult(ok === 1, Number(prev), Number(curr), limit, windowMs, nowMs);
  }

  async publish(channel: string, message: string) {
    await this.client.publish(this.prefix + channel, message);
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
