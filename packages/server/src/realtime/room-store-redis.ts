import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { RedisState } from '../state/redis.ts';
import type { LiveRoom, NewRoomEvent, RoomStore, RoomTx, StoredRoomEvent } from './room-store.ts';

// KEYS: lock, state, members, seq, log, due, history. ARGV: lock token, state JSON ('' deletes),
// member sids (comma-separated), due ms ('' = none), rid, channel, ts, buffer size, n, then
// n × (type, data, history cap or '').
// The fencing check, state write, log appends and publishes happen in one atomic step, so every
// follower sees events in seq order and no event is published without its state.
const COMMIT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('LOCK_LOST') end
local seq = tonumber(redis.call('GET', KEYS[4]) or '0')
local n = tonumber(ARGV[9])
local out = {}
for i = 1, n do
  local t = ARGV[7 + 3 * i]
  local d = ARGV[8 + 3 * i]
  local keep = ARGV[9 + 3 * i]
  seq = seq + 1
  local s = string.format('%d', seq)
  local frame = '{"type":"' .. t .. '","seq":' .. s .. ',"ts":' .. ARGV[7] .. ',"data":' .. d .. '}'
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[8], s .. '-0', 'f', frame)
  if keep ~= '' then
    redis.call('RPUSH', KEYS[7], frame)
    redis.call('LTRIM', KEYS[7], -tonumber(keep), -1)
  end
  redis.call('PUBLISH', ARGV[6], s .. ' ' .. t .. ' ' .. frame)
  out[i] = frame
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[7])
  redis.call('ZREM', KEYS[6], ARGV[5])
  return {seq, out}
end
redis.call('SET', KEYS[4], string.format('%d', seq))
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[3])
if ARGV[3] ~= '' then
  for sid in string.gmatch(ARGV[3], '[^,]+') do redis.call('SADD', KEYS[3], sid) end
end
if ARGV[4] == '' then redis.call('ZREM', KEYS[6], ARGV[5]) else redis.call('ZADD', KEYS[6], ARGV[4], ARGV[5]) end
return {seq, out}
`;

// KEYS: members, seq, log, state, history. ARGV: sid ('' = room must exist), type, data, ts,
// buffer, channel, history cap ('' = not kept).
// The membership check and the append are one step: no message slips in after a leave.
const APPEND = `
if ARGV[1] == '' then
  if redis.call('EXISTS', KEYS[4]) == 0 then return false end
elseif redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return false end
local seq = redis.call('INCR', KEYS[2])
local s = string.format('%d', seq)
local frame = '{"type":"' .. ARGV[2] .. '","seq":' .. s .. ',"ts":' .. ARGV[4] .. ',"data":' .. ARGV[3] .. '}'
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], s .. '-0', 'f', frame)
if ARGV[7] ~= '' then
  redis.call('RPUSH', KEYS[5], frame)
  redis.call('LTRIM', KEYS[5], -tonumber(ARGV[7]), -1)
