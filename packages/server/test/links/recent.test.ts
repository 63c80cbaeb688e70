import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { hashBytes, hashHigh, hashText } from '../../src/links/candidate-records.mjs';
import { packRecent, RECENT_MAX_PER_KEY, RecentRing } from '../../src/links/recent.mjs';

describe('recent ring: what a node keeps of its match candidates', () => {
  const ring = new RecentRing(1_000_000);
  const t0 = Date.parse('2026-06-01T00:00:00.000Z');

  test('remembered members come back newest first, within the asked time, per key', () => {
    const hour = 3_600_000;
    ring.remember(
      packRecent([
        { key: 'fp:a', member: 'clk_1 lnk_1', ms: t0, ttlMs: hour },
        { key: 'fp:a', member: 'clk_3 lnk_1', ms: t0 + 3000, ttlMs: hour },
        { key: 'fp:a', member: 'clk_2 lnk_2', ms: t0 + 2000, ttlMs: hour },
        { key: 'fp:b', member: 'clk_4 lnk_1', ms: t0 + 1000, ttlMs: hour },
      ]),
      t0 + 3000,
    );
    assert.deepEqual(ring.recall('fp:a', t0 + 1000, 5), [
      { member: 'clk_3 lnk_1', ms: t0 + 3000 },
      { member: 'clk_2 lnk_2', ms: t0 + 2000 },
    ]);
    assert.deepEqual(ring.recall('fp:a', t0, 1), [{ member: 'clk_3 lnk_1', ms: t0 + 3000 }]);
    assert.deepEqual(ring.recall('fp:b', t0, 5), [{ member: 'clk_4 lnk_1', ms: t0 + 1000 }]);
    assert.deepEqual(ring.recall('fp:none', t0, 5), []);
    // Members older than their lifetime go when the key is next written.
    ring.remember(
      packRecent([{ key: 'fp:a', member: 'clk_5 lnk_1', ms: t0 + hour + 2500, ttlMs: hour }]),
      t0 + hour + 2500,
    );
    assert.deepEqual(
      ring.recall('fp:a', 0, 10).map((r) => r.member),
      ['clk_5 lnk_1', 'clk_3 lnk_1'],
    );
  });

  test('a key keeps its newest members only', () => {
    // After the previous test's writes: time does not go back for a state.
    const t1 = t0 + 3 * 3_600_000;
    const entries = Array.from({ length: RECENT_MAX_PER_KEY + 7 }, (_, i) => ({
      key: 'fp:many',
      member: `clk_${i}`,
      ms: t1 + i,
      ttlMs: 60_000,
    }));
    ring.remember(packRecent(entries), t1 + entries.length);
    const kept = ring.recall('fp:many', 0, 1000);
    assert.equal(kept.length, RECENT_MAX_PER_KEY);
    assert.equal(kept[0].member, `clk_${entries.length - 1}`);
    assert.equal(kept.at(-1)!.member, 'clk_7');
  });

  test('entries written over hours come back newest first, the expired ones left out', () => {
    const t2 = t0 + 10 * 3_600_000;
    const minute = 60_000;
    // One write every 4 minutes for 80 minutes, each with an entry of two keys.
    for (let k = 0; k <= 20; k++) {
      const ms = t2 + k * 4 * minute;
      ring.remember(
        packRecent([
          { key: 'fp:spread', member: `clk_${k}`, ms, ttlMs: 60 * minute },
          { key: 'fp:other', member: `clk_o${k}`, ms, ttlMs: 60 * minute },
        ]),
        ms,
      );
    }
    const live = ring.recall('fp:spread', 0, 50).map((r) => r.member);
    // As of the last write (minute 80), what is older than an hour is gone.
    assert.deepEqual(
      live,
      Array.from({ length: 15 }, (_, i) => `clk_${20 - i}`),
    );
    assert.deepEqual(
      ring.recall('fp:spread', t2 + 60 * minute, 3),
      [20, 19, 18].map((k) => ({ member: `clk_${k}`, ms: t2 + k * 4 * minute })),
    );
    assert.equal(ring.recall('fp:other', t2 + 79 * minute, 50).length, 1);
  });
});

