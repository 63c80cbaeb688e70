import { EventEmitter } from 'node:events';
import { Redis, type RedisOptions } from 'ioredis';
import { DependencyHealth, DependencyUnavailableError } from '../unavailable.ts';
import { MemoryState } from './memory.ts';
import {
  type RateLimitResult,
  type SharedState,
  type SubscriptionEvents,
  slidingWindowResult,
} from './state.ts';

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

/**
 * `promise`, or a rejection as ioredis's own deadline gives, should it take over `ms`. The
 * deadline is checked after the event loop's next poll for I/O: a loop that was busy past it
 * (a long synchronous task) first reads the answers that arrived meanwhile, so a late loop is
 * not taken for a late Redis.
 */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => setImmediate(() => reject(new Error('Command timed out'))), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** The Redis deadline when none is given (`SVC_STATE_TIMEOUT_MS`). */
export const DEFAULT_STATE_TIMEOUT_MS = 1000;
/** How often a node that saw Redis down asks it again. */
const PROBE_INTERVAL_MS = 250;

/**
 * Whether an ioredis error means Redis is out of reach (a deadline passed, the connection is
 * closed or refused, the server is loading or stopping) rather than that a command was refused.
 */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof DependencyUnavailableError) return err.dependency === 'shared state';
  if (err.name === 'MaxRetriesPerRequestError') return true;
  return /Command timed out|Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|^(LOADING|MASTERDOWN|BUSY|TRYAGAIN|READONLY)\b/.test(
    err.message,
  );
}