end
redis.call('PUBLISH', ARGV[6], s .. ' ' .. ARGV[2] .. ' ' .. frame)
return {seq, frame}
`;

// KEYS: lock, state. ARGV: token, ttl ms. Takes the lock and reads the state in one round trip.
const LOCK = `
if redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  return {1, redis.call('GET', KEYS[2]) or ''}
end
return {0, ''}
`;

const UNLOCK = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

type Scripts = Redis & {
  svcRoomCommit(...args: (string | number)[]): Promise<[number, string[]]>;
  svcRoomAppend(...args: (string | number)[]): Promise<[number, string] | null>;
  svcRoomUnlock(key: string, token: string): Promise<number>;
  svcRoomLock(lock: string, state: string, token: string, ttlMs: number): Promise<[number, string]>;
};

const LOCK_TTL_MS = 5000;
const LOCK_WAIT_MS = 10_000;

/**
 * The Redis RoomStore: per room, the state as one JSON value, the member sids as a set, the seq as
 * a counter and the log as a capped stream whose ids are the seqs; events are published on the
 * room's channel (`<prefix>rt:ev:<rid>`) by the same script that appends them. The lock is
 * `SET NX PX` with a random token that the commit script checks (fencing). Every command goes
 * through {@link RedisState.run}: it has a deadline, and while Redis is down it is refused at once
 * (the command then fails with `DependencyUnavailableError`: 503 on HTTP, `service_unavailable`
 * on the socket).
 */
export class RedisRoomStore implements RoomStore {
  private redis: Scripts;

  constructor(
    private state: RedisState,
    private now: () => number,
    private bufferSize: number,
  ) {
    this.redis = state.redis as Scripts;
    this.redis.defineCommand('svcRoomCommit', { numberOfKeys: 7, lua: COMMIT });
    this.redis.defineCommand('svcRoomAppend', { numberOfKeys: 5, lua: APPEND });
    this.redis.defineCommand('svcRoomUnlock', { numberOfKeys: 1, lua: UNLOCK });
    this.redis.defineCommand('svcRoomLock', { numberOfKeys: 2, lua: LOCK });
  }

  private k(rid: string, part: string) {
    return this.state.key(`rt:{${rid}}:${part}`);
  }

  private channel(rid: string) {
    return `rt:ev:${rid}`;
  }

  /** Commands of this node for one room queue here first, so only one of them polls Redis. */
  private local = new Map<string, Promise<unknown>>();

  async withLock<T>(rid: string, fn: (tx: RoomTx) => Promise<T>): Promise<T> {
    const previous = this.local.get(rid) ?? Promise.resolve();
    const run = previous.catch(() => {}).then(() => this.withRedisLock(rid, fn));
    this.local.set(rid, run);
    try {
      return await run;
    } finally {
      if (this.local.get(rid) === run) this.local.delete(rid);
    }
  }

  private async withRedisLock<T>(rid: string, fn: (tx: RoomTx) => Promise<T>): Promise<T> {
    const lockKey = this.k(rid, 'lock');
    const token = randomBytes(12).toString('hex');
    const deadline = Date.now() + LOCK_WAIT_MS;
    let loaded: string;
    for (;;) {
      const [ok, state] = await this.state.run(() =>
        this.redis.svcRoomLock(lockKey, this.k(rid, 'state'), token, LOCK_TTL_MS),
      );
      if (ok === 1) {
        loaded = state;
        break;
      }
      if (Date.now() > deadline) throw new Error(`room ${rid}: lock wait timed out`);
      await new Promise((r) => setTimeout(r, 2 + Math.random() * 8));
    }
    let first = true;
    const tx: RoomTx = {
      load: async () => {
        if (first) {
          first = false;
          return loaded ? (JSON.parse(loaded) as LiveRoom) : null;
        }
        return this.peek(rid);
      },
      commit: async (room, events, dueAtMs) => {
        const args: (string | number)[] = [
          lockKey,
          this.k(rid, 'state'),
          this.k(rid, 'members'),
          this.k(rid, 'seq'),
          this.k(rid, 'log'),
          this.state.key('rt:due'),
          this.k(rid, 'history'),
          token,
          room ? JSON.stringify(room) : '',
          room ? room.participants.map((p) => p.sid).join(',') : '',
          dueAtMs === null ? '' : String(Math.round(dueAtMs)),
          rid,
          this.state.key(this.channel(rid)),
          String(this.now()),
          this.bufferSize,
          events.length,
        ];
        for (const ev of events) {
          args.push(ev.type, JSON.stringify(ev.data), ev.history ? String(ev.history) : '');
        }
        const [lastSeq, frames] = await this.state.run(() => this.redis.svcRoomCommit(...args));
        const first = lastSeq - events.length + 1;
        return {
          lastSeq,
          events: events.map((ev, i) => ({ seq: first + i, type: ev.type, frame: frames[i]! })),
        };
      },
    };
    try {
      return await fn(tx);
    } finally {
      // Not awaited: this node's next command for the room is sent after it on the same
      // connection, and Redis runs one connection's commands in order.
      // Refused while Redis is down: the lock then expires by itself (LOCK_TTL_MS).
      this.state.run(() => this.redis.svcRoomUnlock(lockKey, token)).catch(() => {});
    }
  }

  async peek(rid: string): Promise<LiveRoom | null> {
    const raw = await this.state.run(() => this.redis.get(this.k(rid, 'state')));
    return raw ? (JSON.parse(raw) as LiveRoom) : null;
  }

  async appendIfMember(rid: string, sid: string | null, event: NewRoomEvent) {
    const result = await this.state.run(() =>
      this.redis.svcRoomAppend(
        this.k(rid, 'members'),
        this.k(rid, 'seq'),
        this.k(rid, 'log'),
        this.k(rid, 'state'),
        this.k(rid, 'history'),
        sid ?? '',
        event.type,
        JSON.stringify(event.data),
        String(this.now()),
        this.bufferSize,
        this.state.key(this.channel(rid)),
        event.history ? String(event.history) : '',
      ),
    );
    if (!result) return null;
    return { seq: Number(result[0]), type: event.type, frame: result[1] };
  }

  async readHistory(rid: string): Promise<string[]> {
    return this.state.run(() => this.redis.lrange(this.k(rid, 'history'), 0, -1));
  }

  async readAfter(rid: string, seq: number): Promise<StoredRoomEvent[] | null> {
    // Beyond any seq a room reaches, and not writable as a stream id (1e21 prints as "1e+21").
    if (!Number.isSafeInteger(seq) || seq < 0) return null;
    const [current, entries] = await this.state.run(() =>
      Promise.all([
        this.redis.get(this.k(rid, 'seq')),
        this.redis.xrange(this.k(rid, 'log'), `(${seq}-0`, '+'),
      ]),
    );
    const last = Number(current ?? 0);
    if (seq > last) return null;
    const events = entries.map(([id, fields]) => {
      const frame = fields[1]!;
      const s = Number(id.slice(0, id.indexOf('-')));
      return { seq: s, type: typeOf(frame), frame };
    });
    if (events.length === 0) return seq === last ? [] : null;
    if (events[0]!.seq !== seq + 1) return null;
    return events;
  }

  async follow(rid: string, handler: (event: StoredRoomEvent) => void) {
    return this.state.subscribe(this.channel(rid), (message) => {
      const a = message.indexOf(' ');
      const b = message.indexOf(' ', a + 1);
      handler({
        seq: Number(message.slice(0, a)),
        type: message.slice(a + 1, b),
        frame: message.slice(b + 1),
      });
    });
  }

  async dueRooms(nowMs: number, limit: number) {
    return this.state.run(() =>
      this.redis.zrangebyscore(this.state.key('rt:due'), '-inf', nowMs, 'LIMIT', 0, limit),
    );
  }

  async heartbeat(nodeId: string, ttlMs: number) {
    await this.state.run(() =>
      this.redis.set(this.state.key(`rt:node:${nodeId}`), '1', 'PX', ttlMs),
    );
  }

  async aliveNodes(nodeIds: string[]) {
    if (nodeIds.length === 0) return new Set<string>();
    const values = await this.state.run(() =>
      this.redis.mget(...nodeIds.map((id) => this.state.key(`rt:node:${id}`))),
    );
    return new Set(nodeIds.filter((_, i) => values[i] !== null));
  }

  async close() {}
}

function typeOf(frame: string) {
  // Frames start with {"type":"<type>", written by the scripts above.
  return frame.slice(9, frame.indexOf('"', 9));
}
