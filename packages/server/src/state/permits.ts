import { type RateLimitResult, slidingWindowResult } from './state.ts';

/**
 * Rate-limit permits a node holds: requests it may admit without asking Redis, because Redis
 * has already counted them. See `RedisState.rateLimit` for the protocol; this class is the
 * node's side of it, pure bookkeeping (no I/O), so it can be tested with a fake clock.
 *
 * A node asks Redis for permits only for a bucket it sees busy (asks closer together than one
 * lease), sized to what it expects to use within one lease. Redis grants at most a share of the
 * room left in the window (so grants shrink as the window fills, and none are granted near the
 * limit). Permits belong to one window and one lease: when either ends, the node stops using
 * them and hands the rest back.
 */
export interface PermitOptions {
  /** How long a node may use a grant (monotonic ms). */
  leaseMs: number;
  /** The largest grant a node asks for. */
  maxGrant: number;
  /** The smallest grant worth asking for (a lease's bookkeeping costs two Redis calls). */
  minGrant: number;
}

/** Permits handed back: the node's unused ones in `index`'s window (0 only ends the lease). */
export interface Returned {
  bucket: string;
  windowMs: number;
  index: number;
  unused: number;
}

interface Lease {
  bucket: string;
  limit: number;
  windowMs: number;
  /** The window the permits belong to. */
  index: number;
  /** Unused permits this node holds. */
  permits: number;
  /** Redis's counts as of the last grant (`curr` includes every permit granted so far). */
  prev: number;
  curr: number;
  /** Until when (monotonic ms) the permits may be used; 0 when no lease is held in Redis. */
  endsAt: number;
  /** The size of the last grant (refill when half of it is used). */
  lastGrant: number;
  /** When (monotonic ms) this node last asked Redis for this bucket, and requests seen since. */
  askedAt: number;
  seen: number;
  /** A refill is on its way. */
  refilling: boolean;
  /** How many times the lease has ended: a grant asked for before the last end goes back. */
  generation: number;
}

export class PermitLeases {
  private leases = new Map<string, Lease>();
  /** The same leases by window length, then bucket: `take` builds no string per request. */
  private byWindow = new Map<number, Map<string, Lease>>();

  constructor(
    private options: PermitOptions,
    private monotonic: () => number = () => performance.now(),
  ) {}

  static id(bucket: string, windowMs: number) {
    return `${windowMs}:${bucket}`;
  }

  /**
   * Admits one request from this node's permits: the result, or undefined when the node has
   * none for this window (then ask Redis). `refill` is set when the node should ask for more
   * ahead of need (half the last grant is used), so requests rarely wait for a grant.
   */
  take(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): { result: RateLimitResult; refill: boolean } | undefined {
    const lease = this.byWindow.get(windowMs)?.get(bucket);
    if (lease === undefined) return undefined;
    lease.seen += 1;
    if (
      lease.permits === 0 ||
      lease.limit !== limit ||
      lease.index !== Math.floor(nowMs / windowMs) ||
      this.monotonic() >= lease.endsAt
    ) {
      return undefined;
    }
    lease.permits -= 1;
    const refill = !lease.refilling && lease.permits <= lease.lastGrant >> 1;
    if (refill) lease.refilling = true;
    return {
      result: slidingWindowResult(
        true,
        lease.prev,
        lease.curr - lease.permits,
        limit,
        windowMs,
        nowMs,
      ),
      refill,
    };
  }

