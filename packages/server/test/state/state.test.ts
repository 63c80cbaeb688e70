import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { MemoryState } from '../../src/state/memory.ts';
import { RecentRing } from '../../src/state/recent.ts';
import type { RedisState } from '../../src/state/redis.ts';
import { packRecent, RECENT_MAX_PER_KEY } from '../../src/state/state.ts';
import { freshState, REDIS_URL } from '../helpers.ts';

const KINDS = ['memory', ...(REDIS_URL ? ['redis' as const] : [])] as const;

for (const kind of KINDS) {
  describe(`shared state (${kind})`, () => {
    const fresh = freshState(kind);
    const { state } = fresh;
    after(() => fresh.drop());
    const minute = 60_000;
    const t0 = Date.parse('2026-06-01T00:00:00.000Z');

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
      await state.publish('chan', 'one');
      await state.publish('chan', 'two');
      await seen;
      assert.deepEqual(got, ['one', 'two']);
      await unsubscribe();
      await other();
      assert.equal(await state.ping(), true);
    });

    test('remembered members come back newest first, within the asked time, per key', async () => {
      const hour = 3_600_000;
      await state.remember(
        packRecent([
          { key: 'fp:a', member: 'clk_1 lnk_1', ms: t0, ttlMs: hour },
          { key: 'fp:a', member: 'clk_3 lnk_1', ms: t0 + 3000, ttlMs: hour },
          { key: 'fp:a', member: 'clk_2 lnk_2', ms: t0 + 2000, ttlMs: hour },
          { key: 'fp:b', member: 'clk_4 lnk_1', ms: t0 + 1000, ttlMs: hour },
        ]),
        t0 + 3000,
      );
      assert.deepEqual(await state.recall('fp:a', t0 + 1000, 5), [
        { member: 'clk_3 lnk_1', ms: t0 + 3000 },
        { member: 'clk_2 lnk_2', ms: t0 + 2000 },
      ]);
      assert.deepEqual(await state.recall('fp:a', t0, 1), [
        { member: 'clk_3 lnk_1', ms: t0 + 3000 },
      ]);
      assert.deepEqual(await state.recall('fp:b', t0, 5), [
        { member: 'clk_4 lnk_1', ms: t0 + 1000 },
      ]);
      assert.deepEqual(await state.recall('fp:none', t0, 5), []);
      // Members older than their lifetime go when the key is next written.
      await state.remember(
        packRecent([{ key: 'fp:a', member: 'clk_5 lnk_1', ms: t0 + hour + 2500, ttlMs: hour }]),
        t0 + hour + 2500,
      );
      assert.deepEqual(
        (await state.recall('fp:a', 0, 10)).map((r) => r.member),
        ['clk_5 lnk_1', 'clk_3 lnk_1'],
      );
    });

    test('a key keeps its newest members only', async () => {
      // After the previous test's writes: time does not go back for a state.
      const t1 = t0 + 3 * 3_600_000;
      const entries = Array.from({ length: RECENT_MAX_PER_KEY + 7 }, (_, i) => ({
        key: 'fp:many',
        member: `clk_${i}`,
        ms: t1 + i,
        ttlMs: 60_000,
      }));
      await state.remember(packRecent(entries), t1 + entries.length);
      const kept = await state.recall('fp:many', 0, 1000);
      assert.equal(kept.length, RECENT_MAX_PER_KEY);
      assert.equal(kept[0].member, `clk_${entries.length - 1}`);
      assert.equal(kept.at(-1)!.member, 'clk_7');
    });

    test('entries written over hours come back newest first, the expired ones left out', async () => {
      const t2 = t0 + 10 * 3_600_000;
      const minute = 60_000;
      // One write every 4 minutes for 80 minutes, each with an entry of two keys.
      for (let k = 0; k <= 20; k++) {
        const ms = t2 + k * 4 * minute;
        await state.remember(
          packRecent([
            { key: 'fp:spread', member: `clk_${k}`, ms, ttlMs: 60 * minute },
            { key: 'fp:other', member: `clk_o${k}`, ms, ttlMs: 60 * minute },
          ]),
          ms,
        );
      }
      const live = (await state.recall('fp:spread', 0, 50)).map((r) => r.member);
      // As of the last write (minute 80), what is older than an hour is gone.
      assert.deepEqual(
        live,
        Array.from({ length: 15 }, (_, i) => `clk_${20 - i}`),
      );
      assert.deepEqual(
        await state.recall('fp:spread', t2 + 60 * minute, 3),
        [20, 19, 18].map((k) => ({ member: `clk_${k}`, ms: t2 + k * 4 * minute })),
      );
      assert.equal((await state.recall('fp:other', t2 + 79 * minute, 50)).length, 1);
    });

    test('a malformed packed entry is refused', async () => {
      await assert.rejects(
        async () => state.remember(Buffer.from('k\t1\tm\n'), t0),
        /malformed entry/,
      );
    });
  });
}

test('in process, remembered entries are bounded: the oldest are forgotten first', async () => {
  const state = new MemoryState(3);
  try {
    const t = Date.parse('2026-06-01T00:00:00.000Z');
    const day = 86_400_000;
    const entry = (i: number) => ({ key: `k${i % 2}`, member: `m${i}`, ms: t + i, ttlMs: day });
    await state.remember(packRecent([0, 1, 2, 3, 4].map(entry)), t + 5);
    assert.deepEqual(
      (await state.recall('k0', 0, 10)).map((r) => r.member),
      ['m4', 'm2'],
    );
    assert.deepEqual(
      (await state.recall('k1', 0, 10)).map((r) => r.member),
      ['m3'],
    );
    // Expired entries are forgotten on the next write, even under the bound.
    await state.remember(packRecent([entry(5)]), t + day + 3);
    assert.deepEqual(
      (await state.recall('k0', 0, 10)).map((r) => r.member),
      ['m4'],
    );
    assert.deepEqual(
      (await state.recall('k1', 0, 10)).map((r) => r.member),
      ['m5'],
    );
  } finally {
    await state.close();
  }
});

