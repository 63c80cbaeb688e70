import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { AREA_MIGRATIONS } from '../../src/areas.ts';
import { openStore } from '../../src/storage/db.ts';
import { CORE_MIGRATIONS } from '../../src/storage/migrations.ts';

const MIGRATIONS = { ...CORE_MIGRATIONS, ...AREA_MIGRATIONS };

import { DATABASE_URL, uniqueName } from '../helpers.ts';

const NEW = ['0301_webhooks_scale_out', '0303_webhooks_key_leases'];

/**
 * A database written by the previous release: every migration but the webhooks scale-out ones
 * (including other areas' later-numbered ones), with an endpoint, an event, a pending (leased)
 * and a succeeded delivery and an attempt in it.
 */
async function previousRelease(db: Kysely<any>, schema?: string) {
  const previous = Object.fromEntries(
    Object.entries(MIGRATIONS).filter(([name]) => !NEW.includes(name)),
  );
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => previous },
    migrationTableSchema: schema,
  });
  const { error } = await migrator.migrateToLatest();
  if (error) throw error;
  const now = new Date().toISOString();
  await db
    .insertInto('projects')
    .values({ id: 'prj_1', name: 'p', products: '[]', created_at: now, updated_at: now })
    .execute();
  await db
    .insertInto('webhook_endpoints')
    .values({
      id: 'whe_1',
      project_id: 'prj_1',
      url: 'https://example.com/hook',
      events: '[]',
      secret: 'whsec_x',
      created_at: now,
      updated_at: now,
    })
    .execute();
  for (const n of [1, 2]) {
    await db
      .insertInto('webhook_events')
      .values({
        id: `evt_${n}`,
        project_id: 'prj_1',
        type: 'room.started',
        ordering_key: 'room:a',
        payload: '{}',
        created_at: now,
      })
      .execute();
  }
  const seqs = await db.selectFrom('webhook_events').select(['seq', 'id']).orderBy('seq').execute();
  for (const [i, status] of (['succeeded', 'pending'] as const).entries()) {
    await db
      .insertInto('webhook_deliveries')
      .values({
        id: `whd_${i}`,
        event_seq: seqs[i].seq,
        event_id: seqs[i].id,
        event_type: 'room.started',
        endpoint_id: 'whe_1',
        project_id: 'prj_1',
        ordering_key: 'room:a',
        status,
        attempt_count: status === 'succeeded' ? 1 : 0,
        next_attempt_at: status === 'pending' ? now : null,
        // Per-row leases, dropped by the upgrade (the delivery is simply due again).
        lease_until: status === 'pending' ? now : null,
        lease_token: status === 'pending' ? 'node_old:1' : null,
        created_at: now,
        updated_at: now,
      })
      .execute();
  }
  await db
    .insertInto('webhook_attempts')
    .values({
      id: 'wha_1',
      delivery_id: 'whd_0',
      attempt: 1,
      attempted_at: now,
      status_code: 200,
      latency_ms: 3,
      node_id: 'node_old',
    })
    .execute();
  await db.destroy();
}

async function checkUpgraded(store: Awaited<ReturnType<typeof openStore>>) {
  const applied = await store.db
    .selectFrom('kysely_migration' as any)
    .select('name' as any)
    .execute();
  for (const name of NEW)
    assert.ok(
      applied.some((r: any) => r.name === name),
      `${name} ran`,
    );
  assert.equal(applied.length, Object.keys(MIGRATIONS).length);
  const endpoint = await store.db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .executeTakeFirstOrThrow();
  assert.equal(endpoint.failing_since, null);
  assert.equal(endpoint.url, 'https://example.com/hook');
  const deliveries = await store.db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .orderBy('id')
    .execute();
  assert.deepEqual(
    deliveries.map((d) => [d.id, d.status, d.success_attempted_at]),
    [
      ['whd_0', 'succeeded', null],
      ['whd_1', 'pending', null],
    ],
  );
  assert.ok(!('lease_until' in deliveries[1]), 'per-row leases are gone');
  assert.deepEqual(await store.db.selectFrom('webhook_key_leases').selectAll().execute(), []);
  const attempts = await store.db.selectFrom('webhook_attempts').select('id').execute();
  assert.deepEqual(attempts, [{ id: 'wha_1' }]);
}

describe('webhooks: the scale-out migrations upgrade a previous release database', () => {
  test('SQLite', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-wh-upgrade-'));
    const file = path.join(dir, 'svc.sqlite');
    try {
      const database = new SQLite(file);
      database.pragma('foreign_keys = ON');
      await previousRelease(new Kysely<any>({ dialect: new SqliteDialect({ database }) }));
      const store = await openStore({ sqliteFile: file, migrations: AREA_MIGRATIONS });
      try {
        await checkUpgraded(store);
      } finally {
        await store.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('PostgreSQL', { skip: !DATABASE_URL }, async () => {
    const schema = uniqueName('t');
    const pool = new pg.Pool({
      connectionString: DATABASE_URL,
      options: `-c search_path=${schema}`,
    });
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    try {
      await sql`create schema ${sql.id(schema)}`.execute(db);
      await previousRelease(db, schema);
      const store = await openStore({
        databaseUrl: DATABASE_URL,
        pgSchema: schema,
        migrations: AREA_MIGRATIONS,
      });
      try {
        await checkUpgraded(store);
      } finally {
        await store.close();
      }
    } finally {
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      await client.query(`drop schema if exists ${schema} cascade`);
      await client.end();
    }
  });
});
