import { EventEmitter } from 'node:events';
import {
  type RateLimitResult,
  RECENT_MAX_PER_KEY,
  type Recalled,
  type RecentEntry,
  type SharedState,
  slidingWindowResult,
} from './state.ts';

/** A remembered entry as kept here. */
interface Kept {
  key: string;
  member: string;
  ms: number;
  expiresMs: number;
}

/** Entries remembered at most, by default (about 200 bytes each). */
export const MEMORY_MAX_REMEMBERED = 1_000_000;

interface Window {
  index: number;
  curr: number;
  prev: number;
}

/** Shared state for a single process: the embedded default. */
export class MemoryState implements SharedState {
  readonly kind = 'memory' as const;
  /** Counters by window length, then bucket (no key string built per request). */
  private windows = new Map<number, Map<string, Window>>();
  private bus = new EventEmitter().setMaxListeners(0);
  private sweeper: NodeJS.Timeout;
  /** Remembered entries by key, oldest first. */
  private recent = new Map<string, Kept[]>();
  /** Every remembered entry in the order it came, for forgetting oldest first. */
  private arrivals: Kept[] = [];
  private arrivalsHead = 0;

  /** @param maxRemembered how many `remember` entries are kept at most (oldest dropped first). */
  constructor(private maxRemembered = MEMORY_MAX_REMEMBERED) {
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

  remember(entries: RecentEntry[], nowMs: number): void {
    for (const e of entries) {
      const kept: Kept = { key: e.key, member: e.member, ms: e.ms, expiresMs: e.ms + e.ttlMs };
      let list = this.recent.get(e.key);
      if (list === undefined) {
        list = [];
        this.recent.set(e.key, list);
      }
      if (list.length > 0 && list.some((k) => k.expiresMs <= nowMs)) {
        // As on Redis: writing a key drops its expired members.
        list = list.filter((k) => k.expiresMs > nowMs);
        this.recent.set(e.key, list);
      }
      list.push(kept);
      if (list.length > RECENT_MAX_PER_KEY) list.shift();
      this.arrivals.push(kept);
    }
    this.forget(nowMs);
  }

  /**
   * Forgets, oldest arrival first, what has expired or is beyond the bound. An entry that lives
   * longer than one that came after it waits for it: lifetimes are a lower bound on memory, the
   * count is the upper one.
   */
  private forget(nowMs: number) {
    const arrivals = this.arrivals;
    let head = this.arrivalsHead;
    while (
      head < arrivals.length &&
      (arrivals[head].expiresMs <= nowMs || arrivals.length - head > this.maxRemembered)
    ) {
      const kept = arrivals[head++];
      const list = this.recent.get(kept.key);
      const at = list ? list.indexOf(kept) : -1;
      if (list && at !== -1) {
        list.splice(at, 1);
        if (list.length === 0) this.recent.delete(kept.key);
      }
    }
    // Compact once the forgotten prefix is large, so the array does not grow without end.
    if (head > 4096 && head * 2 > arrivals.length) {
      this.arrivals = arrivals.slice(head);
      head = 0;
    }
    this.arrivalsHead = head;
  }

  async recall(key: string, sinceMs: number, limit: number): Promise<Recalled[]> {
    const found: Recalled[] = [];
    const list = this.recent.get(key) ?? [];
    // Latest arrival first, then (a stable sort) newest first by time.
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i].ms >= sinceMs) found.push({ member: list[i].member, ms: list[i].ms });
    }
    return found.sort((a, b) => b.ms - a.ms).slice(0, limit);
  }

  async publish(channel: string, message: string) {
    // Deliver asynchronously, as Redis would.
    queueMicrotask(() => this.bus.emit(channel, message));
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    this.bus.on(channel, handler);
    return async () => {
      this.bus.off(channel, handler);
    };
  }

  async ping() {
    return true;
  }

  async close() {
    clearInterval(this.sweeper);
    this.bus.removeAllListeners();
    this.recent.clear();
    this.arrivals = [];
    this.arrivalsHead = 0;
  }
}
