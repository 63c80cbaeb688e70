import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { newId } from '../../src/ids.ts';
import {
  CANDIDATES_PER_KEY,
  CandidateStore,
  candidate,
  candidateKey,
} from '../../src/links/candidates.ts';
import {
  type Click,
  ClickRecorder,
  clickFingerprint,
  clickIdTime,
} from '../../src/links/clicks.ts';
import type { Platform } from '../../src/links/platform.ts';
import { MemoryState, RedisState } from '../../src/state/index.ts';
import { SLICE_MS, shardOf } from '../../src/state/recent-sets.ts';
import {
  type Backend,
  DIALECTS,
  freshState,
  freshStore,
  LogCapture,
  REDIS_URL,
  TEST_STATE_TIMEOUT_MS,
} from '../helpers.ts';

/** Each way clicks reach a store: SQLite with in-process candidates, PostgreSQL with Redis. */
const cases: Pick<Backend, 'name' | 'db' | 'state'>[] = [
  { name: 'SQLite + in-process candidates', db: 'sqlite', state: 'memory' },
  ...(DIALECTS.includes('postgres') && REDIS_URL
    ? [{ name: 'PostgreSQL + Redis candidates', db: 'postgres', state: 'redis' } as const]
    : []),
];

const HOUR = 3_600_000;
const KEY = 'test-fingerprint-key';
const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)\tTab';
/** The fingerprint of the visitor at `ip` with {@link UA}. */
const fp = (ip: string) => clickFingerprint(KEY, ip, UA);

function click(
  at: number,
  linkId: string,
  platform: Platform,
  ip: string,
  extra: Partial<Click> = {},
): Click {
  const id = newId('clk', at);
  return {
    id,
    projectId: 'prj_1',
    linkId,
    platform,
    ip,
    userAgent: UA,
    ms: at,
    ...extra,
    matchWindowMs: HOUR,
  };
}

