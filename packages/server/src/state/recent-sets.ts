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

  async recent(key: string, sinceMs: number, untilMs: number, limit: number) {
    const found: { member: string; ms: number }[] = [];
    for (let h = this.keys.get(key); h !== undefined; h = h.older) {
      if (h.ms >= sinceMs && h.ms <= untilMs) found.push({ member: h.member, ms: h.ms });
    }
    // Latest written first; a stable sort then orders by time.
    return found.sort((a, b) => b.ms - a.ms).slice(0, Math.min(limit, this.options.keep));
  }
}

function contains(newest: Held, member: string) {
  for (let h: Held | undefined = newest; h !== undefined; h = h.older) {
    if (h.member === member) return true;
  }
  return false;
}

/** The span of one slice of time in Redis: a member lives in the hashes of its time's slice. */
export const SLICE_MS = 10 * 60_000;
/** Hashes per slice: a key's field lives in one, by a hash of the key; none grows very large. */
const SHARDS = 16;
/** How far back from its end a range is looked at (see {@link RecentSets.recent}). */
const MAX_RANGE_MS = 8 * 86_400_000;

/** FNV-1a (32 bits) of `key`, modulo {@link SHARDS}: which hash of a slice holds the key. */
export function shardOf(key: string) {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % SHARDS;
}

/**
 * `KEYS`: hashes. `ARGV[1]`: members a field keeps; `ARGV[2]`: a JSON array, per hash how
 * long it must live from now (ms), its field count n, then n pairs of field and entries
 * (`{ms} {member}\n` each, oldest first). A new field is one `HSETNX`; a field that exists (the
 * same key written again within the slice) is rewritten with its newest `keep` distinct members.
 * One string for everything: a batch of thousands costs the client one argument per hash.
 */
const ADD = `
local function newest(text, keep)
  local at, order = {}, {}
  for ms, member in string.gmatch(text, '(%d+) ([^\\n]*)\\n') do
    local t = tonumber(ms)
    if at[member] == nil then order[#order + 1] = member end
    if at[member] == nil or t >= at[member] then at[member] = t end
  end
  local index = {}
  for i, member in ipairs(order) do index[member] = i end
  table.sort(order, function(a, b)
    if at[a] ~= at[b] then return at[a] < at[b] end
    return index[a] < index[b]
  end)
  local out = {}
  for i = math.max(1, #order - keep + 1), #order do
    out[#out + 1] = string.format('%d %s\\n', at[order[i]], order[i])
  end
  return table.concat(out)
end
local keep = tonumber(ARGV[1])
local args = cjson.decode(ARGV[2])
local at = 1
for _, key in ipairs(KEYS) do
  local ttl = args[at]
  local n = args[at + 1]
  for i = at + 2, at + 2 * n, 2 do
    local field, entries = args[i], args[i + 1]
    if redis.call('HSETNX', key, field, entries) == 0 then
      redis.call('HSET', key, field, newest(redis.call('HGET', key, field) .. entries, keep))
    end
  end
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
  at = at + 2 + 2 * n
end
`;

/** `KEYS`: hashes; `ARGV[1]`: the field. Its entries in each hash, in the order of the keys. */
const READ = `
local found = {}
for i, key in ipairs(KEYS) do found[i] = redis.call('HGET', key, ARGV[1]) or '' end
return found
`;

type RedisWithScripts = Redis & {
  svcRecentSetsAdd(keys: number, ...args: (string | number)[]): Promise<null>;
  svcRecentSetsRead(keys: number, ...args: string[]): Promise<string[]>;
};

/**
 * Recent sets in Redis: per name, slice of time ({@link SLICE_MS}) and shard, a hash
 * (`{prefix}{name}:{slice}:{shard}`) with a field per key holding the key's members of that
 * slice, newest `keep`. A hash lives as long as its longest-kept member. Many keys written at
 * once cost Redis one field each rather than a key, an expiry and a sorted set each (half the
 * CPU), and the client one argument per hash rather than per key. The shards keep each hash
 * small, so that one expiring frees little at a time. `recent` reads the key's field in each
 * slice of its range (7 hashes for an hour) with one script call.
 */
