import type { EventEmitter } from 'node:events';
import type { DependencyHealth } from '../unavailable.ts';
import type { MemoryState } from './memory.ts';
import type { RedisState } from './redis.ts';

/**
 * What the subscription connection reports: `lost` when it drops (messages published from then
 * on do not arrive), `restored` when it is back and subscribed again (what was published in
 * between is lost for good: listeners catch up from elsewhere, or drop what they cached).
 */
export interface SubscriptionEvents {
  lost: [];
  restored: [];
}

/** The outcome of one rate-limit check. */
export interface RateLimitResult {
  allowed: boolean;
  /** The limit in force. */
  limit: number;
  /** Requests still available now (after this one, when allowed). */
  remaining: number;
  /** Seconds until the quota is fully available again (for the `RateLimit` header's `t`). */
  resetSeconds: number;
  /** Seconds until one more request would be allowed; 0 when allowed. */
  retryAfterSeconds: number;
}

/** One member written to a key of {@link RecentSets}. */
export interface RecentMember {
  key: string;
  member: string;
  /** Its time, ms since the epoch: members are kept and recalled by it. */
  ms: number;
  /** How long after `ms` the member is kept at least. */
  ttlMs: number;
}

export interface RecentSetsOptions {
  /** Members a key keeps at most: its newest. */
  keep: number;
  /** In process: members kept at most over all keys (the least recently written keys go). */
  maxMembers: number;
}

/**
 * Keys holding their most recent members, each with a time: per key the newest `keep`, each
 * member kept at least `ttlMs` after its time. In Redis a hash per slice of time with a field
 * per key, seen by every node; in process a map, bounded by `maxMembers`, empty after a restart.
 * Calls follow the shared state's outage policy.
 */
export interface RecentSets {
  /** True when the sets outlive this process (Redis); false in process. */
  readonly durable: boolean;
  /** Adds members, oldest first; a member already in its key is kept once. `nowMs`: the clock. */
  add(members: RecentMember[], nowMs: number): Promise<void>;
  /**
   * The key's members with a time from `sinceMs` to `untilMs`, newest first, at most `limit`
   * (and `keep`: older ones may still be held, but only the newest `keep` are sure to be). Redis
   * looks back at most 8 days from `untilMs`.
   */
  recent(
    key: string,
    sinceMs: number,
    untilMs: number,
    limit: number,
  ): Promise<{ member: string; ms: number }[]>;
}

/**
 * State shared by every node of a fleet: rate-limit counters, pub/sub fan-out. One
 * implementation keeps it in process (the embedded default), the other in Redis. Both behave
 * the same; the test suite runs on both.
 */
export interface SharedState {
  readonly kind: 'memory' | 'redis';
  /**
   * Whether the store answers, as this node last saw it. While it is down, calls are refused at
   * once with `DependencyUnavailableError` and rate limits are decided by this node alone.
   * In process: always up.
   */
  readonly health: DependencyHealth;
  /** When the subscription connection is lost and back (see {@link SubscriptionEvents}). */
  readonly subscriptions: EventEmitter<SubscriptionEvents>;
  /**
   * Counts one request against `bucket` under a sliding-window counter (the weighted sum of the
   * previous and current fixed windows, as Cloudflare and Upstash do), atomically across nodes.
   * A refused request is not counted. The in-process implementation answers synchronously
   * (the key gate then finishes without a promise); Redis answers with a promise.
   */
  rateLimit(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): RateLimitResult | Promise<RateLimitResult>;
  /**
   * Sends `message` to every subscriber of `channel` on every node, this one included; resolves
   * with the number of nodes subscribed to it (Redis's `PUBLISH` count), so that a node asking
   * all the others knows how many answers to wait for.
   */
  publish(channel: string, message: string): Promise<number>;
  /** Calls `handler` for each message on `channel`; resolves once the subscription is live. */
  subscribe(channel: string, handler: (message: string) => void): Promise<() => Promise<void>>;
  /**
   * The recent sets called `name` (see {@link RecentSets}): for what a product keeps a while
   * and any node may ask for, such as Links' deferred-match candidates. Options are those of
   * the first call for a name in process.
   */
  recentSets(name: string, options: RecentSetsOptions): RecentSets;
  /** True when the store answers (within its deadline). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
  /**
   * Calls the case for this implementation and returns its result: for a part that needs more
   * than this interface (realtime's room store runs Lua scripts on Redis). A new implementation
   * fails to compile until every such part handles it.
   */
  match<T>(cases: StateCases<T>): T;
}

/** One function per shared-state implementation (see {@link SharedState.match}). */
export interface StateCases<T> {
  /** In process: one node, nothing shared with another. */
  memory(state: MemoryState): T;
  /** Redis: every node of the fleet shares it. */
  redis(state: RedisState): T;
}

/** Sliding-window arithmetic shared by both implementations. */
export function slidingWindowResult(
  allowed: boolean,
  prev: number,
  curr: number,
  limit: number,
  windowMs: number,
  nowMs: number,
): RateLimitResult {
  const intoWindow = nowMs % windowMs;
  const weight = 1 - intoWindow / windowMs;
  const estimate = prev * weight + curr;
  const remaining = Math.max(0, Math.floor(limit - estimate));
  const untilNextWindowMs = windowMs - intoWindow;
  // Everything counted now has left the sliding window one full window after this one ends.
  const resetSeconds = Math.ceil((untilNextWindowMs + (curr > 0 ? windowMs : 0)) / 1000);
  let retryAfterMs = 0;
  if (!allowed) {
    if (curr + 1 <= limit && prev > 0) {
      // Wait in this window until the previous window's weight has decayed enough.
      const neededWeight = (limit - 1 - curr) / prev;
      retryAfterMs = Math.max(0, (1 - neededWeight) * windowMs - intoWindow);
    } else {
      // Wait for the next window, then for this window's count to decay below the limit.
      const neededWeight = curr > 0 ? (limit - 1) / curr : 1;
      retryAfterMs = untilNextWindowMs + Math.max(0, (1 - neededWeight) * windowMs);
    }
  }
  return {
    allowed,
    limit,
    remaining,
    resetSeconds: Math.max(1, resetSeconds),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil(retryAfterMs / 1000)),
  };
}