for (const c of cases) {
  describe(`click recorder: ${c.name}`, async () => {
    const { store, drop } = await freshStore(c.db);
    const shared = freshState(c.state);
    const candidates = new CandidateStore(shared.state, 100_000);
    const logs = new LogCapture();
    const log = pino({ level: 'warn' }, logs);
    // A long delay: only flush() writes.
    const recorder = new ClickRecorder(store, candidates, KEY, log, 60_000);
    after(async () => {
      await recorder.close();
      await shared.drop();
      await drop();
    });
    const dayCount = async (linkId: string) =>
      (
        await store.db
          .selectFrom('link_click_days')
          .select(['day', 'clicks'])
          .where('link_id', '=', linkId)
          .orderBy('day')
          .execute()
      ).map((r) => ({ day: r.day, clicks: Number(r.clicks) }));
    const recall = async (
      platform: 'android' | 'ios',
      ip: string,
      sinceMs: number,
      project = 'prj_1',
    ) =>
      candidates.recall(candidateKey(project, platform, fp(ip)), sinceMs, sinceMs + 2 * HOUR, 1000);
    /** `n` clicks at `at` on `linkId`, odd ones Android, even ones desktop, each from its own IP. */
    const record = (
      n: number,
      at: number,
      linkId: string,
      ip = (i: number) => `10.0.${i >> 8}.${i & 255}`,
    ) => {
      const clicks = Array.from({ length: n }, (_, i) =>
        click(at, linkId, i % 2 ? 'android' : 'desktop', ip(i)),
      );
      for (const one of clicks) recorder.record(one);
      return clicks.map((one) => one.id);
    };

    test('a flushed batch: every click found by its id, counted per UTC day', async () => {
      const at = Date.parse('2026-06-01T23:59:59.000Z');
      const ids = record(250, at, 'lnk_a');
      const other = click(at, 'lnk_a2', 'ios', '10.0.0.1', {
        projectId: 'prj_2',
        userAgent: 'Other',
      });
      recorder.record(other);
      await recorder.flush();
      assert.deepEqual(await recorder.find(other.id), {
        id: other.id,
        projectId: 'prj_2',
        linkId: 'lnk_a2',
        platform: 'ios',
        fingerprint: clickFingerprint(KEY, '10.0.0.1', 'Other'),
        ms: at,
      });
      for (const [i, id] of ids.entries()) {
        const found = await recorder.find(id);
        assert.equal(found?.platform, i % 2 ? 'android' : 'desktop');
        assert.equal(found?.fingerprint, fp(`10.0.${i >> 8}.${i & 255}`));
        assert.equal(found?.ms, at);
      }
      assert.equal(await recorder.find(newId('clk', at)), null, 'an id never issued');
      assert.equal(await recorder.find('clk_not-a-ulid'), null);
      assert.deepEqual(await dayCount('lnk_a'), [{ day: '2026-06-01', clicks: 250 }]);
      // The next day's clicks count on that day, and the same day adds up.
      record(3, at + 2000, 'lnk_a');
      record(2, at, 'lnk_a');
      await recorder.flush();
      assert.deepEqual(await dayCount('lnk_a'), [
        { day: '2026-06-01', clicks: 252 },
        { day: '2026-06-02', clicks: 3 },
      ]);
    });

    test('mobile clicks are match candidates for their window, keyed by project, platform and visitor', async () => {
      const at = Date.parse('2026-06-02T10:00:00.000Z');
      const ids = record(4, at, 'lnk_b', (i) => `192.0.2.${i % 2}`);
      await recorder.flush();
      // Odd clicks are Android, from 192.0.2.1; desktop clicks are never candidates.
      const found = await recall('android', '192.0.2.1', at - HOUR);
      assert.deepEqual(new Set(found.map((f) => f.clickId)), new Set([ids[1], ids[3]]));
      assert.ok(found.every((f) => f.linkId === 'lnk_b' && f.ms === at));
      assert.deepEqual(await recall('android', '192.0.2.0', at - HOUR), []);
      assert.deepEqual(await recall('ios', '192.0.2.1', at - HOUR), []);
      assert.deepEqual(await recall('android', '192.0.2.1', at - HOUR, 'prj_2'), []);
      assert.deepEqual(await recall('android', '192.0.2.1', at + 1), [], 'none since then');
      assert.equal(recorder.fingerprint('::ffff:192.0.2.1', UA), fp('192.0.2.1'));
    });

    test('every click carries the fingerprint of its own address, whatever its shape', async () => {
      const at = Date.parse('2026-06-02T10:00:00.000Z');
      const addresses = [
        '10.0.0.1',
        '10.0.0.12',
        '10.0.0.2',
        '10.0.0.2',
        '2001:db8::1',
        '::ffff:255.255.255.255',
        // What a trusted proxy may pass on: longer than any address, or not Latin-1.
        `unknown, ${'x'.repeat(60)}`,
        'адрес',
        '',
      ];
      const clicks = addresses.map((ip) => click(at, 'lnk_ip', 'android', ip));
      for (const one of clicks) recorder.record(one);
      await recorder.flush();
      for (const [i, ip] of addresses.entries()) {
        assert.equal((await recorder.find(clicks[i].id))?.fingerprint, fp(ip), ip);
        const expected = clicks.filter((_, j) => addresses[j] === ip).map((one) => one.id);
        const found = await recall('android', ip, at - HOUR);
        assert.deepEqual(new Set(found.map((f) => f.clickId)), new Set(expected), ip);
      }
    });

    test('one visitor clicking again and again leaves the newest candidates of its key, and every click', async () => {
      const at = Date.parse('2026-06-02T11:00:00.000Z');
      const ip = '198.51.100.7';
      const ids: string[] = [];
      // Clicks of one visitor, a millisecond apart, interleaved with another's; two batches.
      for (let i = 0; i < CANDIDATES_PER_KEY + 30; i++) {
        const one = click(at + i, 'lnk_hot', 'android', ip);
        ids.push(one.id);
        recorder.record(one);
        if (i % 20 === 0) recorder.record(click(at + i, 'lnk_hot', 'android', '198.51.100.8'));
        if (i === 40) await recorder.flush();
      }
      await recorder.flush();
      const found = await recall('android', ip, at - HOUR);
      assert.deepEqual(
        found.map((f) => f.clickId),
        ids.slice(-CANDIDATES_PER_KEY).reverse(),
        'the newest, newest first',
      );
      assert.ok(found.every((f, i) => f.linkId === 'lnk_hot' && f.ms === at + 79 - i));
      assert.equal((await recall('android', '198.51.100.8', at - HOUR)).length, 4);
      for (const id of ids) assert.equal((await recorder.find(id))?.fingerprint, fp(ip));
      assert.deepEqual(await dayCount('lnk_hot'), [{ day: '2026-06-02', clicks: 84 }]);
    });

    test('pruning drops clicks older than the cut, and keeps the day counts', async () => {
      const at = Date.parse('2026-06-04T10:00:00.000Z');
      const old = record(2, at, 'lnk_d');
      const recent = record(2, at + 1, 'lnk_d');
      await recorder.flush();
      await recorder.prune(at + 1);
      assert.equal(await recorder.find(old[0]), null);
      assert.equal(await recorder.find(old[1]), null);
      assert.equal((await recorder.find(recent[0]))?.linkId, 'lnk_d');
      assert.deepEqual(await dayCount('lnk_d'), [{ day: '2026-06-04', clicks: 4 }]);
    });

    test('a store that refuses the write keeps the clicks and writes them later', async () => {
      const at = Date.parse('2026-06-05T10:00:00.000Z');
      await sql`alter table link_clicks rename to link_clicks_away`.execute(store.db);
      const ids = record(30, at, 'lnk_e');
      await recorder.flush();
      assert.match(logs.text, /link clicks not written; will retry/);
      assert.deepEqual(await dayCount('lnk_e'), [], 'nothing half-written');
      assert.deepEqual(await recall('android', '10.0.0.1', at - HOUR), [], 'no candidate yet');
      await sql`alter table link_clicks_away rename to link_clicks`.execute(store.db);
      await recorder.flush();
      assert.equal((await recorder.find(ids[29]))?.linkId, 'lnk_e');
      assert.deepEqual(await dayCount('lnk_e'), [{ day: '2026-06-05', clicks: 30 }]);
      assert.equal((await recall('android', '10.0.0.1', at - HOUR))[0]?.clickId, ids[1]);
    });

    test('closing while the store refuses writes drops the queue and leaves no retry behind', async () => {
      const shutdownLogs = new LogCapture();
      const closing = new ClickRecorder(
        store,
        candidates,
        KEY,
        pino({ level: 'warn' }, shutdownLogs),
        60_000,
      );
      await sql`alter table link_clicks rename to link_clicks_away`.execute(store.db);
      try {
        for (let i = 0; i < 5; i++) closing.record(click(Date.now(), 'lnk_1', 'ios', '192.0.2.9'));
        await closing.close();
        assert.match(shutdownLogs.text, /link clicks dropped at shutdown/);
        assert.match(shutdownLogs.text, /"dropped":5/);
      } finally {
        await sql`alter table link_clicks_away rename to link_clicks`.execute(store.db);
      }
    });
  });
}