test('in process, entries survive the ring growing and wrapping, each under its own key', () => {
  const t = Date.parse('2026-06-01T00:00:00.000Z');
  const ring = new RecentRing(3000);
  const keys = 700;
  // 5000 entries through a ring bounded to 3000: it grows (1024, 2048, 3000), then wraps.
  for (let i = 0; i < 5000; i += 100) {
    const entries = Array.from({ length: 100 }, (_, j) => ({
      key: `links:fp:prj_1:android:${(i + j) % keys}`,
      member: `clk_${i + j} lnk_${(i + j) % 3}`,
      ms: t + i + j,
      ttlMs: 3_600_000,
    }));
    ring.remember(packRecent(entries), t + i + 100);
  }
  assert.equal(ring.size, 3000);
  for (const k of [0, 1, 299, 699]) {
    const expected = [];
    for (let n = 4999; n >= 2000; n--) if (n % keys === k) expected.push(`clk_${n} lnk_${n % 3}`);
    const got = ring.recall(`links:fp:prj_1:android:${k}`, 0, 100);
    assert.deepEqual(
      got.map((r) => r.member),
      expected,
    );
    assert.equal(got[0].ms, t + Number(expected[0].split(' ')[0].slice(4)));
  }
  assert.deepEqual(ring.recall('links:fp:prj_1:android:700', 0, 10), []);
});

test('in process, the ring grows when its oldest entries sit mid-way (after some expired)', () => {
  const ring = new RecentRing(5000);
  const entry = (i: number, ttlMs: number) => ({
    key: `k${i % 97}`,
    member: `m${i}`,
    ms: i,
    ttlMs,
  });
  const add = (from: number, n: number, ttlMs: number, nowMs: number) =>
    ring.remember(packRecent(Array.from({ length: n }, (_, i) => entry(from + i, ttlMs))), nowMs);
  add(0, 500, 1000, 0);
  // The 500 expire as this one is written: the oldest entry is now in slot 500 of 1024.
  add(500, 1, 10_000, 2000);
  assert.equal(ring.size, 1);
  add(501, 1023, 10_000, 2000); // fills the ring, wrapping around to slot 499
  add(1524, 500, 10_000, 2000); // grows it
  assert.equal(ring.size, 1524);
  for (const k of [0, 1, 50, 96]) {
    const expected = [];
    for (let i = 2023; i >= 500 && expected.length < RECENT_MAX_PER_KEY; i--) {
      if (i % 97 === k) expected.push(`m${i}`);
    }
    assert.deepEqual(
      ring.recall(`k${k}`, 0, 100).map((r) => r.member),
      expected,
    );
  }
});

test('in process, long and non-Latin-1 members come back whole; equal times come latest first', () => {
  const ring = new RecentRing(10);
  const long = 'x'.repeat(200);
  ring.remember(
    packRecent([
      { key: 'k', member: long, ms: 5, ttlMs: 100 },
      { key: 'k', member: 'café ☕', ms: 5, ttlMs: 100 },
      { key: 'k', member: 'short', ms: 4, ttlMs: 100 },
    ]),
    5,
  );
  assert.deepEqual(ring.recall('k', 0, 10), [
    { member: 'café ☕', ms: 5 },
    { member: long, ms: 5 },
    { member: 'short', ms: 4 },
  ]);
  // Expired as of the latest write: no longer recalled, and forgotten.
  ring.remember(packRecent([{ key: 'other', member: 'o', ms: 105, ttlMs: 100 }]), 105);
  assert.deepEqual(ring.recall('k', 0, 10), []);
  assert.equal(ring.size, 1);
});

test('in process, a malformed packed entry is refused', () => {
  const ring = new RecentRing(10);
  for (const bad of ['k\t1\t2\n', 'k\tx\t2\tm\n', 'k\t1\t-2\tm\n', 'k\t\t2\tm\n']) {
    assert.throws(() => ring.remember(Buffer.from(bad), 1), /malformed entry/);
  }
  assert.throws(() => new RecentRing(0), RangeError);
});

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
    await one.state.publish('x', 'hello');
    assert.equal(await received, 'hello');
  } finally {
    await two.state.close();
    await one.drop();
  }
});

test('Redis still recalls candidates the previous version remembered (a sorted set per key)', {
  skip: !REDIS_URL && 'needs REDIS_URL',
}, async () => {
  const { state, prefix, drop } = freshState('redis');
  try {
    const t = Date.parse('2026-06-01T00:00:00.000Z');
    const redis = (state as RedisState).redis;
    await redis.zadd(`${prefix}fp:old`, t, 'clk_old1 lnk_1', t + 2000, 'clk_old2 lnk_1');
    // Before anything is remembered the new way, and after.
    assert.deepEqual(await state.recall('fp:old', t + 1000, 5), [
      { member: 'clk_old2 lnk_1', ms: t + 2000 },
    ]);
    await state.remember(
      packRecent([{ key: 'fp:old', member: 'clk_new lnk_2', ms: t + 3000, ttlMs: 3_600_000 }]),
      t + 3000,
    );
    assert.deepEqual(
      (await state.recall('fp:old', t, 5)).map((r) => r.member),
      ['clk_new lnk_2', 'clk_old2 lnk_1', 'clk_old1 lnk_1'],
    );
  } finally {
    await drop();
  }
});
