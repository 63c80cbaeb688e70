import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { sql } from 'kysely';
import pino from 'pino';
import { newClickId } from '../../src/links/click-id.ts';
import { ClickRecorder } from '../../src/links/clicks.ts';
import { openStore, type Store } from '../../src/storage/db.ts';
import { DIALECTS, freshStore, LogCapture } from '../helpers.ts';

/** Each way clicks reach a store: the writer thread, in process, and PostgreSQL. */
const cases: { name: string; open(): Promise<{ store: Store; drop(): Promise<void> }> }[] = [
  { name: 'SQLite file (writer thread)', open: () => freshStore('sqlite') },
  {
    name: 'SQLite in memory (in process)',
    async open() {
      const store = await openStore({ sqliteFile: ':memory:' });
      return { store, drop: () => store.close() };
    },
  },
  ...(DIALECTS.includes('postgres')
    ? [{ name: 'PostgreSQL (unnest)', open: () => freshStore('postgres') }]
    : []),
];

for (const c of cases) {
  describe(`click recorder: ${c.name}`, async () => {
    const { store, drop } = await c.open();
    const logs = new LogCapture();
    const recorder = new ClickRecorder(store, pino({ level: 'warn' }, logs), 10_000);
    after(async () => {
      await recorder.close();
      await drop();
    });
    const count = async () =>
      Number(
        (await sql<{ n: number | string }>`select count(*) as n from link_clicks`.execute(store.db))
          .rows[0].n,
      );
    const record = (n: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i++) {
        const id = newClickId(Date.now());
        ids.push(id);
        recorder.record(
          id,
          'prj_1',
          'lnk_1',
          i % 2 ? 'android' : 'desktop',
          `fp${i}`,
          new Date().toISOString(),
        );
      }
      return ids;
    };

    test('queued clicks are in the store once flush resolves, every column intact', async () => {
      const ids = record(250);
      await recorder.flush();
      assert.equal(await count(), 250);
      const row = await store.db
        .selectFrom('link_clicks')
        .selectAll()
        .where('id', '=', ids[1])
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        { ...row, created_at: typeof row.created_at },
        {
          id: ids[1],
          project_id: 'prj_1',
          link_id: 'lnk_1',
          platform: 'android',
          fingerprint: 'fp1',
          created_at: 'string',
          claimed_at: null,
        },
      );
      // The writer thread started (it would otherwise have fallen back to writing in process).
      assert.doesNotMatch(logs.text, /click writer thread failed/);
    });

    test('a store that refuses the write keeps the clicks and writes them later', async () => {
      const before = await count();
      await sql`alter table link_clicks rename to link_clicks_away`.execute(store.db);
      record(30);
      await recorder.flush();
      assert.match(logs.text, /link clicks not written; will retry/);
      await sql`alter table link_clicks_away rename to link_clicks`.execute(store.db);
      await recorder.flush();
      assert.equal(await count(), before + 30);
    });

    test('closing while the store refuses writes drops the queue and leaves no retry behind', async () => {
      const shutdownLogs = new LogCapture();
      const closing = new ClickRecorder(store, pino({ level: 'warn' }, shutdownLogs), 10_000);
      await sql`alter table link_clicks rename to link_clicks_away`.execute(store.db);
      try {
        for (let i = 0; i < 5; i++) {
          closing.record(
            newClickId(Date.now()),
            'prj_1',
            'lnk_1',
            'ios',
            'fp',
            new Date().toISOString(),
          );
        }
        await closing.close();
        assert.match(shutdownLogs.text, /link clicks dropped at shutdown/);
        assert.match(shutdownLogs.text, /"dropped":5/);
      } finally {
        await sql`alter table link_clicks_away rename to link_clicks`.execute(store.db);
      }
    });
  });
}