test('a node that starts puts back the in-process candidates still inside a window, the newest up to its bound', async () => {
  const { store, drop } = await freshStore('sqlite');
  const log = pino({ level: 'silent' });
  const at = Date.parse('2026-06-06T10:00:00.000Z');
  try {
    const before = new ClickRecorder(store, new CandidateStore(new MemoryState(), 100), KEY, log);
    const recent = click(at, 'lnk_2', 'ios', '192.0.2.7');
    before.record(click(at - 2 * HOUR, 'lnk_1', 'ios', '192.0.2.7'));
    before.record(recent);
    before.record(click(at, 'lnk_2', 'desktop', '192.0.2.7'));
    for (let i = 0; i < 7; i++) before.record(click(at + 1 + i, 'lnk_3', 'android', '192.0.2.8'));
    await before.close();

    const restarted = new CandidateStore(new MemoryState(), 100);
    const after = new ClickRecorder(store, restarted, KEY, log);
    assert.equal(await after.restoreCandidates(at + 1000, HOUR, 4), 4);
    assert.deepEqual(
      await restarted.recall(candidateKey('prj_1', 'ios', fp('192.0.2.7')), 0, at + HOUR, 10),
      [],
    );
    const android = await restarted.recall(
      candidateKey('prj_1', 'android', fp('192.0.2.8')),
      0,
      at + HOUR,
      10,
    );
    assert.deepEqual(
      android.map((c) => c.ms),
      [6, 5, 4, 3].map((i) => at + 1 + i),
      'the newest four',
    );
    assert.equal(await after.restoreCandidates(at + 1000, HOUR, 100), 8);
    const ios = await restarted.recall(
      candidateKey('prj_1', 'ios', fp('192.0.2.7')),
      0,
      at + HOUR,
      10,
    );
    assert.deepEqual(ios, [{ clickId: recent.id, linkId: 'lnk_2', ms: at }], 'put back once');
    assert.equal(
      (await restarted.recall(candidateKey('prj_1', 'android', fp('192.0.2.8')), 0, at + HOUR, 10))
        .length,
      7,
    );
    await after.close();
  } finally {
    await drop();
  }
});

