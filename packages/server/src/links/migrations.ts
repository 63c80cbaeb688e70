import type { Migration } from 'kysely';

/** Links migrations. Names start with 0100_ so they sort after earlier areas; append only. */
export const linksMigrations: Record<string, Migration> = {};
