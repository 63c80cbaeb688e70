import type { Kysely, Migration } from 'kysely';

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
      // Written in batches, one row per redirect, so kept lean: the primary key is the only
      // index (ids sort by time), and no foreign keys (a link's clicks go when they are pruned).
      await db.schema
        .createTable('link_clicks')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('link_id', 'text', (c) => c.notNull())
        .addColumn('platform', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('link_click_days')
        .addColumn('link_id', 'text', (c) => c.notNull())
        .addColumn('day', 'text', (c) => c.notNull())
        .addColumn('clicks', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('link_click_days_pkey', ['link_id', 'day'])
        .execute();
      await db.schema
        .createTable('link_click_claims')
        .addColumn('click_id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) => c.notNull())
        .addColumn('link_id', 'text', (c) => c.notNull())
        .addColumn('claimed_at', 'text', (c) => c.notNull())
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
};
