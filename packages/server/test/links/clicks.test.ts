import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import pino from 'pino';
import { batchOutput, type ClickColumns, clickFingerprint } from '../../src/links/click-batch.mjs';
import { newClickId } from '../../src/links/click-id.ts';
import {
  clickIdTime,
  findClickLine,
  MAX_SPAN_MS,
  parseClickLog,
} from '../../src/links/click-log.ts';
import { ClickRecorder } from '../../src/links/clicks.ts';
import { linksMigrations } from '../../src/links/migrations.ts';
import { RECENT_MAX_PER_KEY, RecentRing } from '../../src/links/recent.mjs';
import { MemoryState } from '../../src/state/memory.ts';
import { RedisState } from '../../src/state/redis.ts';
import { openStore, type Store } from '../../src/storage/db.ts';
import { DIALECTS, freshState, freshStore, LogCapture, REDIS_URL } from '../helpers.ts';

/** Each way clicks reach a store: the writer thread, in process, and PostgreSQL with Redis. */
const cases: {
  name: string;
  open(): Promise<{ store: Store; drop(): Promise<void> }>;
  state: 'memory' | 'redis';
}[] = [
  { name: 'SQLite file (writer thread)', open: () => freshStore('sqlite'), state: 'memory' },
  {
    name: 'SQLite in memory (in process)',
    async open() {
      const store = await openStore({ sqliteFile: ':memory:' });
      return { store, drop: () => store.close() };
    },
    state: 'memory',
  },
  ...(DIALECTS.includes('postgres') && REDIS_URL
    ? [
        {
          name: 'PostgreSQL + Redis',
          open: () => freshStore('postgres'),
          state: 'redis' as const,
        },
      ]
    : []),
];

const HOUR = 3_600_000;
const KEY = 'test-fingerprint-key';
const UA = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)\tTab';
/** The fingerprint of the visitor at `ip` with {@link UA}. */
const fp = (ip: string) => clickFingerprint(KEY, ip, UA);

