import { linksMigrations } from './links/migrations.ts';
import { realtimeMigrations } from './realtime/migrations.ts';
import type { Migrations } from './storage/migrations.ts';
import { verifyMigrations } from './verify/migrations.ts';
import { webhooksMigrations } from './webhooks/migrations.ts';

/**
 * Every product area's migrations, each numbered in its area's own range. Part of the
 * composition root (with app.ts and config.ts): storage runs them but never imports a product.
 */
export const AREA_MIGRATIONS: Migrations = {
  ...linksMigrations,
  ...verifyMigrations,
  ...webhooksMigrations,
  ...realtimeMigrations,
};
