import { type Kysely, type Migration, PostgresAdapter, sql } from 'kysely';
import { clickLine, MAX_SPAN_MS } from './click-log.ts';
import type { LinksTables } from './tables.ts';

/** The partial-index condition of 0100's fingerprint index (the table is gone since 0101). */
const MOBILE_CLICK = sql<boolean>`platform in ('android', 'ios')`;

/** Links migrations. Names start with 0100_ so they sort after earlier areas; append only. */
export const linksMigrations: Record<string, Migration> = {
  '0100_links': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('links')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('domain', 'text', (c) => c.notNull())
        .addColumn('slug', 'text', (c) => c.notNull())
        .addColumn('url', 'text', (c) => c.notNull())
        .addColumn('android', 'text')
        .addColumn('ios', 'text')
        .addColumn('params', 'text', (c) => c.notNull())
        .addColumn('utm', 'text')
        .addColumn('social', 'text')
        .addColumn('expires_at', 'text')
        .addColumn('external_id', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .addUniqueConstraint('links_domain_slug_key', ['domain', 'slug'])
        .addUniqueConstraint('links_project_external_id_key', ['project_id', 'external_id'])
        .execute();
      await db.schema
        .createIndex('links_project_created_idx')
        .on('links')
        .columns(['project_id', 'created_at'])
        .execute();
      // Written once per redirect, so kept lean: no foreign keys (the service deletes a link's
      // clicks with it, and a deleted project's), and the fingerprint index only covers the
      // mobile clicks that deferred matching can use.
      await db.schema
        .createTable('link_clicks')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('link_id', 'text', (c) => c.notNull())
        .addColumn('platform', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('claimed_at', 'text')
        .execute();
      await db.schema
        .createIndex('link_clicks_fingerprint_idx')
        .on('link_clicks')
        .columns(['fingerprint', 'created_at'])
        .where(MOBILE_CLICK)
        .execute();
      await db.schema
        .createIndex('link_clicks_link_idx')
        .on('link_clicks')
        .columns(['link_id', 'created_at'])
        .execute();
      await db.schema
        .createTable('link_events')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('link_id', 'text', (c) => c.notNull().references('links.id').onDelete('cascade'))
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('name', 'text')
        .addColumn('properties', 'text')
        .addColumn('click_id', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('link_events_link_idx')
        .on('link_events')
        .columns(['link_id', 'created_at'])
        .execute();
      await db.schema
        .createTable('link_devices')
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('device_hash', 'text', (c) => c.notNull())
        .addColumn('first_seen_at', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('link_devices_pkey', ['project_id', 'device_hash'])
        .execute();
    },
  },
  '0101_link_click_log': {
    // A row per redirect, with three indexes, cost more than the redirect itself: clicks become
    // a log of batches, daily counts, and claims (match candidates: see candidates.ts).
    async up(raw: Kysely<unknown>) {
      const db = raw as Kysely<LinksTables>;
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      await db.schema
        .createTable('link_click_log')
        .addColumn('seq', postgres ? 'bigserial' : 'integer', (c) =>
          postgres ? c.primaryKey() : c.primaryKey().autoIncrement(),
        )
        .addColumn('first_ms', 'bigint', (c) => c.notNull())
        .addColumn('last_ms', 'bigint', (c) => c.notNull())
        .addColumn('clicks', 'text', (c) => c.notNull())
        .execute();
      // Written once and read rarely: PostgreSQL stores it as is rather than compressing it.
      if (postgres)
        await sql`alter table link_click_log alter column clicks set storage external`.execute(db);
      await db.schema
        .createIndex('link_click_log_first_idx')
        .on('link_click_log')
        .column('first_ms')
        .execute();
      await db.schema
        .createIndex('link_click_log_last_idx')
        .on('link_click_log')
        .column('last_ms')
        .execute();
      await db.schema
        .createTable('link_click_claims')
        .addColumn('click_id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('link_id', 'text', (c) => c.notNull())
        .addColumn('claimed_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('link_click_days')
        .addColumn('link_id', 'text', (c) => c.notNull())
        .addColumn('day', 'text', (c) => c.notNull())
        .addColumn('clicks', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('link_click_days_pkey', ['link_id', 'day'])
        .execute();

      // The clicks recorded so far, carried over in id (= time) order.
      let after = '';
      for (;;) {
        const rows = await db
          .selectFrom('link_clicks')
          .selectAll()
          .where('id', '>', after)
          .orderBy('id')
          .limit(5000)
          .execute();
        if (rows.length === 0) break;
        after = rows[rows.length - 1].id;
        let lines: string[] = [];
        let first = 0;
        let last = 0;
        const flush = async () => {
          if (lines.length === 0) return;
          await db
            .insertInto('link_click_log')
            .values({ first_ms: first, last_ms: last, clicks: lines.join('\n') })
            .execute();
          lines = [];
        };
        for (const row of rows) {
          const ms = Date.parse(row.created_at);
          if (lines.length > 0 && (ms - first > MAX_SPAN_MS || ms < first)) await flush();
          if (lines.length === 0) first = ms;
          last = Math.max(ms, lines.length === 0 ? ms : last);
          lines.push(
            clickLine(row.id, row.project_id, row.link_id, row.platform, row.fingerprint, ms),
          );
          if (row.claimed_at !== null) {
            await db
              .insertInto('link_click_claims')
              .values({
                click_id: row.id,
                project_id: row.project_id,
                link_id: row.link_id,
                claimed_at: row.claimed_at,
              })
              .execute();
          }
        }
        await flush();
      }
      const day = sql<string>`substr(created_at, 1, 10)`;
      await db
        .insertInto('link_click_days')
        .columns(['link_id', 'day', 'clicks'])
        .expression(
          db
            .selectFrom('link_clicks')
            .select(['link_id', day.as('day'), (eb) => eb.fn.countAll<number>().as('clicks')])
            .groupBy(['link_id', day]),
        )
        .execute();
      await db.schema.dropTable('link_clicks').execute();
    },
  },
};
