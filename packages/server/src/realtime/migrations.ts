import type { Migration } from 'kysely';

/** Realtime migrations. Names start with 0400_ so they sort after earlier areas; append only. */
export const realtimeMigrations: Record<string, Migration> = {};
