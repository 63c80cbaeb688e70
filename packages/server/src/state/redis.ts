import { Redis } from 'ioredis';
import {
  type RateLimitResult,
  RECENT_MAX_PER_KEY,
  type Recalled,
  type SharedState,
  slidingWindowResult,
} from './state.ts';

// KEYS[1] current window, KEYS[2] previous window; ARGV limit, fraction into window, ttl ms,
// and how many requests ask at once. Admits as many of them as the window has room for, in one
// script, so concurrent requests on any node cannot overshoot.
const SLIDING_WINDOW = `
local curr = tonumber(redis.call('GET', KEYS[1]) or '0')
local prev = tonumber(redis.call('GET', KEYS[2]) or '0')
local weight = 1 - tonumber(ARGV[2])
local room = math.floor(tonumber(ARGV[1]) - prev * weight - curr)
local admitted = math.max(0, math.min(tonumber(ARGV[4]), room))
if admitted > 0 then
  redis.call('INCRBY', KEYS[1], admitted)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return {admitted, prev, curr}
`;

/**
 * Remembered entries live in buckets: one hash per {@link RECENT_BUCKET_MS} of write time, with a
 * field per key (see REMEMBER). A batch costs Redis two calls per bucket (in chunks) and an
 * expiry, whatever its keys: a key per visitor cost a key's creation, a ZADD, a trim and an
 * expiry per click (7 µs of Redis time per Android redirect with every click from another
 * visitor, against about 2 µs so). A bucket expires once the longest lifetime of what it holds
 * has passed. `recent:meta` holds the newest write time and the longest lifetime seen, which
 * bound the buckets a recall reads.
 */
const RECENT_BUCKET_MS = 300_000;

// ARGV[1] the key prefix, ARGV[2] the write time (ms), ARGV[3] the longest lifetime among the
// entries (ms), ARGV[4] the most entries per key, ARGV[5] the entries, one per line: key, time
// (ms), lifetime (ms) and member, tab-separated. The bucket is a hash: a field per key, whose
// value is that key's entries written in the bucket's time, `ms\tttl\tmember\n` each, oldest
// first. A batch reads the fields it adds to (HMGET) and writes them (HSET): two calls, in
// chunks, whatever its size.
const REMEMBER = `
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local life = tonumber(ARGV[3])
local keep = tonumber(ARGV[4])
local packed = ARGV[5]
local bucket = prefix .. 'recent:' .. math.floor(now / ${RECENT_BUCKET_MS})
local values = {}
local fields = {}
local pos = 1
local n = #packed
while pos <= n do
  local t1 = string.find(packed, '\\t', pos, true)
  local nl = string.find(packed, '\\n', pos, true)
  if not t1 or not nl or t1 > nl then return redis.error_reply('malformed entry') end
  local field = string.sub(packed, pos, t1 - 1)
  local value = string.sub(packed, t1 + 1, nl)
  local v = values[field]
  if v then values[field] = v .. value else values[field] = value; fields[#fields + 1] = field end
  pos = nl + 1
end
-- A key's entries beyond the newest \`keep\` are dropped: its oldest lines.
local function trimmed(v)
  local lines = 0
  for _ in string.gmatch(v, '\\n') do lines = lines + 1 end
  local at = 1
  while lines > keep do
    at = string.find(v, '\\n', at, true) + 1
    lines = lines - 1
  end
  return string.sub(v, at)
end
for i = 1, #fields, 1000 do
  local chunk = { unpack(fields, i, math.min(i + 999, #fields)) }
  local old = redis.call('HMGET', bucket, unpack(chunk))
  local args = {}
  for j, field in ipairs(chunk) do
    local v = values[field]
    if old[j] then v = old[j] .. v end
    if #v > 200 then v = trimmed(v) end
    args[#args + 1] = field
    args[#args + 1] = v
  end
  redis.call('HSET', bucket, unpack(args))
end
-- Relative to the write: the writer's clock, not Redis's, decides what time it is.
local ttl = (math.floor(now / ${RECENT_BUCKET_MS}) + 1) * ${RECENT_BUCKET_MS} + life - now
if redis.call('PEXPIRE', bucket, ttl, 'NX') == 0 then
  redis.call('PEXPIRE', bucket, ttl, 'GT')
end
local meta = prefix .. 'recent:meta'
local seen = redis.call('HMGET', meta, 'newest', 'life')
if not seen[1] or tonumber(seen[1]) < now then redis.call('HSET', meta, 'newest', now) end
if not seen[2] or tonumber(seen[2]) < life then redis.call('HSET', meta, 'life', life) end
return 0
`;

