import type { Migration } from 'kysely';

/** Verify migrations. Names start with 0200_ so they sort after earlier areas; append only. */
export const verifyMigrations: Record<string, Migration> = {};
