import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import pg from 'pg';
import { AREA_MIGRATIONS } from '../../src/areas.ts';
import { openStore } from '../../src/storage/db.ts';
import { CORE_MIGRATIONS } from '../../src/storage/migrations.ts';
import { WalCheckpointer } from '../../src/storage/wal-checkpointer.ts';

const MIGRATIONS = { ...CORE_MIGRATIONS, ...AREA_MIGRATIONS };

import { DATABASE_URL, DIALECTS, dropSchemas, freshStore, uniqueName } from '../helpers.ts';

for (const dialect of DIALECTS) {
  describe(`storage (${dialect})`, () => {
    test('migrations create every table and are idempotent', async () => {
      const fresh = await freshStore(dialect);
      try {
        const tables = (await fresh.store.db.introspection.getTables()).map((t) => t.name);
        for (const t of ['projects', 'api_keys', 'signing_keys']) assert.ok(tables.includes(t), t);
        const applied = await fresh.store.db
          .selectFrom('kysely_migration' as any)
          .select('name' as any)
          .execute();
        assert.equal(applied.length, Object.keys(MIGRATIONS).length);
        // Opening the same database again applies nothing and fails nothing.
        if (dialect === 'postgres') {
          const again = await openStore({
            databaseUrl: DATABASE_URL,
            pgSchema: fresh.schema,
            migrations: AREA_MIGRATIONS,
          });
          await again.close();
        }
      } finally {
        await fresh.drop();
      }
    });

    test('a key row round-trips and the hash is unique', async () => {
      const fresh = await freshStore(dialect);
      try {
        const db = fresh.store.db;
        const now = new Date().toISOString();
        await db
          .insertInto('projects')
          .values({
            id: 'prj_1',
            name: 'p',
            products: '[]',
            webhooks_enabled: 0,
            settings: '{}',
            created_at: now,
            updated_at: now,
          })
          .execute();
        const row = {
          id: 'key_1',
          project_id: 'prj_1',
          type: 'client' as const,
          name: null,
          key_hash: 'h',
          prefix: 'svc_pk_abcd',
          last4: 'wxyz',
          scopes: '["links"]',
          allowed_origins: '[]',
          allowed_bundle_ids: '[]',
          allowed_ips: '[]',
          rate_limit_per_minute: 5,
          expires_at: null,
          revoked_at: null,
          replaced_by: null,
          created_at: now,
        };
        await db.insertInto('api_keys').values(row).execute();
        assert.deepEqual(
          await db.selectFrom('api_keys').selectAll().where('id', '=', 'key_1').executeTakeFirst(),
          row,
        );
        await assert.rejects(
          db
            .insertInto('api_keys')
            .values({ ...row, id: 'key_2' })
            .execute(),
        );
        // Deleting the project removes its keys.
        await db.deleteFrom('projects').where('id', '=', 'prj_1').execute();
        assert.equal((await db.selectFrom('api_keys').selectAll().execute()).length, 0);
      } finally {
        await fresh.drop();
      }
    });

    test('a statement marked `prepared` gives the same answers, prepared once per connection on PostgreSQL', async () => {
      const fresh = await freshStore(dialect);
      try {
        await fresh.store.db.transaction().execute(async (trx) => {
          // One connection: the second run reuses the statement its first run prepared.
          for (const n of [1, 2]) {
            const { rows } = await sql<{
              n: number;
            }>`/* prepared storage_test_statement */ select ${n} + 1 as n`.execute(trx);
            assert.equal(Number(rows[0].n), n + 1);
          }
          if (dialect === 'postgres') {
            const { rows } = await sql<{ name: string }>`
              select name from pg_prepared_statements`.execute(trx);
            assert.deepEqual(
              rows.map((r) => r.name),
              ['storage_test_statement'],
            );
          }
        });
      } finally {
        await fresh.drop();
      }
    });
  });
}