for (const c of cases) {
  describe(`click recorder: ${c.name}`, async () => {
    const { store, drop } = await c.open();
    const shared = freshState(c.state);
    const logs = new LogCapture();
    const recorder = new ClickRecorder(
      store,
      shared.state,
      KEY,
      pino({ level: 'warn' }, logs),
      10_000,
    );
    await recorder.start(Date.now(), HOUR);
    after(async () => {
      await recorder.close();
      await shared.drop();
      await drop();
    });
    const logged = async () =>
      Number(
        (
          await sql<{ n: number | string }>`select count(*) as n from link_click_log`.execute(
            store.db,
          )
        ).rows[0].n,
      );
    const dayCount = async (linkId: string) =>
      (
        await store.db
          .selectFrom('link_click_days')
          .select(['day', 'clicks'])
          .where('link_id', '=', linkId)
          .execute()
      ).map((r) => ({ day: r.day, clicks: Number(r.clicks) }));
    const record = (
      n: number,
      at: number,
      linkId = 'lnk_1',
      ip = (i: number) => `10.0.${Math.floor(i / 250)}.${i % 250}`,
    ) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const id = newClickId(at);
        ids.push(id);
        recorder.record(id, 'prj_1', linkId, i % 2 ? 'android' : 'desktop', ip(i), UA, at, HOUR);
      }
      return ids;
    };

    test('a flushed batch is one log row: every click found by its id, counted per day', async () => {
      const at = Date.parse('2026-06-01T23:59:59.000Z');
      const ids = record(250, at, 'lnk_a');
      // Another link and another agent in the same batch.
      const other = newClickId(at);
      recorder.record(other, 'prj_2', 'lnk_a2', 'ios', '10.0.0.1', 'Other agent', at, HOUR);
      await recorder.flush();
      assert.equal(await logged(), 1);
      assert.deepEqual(await recorder.find(other), {
        id: other,
        projectId: 'prj_2',
        linkId: 'lnk_a2',
        platform: 'ios',
        fingerprint: clickFingerprint(KEY, '10.0.0.1', 'Other agent'),
        ms: at,
      });
      assert.deepEqual(await dayCount('lnk_a2'), [{ day: '2026-06-01', clicks: 1 }]);
      for (const [i, id] of ids.entries()) {
        assert.deepEqual(await recorder.find(id), {
          id,
          projectId: 'prj_1',
          linkId: 'lnk_a',
          platform: i % 2 ? 'android' : 'desktop',
          fingerprint: fp(`10.0.${Math.floor(i / 250)}.${i % 250}`),
          ms: at,
        });
      }
      assert.equal(await recorder.find(newClickId(at)), null, 'an id never issued');
      assert.equal(await recorder.find('clk_not-a-ulid'), null);
      assert.deepEqual(await dayCount('lnk_a'), [{ day: '2026-06-01', clicks: 250 }]);
      // The next day's clicks count on that day, and the same day adds up.
      record(3, at + 2000, 'lnk_a');
      record(2, at, 'lnk_a');
      await recorder.flush();
      assert.deepEqual(
        (await dayCount('lnk_a')).sort((x, y) => x.day.localeCompare(y.day)),
        [
          { day: '2026-06-01', clicks: 252 },
          { day: '2026-06-02', clicks: 3 },
        ],
      );
      // The writer thread started (it would otherwise have fallen back to writing in process).
      assert.doesNotMatch(logs.text, /click writer thread failed/);
    });

    test('mobile clicks are match candidates for their window; desktop clicks are not', async () => {
      const at = Date.parse('2026-06-02T10:00:00.000Z');
      const ids = record(4, at, 'lnk_b', (i) => `192.0.2.${i % 2}`);
      await recorder.flush();
      // Odd clicks are android, from 192.0.2.1.
      const found = await recorder.candidates('prj_1', 'android', fp('192.0.2.1'), at - HOUR);
      assert.deepEqual(new Set(found.map((f) => f.clickId)), new Set([ids[1], ids[3]]));
      assert.ok(found.every((f) => f.linkId === 'lnk_b' && f.ms === at));
      const one = fp('192.0.2.1');
      assert.deepEqual(
        await recorder.candidates('prj_1', 'android', fp('192.0.2.0'), at - HOUR),
        [],
      );
      assert.deepEqual(await recorder.candidates('prj_1', 'ios', one, at - HOUR), []);
      assert.deepEqual(await recorder.candidates('prj_2', 'android', one, at - HOUR), []);
      assert.deepEqual(await recorder.candidates('prj_1', 'android', one, at + 1), []);
      // The main thread's fingerprint of a visitor is the one the batch was written with.
      assert.equal(recorder.fingerprint('::ffff:192.0.2.1', UA), one);
      assert.equal((await recorder.find(ids[1]))?.fingerprint, one);
    });

    test('every click carries the fingerprint of its own address, whatever its shape', async () => {
      const at = Date.parse('2026-06-02T10:00:00.000Z');
      const addresses = [
        '10.0.0.1',
        '10.0.0.12',
        '10.0.0.2',
        '10.0.0.2',
        '10.0.0.3',
        '2001:db8::1',
        '::ffff:255.255.255.255',
        'ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255',
        // What a trusted proxy may pass on: longer than any address, or not Latin-1.
        `unknown, ${'x'.repeat(60)}`,
        'адрес',
        '',
        '10.0.0.1',
      ];
      const ids = addresses.map((ip) => {
        const id = newClickId(at);
        recorder.record(id, 'prj_1', 'lnk_ip', 'android', ip, UA, at, HOUR);
        return id;
      });
      await recorder.flush();
      for (const [i, ip] of addresses.entries()) {
        assert.equal((await recorder.find(ids[i]))?.fingerprint, fp(ip), ip);
        const found = await recorder.candidates('prj_1', 'android', fp(ip), at - HOUR);
        const expected = ids.filter((_, j) => addresses[j] === ip);
        assert.deepEqual(new Set(found.map((f) => f.clickId)), new Set(expected), ip);
      }
    });

    test('one visitor clicking again and again leaves the newest candidates of its key, and every click in the log', async () => {
      const at = Date.parse('2026-06-02T11:00:00.000Z');
      const ip = '198.51.100.7';
      const ids: string[] = [];
      // Clicks of one visitor in one batch, interleaved with another's, a millisecond apart.
      for (let i = 0; i < RECENT_MAX_PER_KEY + 30; i++) {
        const id = newClickId(at + i);
        ids.push(id);
        recorder.record(id, 'prj_1', 'lnk_hot', 'android', ip, UA, at + i, HOUR);
        if (i % 20 === 0) {
          const other = newClickId(at + i);
          recorder.record(other, 'prj_1', 'lnk_hot', 'android', '198.51.100.8', UA, at + i, HOUR);
        }
      }
      await recorder.flush();
      const found = await recorder.candidates('prj_1', 'android', fp(ip), at - HOUR);
      assert.deepEqual(
        found.map((f) => f.clickId),
        ids.slice(-RECENT_MAX_PER_KEY).reverse(),
        'the newest, newest first',
      );
      assert.ok(found.every((f, i) => f.linkId === 'lnk_hot' && f.ms === at + 79 - i));
      assert.equal(
        (await recorder.candidates('prj_1', 'android', fp('198.51.100.8'), at - HOUR)).length,
        4,
      );
      // The log keeps them all, with the one fingerprint each.
      for (const id of ids) assert.equal((await recorder.find(id))?.fingerprint, fp(ip));
      assert.deepEqual(await dayCount('lnk_hot'), [{ day: '2026-06-02', clicks: 84 }]);
    });

    test('a batch never spans more than the log allows, so a click is found from its id', async () => {
      const at = Date.parse('2026-06-03T10:00:00.000Z');
      const before = await logged();
      const early = record(1, at, 'lnk_c');
      const late = record(1, at + MAX_SPAN_MS + 1, 'lnk_c');
      await recorder.flush();
      assert.equal(await logged(), before + 2);
      assert.equal((await recorder.find(early[0]))?.ms, at);
      assert.equal((await recorder.find(late[0]))?.ms, at + MAX_SPAN_MS + 1);
      assert.equal(clickIdTime(late[0]), at + MAX_SPAN_MS + 1);
    });

    test('pruning drops log rows older than the cut, and keeps the day counts', async () => {
      const at = Date.parse('2026-06-04T10:00:00.000Z');
      const old = record(2, at, 'lnk_d');
      const recent = record(2, at + 2 * MAX_SPAN_MS, 'lnk_d');
      await recorder.flush();
      await recorder.prune(at + 1);
      assert.equal(await recorder.find(old[0]), null);
      assert.equal((await recorder.find(recent[0]))?.linkId, 'lnk_d');
      assert.deepEqual(await dayCount('lnk_d'), [{ day: '2026-06-04', clicks: 4 }]);
    });

    test('a store that refuses the write keeps the clicks and writes them later', async () => {
      const at = Date.parse('2026-06-05T10:00:00.000Z');
      await sql`alter table link_click_log rename to link_click_log_away`.execute(store.db);
      const ids = record(30, at, 'lnk_e');
      await recorder.flush();
      assert.match(logs.text, /link clicks not written; will retry/);
      await sql`alter table link_click_log_away rename to link_click_log`.execute(store.db);
      await recorder.flush();
      assert.equal((await recorder.find(ids[29]))?.linkId, 'lnk_e');
      assert.deepEqual(await dayCount('lnk_e'), [{ day: '2026-06-05', clicks: 30 }]);
    });

    test('closing while the store refuses writes drops the queue and leaves no retry behind', async () => {
      const shutdownLogs = new LogCapture();
      const closing = new ClickRecorder(
        store,
        shared.state,
        KEY,
        pino({ level: 'warn' }, shutdownLogs),
        10_000,
      );
      await sql`alter table link_click_log rename to link_click_log_away`.execute(store.db);
      try {
        for (let i = 0; i < 5; i++) {
          const now = Date.now();
          closing.record(newClickId(now), 'prj_1', 'lnk_1', 'ios', '192.0.2.9', UA, now, HOUR);
        }
        await closing.close();
        assert.match(shutdownLogs.text, /link clicks dropped at shutdown/);
        assert.match(shutdownLogs.text, /"dropped":5/);
      } finally {
        await sql`alter table link_click_log_away rename to link_click_log`.execute(store.db);
      }
    });
  });
}