// ARGV[1] the key prefix, ARGV[2] the key, ARGV[3] since (ms). Returns the key's entries in
// the buckets that may hold live ones (member, ms, lifetime, flattened), and the newest write
// time last: the caller sorts, filters and cuts.
const RECALL = `
local prefix = ARGV[1]
local key = ARGV[2]
local since = tonumber(ARGV[3])
local meta = redis.call('HMGET', prefix .. 'recent:meta', 'newest', 'life')
local out = {}
local newest = tonumber(meta[1] or '0')
local life = tonumber(meta[2] or '0')
local from = math.floor(newest / ${RECENT_BUCKET_MS})
local to = math.floor(math.max(since, newest - life) / ${RECENT_BUCKET_MS})
-- Nothing written in buckets yet: no bucket to read.
if not meta[1] then to = from + 1 end
for b = from, to, -1 do
  local v = redis.call('HGET', prefix .. 'recent:' .. b, key)
  if v then
    for ms, ttl, member in string.gmatch(v, '([^\\t\\n]*)\\t([^\\t\\n]*)\\t([^\\n]*)\\n') do
      out[#out + 1] = member
      out[#out + 1] = ms
      out[#out + 1] = ttl
    end
  end
end
-- Entries the previous version remembered, a sorted set per key scored by time (until
-- 2026-11-26): read until they expire, as live as their key.
local before = redis.call('ZREVRANGEBYSCORE', prefix .. key, '+inf', since, 'WITHSCORES', 'LIMIT', 0, ${RECENT_MAX_PER_KEY})
for i = 1, #before, 2 do
  out[#out + 1] = before[i]
  out[#out + 1] = before[i + 1]
  out[#out + 1] = '${Number.MAX_SAFE_INTEGER}'
end
out[#out + 1] = meta[1] or '0'
return out
`;

/**
 * The longest lifetime (third field) among packed entries: a scan of the bytes for the third
 * tab of each line, with no string made.
 */
function longestLifetime(packed: Buffer): number {
  let longest = 0;
  let pos = 0;
  while (pos < packed.length) {
    const t1 = packed.indexOf(9, pos);
    const t2 = t1 === -1 ? -1 : packed.indexOf(9, t1 + 1);
    const t3 = t2 === -1 ? -1 : packed.indexOf(9, t2 + 1);
    const nl = packed.indexOf(10, pos);
    if (t3 === -1 || nl === -1 || t3 > nl) throw new Error('malformed entry');
    let life = 0;
    for (let i = t2 + 1; i < t3; i++) {
      const digit = packed[i] - 48;
      if (digit < 0 || digit > 9) throw new Error('malformed entry');
      life = life * 10 + digit;
    }
    if (life > longest) longest = life;
    pos = nl + 1;
  }
  return longest;
}

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
    limit: number,
    fraction: number,
    ttlMs: number,
    asking: number,
  ): Promise<[number, number, number]>;
  svcRemember(
    prefix: string,
    nowMs: number,
    lifeMs: number,
    keep: number,
    lines: Buffer,
  ): Promise<number>;
  svcRecall(prefix: string, key: string, sinceMs: number): Promise<string[]>;
};

/** Shared state in Redis: every node of a fleet agrees on counters and sees every message. */
export class RedisState implements SharedState {
  readonly kind = 'redis' as const;
  private client: RedisWithScripts;
  private subscriber: Redis;
  private handlers = new Map<string, Set<(message: string) => void>>();
  private batches = new Map<string, RateLimitBatch>();

  /**
   * @param url `redis://…`
   * @param prefix prepended to every key and channel, so several deployments (or test files)
   *   can share one Redis.
   */
  constructor(
    url: string,
    private prefix = 'svc:',
  ) {
    const options = { enableAutoPipelining: true, maxRetriesPerRequest: 2, lazyConnect: false };
    this.client = new Redis(url, options) as RedisWithScripts;
    this.client.defineCommand('svcSlidingWindow', { numberOfKeys: 2, lua: SLIDING_WINDOW });
    this.client.defineCommand('svcRemember', { numberOfKeys: 0, lua: REMEMBER });
    this.client.defineCommand('svcRecall', { numberOfKeys: 0, lua: RECALL });
    this.subscriber = new Redis(url, { ...options, enableAutoPipelining: false });
    this.subscriber.on('message', (channel: string, message: string) => {
      const set = this.handlers.get(channel);
      if (set) for (const handler of set) handler(message);
    });
    // ioredis reconnects by itself; errors are reported through ping() and readiness.
    this.client.on('error', () => {});
    this.subscriber.on('error', () => {});
  }