describe('storage (postgres): several nodes migrating at once', {
  skip: !DATABASE_URL && 'needs DATABASE_URL',
}, () => {
  const schema = uniqueName('t');
  after(() => dropSchemas(schema));
  test('five stores opened concurrently on an empty schema all succeed, migrating once', async () => {
    const stores = await Promise.all(
      Array.from({ length: 5 }, () =>
        openStore({ databaseUrl: DATABASE_URL, pgSchema: schema, migrations: AREA_MIGRATIONS }),
      ),
    );
    const rows = await stores[0].db
      .selectFrom('kysely_migration' as any)
      .select('name' as any)
      .execute();
    assert.equal(rows.length, Object.keys(MIGRATIONS).length);
    await Promise.all(stores.map((s) => s.close()));
  });
});

describe('storage (postgres): migrating while other schemas come and go', {
  skip: !DATABASE_URL && 'needs DATABASE_URL',
}, () => {
  const prefix = uniqueName('t');
  after(() => dropSchemas(prefix));

  test('introspection sees only the store’s own schema', async () => {
    const a = await openStore({
      databaseUrl: DATABASE_URL,
      pgSchema: `${prefix}_a`,
      migrations: AREA_MIGRATIONS,
    });
    const b = await openStore({
      databaseUrl: DATABASE_URL,
      pgSchema: `${prefix}_b`,
      migrations: AREA_MIGRATIONS,
    });
    try {
      const tables = await a.db.introspection.getTables({ withInternalKyselyTables: true });
      assert.ok(tables.some((t) => t.name === 'kysely_migration'));
      assert.deepEqual([...new Set(tables.map((t) => t.schema))], [`${prefix}_a`]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('stores open while other sessions create and drop schemas with tables', async () => {
    // What test files (and nodes of other installs sharing a database) do to each other.
    const churn = new pg.Client({ connectionString: DATABASE_URL });
    await churn.connect();
    let stop = false;
    let churned = 0;
    const churning = (async () => {
      while (!stop) {
        const name = `${prefix}_churn${churned++}`;
        await churn.query(`create schema ${name}`);
        await churn.query(`create table ${name}.x (id serial primary key, v text)`);
        await churn.query(`drop schema ${name} cascade`);
      }
    })();
    try {
      for (let i = 0; i < 8; i++) {
        const store = await openStore({
          databaseUrl: DATABASE_URL,
          pgSchema: `${prefix}_s${i}`,
          migrations: AREA_MIGRATIONS,
        });
        await store.close();
      }
    } finally {
      stop = true;
      await churning;
      await churn.end();
    }
    assert.ok(churned > 0);
  });
});

describe('SQLite WAL checkpoints', () => {
  test('a thread of its own copies the WAL into the database file; the write connection does not', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-wal-'));
    const file = path.join(dir, 'db.sqlite');
    const db = new SQLite(file);
    db.pragma('journal_mode = WAL');
    // The write connection never checkpoints by itself here.
    db.pragma('wal_autocheckpoint = 0');
    db.exec('create table t (id integer primary key, body text)');
    const checkpointer = new WalCheckpointer(file, 20);
    try {
      const insert = db.prepare('insert into t (body) values (?)');
      const body = 'x'.repeat(3000);
      for (let i = 0; i < 600; i++) insert.run(body);
      const fileBefore = fs.statSync(file).size;
      const deadline = Date.now() + 20_000;
      while (checkpointer.framesCheckpointed < 600 && Date.now() < deadline) {
        await delay(20);
      }
      assert.equal(checkpointer.lastError, null);
      assert.ok(
        checkpointer.framesCheckpointed >= 600,
        `${checkpointer.framesCheckpointed} frames`,
      );
      // The rows are in the database file itself now (about 600 pages of 4 KiB).
      assert.ok(fs.statSync(file).size >= fileBefore + 600 * 3000, 'the file grew');
      // The writer goes on while the thread runs.
      insert.run(body);
      assert.equal((db.prepare('select count(*) as n from t').get() as { n: number }).n, 601);
    } finally {
      await checkpointer.close();
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
