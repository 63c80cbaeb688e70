import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { Redis, type RedisOptions } from 'ioredis';
import { DependencyHealth, DependencyUnavailableError } from '../unavailable.ts';
import { MemoryState } from './memory.ts';
import { PermitLeases, type Returned } from './permits.ts';
import { RedisRecentSets } from './recent-sets.ts';
import {
  type RateLimitResult,
  type RecentSetsOptions,
  type SharedState,
  type StateCases,
  type SubscriptionEvents,
  slidingWindowResult,
} from './state.ts';

// KEYS[1] current window's count, KEYS[2] previous window's, KEYS[3] the current window's
// leases (node id -> when its lease ends, Redis time in ms). ARGV: limit, fraction into the
// window, ttl ms, requests asking, permits wanted beyond them, node id, lease ms, reclaim
// channel, reclaim message. Admits as many of the asking requests as the window has room for,
// in one script, so concurrent requests on any node cannot overshoot. When all are admitted it also grants the node up to the permits it wants,
// at most an eighth of the room left (counted now, used by the node without asking). When some
// are short while other nodes hold leases, it asks them to hand back their unused permits and
// answers how long (ms) until the first lease ends, rather than refusing at once.
const SLIDING_WINDOW = `
local curr = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local weight = 1 - tonumber(ARGV[2])
local room = math.floor(tonumber(ARGV[1]) - prev * weight - curr)
local asking = tonumber(ARGV[4])
local admitted = math.max(0, math.min(asking, room))
local granted = 0
local wait = 0
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if admitted < asking then
  local leases = redis.call('HGETALL', KEYS[3])
  for i = 1, #leases, 2 do
    if leases[i] ~= ARGV[6] then
      local left = tonumber(leases[i + 1]) - now
      if left <= 0 then
        redis.call('HDEL', KEYS[3], leases[i])
      elseif wait == 0 or left < wait then
        wait = left
      end
    end
  end
  if wait > 0 then redis.call('PUBLISH', ARGV[8], ARGV[9]) end
else
  granted = math.max(0, math.min(tonumber(ARGV[5]), math.floor((room - admitted) / 8)))
end
if admitted + granted > 0 then
  redis.call('INCRBY', KEYS[1], admitted + granted)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
if granted > 0 then
  redis.call('HSET', KEYS[3], ARGV[6], now + tonumber(ARGV[7]))
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return {admitted, prev, curr, granted, wait}
`;

