import type { Redis } from 'ioredis';
import type { RedisState } from './redis.ts';
import type { RecentMember, RecentSets, RecentSetsOptions } from './state.ts';

/** A key's members, newest first; the newest also carries the key's count and expiry. */
interface Held {
  member: string;
  ms: number;
  older: Held | undefined;
  count: number;
  expiresMs: number;
}

/**
 * Recent sets in this process: a map from key to a list of its members, newest first. Keys are
 * kept in the order they were last written, so the least recently written go first, both when
 * their newest member has expired and when the sets hold more than `maxMembers`.
 */
export class MemoryRecentSets implements RecentSets {
  readonly durable = false;
  private keys = new Map<string, Held>();
  private size = 0;

  constructor(private options: RecentSetsOptions) {}

  async add(members: RecentMember[], nowMs: number) {
    const { keep } = this.options;
    for (const m of members) {
      const newest = this.keys.get(m.key);
      if (newest !== undefined) {
        // Written last from now on.
        this.keys.delete(m.key);
        if (contains(newest, m.member)) {
          this.keys.set(m.key, newest);
          continue;
        }
      }
      const held: Held = {
        member: m.member,
        ms: m.ms,
        older: newest,
        count: (newest?.count ?? 0) + 1,
        expiresMs: m.ms + m.ttlMs,
      };
      this.keys.set(m.key, held);
      this.size++;
      if (held.count > keep) {
        let last = held;
        for (let i = 1; i < keep; i++) last = last.older!;
        last.older = undefined;
        held.count = keep;
        this.size--;
      }
    }
    // Forget keys whose newest member has expired, and the oldest keys beyond the bound.
    for (const [key, held] of this.keys) {
      if (held.expiresMs > nowMs && this.size <= this.options.maxMembers) break;
      this.keys.delete(key);
      this.size -= held.count;
    }
  }

  async recent(key: string, sinceMs: number, limit: number) {
    const found: { member: string; ms: number }[] = [];
    for (let h = this.keys.get(key); h !== undefined; h = h.older) {
      if (h.ms >= sinceMs) found.push({ member: h.member, ms: h.ms });
    }
    // Latest written first; a stable sort then orders by time.
    return found.sort((a, b) => b.ms - a.ms).slice(0, limit);
  }
}

function contains(newest: Held, member: string) {
  for (let h: Held | undefined = newest; h !== undefined; h = h.older) {
    if (h.member === member) return true;
  }
  return false;
}

/**
 * `KEYS`: the keys; `ARGV[1]`: members a key keeps; `ARGV[2]`: a JSON array of strings, per key
 * its TTL (ms), its count n, and n pairs of score (the member's time) and member. One string for
 * all the members: a batch of thousands costs the client one argument instead of four per key.
 */
const ADD = `
local keep = tonumber(ARGV[1])
local args = cjson.decode(ARGV[2])
local at = 1
for _, key in ipairs(KEYS) do
  local ttl = args[at]
  local n = tonumber(args[at + 1])
  redis.call('ZADD', key, unpack(args, at + 2, at + 1 + 2 * n))
  redis.call('ZREMRANGEBYRANK', key, 0, -keep - 1)
  redis.call('PEXPIRE', key, ttl)
  at = at + 2 + 2 * n
end
`;

type RedisWithAdd = Redis & {
  svcRecentSetsAdd(keys: number, ...args: (string | number)[]): Promise<null>;
};

/**
 * Recent sets in Redis: a sorted set per key (`{prefix}{name}:{key}`), scored by time, trimmed
 * to its newest `keep` and expiring `ttlMs` after its last write. One script call per `add`.
 */
export class RedisRecentSets implements RecentSets {
  readonly durable = true;
  private redis: RedisWithAdd;

  constructor(
    private state: RedisState,
    private name: string,
    private options: RecentSetsOptions,
  ) {
    this.redis = state.redis as RedisWithAdd;
    this.redis.defineCommand('svcRecentSetsAdd', { lua: ADD });
  }

  async add(members: RecentMember[]) {
    if (members.length === 0) return;
    const { keep } = this.options;
    const byKey = new Map<string, RecentMember[]>();
    for (const m of members) {
      const list = byKey.get(m.key);
      if (list) list.push(m);
      else byKey.set(m.key, [m]);
    }
    const keys: string[] = [];
    const args: string[] = [];
    for (const [key, list] of byKey) {
      // Older ones would be trimmed at once.
      const kept = list.slice(-keep);
      keys.push(this.state.key(`${this.name}:${key}`));
      args.push(String(Math.max(...kept.map((m) => m.ttlMs))), String(kept.length));
      for (const m of kept) args.push(String(m.ms), m.member);
    }
    const packed = JSON.stringify(args);
    await this.state.run(() => this.redis.svcRecentSetsAdd(keys.length, ...keys, keep, packed));
  }

  async recent(key: string, sinceMs: number, limit: number) {
    const found = await this.state.run((redis) =>
      redis.zrevrangebyscore(
        this.state.key(`${this.name}:${key}`),
        '+inf',
        sinceMs,
        'WITHSCORES',
        'LIMIT',
        0,
        limit,
      ),
    );
    const members: { member: string; ms: number }[] = [];
    for (let i = 0; i < found.length; i += 2) {
      members.push({ member: found[i], ms: Number(found[i + 1]) });
    }
    return members;
  }
}
