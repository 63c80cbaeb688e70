import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PermitLeases } from '../../src/state/permits.ts';

// The node's side of rate-limit permits, on a fake clock: when it asks for permits and how
// many, when it may use them, and what it hands back.
const minute = 60_000;
const t0 = Date.parse('2026-06-01T00:00:10.000Z');
const options = { leaseMs: 200, maxGrant: 1000, minGrant: 4 };

function setup() {
  let now = 1000;
  const leases = new PermitLeases(options, () => now);
  const id = PermitLeases.id('key:1', minute);
  return {
    leases,
    id,
    advance: (ms: number) => {
      now += ms;
    },
    now: () => now,
    ask: (asking: number) => leases.ask(id, 'key:1', 100, minute, asking),
  };
}

test('a bucket seen once, or seldom, asks for no permits; a busy one asks for a lease of them, capped', () => {
  const { ask, advance, leases } = setup();
  assert.equal(ask(1).reserve, 0, 'first sight: no permits');
  advance(500);
  assert.equal(ask(1).reserve, 0, 'one request per 500 ms: decided request by request');
  advance(50);
  // 4 requests in 50 ms: about 16 within a 200 ms lease.
  // (Every request passes `take` first: the one that asks was seen there too.)
  for (let i = 0; i < 4; i++) leases.take('key:1', 100, minute, t0);
  assert.equal(ask(1).reserve, 16);
  advance(1);
  for (let i = 0; i < 5000; i++) leases.take('key:1', 100, minute, t0);
  assert.equal(ask(1).reserve, 1000, 'capped at maxGrant');
  advance(100);
  assert.equal(ask(1).reserve, 0, 'fewer than minGrant expected: none');
});

test('permits admit synchronously within their window and lease, refill at half, and end', () => {
  const { ask, advance, leases, id, now } = setup();
  const index = Math.floor(t0 / minute);
  const { generation } = ask(5);
  assert.equal(leases.take('key:1', 100, minute, t0), undefined, 'no permits yet');
  // Redis admitted 5 and granted 10: its count is 15, with 20 in the previous window.
  assert.deepEqual(leases.granted(id, index, 10, 20, 15, now(), generation), []);
  assert.equal(leases.held(id), 10);
  const first = leases.take('key:1', 100, minute, t0);
  assert.ok(first);
  assert.equal(first.refill, false);
  // 10 s into the window the previous one weighs 5/6: 100 - 20 × 5/6 - (15 - 9) = 77.3.
  assert.equal(first.result.allowed, true);
  assert.equal(first.result.remaining, 77);
  for (let i = 0; i < 3; i++) assert.equal(leases.take('key:1', 100, minute, t0)?.refill, false);
  assert.equal(leases.take('key:1', 100, minute, t0)?.refill, true, 'half the grant used: refill');
  assert.equal(leases.take('key:1', 100, minute, t0)?.refill, false, 'one refill at a time');
  assert.equal(leases.held(id), 4);
  assert.equal(leases.take('key:1', 50, minute, t0), undefined, 'another limit: not these permits');
  assert.equal(
    leases.take('key:1', 100, minute, (index + 1) * minute),
    undefined,
    'the next window: not these permits',
  );
  advance(options.leaseMs);
  assert.equal(leases.take('key:1', 100, minute, t0), undefined, 'the lease is over');
  assert.deepEqual(leases.expire(t0, minute), [
    { bucket: 'key:1', windowMs: minute, index, unused: 4 },
  ]);
  assert.equal(leases.held(id), 0);
  assert.deepEqual(leases.expire(t0, minute), [], 'handed back once');
  assert.equal(leases.release(id), undefined, 'no lease left to release');
});

test('a lease over by the next ask is handed back with it', () => {
  const { ask, advance, leases, id, now } = setup();
  const index = Math.floor(t0 / minute);
  leases.granted(id, index, 8, 0, 9, now(), ask(1).generation);
  leases.take('key:1', 100, minute, t0);
  advance(options.leaseMs);
  assert.deepEqual(ask(1).back, { bucket: 'key:1', windowMs: minute, index, unused: 7 });
  assert.equal(leases.held(id), 0);
});

test('window rollover: permits of the window that ended go back, late grants too', () => {
  const { ask, leases, id, now } = setup();
  const index = Math.floor(t0 / minute);
  leases.granted(id, index, 8, 0, 9, now(), ask(1).generation);
  assert.equal(leases.held(id), 8);
  // A sweep after the window ended hands them back even though the lease has time left.
  assert.deepEqual(leases.expire((index + 1) * minute, minute), [
    { bucket: 'key:1', windowMs: minute, index, unused: 8 },
  ]);
  leases.granted(id, index, 8, 0, 17, now(), ask(1).generation);
  assert.equal(leases.held(id), 8);
  // The next window's first grant ends the old lease and returns its permits.
  assert.deepEqual(leases.granted(id, index + 1, 6, 17, 7, now(), ask(1).generation), [
    { bucket: 'key:1', windowMs: minute, index, unused: 8 },
  ]);
  assert.equal(leases.held(id), 6);
  // A grant for the window already left goes straight back.
  assert.deepEqual(leases.granted(id, index, 3, 0, 20, now(), ask(1).generation), [
    { bucket: 'key:1', windowMs: minute, index, unused: 3 },
  ]);
  assert.equal(leases.held(id), 6);
});

test('release hands back what is unused at once, and a grant that was on its way then too', () => {
  const { ask, leases, id, now } = setup();
  const index = Math.floor(t0 / minute);
  leases.granted(id, index, 8, 0, 9, now(), ask(1).generation);
  leases.take('key:1', 100, minute, t0);
  // A refill is asked for, then the lease is reclaimed before its answer arrives.
  const { generation } = ask(0);
  assert.deepEqual(leases.release(id), { bucket: 'key:1', windowMs: minute, index, unused: 7 });
  assert.equal(leases.take('key:1', 100, minute, t0), undefined);
  assert.deepEqual(leases.granted(id, index, 5, 0, 14, now(), generation), [
    { bucket: 'key:1', windowMs: minute, index, unused: 5 },
  ]);
  assert.equal(leases.held(id), 0, 'not used: Redis no longer lists the lease');
  leases.granted(id, index, 8, 0, 17, now(), ask(1).generation);
  assert.equal(leases.held(id), 8);
  leases.clear();
  assert.equal(leases.held(id), 0);
  assert.equal(leases.take('key:1', 100, minute, t0), undefined);
});