test('a node that starts puts back the candidates still inside a window, the newest up to its bound', async () => {
  const { store, drop } = await freshStore('sqlite');
  const log = pino({ level: 'silent' });
  const at = Date.parse('2026-06-06T10:00:00.000Z');
  try {
    const before = new ClickRecorder(store, new MemoryState(), KEY, log);
    const recent = newClickId(at);
    const old = newClickId(at - 2 * HOUR);
    before.record(old, 'prj_1', 'lnk_1', 'ios', '192.0.2.7', UA, at - 2 * HOUR, HOUR);
    before.record(recent, 'prj_1', 'lnk_2', 'ios', '192.0.2.7', UA, at, HOUR);
    before.record(newClickId(at), 'prj_1', 'lnk_2', 'desktop', '192.0.2.7', UA, at, HOUR);
    await before.close();
    const state = new MemoryState();
    const after = new ClickRecorder(store, state, KEY, log);
    assert.equal(await after.start(at + 1000, HOUR), 1);
    assert.deepEqual(await after.candidates('prj_1', 'ios', fp('192.0.2.7'), at - 3 * HOUR), [
      { clickId: recent, linkId: 'lnk_2', ms: at },
    ]);
    await after.close();
    await state.close();

    // More clicks than a node keeps, over several log rows (batches a minute apart): the newest.
    const busy = new ClickRecorder(store, new MemoryState(), KEY, log);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const ms = at + (i + 1) * 2 * MAX_SPAN_MS;
      ids.push(newClickId(ms));
      busy.record(ids[i], 'prj_1', 'lnk_3', 'android', '192.0.2.8', UA, ms, 3 * HOUR);
    }
    await busy.close();
    const small = new MemoryState();
    const restarted = new ClickRecorder(store, small, KEY, log, 100, 2000, 4);
    assert.equal(await restarted.start(at + 20 * MAX_SPAN_MS, 3 * HOUR), 4);
    assert.deepEqual(
      (await restarted.candidates('prj_1', 'android', fp('192.0.2.8'), at)).map((c) => c.clickId),
      ids.slice(-4).reverse(),
    );
    await restarted.close();
    await small.close();
  } finally {
    await drop();
  }
});