test('the in-process store forgets expired keys and the least recently written beyond its bound', async () => {
  const memory = new CandidateStore(new MemoryState(), 3);
  const at = Date.parse('2026-06-07T10:00:00.000Z');
  const entry = (key: string, ms: number, ttlMs = HOUR) =>
    candidate(key, `clk_${key}${ms}`, 'l', ms, ttlMs);
  await memory.add([entry('a', at), entry('b', at, 1000), entry('c', at)], at);
  await memory.add([entry('a', at + 1)], at + 1);
  // Four candidates, a bound of three: b, written least recently, goes.
  assert.equal((await memory.recall('b', 0, at + 2 * HOUR, 10)).length, 0);
  assert.equal((await memory.recall('a', 0, at + 2 * HOUR, 10)).length, 2);
  // An hour later c's window has passed; a's newest click is still inside its own.
  await memory.add([entry('d', at + HOUR)], at + HOUR);
  assert.deepEqual(await memory.recall('c', 0, at + 2 * HOUR, 10), []);
  assert.equal((await memory.recall('d', 0, at + 2 * HOUR, 10)).length, 1);
});

test('nodes of a fleet match each other’s clicks through Redis', {
  skip: !REDIS_URL && 'needs REDIS_URL',
}, async () => {
  const a = freshState('redis');
  // Another node: its own connection to the same Redis, under the same prefix.
  const bState = new RedisState(REDIS_URL!, a.prefix, TEST_STATE_TIMEOUT_MS);
  try {
    const nodeA = new CandidateStore(a.state, 100);
    const nodeB = new CandidateStore(bState, 100);
    const at = Date.now();
    const key = candidateKey('prj_1', 'android', fp('192.0.2.20'));
    await nodeA.add([candidate(key, 'clk_a', 'lnk_a', at, HOUR)], at);
    await nodeB.add([candidate(key, 'clk_b', 'lnk_b', at + 1, HOUR)], at + 1);
    for (const node of [nodeA, nodeB]) {
      assert.deepEqual(await node.recall(key, at - HOUR, at + HOUR, 10), [
        { clickId: 'clk_b', linkId: 'lnk_b', ms: at + 1 },
        { clickId: 'clk_a', linkId: 'lnk_a', ms: at },
      ]);
    }
    assert.equal((await nodeA.recall(key, at - HOUR, at + HOUR, 1)).length, 1, 'the limit holds');
    // The hash of the key's slice expires with the window of its newest click.
    const hash = `links:cand:${Math.floor((at + 1) / SLICE_MS)}:${shardOf(key)}`;
    const ttl = await bState.redis.pttl(bState.key(hash));
    assert.ok(ttl > HOUR - 60_000 && ttl <= HOUR, String(ttl));
  } finally {
    await bState.close();
    await a.drop();
  }
});

test('click ids carry their time', () => {
  const at = Date.parse('2026-11-27T03:00:00.000Z');
  assert.equal(clickIdTime(newId('clk', at)), at);
  assert.equal(clickIdTime('clk_short'), null);
  assert.equal(clickIdTime(`lnk_${newId('clk', at).slice(4)}`), null);
});
