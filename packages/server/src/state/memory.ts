import { EventEmitter } from 'node:events';
import { type RateLimitResult, type SharedState, slidingWindowResult } from './state.ts';

interface Window {
  index: number;
  curr: number;
  prev: number;
}

/** Shared state for a single process: the embedded default. */
export class MemoryState implements SharedState {
  readonly kind = 'memory' as const;
  private windows = new Map<string, Window>();
  private bus = new EventEmitter().setMaxListeners(0);
  private sweeper: NodeJS.Timeout;

  constructor() {
    // Drop counters that can no longer affect a decision, so memory stays bounded.
    this.sweeper = setInterval(() => this.sweep(Date.now()), 60_000).unref();
  }

  rateLimit(bucket: string, limit: number, windowMs: number, nowMs: number): RateLimitResult {
    const index = Math.floor(nowMs / windowMs);
    const key = `${bucket}:${windowMs}`;
    let w = this.windows.get(key);
    if (!w) {
      w = { index, curr: 0, prev: 0 };
      this.windows.set(key, w);
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
    for (const [key, w] of this.windows) {
      const windowMs = Number(key.slice(key.lastIndexOf(':') + 1));
      if (Math.floor(nowMs / windowMs) > w.index + 1) this.windows.delete(key);
    }
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
  }
}