test('a writer thread that dies leaves no candidate behind: they are put back, and clicks are written in process', async () => {
  const { store, drop } = await freshStore('sqlite');
  const shared = freshState('memory');
  const logs = new LogCapture();
  const recorder = new ClickRecorder(store, shared.state, KEY, pino({ level: 'warn' }, logs));
  const at = Date.now();
  await recorder.start(at, HOUR);
  try {
    const before = newClickId(at);
    recorder.record(before, 'prj_1', 'lnk_1', 'android', '192.0.2.30', UA, at, HOUR);
    await recorder.flush();
    // The thread ends while idle, as a crash would end it.
    const thread = (recorder as unknown as { writer: { worker: Worker } }).writer.worker;
    await thread.terminate();
    assert.match(logs.text, /click writer thread failed/);
    const after = newClickId(at + 1);
    recorder.record(after, 'prj_1', 'lnk_1', 'android', '192.0.2.30', UA, at + 1, HOUR);
    await recorder.flush();
    const found = await recorder.candidates('prj_1', 'android', fp('192.0.2.30'), at - HOUR);
    assert.deepEqual(
      found.map((f) => f.clickId),
      [after, before],
    );
    assert.equal((await recorder.find(after))?.linkId, 'lnk_1');
    assert.doesNotMatch(logs.text, /not put back|not kept/);
  } finally {
    await recorder.close();
    await shared.drop();
    await drop();
  }
});