/**
 * Shared state in Redis: every node of a fleet agrees on counters and sees every message.
 *
 * Outages: every command has a deadline (`timeoutMs`); a command that misses it or loses its
 * connection sets {@link health} down, and while it is down commands are refused at once with
 * {@link DependencyUnavailableError} (no request waits on a Redis known to be down) while the
 * node asks Redis every 250 ms; the first answer sets it up again. Rate limits are then decided
 * in process (see {@link rateLimit}). Messages published while the subscription connection is
 * away are lost: {@link subscriptions} says when it is lost and back, so listeners can catch up.
 */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;
  readonly health = new DependencyHealth('shared state');
  readonly subscriptions = new EventEmitter<SubscriptionEvents>();
  private client: RedisWithScripts;
  private subscriber: Redis;
  private handlers = new Map<string, Set<(message: string) => void>>();
  private batches = new Map<string, RateLimitBatch>();
  /** Counts rate limits while Redis is down (each node alone: see {@link rateLimit}). */
  private local = new MemoryState();
  private probe: NodeJS.Timeout | null = null;
  private probing = false;
  private subscriberWasReady = false;
  private closed = false;

  /**
   * @param url `redis://…`
   * @param prefix prepended to every key and channel, so several deployments (or test files)
   *   can share one Redis.
   * @param timeoutMs the deadline of one call (connecting included, when a call waits for it).
   */
  constructor(
    url: string,
    private prefix = 'svc:',
    private timeoutMs = DEFAULT_STATE_TIMEOUT_MS,
  ) {
    const options: RedisOptions = {
      enableAutoPipelining: true,
      // Commands issued while disconnected wait for the connection, within their deadline.
      maxRetriesPerRequest: 1,
      // A backstop only: every call has its own deadline (see `within`); this one frees the
      // commands of a Redis that never answers again.
      commandTimeout: Math.max(timeoutMs * 5, 5000),
      // Likewise: a connection that takes long only delays the calls, each within its deadline.
      connectTimeout: Math.max(timeoutMs * 5, 5000),
      // Reconnect soon after Redis is back (ioredis's default waits up to 2 s).
      retryStrategy: (times) => Math.min(times * 100, 1000),
      lazyConnect: false,
    };
    this.client = new Redis(url, options) as RedisWithScripts;
    this.client.defineCommand('svcSlidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW });
    this.subscriber = new Redis(url, { ...options, enableAutoPipelining: false });
    this.subscriber.on('message', (channel: string, message: string) => {
      const set = this.handlers.get(channel);
      if (set) for (const handler of set) handler(message);
    });
    // ioredis reconnects by itself; errors are reported through health and readiness.
    this.client.on('error', () => {});
    this.subscriber.on('error', () => {});
    let clientWasReady = false;
    this.client.on('close', () => {
      if (clientWasReady && !this.closed) this.health.markDown(new Error('Connection is closed.'));
    });
    this.client.on('ready', () => {
      clientWasReady = true;
      this.tryProbe();
    });
    this.health.on('down', () => this.startProbing());
    // ioredis subscribes again by itself after a reconnect; what was published meanwhile is lost.
    this.subscriber.on('close', () => {
      if (this.subscriberWasReady && !this.closed) this.subscriptions.emit('lost');
    });
    this.subscriber.on('ready', () => {
      if (this.subscriberWasReady) this.subscriptions.emit('restored');
      this.subscriberWasReady = true;
    });
  }

  /** The underlying connection, for areas that need Redis commands beyond this interface. */
  get redis(): Redis {
    return this.client;
  }

  key(name: string) {
    return this.prefix + name;
  }

  /**
   * Runs one call to Redis under the outage policy: refused at once while Redis is known down;
   * a deadline missed or a connection lost sets it down and rejects with
   * {@link DependencyUnavailableError}. Every command of every area goes through here.
   */
  run<T>(call: (redis: Redis) => Promise<T>): Promise<T> {
    if (!this.health.up) return Promise.reject(this.health.refusal());
    // The call's own deadline: ioredis's per command starts only when the command is written,
    // and an auto-pipelined command waits for the pipeline ahead of it to finish first.
    return within(call(this.client), this.timeoutMs).catch((err: unknown) => {
      throw this.failed(err);
    });
  }

  private failed(err: unknown): unknown {
    if (!isRedisUnavailable(err)) return err;
    this.health.markDown(err);
    if (err instanceof DependencyUnavailableError) return err;
    return new DependencyUnavailableError(
      'shared state',
      err instanceof Error ? err.message : String(err),
      { cause: err },
    );
  }

  private startProbing() {
    if (this.probe || this.closed) return;
    this.probe = setInterval(() => this.tryProbe(), PROBE_INTERVAL_MS).unref();
  }

  private tryProbe() {
    if (this.health.up || this.probing || this.closed || this.client.status !== 'ready') return;
    this.probing = true;
    within(this.client.ping(), this.timeoutMs)
      .then(
        () => {
          this.health.markUp();
          if (this.probe) clearInterval(this.probe);
          this.probe = null;
        },
        () => {},
      )
      .finally(() => {
        this.probing = false;
      });
  }

  /**
   * Requests for the same bucket that arrive in one turn of the event loop share one script call (a hot key
   * under load costs one Redis round trip per turn, not one per request); the script admits as
   * many as fit, in arrival order, so the count stays exact across nodes.
   *
   * While Redis is down (or when the call fails for that reason), each node counts alone, in
   * process, with the same limit: requests are neither refused nor made to wait, and a key gets
   * at most its limit per node (N × limit across N nodes) until Redis is back, when the counts
   * in Redis take over again.
   */
  rateLimit(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): RateLimitResult | Promise<RateLimitResult> {
    if (!this.health.up) return this.local.rateLimit(bucket, limit, windowMs, nowMs);
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
      this.run(() =>
        this.client.svcSlidingWindow(
          base + index,
          base + (index - 1),
          b.limit,
          (b.nowMs % b.windowMs) / b.windowMs,
          b.windowMs * 2,
          b.waiters.length,
        ),
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
          if (err instanceof DependencyUnavailableError) {
            for (const w of b.waiters)
              w.resolve(this.local.rateLimit(b.bucket, b.limit, b.windowMs, b.nowMs));
          } else {
            for (const w of b.waiters) w.reject(err);
          }
        });
    }
  }

  async publish(channel: string, message: string) {
    return this.run((redis) => redis.publish(this.prefix + channel, message));
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    const full = this.prefix + channel;
    let set = this.handlers.get(full);
    if (!set) {
      if (!this.health.up) throw this.health.refusal();
      set = new Set();
      this.handlers.set(full, set);
      try {
        await within(this.subscriber.subscribe(full), this.timeoutMs);
      } catch (err) {
        if (this.handlers.get(full) === set && set.size === 0) this.handlers.delete(full);
        throw this.failed(err);
      }
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
      const ok = (await within(this.client.ping(), this.timeoutMs)) === 'PONG';
      if (ok) this.health.markUp();
      return ok;
    } catch (err) {
      this.failed(err);
      return false;
    }
  }

  async close() {
    this.closed = true;
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
    this.handlers.clear();
    await this.local.close();
    await Promise.allSettled([this.client.quit(), this.subscriber.quit()]);
  }
}
