import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { RedisState } from '../../src/state/index.ts';
import { DependencyUnavailableError } from '../../src/unavailable.ts';
import { HAS_REDIS_SERVER, RedisServer } from '../fixtures/redis-server.ts';
import { waitFor } from '../outage/fleet.ts';

// The shared state's outage policy on a redis-server of this file's own: deadlines, refusing at
// once while down, per-node rate limits, the subscription's lost/restored signals, recovery.
const skip = !HAS_REDIS_SERVER && 'needs redis-server';
let redis: RedisServer;
let state: RedisState;
const timeoutMs = 300;

before(async () => {
  if (skip) return;
  redis = await RedisServer.start();
  state = new RedisState(redis.url, 'state-outage:', timeoutMs);
});

after(async () => {
  await state?.close();
  await redis?.stop();
});

test('Redis stopped, then back: calls fail within the deadline, then at once; rate limits count per node; everything recovers', {
  skip,
}, async () => {
  const events: string[] = [];
  state.subscriptions
    .on('lost', () => events.push('lost'))
    .on('restored', () => events.push('restored'));
  await state.subscribe('ch', () => {});
  const counted = state.rateLimit('k', 2, 60_000, Date.now());
  assert.ok(counted instanceof Promise, 'decided in Redis while it is up');
  assert.equal((await counted).allowed, true);

  await redis.stop();
  let started = performance.now();
  await assert.rejects(state.publish('ch', 'x'), DependencyUnavailableError);
  assert.ok(performance.now() - started < timeoutMs + 300, 'within the deadline');
  assert.equal(state.health.up, false);
  started = performance.now();
  await assert.rejects(state.publish('ch', 'x'), DependencyUnavailableError);
  assert.ok(performance.now() - started < 50, 'refused at once while down');
  started = performance.now();
  assert.equal(await state.ping(), false);
  assert.ok(performance.now() - started < timeoutMs + 300);

  // Counted by this node alone, synchronously, with the same limit.
  const now = Date.now();
  const local = [1, 2, 3].map(() => state.rateLimit('k2', 2, 60_000, now));
  assert.ok(
    local.every((r) => !(r instanceof Promise)),
    'no waiting on a Redis known down',
  );
  assert.deepEqual(
    local.map((r) => (r as { allowed: boolean }).allowed),
    [true, true, false],
  );

  await redis.start();
  await waitFor('Redis seen up again', async () => (state.health.up ? true : undefined), 5000);
  await waitFor('subscription restored', async () =>
    events.includes('restored') ? true : undefined,
  );
  assert.deepEqual(events.slice(0, 1), ['lost']);
  assert.ok((await state.publish('ch', 'x')) >= 1, 'the subscription is live again');
  const again = state.rateLimit('k3', 2, 60_000, Date.now());
  assert.ok(again instanceof Promise, 'decided in Redis again');
  assert.equal((await again).allowed, true);
});

test('Redis frozen: a call fails within the deadline, later ones at once; thawed: back', {
  skip,
}, async () => {
  assert.equal(await state.ping(), true);
  redis.freeze();
  try {
    const started = performance.now();
    await assert.rejects(
      state.run((r) => r.get('x')),
      DependencyUnavailableError,
    );
    assert.ok(performance.now() - started < timeoutMs + 300, 'within the deadline');
    const next = performance.now();
    await assert.rejects(
      state.run((r) => r.get('x')),
      DependencyUnavailableError,
    );
    assert.ok(performance.now() - next < 50, 'refused at once while down');
  } finally {
    redis.thaw();
  }
  await waitFor('Redis seen up again', async () => (state.health.up ? true : undefined), 5000);
  assert.equal(await state.run((r) => r.set('x', '1')), 'OK');
});

test('permits held when Redis goes down are dropped: the node counts alone with the key’s limit, and asks Redis again when it is back', {
  skip,
}, async () => {
  await waitFor('Redis up', async () => ((await state.ping()) ? true : undefined), 5000);
  const now = Date.now();
  for (let round = 0; round < 3; round++)
    await Promise.all(Array.from({ length: 10 }, () => state.rateLimit('p', 50, 60_000, now)));
  assert.ok(!(state.rateLimit('p', 50, 60_000, now) instanceof Promise), 'holding permits');

  await redis.stop();
  await assert.rejects(state.publish('ch', 'x'), DependencyUnavailableError);
  assert.equal(state.health.up, false);
  // In process, alone: exactly the limit, whatever permits were held.
  const local = Array.from({ length: 60 }, () => state.rateLimit('p', 50, 60_000, now));
  assert.ok(local.every((r) => !(r instanceof Promise)));
  assert.equal(local.filter((r) => (r as { allowed: boolean }).allowed).length, 50);

  await redis.start();
  await waitFor('Redis seen up again', async () => (state.health.up ? true : undefined), 5000);
  const again = state.rateLimit('p', 50, 60_000, now);
  assert.ok(again instanceof Promise, 'the permits held before the outage are gone');
  await again;
});