  /**
   * Called when this node asks Redis for `id` with `asking` requests waiting: how many permits
   * to ask for beyond them, from the rate this node has seen the bucket at (0 for a bucket that
   * is not busy: it is then decided request by request, as without permits), the permits of
   * a lease that has ended, to hand back before asking, and the lease's generation (for
   * {@link granted}).
   */
  ask(
    id: string,
    bucket: string,
    limit: number,
    windowMs: number,
    asking: number,
  ): { reserve: number; generation: number; back?: Returned } {
    const now = this.monotonic();
    let lease = this.leases.get(id);
    if (lease === undefined) {
      lease = {
        bucket,
        limit,
        windowMs,
        index: -1,
        permits: 0,
        prev: 0,
        curr: 0,
        endsAt: 0,
        lastGrant: 0,
        askedAt: now,
        seen: 0,
        refilling: false,
        generation: 0,
      };
      this.leases.set(id, lease);
      let buckets = this.byWindow.get(windowMs);
      if (!buckets) {
        buckets = new Map();
        this.byWindow.set(windowMs, buckets);
      }
      buckets.set(bucket, lease);
      return { reserve: 0, generation: 0 };
    }
    // Requests that went to Redis without passing `take` (no lease yet) count as seen too.
    const seen = Math.max(lease.seen, asking);
    const elapsed = now - lease.askedAt;
    lease.askedAt = now;
    lease.seen = 0;
    // A lease that has ended goes back first (before the ask, on the same connection), so its
    // unused permits are room again.
    const back = lease.endsAt > 0 && now >= lease.endsAt ? this.end(lease) : undefined;
    const generation = lease.generation;
    if (elapsed >= this.options.leaseMs) return { reserve: 0, generation, back };
    const expected = Math.floor((seen * this.options.leaseMs) / Math.max(elapsed, 1));
    const reserve = Math.min(this.options.maxGrant, expected);
    return { reserve: reserve < this.options.minGrant ? 0 : reserve, generation, back };
  }

  /**
   * Records Redis's answer to an ask made at `askedAt` (monotonic) in lease `generation`, for
   * window `index`: `granted` permits (possibly 0) and its counts (`curr` after the grant).
   * Returns permits to hand back at once: those of an older window the node still held, and a
   * grant that arrives for a window the node has left or after its lease ended (handed back
   * while the grant was on its way: Redis no longer lists the lease, so other nodes would not
   * wait for these permits).
   */
  granted(
    id: string,
    index: number,
    granted: number,
    prev: number,
    curr: number,
    askedAt: number,
    generation: number,
  ): Returned[] {
    const lease = this.leases.get(id);
    if (lease === undefined) return [];
    lease.refilling = false;
    const back: Returned[] = [];
    const grant = { bucket: lease.bucket, windowMs: lease.windowMs, index, unused: granted };
    if (lease.index > index) return granted > 0 ? [grant] : [];
    const ended = lease.generation !== generation;
    if (lease.index < index) {
      if (lease.endsAt > 0) back.push(this.end(lease));
      lease.index = index;
      lease.permits = 0;
    }
    lease.prev = prev;
    lease.curr = curr;
    if (granted > 0 && ended) back.push(grant);
    else if (granted > 0) {
      lease.permits += granted;
      lease.lastGrant = granted;
      lease.endsAt = askedAt + this.options.leaseMs;
    }
    return back;
  }

  /** A refill that failed: the node may ask again. */
  refillFailed(id: string) {
    const lease = this.leases.get(id);
    if (lease) lease.refilling = false;
  }

  /**
   * Ends `id`'s lease now (another node is waiting for permits): what to hand back, or
   * undefined when this node holds no lease for it.
   */
  release(id: string): Returned | undefined {
    const lease = this.leases.get(id);
    if (lease === undefined || lease.endsAt === 0) return undefined;
    return this.end(lease);
  }

  /**
   * Ends every lease past its end (or of a window that is over, by `nowMs`) and forgets
   * buckets not asked about for `idleMs`: what to hand back.
   */
  expire(nowMs: number, idleMs: number): Returned[] {
    const now = this.monotonic();
    const back: Returned[] = [];
    for (const [id, lease] of this.leases) {
      const over = lease.index !== Math.floor(nowMs / lease.windowMs);
      if (lease.endsAt > 0 && (now >= lease.endsAt || over)) back.push(this.end(lease));
      if (lease.endsAt === 0 && !lease.refilling && now - lease.askedAt >= idleMs) {
        this.leases.delete(id);
        this.byWindow.get(lease.windowMs)?.delete(lease.bucket);
      }
    }
    return back;
  }

  /** Drops every permit without handing it back (Redis is down: they stay counted there). */
  clear() {
    this.leases.clear();
    this.byWindow.clear();
  }

  /** Unused permits held for `id` (for tests and metrics). */
  held(id: string): number {
    return this.leases.get(id)?.permits ?? 0;
  }

  private end(lease: Lease): Returned {
    const back = {
      bucket: lease.bucket,
      windowMs: lease.windowMs,
      index: lease.index,
      unused: lease.permits,
    };
    lease.permits = 0;
    lease.endsAt = 0;
    lease.generation += 1;
    return back;
  }
}
