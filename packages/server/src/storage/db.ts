import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import {
  type DatabaseIntrospector,
  Kysely,
  Migrator,
  PostgresDialect,
  SqliteDialect,
  sql,
  type TableMetadata,
} from 'kysely';
import pg from 'pg';
import { migrationProvider } from './migrations.ts';
import type { Database } from './schema.ts';

export type DialectName = 'sqlite' | 'postgres';

/** The SQL store: a Kysely instance plus what differs between dialects. */
export interface Store {
  db: Kysely<Database>;
  dialect: DialectName;
  /** True when the store answers a trivial query. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

export interface StoreOptions {
  /** `postgres://…`; when absent, SQLite at `sqliteFile`. */
  databaseUrl?: string;
  /** The SQLite file (`:memory:` for a private in-memory database). */
  sqliteFile?: string;
  /** PostgreSQL schema to use (created if missing): lets test files share one database. */
  pgSchema?: string;
}

// Arbitrary constant: the advisory lock that serialises migrations across nodes.
const MIGRATION_LOCK_ID = 7_446_211_031;

/** Opens the store and brings its schema up to date. Safe when several nodes start at once. */
export async function openStore(options: StoreOptions): Promise<Store> {
  if (options.databaseUrl) return openPostgres(options.databaseUrl, options.pgSchema);
  return openSqlite(options.sqliteFile ?? ':memory:');
}

async function openSqlite(file: string): Promise<Store> {
  if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
  const database = new SQLite(file);
  database.pragma('journal_mode = WAL');
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  database.pragma('synchronous = NORMAL');
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
  await migrate(db);
  return {
    db,
    dialect: 'sqlite',
    ping: async () => {
      await sql`select 1`.execute(db);
      return true;
    },
    close: () => db.destroy(),
  };
}

async function openPostgres(url: string, schema?: string): Promise<Store> {
  if (schema && !/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) throw new Error('bad schema name');
  const poolOptions: pg.PoolConfig = { connectionString: url, max: 10 };
  if (schema) poolOptions.options = `-c search_path=${schema}`;
  // One session holds the advisory lock while the migrator runs on the pool.
  const lock = new pg.Client({ connectionString: url });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    const db = new Kysely<Database>({
      dialect: new CurrentSchemaPostgresDialect({ pool: new pg.Pool(poolOptions) }),
    });
    try {
      if (schema) await sql`create schema if not exists ${sql.id(schema)}`.execute(db);
      // Name the schema: Kysely otherwise takes migration tables found in any schema as ours.
      const current = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
      await migrate(db, current.rows[0]?.schema ?? schema ?? 'public');
    } catch (err) {
      await db.destroy();
      throw err;
    }
    return {
      db,
      dialect: 'postgres',
      ping: async () => {
        await sql`select 1`.execute(db);
        return true;
      },
      close: () => db.destroy(),
    };
  } finally {
    await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => {});
    await lock.end();
  }
}

/**
 * PostgreSQL as Kysely's, except that introspection sees only the session's schema. Kysely's own
 * introspector lists every table of every schema (its migrator uses it to find its tables); a
 * schema dropped by another session during that listing fails the query ("schema … does not
 * exist"), which broke migrations while other nodes or test files dropped theirs.
 */
class CurrentSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    const getTables = async (): Promise<TableMetadata[]> => {
      const { rows } = await sql<{ name: string; schema: string; kind: string }>`
        select c.relname as name, n.nspname as schema, c.relkind as kind
        from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'v', 'p')`.execute(db);
      return rows.map((t) => ({
        name: t.name,
        schema: t.schema,
        isView: t.kind === 'v',
        columns: [],
      }));
    };
    return {
      getSchemas: async () =>
        (
          await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(
            db,
          )
        ).rows,
      getTables,
      getMetadata: async () => ({ tables: await getTables() }),
    };
  }
}

async function migrate(db: Kysely<Database>, migrationTableSchema?: string) {
  const migrator = new Migrator({ db, provider: migrationProvider, migrationTableSchema });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new Error(`migration ${failed?.migrationName ?? ''} failed: ${String(error)}`, {
      cause: error,
    });
  }
}

/** Parses a JSON text column. */
export function json<T>(text: string): T {
  return JSON.parse(text) as T;
}