test('entries are bounded: the oldest are forgotten first', () => {
  const ring = new RecentRing(3);
  {
    const t = Date.parse('2026-06-01T00:00:00.000Z');
    const day = 86_400_000;
    const entry = (i: number) => ({ key: `k${i % 2}`, member: `m${i}`, ms: t + i, ttlMs: day });
    ring.remember(packRecent([0, 1, 2, 3, 4].map(entry)), t + 5);
    assert.deepEqual(
      ring.recall('k0', 0, 10).map((r) => r.member),
      ['m4', 'm2'],
    );
    assert.deepEqual(
      ring.recall('k1', 0, 10).map((r) => r.member),
      ['m3'],
    );
    // Expired entries are forgotten on the next write, even under the bound.
    ring.remember(packRecent([entry(5)]), t + day + 3);
    assert.deepEqual(
      ring.recall('k0', 0, 10).map((r) => r.member),
      ['m4'],
    );
    assert.deepEqual(
      ring.recall('k1', 0, 10).map((r) => r.member),
      ['m5'],
    );
  }
});

test('entries survive the ring wrapping around, each under its own key', () => {
  const t = Date.parse('2026-06-01T00:00:00.000Z');
  const ring = new RecentRing(3000);
  const keys = 700;
  // 5000 entries through a ring bounded to 3000: it fills, then wraps.
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

test('the ring wraps when its oldest entries sit mid-way (after some expired)', () => {
  const ring = new RecentRing(1024);
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
  assert.equal(ring.size, 1024);
  add(1524, 500, 10_000, 2000); // beyond the bound: the oldest 500 go
  assert.equal(ring.size, 1024);
  for (const k of [0, 1, 50, 96]) {
    const expected = [];
    for (let i = 2023; i >= 1000 && expected.length < RECENT_MAX_PER_KEY; i--) {
      if (i % 97 === k) expected.push(`m${i}`);
    }
    assert.deepEqual(
      ring.recall(`k${k}`, 0, 100).map((r) => r.member),
      expected,
    );
  }
  // Entries far in the past under the same keys are stale links in the chains, never returned.
  assert.ok(ring.recall('k0', 0, 1000).every((r) => Number(r.member.slice(1)) >= 1000));
});

test('long and non-Latin-1 members come back whole; equal times come latest first', () => {
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

test('a key is found by the hash of its UTF-8 bytes, whatever its characters', () => {
  const ring = new RecentRing(10);
  ring.remember(
    packRecent([
      { key: 'clé ☕', member: 'a', ms: 1, ttlMs: 10 },
      { key: 'cle', member: 'b', ms: 1, ttlMs: 10 },
    ]),
    1,
  );
  assert.deepEqual(ring.recall('clé ☕', 0, 10), [{ member: 'a', ms: 1 }]);
  assert.deepEqual(ring.recall('cle', 0, 10), [{ member: 'b', ms: 1 }]);
  const bytes = Buffer.from('clé ☕');
  const lo = hashText('clé ☕');
  const hi = hashHigh();
  assert.equal(hashBytes(bytes, 0, bytes.length), lo);
  assert.equal(hashHigh(), hi);
});

test('malformed records are refused', () => {
  const ring = new RecentRing(10);
  const good = packRecent([{ key: 'k', member: 'clk_1 lnk_1', ms: 1, ttlMs: 2 }]);
  const noExpiry = Uint8Array.from(good);
  new DataView(noExpiry.buffer).setFloat64(16, Number.NaN, true);
  const backwards = Uint8Array.from(good);
  new DataView(backwards.buffer).setFloat64(16, 0, true);
  for (const bad of [
    good.subarray(0, good.length - 1),
    good.subarray(0, 20),
    noExpiry,
    backwards,
  ]) {
    assert.throws(() => ring.remember(bad, 1), /malformed entry/);
  }
  ring.remember(good, 1);
  assert.deepEqual(ring.recall('k', 0, 10), [{ member: 'clk_1 lnk_1', ms: 1 }]);
  assert.throws(() => new RecentRing(0), RangeError);
});