test('nodes of a fleet answer for the clicks they served, their queued ones included', {
  skip: !(REDIS_URL && DIALECTS.includes('postgres')) && 'needs REDIS_URL and DATABASE_URL',
}, async () => {
  const { store, drop } = await freshStore('postgres');
  const a = freshState('redis');
  // Another node: its own connection to the same Redis, under the same prefix.
  const bState = new RedisState(REDIS_URL!, a.prefix);
  const logs = new LogCapture();
  const log = pino({ level: 'warn' }, logs);
  const nodeA = new ClickRecorder(store, a.state, KEY, log, 60_000);
  const nodeB = new ClickRecorder(store, bState, KEY, log, 60_000);
  try {
    await nodeA.start(Date.now(), HOUR);
    await nodeB.start(Date.now(), HOUR);
    const at = Date.now();
    const onA = newClickId(at);
    const onB = newClickId(at + 1);
    nodeA.record(onA, 'prj_1', 'lnk_a', 'android', '192.0.2.20', UA, at, HOUR);
    // Still queued on B (a minute's delay): B writes it before it answers.
    nodeB.record(onB, 'prj_1', 'lnk_b', 'android', '192.0.2.20', UA, at + 1, HOUR);
    await nodeA.flush();
    for (const node of [nodeA, nodeB]) {
      assert.deepEqual(await node.candidates('prj_1', 'android', fp('192.0.2.20'), at - HOUR), [
        { clickId: onB, linkId: 'lnk_b', ms: at + 1 },
        { clickId: onA, linkId: 'lnk_a', ms: at },
      ]);
    }
    // A node that stops no longer counts: the other asks only itself.
    await nodeB.close();
    assert.deepEqual(
      (await nodeA.candidates('prj_1', 'android', fp('192.0.2.20'), at - HOUR)).map(
        (c) => c.clickId,
      ),
      [onA],
    );
    assert.doesNotMatch(logs.text, /did not answer/, 'every node counted answered');
  } finally {
    await nodeA.close();
    await nodeB.close();
    await bState.close();
    await a.drop();
    await drop();
  }
});

test('findClickLine finds a click id only at the start of a line (rows of the first form)', () => {
  const a = newClickId(1);
  const b = newClickId(1);
  const text = `${a}\tprj\tlnk\tios\tfp\t1\n${b}\tprj\tlnk2\tandroid\tfp2\t1`;
  assert.equal(findClickLine(text, b)?.linkId, 'lnk2');
  assert.equal(findClickLine(text, a)?.linkId, 'lnk');
  assert.equal(findClickLine(`x${a}\tp\tl\tios\tf\t1`, a), null);
  assert.equal(parseClickLog(text).length, 2);
});

