import type { Migration } from 'kysely';

/** Webhooks migrations. Names start with 0300_ so they sort after earlier areas; append only. */
export const webhooksMigrations: Record<string, Migration> = {};