export class RedisRecentSets implements RecentSets {
  readonly durable = true;
  private redis: RedisWithScripts;

  constructor(
    private state: RedisState,
    private name: string,
    private options: RecentSetsOptions,
  ) {
    this.redis = state.redis as RedisWithScripts;
    this.redis.defineCommand('svcRecentSetsAdd', { lua: ADD });
    this.redis.defineCommand('svcRecentSetsRead', { lua: READ });
  }

  async add(members: RecentMember[], nowMs: number) {
    const { keep } = this.options;
    // Per hash, by slice × SHARDS + shard: how long it must live from now, and per key its
    // entries, oldest first.
    const hashes = new Map<number, { ttlMs: number; keys: Map<string, string[]> }>();
    for (const m of members) {
      // Members kept no longer than now are not written.
      if (m.ms + m.ttlMs <= nowMs) continue;
      if (m.member.includes('\n')) throw new Error('a recent-set member holds no line break');
      const slot = Math.floor(m.ms / SLICE_MS) * SHARDS + shardOf(m.key);
      let hash = hashes.get(slot);
      if (!hash) {
        hash = { ttlMs: 0, keys: new Map() };
        hashes.set(slot, hash);
      }
      hash.ttlMs = Math.max(hash.ttlMs, m.ms + m.ttlMs - nowMs);
      const entry = `${m.ms} ${m.member}\n`;
      const entries = hash.keys.get(m.key);
      if (entries) entries.push(entry);
      else hash.keys.set(m.key, [entry]);
    }
    if (hashes.size === 0) return;
    const names: string[] = [];
    const args: (string | number)[] = [];
    for (const [slot, { ttlMs, keys }] of hashes) {
      names.push(this.hashKey(Math.floor(slot / SHARDS), slot % SHARDS));
      args.push(ttlMs, keys.size);
      // Older ones would be trimmed at once.
      for (const [key, entries] of keys) {
        args.push(key, entries.length === 1 ? entries[0] : entries.slice(-keep).join(''));
      }
    }
    const packed = JSON.stringify(args);
    await this.state.run(() => this.redis.svcRecentSetsAdd(names.length, ...names, keep, packed));
  }

  async recent(key: string, sinceMs: number, untilMs: number, limit: number) {
    const names: string[] = [];
    const first = Math.floor(Math.max(sinceMs, untilMs - MAX_RANGE_MS) / SLICE_MS);
    const shard = shardOf(key);
    for (let n = Math.floor(untilMs / SLICE_MS); n >= first; n--)
      names.push(this.hashKey(n, shard));
    if (names.length === 0) return [];
    const slices = await this.state.run(() =>
      this.redis.svcRecentSetsRead(names.length, ...names, key),
    );
    // Newest slice first, and in each the latest written first: a stable sort by time then
    // puts a member's newest entry before its others.
    const all: { member: string; ms: number }[] = [];
    for (const text of slices) {
      const lines = text.split('\n');
      for (let i = lines.length - 2; i >= 0; i--) {
        const space = lines[i].indexOf(' ');
        const ms = Number(lines[i].slice(0, space));
        if (ms >= sinceMs && ms <= untilMs) all.push({ member: lines[i].slice(space + 1), ms });
      }
    }
    all.sort((a, b) => b.ms - a.ms);
    const most = Math.min(limit, this.options.keep);
    const found: { member: string; ms: number }[] = [];
    const seen = new Set<string>();
    for (const one of all) {
      if (found.length === most) break;
      if (seen.has(one.member)) continue;
      seen.add(one.member);
      found.push(one);
    }
    return found;
  }

  private hashKey(slice: number, shard: number) {
    return this.state.key(`${this.name}:${slice}:${shard}`);
  }
}
