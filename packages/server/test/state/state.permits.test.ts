import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import type { RateLimitResult, SharedState } from '../../src/state/index.ts';
import { freshState, REDIS_URL } from '../helpers.ts';
import { waitFor } from '../outage/fleet.ts';

// Rate-limit permits with Redis, on two states sharing a prefix (two nodes): a busy key far
// below its limit is admitted without Redis, and the limit is still exact.
const minute = 60_000;

describe('rate-limit permits across two nodes (redis)', {
  skip: !REDIS_URL && 'needs REDIS_URL',
}, () => {
  let one: ReturnType<typeof freshState>;
  let two: ReturnType<typeof freshState>;
  let redis: Redis;
  before(() => {
    one = freshState('redis');
    two = freshState('redis', one.prefix);
    redis = new Redis(REDIS_URL!);
  });
  after(async () => {
    redis.disconnect();
    await two.state.close();
    await one.drop();
  });

  /** What Redis has counted for `bucket` in the window of `nowMs` (permits granted included). */
  const counted = async (bucket: string, nowMs: number) =>
    Number(
      (await redis.get(`${one.prefix}rl:{${bucket}}:${minute}:${Math.floor(nowMs / minute)}`)) ?? 0,
    );

  /** `n` requests on `state` in one turn; how many were decided without a promise. */
  async function burst(
    state: SharedState,
    bucket: string,
    limit: number,
    n: number,
    nowMs: number,
  ) {
    const answers = Array.from({ length: n }, () => state.rateLimit(bucket, limit, minute, nowMs));
    const local = answers.filter((a) => !(a instanceof Promise)).length;
    const results: RateLimitResult[] = await Promise.all(answers);
    return { allowed: results.filter((r) => r.allowed).length, local, results };
  }

  test('a busy key far below its limit is admitted from permits, counted in Redis first', async () => {
    const now = Date.now();
    let allowed = 0;
    let local = 0;
    for (let round = 0; round < 10; round++) {
      const r = await burst(one.state, 'busy', 100_000, 20, now);
      allowed += r.allowed;
      local += r.local;
      // Never more admitted than counted: permits are counted when granted.
      assert.ok((await counted('busy', now)) >= allowed);
    }
    assert.equal(allowed, 200);
    assert.ok(local >= 100, `only ${local} of 200 requests were admitted from permits`);
    const remaining = (one.state.rateLimit('busy', 100_000, minute, now) as RateLimitResult)
      .remaining;
    assert.ok(remaining < 100_000 - 200 && remaining > 100_000 - 2000, `remaining ${remaining}`);
  });

  test('150 requests at limit 120 across two nodes holding permits: exactly 120 pass', async () => {
    const now = Date.now();
    let allowed = 0;
    let local = 0;
    // Rounds of 10 per node, so that both become busy and hold permits while the window fills.
    for (let round = 0; round < 15; round++) {
      const [a, b] = await Promise.all([
        burst(one.state, 'exact', 120, 5, now),
        burst(two.state, 'exact', 120, 5, now),
      ]);
      allowed += a.allowed + b.allowed;
      local += a.local + b.local;
      assert.ok((await counted('exact', now)) <= 120, 'never more than the limit counted');
    }
    assert.ok(local > 0, 'some requests were admitted from permits');
    assert.equal(allowed, 120);
    // Every permit handed out was used or handed back: Redis's count is what was admitted.
    await waitFor('unused permits handed back', async () =>
      (await counted('exact', now)) === 120 ? true : undefined,
    );
  });

  test('permits a node holds but no longer uses go to the node short of room: exactly the limit', async () => {
    const now = Date.now();
    let allowed = 0;
    // Node two gets busy and holds permits, then its traffic stops.
    for (let round = 0; round < 3; round++)
      allowed += (await burst(two.state, 'strand', 120, 10, now)).allowed;
    const held = (await counted('strand', now)) - allowed;
    assert.ok(held > 0, 'node two holds permits');
    // Node one sends just what is left of the limit, in bursts: every one must pass, including
    // those that need the room two's permits hold.
    const started = performance.now();
    for (let left = 120 - allowed; left > 0; left -= 10) {
      const sent = Math.min(10, left);
      assert.equal((await burst(one.state, 'strand', 120, sent, now)).allowed, sent);
    }
    assert.equal(
      (await burst(one.state, 'strand', 120, 1, now)).allowed,
      0,
      'then the limit holds',
    );
    assert.ok(performance.now() - started < 700 + 500, 'waited at most about a lease');
    assert.equal(await counted('strand', now), 120);
  });

  test('concurrent bursts on both nodes at once: exactly the limit, whoever holds permits', async () => {
    const now = Date.now();
    // Make both nodes busy (permits granted), then send 300 at once, half on each.
    await Promise.all([
      burst(one.state, 'race', 200, 10, now),
      burst(two.state, 'race', 200, 10, now),
    ]);
    await Promise.all([
      burst(one.state, 'race', 200, 10, now),
      burst(two.state, 'race', 200, 10, now),
    ]);
    const [a, b] = await Promise.all([
      burst(one.state, 'race', 200, 150, now),
      burst(two.state, 'race', 200, 150, now),
    ]);
    assert.equal(40 + a.allowed + b.allowed, 200);
    for (const r of [...a.results, ...b.results].filter((r) => !r.allowed))
      assert.ok(r.retryAfterSeconds >= 1);
  });

  test('near the limit grants shrink: each is at most an eighth of the room left, none at the limit', async () => {
    const now = Date.now();
    const limit = 1000;
    let allowed = (await burst(one.state, 'near', limit, 900, now)).allowed;
    assert.equal(allowed, 900, 'one turn, one script call, no permits on first sight');
    while (allowed < limit) {
      const before = allowed;
      allowed += (await burst(one.state, 'near', limit, 4, now)).allowed;
      // A grant is at most an eighth of the room; a refill may come while half the last is held.
      const held = (await counted('near', now)) - allowed;
      assert.ok(
        held <= Math.floor((limit - before) / 4),
        `${held} permits held with ${limit - before} left`,
      );
    }
    assert.equal(allowed, limit);
    assert.equal((await burst(one.state, 'near', limit, 5, now)).allowed, 0);
    assert.equal(await counted('near', now), limit, 'no permits outstanding at the limit');
  });

  test('window rollover: permits of the old window are not used in the new one, and go back', async () => {
    // Windows of a minute: take one that ends soon after the requests, on a clock of our own.
    const index = Math.floor(Date.now() / minute) + 1000;
    const late = index * minute - 1;
    for (let round = 0; round < 3; round++) await burst(one.state, 'roll', 10_000, 10, late);
    const held = (await counted('roll', late)) - 30;
    assert.ok(held > 0, 'permits held at the end of the window');
    const next = (index + 1) * minute;
    const first = one.state.rateLimit('roll', 10_000, minute, next);
    assert.ok(first instanceof Promise, 'the new window asks Redis');
    assert.equal((await first).allowed, true);
    await waitFor('the old window’s unused permits handed back', async () =>
      (await counted('roll', late)) === 30 ? true : undefined,
    );
    // The old window weighs in the new one with what was admitted, not what was granted.
    assert.equal((await counted('roll', next)) >= 1, true);
  });
});