// KEYS[1] a window's count, KEYS[2] its leases; ARGV node id, unused permits. Ends the node's
// lease and takes its unused permits off the count (never below zero: after a flush the count
// starts again from nothing).
const RETURN_PERMITS = `
redis.call('HDEL', KEYS[2], ARGV[1])
local back = math.min(tonumber(ARGV[2]), tonumber(redis.call('GET', KEYS[1]) or '0'))
if back > 0 then redis.call('DECRBY', KEYS[1], back) end
return back
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
    leases: string,
    limit: number,
    fraction: number,
    ttlMs: number,
    asking: number,
    reserve: number,
    node: string,
    leaseMs: number,
    reclaimChannel: string,
    reclaimMessage: string,
  ): Promise<[number, number, number, number, number]>;
  svcReturnPermits(count: string, leases: string, node: string, unused: number): Promise<number>;
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
/** How long calls wait for the first connection of a starting node. */
const STARTUP_WAIT_MS = 10_000;
/** How often a node that saw Redis down asks it again. */
const PROBE_INTERVAL_MS = 250;
/** How long a node may use a grant of rate-limit permits before it hands the rest back. */
export const PERMIT_LEASE_MS = 200;
/**
 * How much longer Redis keeps a lease than its holder uses it: other nodes wait for a lease to be
 * handed back, or for this much past its end (its holder is gone or stalled), before refusing.
 */
const PERMIT_LEASE_GRACE_MS = 500;
/** How often a node hands back the permits of leases that ended. */
const PERMIT_SWEEP_MS = 100;
/** The longest a request short of room waits between asks while other nodes hold leases. */
const PERMIT_RETRY_MS = 20;
const PERMITS = { leaseMs: PERMIT_LEASE_MS, maxGrant: 1000, minGrant: 4 };
const RECLAIM_CHANNEL = 'rl.reclaim';

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

  match<T>(cases: StateCases<T>): T {
    return cases.redis(this);
  }
  readonly health = new DependencyHealth('shared state');
  readonly subscriptions = new EventEmitter<SubscriptionEvents>();
  private client: RedisWithScripts;
  private subscriber: Redis;
  private handlers = new Map<string, Set<(message: string) => void>>();
  private batches = new Map<string, RateLimitBatch>();
  /** Counts rate limits while Redis is down (each node alone: see {@link rateLimit}). */
  private local = new MemoryState();
  /** Rate-limit permits this node holds (see {@link rateLimit}). */
  private permits = new PermitLeases(PERMITS);
  /** This node's name in the leases of rate-limit windows. */
  private readonly node = randomBytes(6).toString('hex');
  private permitSweeper: NodeJS.Timeout;
  private reclaim: Promise<unknown> | null = null;
  private probe: NodeJS.Timeout | null = null;
  private probing = false;
  private subscriberWasReady = false;
  private clientWasReady = false;
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
    this.client.defineCommand('svcSlidingWindow', { numberOfKeys: 3, lua: SLIDING_WINDOW });
    this.client.defineCommand('svcReturnPermits', { numberOfKeys: 2, lua: RETURN_PERMITS });
    this.subscriber = new Redis(url, { ...options, enableAutoPipelining: false });
    this.subscriber.on('message', (channel: string, message: string) => {
      const set = this.handlers.get(channel);
      if (set) for (const handler of set) handler(message);
    });
    // ioredis reconnects by itself; errors are reported through health and readiness.
    this.client.on('error', () => {});
    this.subscriber.on('error', () => {});
    this.client.on('close', () => {
      if (this.clientWasReady && !this.closed)
        this.health.markDown(new Error('Connection is closed.'));
    });
    this.client.on('ready', () => {
      this.clientWasReady = true;
      this.tryProbe();
    });
    this.health.on('down', () => {
      // Permits stay counted in Redis; while it is down each node counts alone (rateLimit).
      this.permits.clear();
      this.startProbing();
    });
    // Hands back the permits of leases that ended, or whose window did by the system clock (a
    // caller on another clock, as some tests are, only gets its permits handed back early).
    this.permitSweeper = setInterval(() => {
      for (const back of this.permits.expire(Date.now(), 60_000)) this.giveBack(back);
    }, PERMIT_SWEEP_MS).unref();
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
    return within(call(this.client), this.deadlineMs()).catch((err: unknown) => {
      throw this.failed(err);
    });
  }

  /**
   * The deadline of a call now: `timeoutMs`, or, until the first connection is ready, the
   * start-up wait (a process starting is busy, and there is no outage to detect yet).
   */
  private deadlineMs() {
    return this.clientWasReady ? this.timeoutMs : Math.max(this.timeoutMs, STARTUP_WAIT_MS);
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
   * Exact across nodes, and for a busy key far below its limit decided without Redis:
   *
   * - A node that holds permits for the bucket's current window admits from them at once (no
   *   promise). Permits are counted in Redis when granted, so admissions never exceed the limit
   *   whatever the number of nodes.
   * - Otherwise the requests for the bucket that arrive in one turn of the event loop share one
   *   script call, which admits as many as fit, in arrival order. A node that saw the bucket
   *   busy also asks for permits: about what it expects to use within a lease
   *   ({@link PERMIT_LEASE_MS}), at most 1,000 and at most an eighth of the room left, so grants
   *   shrink as the window fills and stop near the limit. It asks for more when half a grant is
   *   used, so a busy key rarely waits.
   * - A lease ends after {@link PERMIT_LEASE_MS}, when the window ends, or when another node is
   *   short of room; the node then hands its unused permits back. A request short of room while
   *   other nodes hold leases waits for them (they are asked at once over pub/sub, and Redis drops
   *   a lease {@link PERMIT_LEASE_GRACE_MS} after its end) instead of being refused, so a limit is
   *   reached exactly: permits never strand room another node needed.
   *
   * While Redis is down (or when the call fails for that reason), each node counts alone, in
   * process, with the same limit, and drops its permits: requests are neither refused nor made
   * to wait, and a key gets at most its limit per node (N × limit across N nodes) until Redis is
   * back, when the counts in Redis take over again.
   */
  rateLimit(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): RateLimitResult | Promise<RateLimitResult> {
    if (!this.health.up) return this.local.rateLimit(bucket, limit, windowMs, nowMs);
    const taken = this.permits.take(bucket, limit, windowMs, nowMs);
    if (taken !== undefined) {
      if (taken.refill) this.batchFor(bucket, limit, windowMs, nowMs);
      return taken.result;
    }
    const waiters = this.batchFor(bucket, limit, windowMs, nowMs).waiters;
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  }

  /** The batch of this turn for a bucket (a refill ahead of need is a batch with no waiters). */
  private batchFor(bucket: string, limit: number, windowMs: number, nowMs: number) {
    const id = `${limit}:${windowMs}:${bucket}`;
    let batch = this.batches.get(id);
    if (!batch) {
      batch = { bucket, limit, windowMs, nowMs, waiters: [] };
      this.batches.set(id, batch);
      // After this poll phase: every request parsed in this turn of the event loop joins.
      if (this.batches.size === 1) setImmediate(() => this.decideBatches());
    }
    return batch;
  }

  private decideBatches() {
    const batches = [...this.batches.values()];
    this.batches.clear();
    for (const b of batches) this.decide(b);
  }

  private decide(b: RateLimitBatch) {
    const id = PermitLeases.id(b.bucket, b.windowMs);
    const askedAt = performance.now();
    const { reserve, generation, back } = this.permits.ask(
      id,
      b.bucket,
      b.limit,
      b.windowMs,
      b.waiters.length,
    );
    if (back) this.giveBack(back);
    if (b.waiters.length === 0 && reserve === 0) return this.permits.refillFailed(id);
    if (reserve > 0) this.listenForReclaims();
    const index = Math.floor(b.nowMs / b.windowMs);
    const base = `${this.prefix}rl:{${b.bucket}}:${b.windowMs}:`;
    this.run(() =>
      this.client.svcSlidingWindow(
        base + index,
        base + (index - 1),
        `${base + index}:leases`,
        b.limit,
        (b.nowMs % b.windowMs) / b.windowMs,
        b.windowMs * 2,
        b.waiters.length,
        reserve,
        this.node,
        PERMIT_LEASE_MS + PERMIT_LEASE_GRACE_MS,
        this.prefix + RECLAIM_CHANNEL,
        id,
      ),
    )
      .then(([admitted, prevCount, currCount, granted, waitMs]) => {
        const p = Number(prevCount);
        const c = Number(currCount);
        const n = Number(admitted);
        const backs = this.permits.granted(
          id,
          index,
          Number(granted),
          p,
          c + n + Number(granted),
          askedAt,
          generation,
        );
        for (const back of backs) this.giveBack(back);
        const short: RateLimitBatch['waiters'] = [];
        b.waiters.forEach((w, i) => {
          if (i < n) {
            w.resolve(slidingWindowResult(true, p, c + i + 1, b.limit, b.windowMs, b.nowMs));
            return;
          }
          // Short of room in Redis, but this node may hold the room: permits granted to an
          // earlier ask of its own that was still on its way.
          const taken = this.permits.take(b.bucket, b.limit, b.windowMs, b.nowMs);
          if (taken) {
            if (taken.refill) this.batchFor(b.bucket, b.limit, b.windowMs, b.nowMs);
            w.resolve(taken.result);
          } else if (Number(waitMs) > 0) short.push(w);
          else w.resolve(slidingWindowResult(false, p, c + n, b.limit, b.windowMs, b.nowMs));
        });
        // Other nodes hold permits they may hand back: ask again shortly rather than refuse.
        if (short.length > 0) {
          setTimeout(
            () => this.decide({ ...b, waiters: short }),
            Math.min(Number(waitMs), PERMIT_RETRY_MS),
          ).unref();
        }
      })
      .catch((err) => {
        this.permits.refillFailed(id);
        if (err instanceof DependencyUnavailableError) {
          for (const w of b.waiters)
            w.resolve(this.local.rateLimit(b.bucket, b.limit, b.windowMs, b.nowMs));
        } else {
          for (const w of b.waiters) w.reject(err);
        }
      });
  }

  /** Hands unused permits back to Redis (ending the lease); a failure leaves them counted. */
  private giveBack(back: Returned) {
    const count = `${this.prefix}rl:{${back.bucket}}:${back.windowMs}:${back.index}`;
    this.run(() =>
      this.client.svcReturnPermits(count, `${count}:leases`, this.node, back.unused),
    ).catch(() => {});
  }

  /** Subscribes (once) to other nodes' requests to hand back permits of a bucket. */
  private listenForReclaims() {
    if (this.reclaim) return;
    this.reclaim = this.subscribe(RECLAIM_CHANNEL, (id) => {
      const back = this.permits.release(id);
      if (back) this.giveBack(back);
    }).catch(() => {
      this.reclaim = null;
    });
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
        await within(
          this.subscriber.subscribe(full),
          this.subscriberWasReady ? this.timeoutMs : Math.max(this.timeoutMs, STARTUP_WAIT_MS),
        );
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

  recentSets(name: string, options: RecentSetsOptions) {
    return new RedisRecentSets(this, name, options);
  }

  async ping() {
    try {
      const ok = (await within(this.client.ping(), this.deadlineMs())) === 'PONG';
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
    clearInterval(this.permitSweeper);
    this.permits.clear();
    this.handlers.clear();
    await this.local.close();
    await Promise.allSettled([this.client.quit(), this.subscriber.quit()]);
  }
}
