import type { KeyType, Product } from '@svc/protocol';
import type { Clock } from '../clock.ts';
import type { SharedState } from '../state/index.ts';
import { json, type Store } from '../storage/db.ts';
import { unavailableDependency } from '../unavailable.ts';
import { hashKey, parseKey } from './key-format.ts';
import { parseIpRange } from './restrictions.ts';

/** A key as the gate needs it, with its project's enabled products. Cached in process. */
export interface VerifiedKey {
  id: string;
  projectId: string;
  type: KeyType;
  scopes: ReadonlySet<string>;
  allowedOrigins: readonly string[];
  allowedBundleIds: readonly string[];
  ipRanges: NonNullable<ReturnType<typeof parseIpRange>>[];
  rateLimitPerMinute: number | null;
  expiresAtMs: number | null;
  /** When the key stops working: now or later (a rotated key's grace period end). */
  revokedAtMs: number | null;
  projectProducts: ReadonlySet<Product>;
  /** The key's rate-limit bucket name in the shared state (built once, not per request). */
  rateBucket: string;
}

interface CacheEntry {
  key: VerifiedKey | null;
  cachedAtMs: number;
}

const INVALIDATE_CHANNEL = 'keys.invalidate';
const MAX_ENTRIES = 50_000;
/**
 * How long a key stays cached while invalidations may not arrive (the shared state is down or
 * its subscription is lost): a revocation then takes effect on every node within this bound.
 */
export const UNINFORMED_TTL_MS = 1000;

/**
 * Looks keys up by hash, caching results (hits and misses) in process. Any admin change to keys
 * or projects publishes an invalidation on the shared state, which every node applies at once;
 * the TTL is only a safety net should a message be lost. While invalidations cannot arrive (the
 * shared state is down or the subscription is lost), the node drops its cache and keeps keys
 * for at most {@link UNINFORMED_TTL_MS}; it drops it again when they can.
 */
export class KeyStore {
  private cache = new Map<string, CacheEntry>();
  private unsubscribe: (() => Promise<void>) | undefined;
  private generation = 0;
  /** The TTL in force: `ttlMs`, or shorter while invalidations may be missed. */
  private currentTtlMs: number;
  private subscriptionLost = false;
  private readonly onStateChange = () => this.adapt();
  private readonly onLost = () => {
    this.subscriptionLost = true;
    this.adapt();
  };
  private readonly onRestored = () => {
    this.subscriptionLost = false;
    this.adapt();
  };

  constructor(
    private store: Store,
    private state: SharedState,
    private clock: Clock,
    private ttlMs: number,
  ) {
    this.currentTtlMs = ttlMs;
  }

  async start() {
    this.unsubscribe = await this.state.subscribe(INVALIDATE_CHANNEL, () => this.clear());
    this.state.health.on('down', this.onStateChange).on('up', this.onStateChange);
    this.state.subscriptions.on('lost', this.onLost).on('restored', this.onRestored);
  }

  async stop() {
    this.state.health.off('down', this.onStateChange).off('up', this.onStateChange);
    this.state.subscriptions.off('lost', this.onLost).off('restored', this.onRestored);
    await this.unsubscribe?.();
  }

  /** Invalidations may have been missed, or may be from now on: forget, and set the TTL. */
  private adapt() {
    const informed = this.state.health.up && !this.subscriptionLost;
    this.currentTtlMs = informed ? this.ttlMs : Math.min(this.ttlMs, UNINFORMED_TTL_MS);
    this.clear();
  }

  /** Drops every cached key on this node. */
  clear() {
    this.generation += 1;
    this.cache.clear();
  }

  /** Tells every node (this one included) to drop cached keys. Call after any key or project change. */
  async invalidateEverywhere() {
    this.clear();
    try {
      await this.state.publish(INVALIDATE_CHANNEL, String(this.clock.now()));
    } catch (err) {
      // The change is stored. With the shared state down, every node keeps keys for at most
      // UNINFORMED_TTL_MS until it is back (see the class comment), so the change still lands.
      if (!unavailableDependency(err)) throw err;
    }
  }

  /**
   * The key a request presents, or null when it is malformed or unknown. A malformed key (bad
   * prefix, length or checksum) never reaches the store. Results are cached by the presented
   * string, so a cached key costs one map lookup: no parse and no SHA-256. The cache lives only
   * in this process's memory, as the request carrying the key does; at rest there are only hashes.
   */
  /**
   * The cached answer for `presented`, without waiting: the key, `null` for a key known not to
   * exist, or `undefined` when the cache has no fresh answer (then call {@link find}).
   */
  peek(presented: string, now: number): VerifiedKey | null | undefined {
    const hit = this.cache.get(presented);
    return hit && now - hit.cachedAtMs < this.currentTtlMs ? hit.key : undefined;
  }

  async find(presented: string): Promise<VerifiedKey | null> {
    const now = this.clock.now();
    const hit = this.peek(presented, now);
    if (hit !== undefined) return hit;
    if (!parseKey(presented).ok) return null;
    const generation = this.generation;
    const key = await this.load(hashKey(presented));
    // An invalidation that arrived during the query makes this result stale: don't cache it.
    if (generation === this.generation && this.currentTtlMs > 0) {
      if (this.cache.size >= MAX_ENTRIES) {
        const oldest = this.cache.keys().next().value;
        if (oldest !== undefined) this.cache.delete(oldest);
      }
      this.cache.set(presented, { key, cachedAtMs: now });
    }
    return key;
  }

  private async load(hash: string): Promise<VerifiedKey | null> {
    const row = await this.store.db
      .selectFrom('api_keys')
      .innerJoin('projects', 'projects.id', 'api_keys.project_id')
      .select([
        'api_keys.id',
        'api_keys.project_id',
        'api_keys.type',
        'api_keys.scopes',
        'api_keys.allowed_origins',
        'api_keys.allowed_bundle_ids',
        'api_keys.allowed_ips',
        'api_keys.rate_limit_per_minute',
        'api_keys.expires_at',
        'api_keys.revoked_at',
        'projects.products',
      ])
      .where('api_keys.key_hash', '=', hash)
      .executeTakeFirst();
    if (!row) return null;
    return {
      id: row.id,
      projectId: row.project_id,
      type: row.type,
      scopes: new Set(json<string[]>(row.scopes)),
      allowedOrigins: json<string[]>(row.allowed_origins),
      allowedBundleIds: json<string[]>(row.allowed_bundle_ids),
      ipRanges: json<string[]>(row.allowed_ips)
        .map(parseIpRange)
        .filter((r): r is NonNullable<typeof r> => r !== null),
      rateLimitPerMinute: row.rate_limit_per_minute,
      expiresAtMs: row.expires_at ? Date.parse(row.expires_at) : null,
      revokedAtMs: row.revoked_at ? Date.parse(row.revoked_at) : null,
      projectProducts: new Set(json<Product[]>(row.products)),
      rateBucket: `key:${row.id}`,
    };
  }
}
