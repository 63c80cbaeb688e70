import { type Kysely, type Migration, type MigrationProvider, sql } from 'kysely';

/**
 * Core migrations. Append only: a released migration never changes. Each product area keeps
 * its own in its folder's migrations.ts, numbered in its own range.
 */
export const CORE_MIGRATIONS: Record<string, Migration> = {
  '0001_projects_and_keys': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('projects')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('products', 'text', (c) => c.notNull())
        .addColumn('webhooks_enabled', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('settings', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createTable('api_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .addColumn('type', 'text', (c) => c.notNull())
        .addColumn('name', 'text')
        .addColumn('key_hash', 'text', (c) => c.notNull().unique())
        .addColumn('prefix', 'text', (c) => c.notNull())
        .addColumn('last4', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('allowed_origins', 'text', (c) => c.notNull())
        .addColumn('allowed_bundle_ids', 'text', (c) => c.notNull())
        .addColumn('allowed_ips', 'text', (c) => c.notNull())
        .addColumn('rate_limit_per_minute', 'integer')
        .addColumn('expires_at', 'text')
        .addColumn('revoked_at', 'text')
        .addColumn('replaced_by', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('api_keys_project_idx')
        .on('api_keys')
        .columns(['project_id', 'created_at'])
        .execute();
    },
  },
  '0002_signing_keys': {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable('signing_keys')
        .addColumn('kid', 'text', (c) => c.primaryKey())
        .addColumn('alg', 'text', (c) => c.notNull())
        .addColumn('public_jwk', 'text', (c) => c.notNull())
        .addColumn('private_jwk', 'text', (c) => c.notNull())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('retired_at', 'text')
        .execute();
    },
  },
  '0003_project_claims': {
    async up(db: Kysely<unknown>) {
      // Values a project holds alone (a product's settings declare them: Links' custom domains).
      await db.schema
        .createTable('project_claims')
        .addColumn('claim', 'text', (c) => c.primaryKey())
        .addColumn('project_id', 'text', (c) =>
          c.notNull().references('projects.id').onDelete('cascade'),
        )
        .execute();
      await db.schema
        .createIndex('project_claims_project_idx')
        .on('project_claims')
        .column('project_id')
        .execute();
    },
  },
};

/** Migrations by name: the core ones and those of the areas given. */
export type Migrations = Record<string, Migration>;

/** The migrations storage runs: the core ones plus the areas' (the app passes every area's). */
export function migrationProvider(areas: Migrations): MigrationProvider {
  const all = { ...CORE_MIGRATIONS, ...areas };
  return { getMigrations: async () => all };
}

export { sql };
