import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { RedisState } from '../../src/state/index.ts';
import { SLICE_MS, shardOf } from '../../src/state/recent-sets.ts';
import { freshState, REDIS_URL } from '../helpers.ts';

const KINDS = ['memory', ...(REDIS_URL ? ['redis' as const] : [])] as const;

for (const kind of KINDS) {
  describe(`shared state (${kind})`, () => {
    const fresh = freshState(kind);
    const { state } = fresh;
    after(() => fresh.drop());
    const minute = 60_000;
    const t0 = Date.parse('2026-06-01T00:00:00.000Z');

    test('recent sets keep each key’s newest members, recalled newest first from a time on', async () => {
      const sets = state.recentSets('test:recent', { keep: 3, maxMembers: 1000 });
      assert.equal(sets.durable, kind === 'redis');
      const hour = 3_600_000;
      const at = Date.now();
      const member = (key: string, name: string, ms: number) => ({
        key,
        member: name,
        ms,
        ttlMs: hour,
      });
      await sets.add(
        ['a', 'b', 'c', 'd'].map((m, i) => member('k1', m, at + i)),
        at + 3,
      );
      await sets.add([member('k1', 'b', at + 1), member('k2', 'x', at)], at + 3);
      assert.deepEqual(
        await sets.recent('k1', at, at + 3, 10),
        [
          { member: 'd', ms: at + 3 },
          { member: 'c', ms: at + 2 },
          { member: 'b', ms: at + 1 },
        ],
        'the newest three, each once',
      );
      assert.deepEqual(await sets.recent('k1', at + 2, at + 3, 10), [
        { member: 'd', ms: at + 3 },
        { member: 'c', ms: at + 2 },
      ]);
      assert.equal((await sets.recent('k1', at, at + 3, 1)).length, 1, 'at most the limit');
      assert.deepEqual(await sets.recent('k2', at, at + 3, 10), [{ member: 'x', ms: at }]);
      assert.deepEqual(await sets.recent('nothing', at, at + 3, 10), []);
      assert.equal(
        state.recentSets('test:recent', { keep: 3, maxMembers: 1000 }).durable,
        sets.durable,
      );
      assert.equal(
        (
          await state
            .recentSets('test:recent', { keep: 3, maxMembers: 1000 })
            .recent('k2', at - 1000, at + 1000, 10)
        ).length,
        1,
        'the same sets by name',
      );
    });

    test('recent sets: keys interleaved in one call (in one Redis hash) keep their newest', async () => {
      const sets = state.recentSets('test:interleaved', { keep: 3, maxMembers: 1000 });
      const at = Date.now();
      // Two keys of the same shard, so that on Redis they share a hash and come back in turn.
      const [a, b] = Array.from({ length: 200 }, (_, i) => `key-${i}`)
        .filter((k) => shardOf(k) === shardOf('key-0'))
        .slice(0, 2);
      const m = (key: string, member: string, dt: number) => ({
        key,
        member,
        ms: at + dt,
        ttlMs: 3_600_000,
      });
      await sets.add(
        [
          m(a, 'p', 0),
          m(b, 'q', 0),
          m(a, 'r', 1),
          m(a, 's', 2),
          m(b, 't', 1),
          m(a, 'u', 3),
          m(b, 'w', 2),
          m(a, 'v', 4),
        ],
        at + 4,
      );
      const names = async (key: string) =>
        (await sets.recent(key, at, at + 4, 10)).map((x) => `${x.member}@${x.ms - at}`);
      assert.deepEqual(await names(a), ['v@4', 'u@3', 's@2'], 'the newest three');
      assert.deepEqual(await names(b), ['w@2', 't@1', 'q@0']);
    });

    test('recent sets span slices of time: a key written again and again keeps its newest, recalled by range', async () => {
      const sets = state.recentSets('test:span', { keep: 4, maxMembers: 1000 });
      const hour = 3_600_000;
      // From just before a slice boundary to well after it, one member a minute.
      const t = (Math.floor(Date.now() / SLICE_MS) + 1) * SLICE_MS - 3 * 60_000;
      const members = Array.from({ length: 8 }, (_, i) => ({
        key: 'v',
        member: `m${i}`,
        ms: t + i * 60_000,
        ttlMs: hour,
      }));
      // Three calls, the first two in one slice, the last across the boundary.
      await sets.add(members.slice(0, 2), t + 60_000);
      await sets.add([...members.slice(2, 5), members[1]], t + 4 * 60_000);
      await sets.add(members.slice(5), t + 7 * 60_000);
      await sets.add([{ key: 'w', member: 'gone', ms: t - 2 * hour, ttlMs: hour }], t);
      const names = async (since: number, until: number, limit = 10) =>
        (await sets.recent('v', since, until, limit)).map((m) => m.member);
      assert.deepEqual(await names(t, t + hour), ['m7', 'm6', 'm5', 'm4'], 'the newest four');
      assert.deepEqual(await names(t + 4 * 60_000, t + 5 * 60_000), ['m5', 'm4'], 'in range');
      assert.deepEqual(await names(t + 6 * 60_000, t + hour), ['m7', 'm6']);
      assert.deepEqual(await names(t, t + hour, 2), ['m7', 'm6'], 'at most the limit');
      assert.deepEqual(await names(t + hour, t + 2 * hour), []);
      assert.deepEqual(
        await sets.recent('w', t - 3 * hour, t, 10),
        kind === 'redis' ? [] : [{ member: 'gone', ms: t - 2 * hour }],
        'in Redis, a member whose time is past is not written',
      );
    });

    if (kind === 'redis') {
      test('in Redis, a slice lives as long as its longest-kept member', async () => {
        const sets = state.recentSets('test:ttl', { keep: 3, maxMembers: 1000 });
        const now = Date.now();
        const redis = (state as RedisState).redis;
        // Keys chosen to share a hash.
        const same: string[] = [];
        for (let i = 0; same.length < 3; i++) {
          if (shardOf(`key-${i}`) === shardOf('key-0')) same.push(`key-${i}`);
        }
        const [a, b, c] = same;
        await sets.add(
          [
            { key: a, member: 'x', ms: now, ttlMs: 60_000 },
            { key: b, member: 'y', ms: now, ttlMs: 90_000 },
          ],
          now,
        );
        const hash = `${fresh.prefix}test:ttl:${Math.floor(now / SLICE_MS)}:${shardOf(a)}`;
        const ttl = await redis.pttl(hash);
        assert.ok(ttl > 80_000 && ttl <= 90_000, `ttl ${ttl}`);
        // A later write with a shorter life does not shorten it.
        await sets.add([{ key: c, member: 'z', ms: now, ttlMs: 1_000 }], now);
        assert.ok((await redis.pttl(hash)) > 80_000);
        assert.deepEqual(await redis.hkeys(hash), [a, b, c]);
      });
    }

    test('a fixed burst gets exactly the limit', async () => {
      const results = await Promise.all(
        Array.from({ length: 15 }, () => state.rateLimit('burst', 10, minute, t0 + 1000)),
      );
      assert.equal(results.filter((r) => r.allowed).length, 10);
      // In arrival order (on Redis the burst is decided by one script call): the first ten pass,
      // each seeing one less remaining.
      assert.deepEqual(
        results.map((r) => r.allowed),
        Array.from({ length: 15 }, (_, i) => i < 10),
      );
      assert.deepEqual(
        results.slice(0, 10).map((r) => r.remaining),
        [9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
      );
      const refused = results.find((r) => !r.allowed)!;
      assert.equal(refused.remaining, 0);
      assert.ok(refused.retryAfterSeconds >= 1);
    });

    test('the window slides: the previous window weighs in proportionally', async () => {
      for (let i = 0; i < 10; i++)
        assert.ok((await state.rateLimit('slide', 10, minute, t0 + 30_000)).allowed);
      // Half-way through the next window, half of the previous count still weighs: 5 more fit.
      const next = t0 + minute + 30_000;
      let allowed = 0;
      for (let i = 0; i < 10; i++)
        if ((await state.rateLimit('slide', 10, minute, next)).allowed) allowed++;
      assert.equal(allowed, 5);
      // Two windows later, everything has decayed.
      assert.ok((await state.rateLimit('slide', 10, minute, t0 + 3 * minute)).allowed);
    });

    test('remaining counts down and buckets are independent', async () => {
      const a = await state.rateLimit('a', 3, minute, t0);
      const b = await state.rateLimit('b', 3, minute, t0);
      assert.equal(a.remaining, 2);
      assert.equal(b.remaining, 2);
      assert.equal((await state.rateLimit('a', 3, minute, t0)).remaining, 1);
    });

    test('publish reaches subscribers; unsubscribe stops delivery', async () => {
      const got: string[] = [];
      const unsubscribe = await state.subscribe('chan', (m) => got.push(m));
      const other = await state.subscribe('chan', () => {});
      const seen = new Promise<void>((resolve) => {
        state.subscribe('chan', (m) => m === 'two' && resolve());
      });
      // The count of nodes listening: handlers in process, connections for Redis.
      assert.equal(await state.publish('chan', 'one'), kind === 'memory' ? 3 : 1);
      await state.publish('chan', 'two');
      assert.equal(await state.publish('nobody-listens', 'x'), 0);
      await seen;
      assert.deepEqual(got, ['one', 'two']);
      await unsubscribe();
      await other();
      assert.equal(await state.ping(), true);
    });
  });
}

test('a second Redis state with the same prefix sees the same counters and messages', {
  skip: !REDIS_URL && 'needs REDIS_URL',
}, async () => {
  const one = freshState('redis');
  const two = freshState('redis', one.prefix);
  try {
    const t = Date.parse('2026-06-01T00:00:10.000Z');
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        (i % 2 ? one.state : two.state).rateLimit('shared', 12, 60_000, t),
      ),
    );
    assert.equal(results.filter((r) => r.allowed).length, 12);
    let deliver!: (m: string) => void;
    const received = new Promise<string>((resolve) => {
      deliver = resolve;
    });
    // subscribe() resolves once the subscription is live, so the message cannot be missed.
    await two.state.subscribe('x', (m) => deliver(m));
    assert.equal(await one.state.publish('x', 'hello'), 1);
    await one.state.subscribe('x', () => {});
    assert.equal(await one.state.publish('x', 'again'), 2, 'two connections listen');
    assert.equal(await received, 'hello');
  } finally {
    await two.state.close();
    await one.drop();
  }
});