test('the compact log form: links named once, a click found by id, its time from the id', () => {
  const at = Date.parse('2026-11-27T03:00:00.000Z');
  const [a, b, c] = [newClickId(at), newClickId(at + 5), newClickId(at + 9)];
  const text = [
    '#2\tprj_1\tlnk_a\tprj_2\tlnk_b',
    `${a.slice(4)}\t1\ti\tfpA`,
    `${b.slice(4)}\t0\ta\tfpB`,
    `${c.slice(4)}\t0\td\tfpC`,
  ].join('\n');
  assert.deepEqual(findClickLine(text, b), {
    id: b,
    projectId: 'prj_1',
    linkId: 'lnk_a',
    platform: 'android',
    fingerprint: 'fpB',
    ms: at + 5,
  });
  assert.deepEqual(findClickLine(text, a), {
    id: a,
    projectId: 'prj_2',
    linkId: 'lnk_b',
    platform: 'ios',
    fingerprint: 'fpA',
    ms: at,
  });
  assert.equal(findClickLine(text, c)?.platform, 'desktop');
  assert.equal(findClickLine(text, newClickId(at)), null, 'an id the row does not hold');
  assert.equal(findClickLine(text, a.slice(4)), null, 'an id without its prefix');
  assert.deepEqual(
    parseClickLog(text).map((click) => [click.id, click.linkId, click.ms]),
    [
      [a, 'lnk_b', at],
      [b, 'lnk_a', at + 5],
      [c, 'lnk_a', at + 9],
    ],
  );
});

for (const dialect of DIALECTS)
  test(`the migration carries per-click rows over: log lines, claims and day counts (${dialect})`, async () => {
    const { store, drop } = await freshStore(dialect);
    try {
      // The store is migrated: rebuild the old table as it was and run the migration again.
      await sql`drop table link_click_log`.execute(store.db);
      await sql`drop table link_click_claims`.execute(store.db);
      await sql`drop table link_click_days`.execute(store.db);
      await sql`create table link_clicks (id text primary key, project_id text not null, link_id text not null, platform text not null, fingerprint text not null, created_at text not null, claimed_at text)`.execute(
        store.db,
      );
      const t = Date.parse('2026-05-01T10:00:00.000Z');
      const ids = [newClickId(t), newClickId(t + 1000), newClickId(t + 2 * MAX_SPAN_MS)];
      await store.db
        .insertInto('link_clicks')
        .values(
          ids.map((id, i) => ({
            id,
            project_id: 'prj_1',
            link_id: 'lnk_1',
            platform: 'android' as const,
            fingerprint: `fp${i}`,
            created_at: new Date(t + (i === 2 ? 2 * MAX_SPAN_MS : i * 1000)).toISOString(),
            claimed_at: i === 1 ? new Date(t + 5000).toISOString() : null,
          })),
        )
        .execute();
      await linksMigrations['0101_link_click_log'].up(store.db);
      const recorder = new ClickRecorder(store, new MemoryState(), KEY, pino({ level: 'silent' }));
      assert.equal((await recorder.find(ids[0]))?.fingerprint, 'fp0');
      assert.equal((await recorder.find(ids[2]))?.ms, t + 2 * MAX_SPAN_MS);
      const claims = await store.db.selectFrom('link_click_claims').selectAll().execute();
      assert.deepEqual(
        claims.map((c) => c.click_id),
        [ids[1]],
      );
      const days = await store.db.selectFrom('link_click_days').selectAll().execute();
      assert.deepEqual(
        days.map((d) => ({ ...d, clicks: Number(d.clicks) })),
        [{ link_id: 'lnk_1', day: '2026-05-01', clicks: 3 }],
      );
      const logRows = await store.db
        .selectFrom('link_click_log')
        .selectAll()
        .orderBy('seq')
        .execute();
      assert.equal(logRows.length, 2, 'clicks more than a minute apart are in separate rows');
      await recorder.close();
    } finally {
      await drop();
    }
  });

/**
 * A batch's columns for clicks `ids`, made a millisecond apart from `at`, each a match candidate
 * for an hour if mobile; the rest (links, platforms, visitors) as given.
 */