  /** The underlying connection, for areas that need Redis commands beyond this interface. */
  get redis(): Redis {
    return this.client;
  }

  key(name: string) {
    return this.prefix + name;
  }

  /**
   * Requests for the same bucket that arrive in one turn of the event loop share one script call (a hot key
   * under load costs one Redis round trip per turn, not one per request); the script admits as
   * many as fit, in arrival order, so the count stays exact across nodes.
   */
  rateLimit(
    bucket: string,
    limit: number,
    windowMs: number,
    nowMs: number,
  ): Promise<RateLimitResult> {
    const id = `${limit}:${windowMs}:${bucket}`;
    let batch = this.batches.get(id);
    if (!batch) {
      batch = { bucket, limit, windowMs, nowMs, waiters: [] };
      this.batches.set(id, batch);
      // After this poll phase: every request parsed in this turn of the event loop joins.
      if (this.batches.size === 1) setImmediate(() => this.decideBatches());
    }
    const waiters = batch.waiters;
    return new Promise((resolve, reject) => waiters.push({ resolve, reject }));
  }

  private decideBatches() {
    const batches = [...this.batches.values()];
    this.batches.clear();
    for (const b of batches) {
      const index = Math.floor(b.nowMs / b.windowMs);
      const base = `${this.prefix}rl:{${b.bucket}}:${b.windowMs}:`;
      this.client
        .svcSlidingWindow(
          base + index,
          base + (index - 1),
          b.limit,
          (b.nowMs % b.windowMs) / b.windowMs,
          b.windowMs * 2,
          b.waiters.length,
        )
        .then(([admitted, prev, curr]) => {
          const p = Number(prev);
          const c = Number(curr);
          b.waiters.forEach((w, i) => {
            const ok = i < admitted;
            const count = ok ? c + i + 1 : c + Number(admitted);
            w.resolve(slidingWindowResult(ok, p, count, b.limit, b.windowMs, b.nowMs));
          });
        })
        .catch((err) => {
          for (const w of b.waiters) w.reject(err);
        });
    }
  }

  async remember(packed: Uint8Array, nowMs: number): Promise<void> {
    if (packed.length === 0) return;
    const bytes = Buffer.from(packed.buffer, packed.byteOffset, packed.length);
    await this.client.svcRemember(
      this.prefix,
      nowMs,
      longestLifetime(bytes),
      RECENT_MAX_PER_KEY,
      bytes,
    );
  }

  /**
   * The key's newest {@link RECENT_MAX_PER_KEY} entries are its members (a key is not trimmed
   * in Redis: its older entries are skipped here, and go with their bucket); of those, the ones
   * at least `sinceMs` and still live as of the newest write, newest first.
   */
  async recall(key: string, sinceMs: number, limit: number): Promise<Recalled[]> {
    const flat = await this.client.svcRecall(this.prefix, key, sinceMs);
    const newest = Number(flat[flat.length - 1]);
    const entries: { member: string; ms: number; live: boolean }[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      const ms = Number(flat[i + 1]);
      entries.push({ member: flat[i], ms, live: ms + Number(flat[i + 2]) > newest });
    }
    entries.sort((a, b) => b.ms - a.ms);
    return entries
      .slice(0, RECENT_MAX_PER_KEY)
      .filter((e) => e.live && e.ms >= sinceMs)
      .slice(0, limit)
      .map(({ member, ms }) => ({ member, ms }));
  }

  async publish(channel: string, message: string) {
    await this.client.publish(this.prefix + channel, message);
  }

  async subscribe(channel: string, handler: (message: string) => void) {
    const full = this.prefix + channel;
    let set = this.handlers.get(full);
    if (!set) {
      set = new Set();
      this.handlers.set(full, set);
      await this.subscriber.subscribe(full);
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

  async ping() {
    try {
      return (await this.client.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close() {
    this.handlers.clear();
    await Promise.allSettled([this.client.quit(), this.subscriber.quit()]);
  }
}
