import { EventEmitter } from 'node:events';
import { DependencyHealth } from '../unavailable.ts';
import { MemoryRecentSets } from './recent-sets.ts';
import {
  type RateLimitResult,
  type RecentSetsOptions,
  type SharedState,
  type StateCases,
  type SubscriptionEvents,
  slidingWindowResult,
} from './state.ts';

interface Window {
  index: number;
  curr: number;
  prev: number;
}

/** Shared state for a single process: the embedded default. */
export class MemoryState implements SharedState {
  readonly kind = 'memory' as const;

  match<T>(cases: StateCases<T>): T {
    return cases.memory(this);
  }
  /** In process: never down, and its subscriptions are never lost. */
  readonly health = new DependencyHealth('shared state');
  readonly subscriptions = new EventEmitter<SubscriptionEvents>();
  /** Counters by window length, then bucket (no key string built per request). */
  private windows = new Map<number, Map<string, Window>>();
  private bus = new EventEmitter().setMaxListeners(0);
  private sweeper: NodeJS.Timeout;
  private recent = new Map<string, MemoryRecentSets>();

  constructor() {
    // Drop counters that can no longer affect a decision, so memory stays bounded.
    this.sweeper = setInterval(() => this.sweep(Date.now()), 60_000).unref();
  }

  rateLimit(bucket: string, limit: number, windowMs: number, nowMs: number): RateLimitResult {
    const index = Math.floor(nowMs / windowMs);
    let buckets = this.windows.get(windowMs);
    if (!buckets) {
      buckets = new Map();
      this.windows.set(windowMs, buckets);
    }
    let w = buckets.get(bucket);
    if (!w) {
      w = { index, curr: 0, prev: 0 };
      buckets.set(bucket, w);
    } else if (w.index !== index) {
      w.prev = w.index === index - 1 ? w.curr : 0;
      w.curr = 0;
      w.index = index;
    }
    const weight = 1 - (nowMs % windowMs) / windowMs;
    const allowed = w.prev * weight + w.curr + 1 <= limit;
    if (allowed) w.curr += 1;
    return slidingWindowResult(allowed, w.prev, w.curr, limit, windowMs, nowMs);
  }

  private sweep(nowMs: number) {
    for (const [windowMs, buckets] of this.windows) {
      for (const [bucket, w] of buckets) {
        if (Math.floor(nowMs / windowMs) > w.index + 1) buckets.delete(bucket);
      }
    }
  }

  async publish(channel: string, message: string) {
    // Deliver asynchronously, as Redis would; each subscriber counts as a node.
    queueMicrotask(() => this.bus.emit(channel, message));
    return this.bus.listenerCount(channel);
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    this.bus.on(channel, handler);
    return async () => {
      this.bus.off(channel, handler);
    };
  }

  recentSets(name: string, options: RecentSetsOptions) {
    let sets = this.recent.get(name);
    if (!sets) {
      sets = new MemoryRecentSets(options);
      this.recent.set(name, sets);
    }
    return sets;
  }

  async ping() {
    return true;
  }

  async close() {
    clearInterval(this.sweeper);
    this.bus.removeAllListeners();
  }
}