function batchOf(
  ids: string[],
  at: number,
  {
    ips,
    ...rest
  }: Omit<
    ClickColumns,
    'size' | 'firstMs' | 'lastMs' | 'ids' | 'times' | 'lifetimes' | 'ipText' | 'ipEnds'
  > & { ips: string[] },
): ClickColumns {
  const n = ids.length;
  const ipText = Buffer.from(ips.join(''));
  let end = 0;
  const ipEnds = Uint32Array.from(ips, (ip) => {
    end += Buffer.byteLength(ip);
    return end;
  });
  return {
    ipText,
    ipEnds,
    size: n,
    firstMs: at,
    lastMs: at + n - 1,
    ids: Buffer.from(ids.map((id) => id.slice(4)).join(''), 'latin1'),
    times: Float64Array.from(ids, (_, i) => at + i),
    lifetimes: new Float64Array(n).fill(HOUR),
    ...rest,
  };
}

/** A batch's candidate records as the node's ring reads them. */
function ringOf(candidates: Uint8Array) {
  const ring = new RecentRing(100_000);
  ring.remember(candidates, 0);
  return ring;
}

test('a batch hands the node only the newest candidates of a key', () => {
  const n = RECENT_MAX_PER_KEY * 3;
  const at = Date.parse('2026-06-02T12:00:00.000Z');
  const ids = Array.from({ length: n }, (_, i) => newClickId(at + i));
  const columns = batchOf(ids, at, {
    link: new Uint32Array(n),
    // Every third click is a desktop one, every fifth from another address.
    platform: Uint8Array.from(ids, (_, i) => (i % 3 === 0 ? 0 : 1)),
    ip: Uint32Array.from(ids, (_, i) => (i % 5 === 0 ? 1 : 0)),
    agent: new Uint32Array(n),
    projects: ['prj_1'],
    linkIds: ['lnk_1'],
    ips: ['192.0.2.1', '192.0.2.2'],
    agents: [UA],
  });
  const { rows, candidates } = batchOutput(columns, KEY, RECENT_MAX_PER_KEY);
  assert.equal(rows.split('\n').length, n + 1, 'every click is logged, after the links');
  assert.deepEqual(
    parseClickLog(rows),
    ids.map((id, i) => ({
      id,
      projectId: 'prj_1',
      linkId: 'lnk_1',
      platform: i % 3 === 0 ? 'desktop' : 'android',
      fingerprint: fp(i % 5 === 0 ? '192.0.2.2' : '192.0.2.1'),
      ms: at + i,
    })),
  );
  const ring = ringOf(candidates);
  const of = (ip: string) =>
    ring
      .recall(`links:fp:prj_1:android:${fp(ip)}`, 0, 1000)
      .map((r) => r.member.split(' ')[0])
      .reverse();
  const mobile = (ip: number) => ids.filter((_, i) => i % 3 !== 0 && (i % 5 === 0 ? 1 : 0) === ip);
  assert.ok(mobile(0).length > RECENT_MAX_PER_KEY);
  assert.deepEqual(of('192.0.2.1'), mobile(0).slice(-RECENT_MAX_PER_KEY));
  assert.deepEqual(of('192.0.2.2'), mobile(1));
  assert.equal(ring.size, RECENT_MAX_PER_KEY + mobile(1).length, 'no other candidate');
});

