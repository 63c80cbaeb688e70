import type { LinkAppPlatform } from '@svc/protocol';
import type { Redis } from 'ioredis';
import type { SharedState } from '../state/index.ts';
import type { RedisState } from '../state/redis.ts';

/** Candidates a key keeps at most: its newest. One visitor clicking again and again costs no more. */
export const CANDIDATES_PER_KEY = 50;

/** A mobile click that an app's first open may be matched to (deferred deep linking). */
export interface Candidate {
  clickId: string;
  linkId: string;
  /** The click's time, ms since the epoch. */
  ms: number;
}

/** A candidate under its key, kept `ttlMs` after its click (the project's match window). */
export interface CandidateEntry extends Candidate {
  key: string;
  ttlMs: number;
}

/**
 * Where deferred-match candidates live between a click and the app's first open: mobile clicks
 * under the key of their project, platform and visitor's fingerprint. In process for the
 * embedded default, in Redis (with a TTL) for a fleet, so that every node sees every node's
 * clicks. A key keeps its newest {@link CANDIDATES_PER_KEY}; claims are not kept here (the SQL
 * store's `link_click_claims` decides them).
 */
export interface CandidateStore {
  /** Adds entries, oldest first; `nowMs` is the clock's time, for what has expired. */
  add(entries: CandidateEntry[], nowMs: number): Promise<void>;
  /** The key's candidates with a time of at least `sinceMs`, newest first, at most `limit`. */
  recall(key: string, sinceMs: number, limit: number): Promise<Candidate[]>;
}

/** The key of a visitor's candidates in a project, for one app platform. */
export function candidateKey(projectId: string, platform: LinkAppPlatform, fingerprint: string) {
  return `links:cand:${projectId}:${platform}:${fingerprint}`;
}

interface Held extends Candidate {
  expiresMs: number;
}

/**
 * Candidates in this process: a map from key to its candidates (oldest first). Keys are kept
 * in the order they were last written, so the least recently written go first, both when their
 * newest candidate has expired and when the store holds more than `max` candidates.
 */
export class MemoryCandidateStore implements CandidateStore {
  private keys = new Map<string, Held[]>();
  private size = 0;

  /** @param max candidates kept at most (`SVC_LINKS_MAX_CANDIDATES`) */
  constructor(private max: number) {}

  async add(entries: CandidateEntry[], nowMs: number) {
    for (const e of entries) {
      let held = this.keys.get(e.key);
      if (held === undefined) {
        held = [];
      } else {
        // Written last from now on.
        this.keys.delete(e.key);
        // A click put back from `link_clicks` at start may already be here.
        if (held.some((h) => h.clickId === e.clickId)) {
          this.keys.set(e.key, held);
          continue;
        }
      }
      this.keys.set(e.key, held);
      held.push({ clickId: e.clickId, linkId: e.linkId, ms: e.ms, expiresMs: e.ms + e.ttlMs });
      this.size++;
      if (held.length > CANDIDATES_PER_KEY) {
        held.shift();
        this.size--;
      }
    }
    this.forget(nowMs);
  }

  async recall(key: string, sinceMs: number, limit: number): Promise<Candidate[]> {
    const held = this.keys.get(key) ?? [];
    const found: Candidate[] = [];
    // Latest arrival first; a stable sort then orders by time.
    for (let i = held.length - 1; i >= 0; i--) {
      const h = held[i];
      if (h.ms >= sinceMs) found.push({ clickId: h.clickId, linkId: h.linkId, ms: h.ms });
    }
    return found.sort((a, b) => b.ms - a.ms).slice(0, limit);
  }

  /** Forgets keys whose newest candidate has expired, and the oldest keys beyond the bound. */
  private forget(nowMs: number) {
    for (const [key, held] of this.keys) {
      const expired = held[held.length - 1].expiresMs <= nowMs;
      if (!expired && this.size <= this.max) break;
      this.keys.delete(key);
      this.size -= held.length;
    }
  }
}

/**
 * `KEYS`: candidate keys; `ARGV[1]`: candidates a key keeps; then per key its TTL (ms), its
 * count n, and n pairs of score (the click's time) and member (`clickId linkId`).
 */
const ADD = `
local keep = tonumber(ARGV[1])
local at = 2
for _, key in ipairs(KEYS) do
  local ttl = ARGV[at]
  local n = tonumber(ARGV[at + 1])
  redis.call('ZADD', key, unpack(ARGV, at + 2, at + 1 + 2 * n))
  redis.call('ZREMRANGEBYRANK', key, 0, -keep - 1)
  redis.call('PEXPIRE', key, ttl)
  at = at + 2 + 2 * n
end
`;

type RedisWithAdd = Redis & {
  svcLinkCandidatesAdd(keys: number, ...args: (string | number)[]): Promise<null>;
};

/**
 * Candidates in Redis: a sorted set per key, scored by click time, trimmed to its newest
 * {@link CANDIDATES_PER_KEY} and expiring a match window after its last write. A batch of
 * clicks is one script call. Calls follow the shared state's outage policy: while Redis is down
 * they fail with `DependencyUnavailableError` (503 on HTTP).
 */
export class RedisCandidateStore implements CandidateStore {
  private redis: RedisWithAdd;

  constructor(private state: RedisState) {
    this.redis = state.redis as RedisWithAdd;
    this.redis.defineCommand('svcLinkCandidatesAdd', { lua: ADD });
  }

  async add(entries: CandidateEntry[]) {
    if (entries.length === 0) return;
    const byKey = new Map<string, CandidateEntry[]>();
    for (const e of entries) {
      const list = byKey.get(e.key);
      if (list) list.push(e);
      else byKey.set(e.key, [e]);
    }
    const keys: string[] = [];
    const args: (string | number)[] = [CANDIDATES_PER_KEY];
    for (const [key, list] of byKey) {
      // Older ones would be trimmed at once.
      const kept = list.slice(-CANDIDATES_PER_KEY);
      keys.push(this.state.key(key));
      args.push(Math.max(...kept.map((e) => e.ttlMs)), kept.length);
      for (const e of kept) args.push(e.ms, `${e.clickId} ${e.linkId}`);
    }
    await this.state.run(() => this.redis.svcLinkCandidatesAdd(keys.length, ...keys, ...args));
  }

  async recall(key: string, sinceMs: number, limit: number): Promise<Candidate[]> {
    const found = await this.state.run((redis) =>
      redis.zrevrangebyscore(this.state.key(key), '+inf', sinceMs, 'WITHSCORES', 'LIMIT', 0, limit),
    );
    const candidates: Candidate[] = [];
    for (let i = 0; i < found.length; i += 2) {
      const [clickId, linkId] = found[i].split(' ');
      candidates.push({ clickId, linkId, ms: Number(found[i + 1]) });
    }
    return candidates;
  }
}

/** One in-process store per shared state: the apps of one process that share it share these. */
const inProcess = new WeakMap<SharedState, MemoryCandidateStore>();

/** The candidate store that goes with `state`: Redis's when it is Redis, else in process. */
export function candidateStoreFor(state: SharedState, max: number): CandidateStore {
  if (state.kind === 'redis') return new RedisCandidateStore(state as RedisState);
  let store = inProcess.get(state);
  if (!store) {
    store = new MemoryCandidateStore(max);
    inProcess.set(state, store);
  }
  return store;
}