test('a batch keys candidates by project, platform and visitor, not by link', () => {
  // Clicks of one visitor on links of two projects, from Android and iOS, in turn.
  const links = [0, 1, 2, 0, 1, 2, 0, 1];
  const platforms = [1, 2, 1, 1, 2, 2, 2, 1];
  const n = links.length;
  const at = Date.parse('2026-06-02T12:00:00.000Z');
  const ids = Array.from({ length: n }, (_, i) => newClickId(at + i));
  const columns = batchOf(ids, at, {
    link: Uint32Array.from(links),
    platform: Uint8Array.from(platforms),
    ip: new Uint32Array(n),
    agent: new Uint32Array(n),
    // Links 0 and 1 are of one project.
    projects: ['prj_1', 'prj_1', 'prj_2'],
    linkIds: ['lnk_a', 'lnk_b', 'lnk_c'],
    ips: ['192.0.2.1'],
    agents: [UA],
  });
  // One member per key: each key's newest click only.
  const { candidates } = batchOutput(columns, KEY, 1);
  const ring = ringOf(candidates);
  assert.equal(ring.size, 4);
  const found = ['prj_1', 'prj_2'].flatMap((project) =>
    ['android', 'ios'].map((platform) => {
      const key = `links:fp:${project}:${platform}`;
      const members = ring.recall(`${key}:${fp('192.0.2.1')}`, 0, 10).map((r) => r.member);
      return [key, ...members];
    }),
  );
  const newest = (project: string, platform: number) => {
    let i = n - 1;
    while (columns.projects[links[i]] !== project || platforms[i] !== platform) i--;
    return `${ids[i]} ${columns.linkIds[links[i]]}`;
  };
  assert.deepEqual(found, [
    ['links:fp:prj_1:android', newest('prj_1', 1)],
    ['links:fp:prj_1:ios', newest('prj_1', 2)],
    ['links:fp:prj_2:android', newest('prj_2', 1)],
    ['links:fp:prj_2:ios', newest('prj_2', 2)],
  ]);
});

test('a batch of many IPs and many agents, or of many visitors across many projects, is written the same', () => {
  const at = Date.parse('2026-06-02T12:00:00.000Z');
  // 300 IPs × 300 agents: more pairs than the batch's table of visitors takes. Then 2000
  // visitors on links of 17 projects: more candidate keys than its table of counts takes. In
  // both, the first visitor then clicks again and again on the first link.
  const cases = [
    { visitors: 300, projects: 1, agents: 300 },
    { visitors: 2000, projects: 17, agents: 1 },
  ];
  const again = RECENT_MAX_PER_KEY + 20;
  for (const { visitors, projects, agents } of cases) {
    const n = visitors + again;
    const ids = Array.from({ length: n }, (_, i) => newClickId(at + i));
    const ips = Array.from({ length: visitors }, (_, i) => `198.51.${i >> 8}.${i & 255}`);
    const agentNames = Array.from({ length: agents }, (_, a) => `${UA} agent/${a}`);
    /** Each click's visitor: its own for the first ones, then the first visitor's. */
    const who = (i: number) => (i < visitors ? i : 0);
    const columns = batchOf(ids, at, {
      link: Uint32Array.from(ids, (_, i) => who(i) % projects),
      platform: Uint8Array.from(ids, (_, i) => (who(i) % 2 ? 1 : 2)),
      ip: Uint32Array.from(ids, (_, i) => who(i)),
      agent: Uint32Array.from(ids, (_, i) => who(i) % agents),
      projects: Array.from({ length: projects }, (_, p) => `prj_${p}`),
      linkIds: Array.from({ length: projects }, (_, p) => `lnk_${p}`),
      ips,
      agents: agentNames,
    });
    const { rows, candidates } = batchOutput(columns, KEY, RECENT_MAX_PER_KEY);
    const expected = (v: number) => clickFingerprint(KEY, ips[v], agentNames[v % agents]);
    assert.deepEqual(
      parseClickLog(rows).map((click) => [click.id, click.projectId, click.fingerprint]),
      ids.map((id, i) => [id, `prj_${who(i) % projects}`, expected(who(i))]),
    );
    const ring = ringOf(candidates);
    assert.equal(ring.size, visitors - 1 + RECENT_MAX_PER_KEY, 'a key keeps its newest');
    const membersOf = (v: number) =>
      ring
        .recall(`links:fp:prj_${v % projects}:${v % 2 ? 'android' : 'ios'}:${expected(v)}`, 0, 100)
        .map((r) => r.member);
    for (const v of [1, visitors - 1])
      assert.deepEqual(membersOf(v), [`${ids[v]} lnk_${v % projects}`]);
    assert.deepEqual(
      membersOf(0),
      ids
        .slice(-RECENT_MAX_PER_KEY)
        .reverse()
        .map((id) => `${id} lnk_0`),
    );
  }
});
