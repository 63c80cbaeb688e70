import fs from 'node:fs';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import {
  type DatabaseIntrospector,
  Kysely,
  Migrator,
  PostgresDialect,
  type SqliteDatabase,
  SqliteDialect,
  sql,
  type TableMetadata,
} from 'kysely';
import pg from 'pg';
import {
  type Dependency,
  DependencyHealth,
  DependencyUnavailableError,
  unavailableDependency,
} from '../unavailable.ts';
import { makePrivateDir, restrictFiles } from './files.ts';
import { type Migrations, migrationProvider } from './migrations.ts';
import type { Database } from './schema.ts';
import { BACKSTOP_AUTOCHECKPOINT_PAGES, WalCheckpointer } from './wal-checkpointer.ts';

export type DialectName = 'sqlite' | 'postgres';

/** The SQL store: a Kysely instance plus what differs between dialects. */
export interface Store {
  db: Kysely<Database>;
  dialect: DialectName;
  /**
   * Whether the store answers, as this node last saw it (PostgreSQL: set down by a query that
   * timed out or lost its connection, up by the next that succeeds; SQLite: always up).
   */
  health: DependencyHealth;
  /** True when the store answers a trivial query (within the store's deadline). */
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
  /**
   * PostgreSQL: the deadline of one query, and of getting a connection for it (ms; 5000).
   * A query past it fails with {@link DependencyUnavailableError} and its connection is closed.
   */
  timeoutMs?: number;
  /**
   * The product areas' migrations, run after the core ones (the app passes `AREA_MIGRATIONS`
   * from areas.ts; storage knows no product).
   */
  migrations: Migrations;
}

/** The PostgreSQL deadline when none is given (`SVC_STORE_TIMEOUT_MS`). */
export const DEFAULT_STORE_TIMEOUT_MS = 5000;

// Arbitrary constant: the advisory lock that serialises migrations across nodes.
const MIGRATION_LOCK_ID = 7_446_211_031;

/** Opens the store and brings its schema up to date. Safe when several nodes start at once. */
export async function openStore(options: StoreOptions): Promise<Store> {
  if (options.databaseUrl) {
    return openPostgres(
      options.databaseUrl,
      options.pgSchema,
      options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS,
      options.migrations,
    );
  }
  return openSqlite(options.sqliteFile ?? ':memory:', options.migrations);
}

async function openSqlite(file: string, migrations: Migrations): Promise<Store> {
  if (file !== ':memory:') {
    // The file holds sealed secrets and every project's data: owner-only, created so (SQLite
    // gives its -wal and -shm files the database file's mode), and tightened if it was not.
    makePrivateDir(path.dirname(file));
    fs.closeSync(fs.openSync(file, 'a', 0o600));
    restrictFiles(file, `${file}-wal`, `${file}-shm`, `${file}-journal`);
  }
  const database = new SQLite(file);
  database.pragma('journal_mode = WAL');
  if (file !== ':memory:') restrictFiles(`${file}-wal`, `${file}-shm`);
  database.pragma('busy_timeout = 5000');
  database.pragma('foreign_keys = ON');
  database.pragma('synchronous = NORMAL');
  const db = new Kysely<Database>({
    dialect: new SqliteDialect({ database: cachingStatements(database) }),
  });
  await migrate(db, migrations);
  // A file's WAL is checkpointed off the event loop (an in-memory database has no WAL).
  let checkpointer: WalCheckpointer | null = null;
  if (file !== ':memory:') {
    database.pragma(`wal_autocheckpoint = ${BACKSTOP_AUTOCHECKPOINT_PAGES}`);
    checkpointer = new WalCheckpointer(file);
  }
  return {
    db,
    dialect: 'sqlite',
    health: new DependencyHealth('store'),
    ping: async () => {
      await sql`select 1`.execute(db);
      return true;
    },
    close: async () => {
      await checkpointer?.close();
      await db.destroy();
    },
  };
}

/** SQLite statements kept prepared at most (the least recently used is dropped first). */
export const SQLITE_STATEMENT_CACHE = 256;

/**
 * The database as Kysely's SQLite driver sees it, with its statements prepared once per SQL text
 * instead of on every execution (preparing is a large share of a short statement's cost). The
 * driver runs one statement at a time (one connection behind a mutex), so a cached statement is
 * never in use twice at once. SQLite prepares a statement again by itself after a schema change.
 */
export function cachingStatements(database: SQLite.Database): SqliteDatabase {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => database.close(),
    prepare(text: string) {
      let statement = statements.get(text);
      if (statement) {
        statements.delete(text);
      } else {
        statement = database.prepare(text);
        if (statements.size >= SQLITE_STATEMENT_CACHE) {
          statements.delete(statements.keys().next().value as string);
        }
      }
      statements.set(text, statement);
      return statement;
    },
  };
}

async function openPostgres(
  url: string,
  schema: string | undefined,
  timeoutMs: number,
  migrations: Migrations,
) {
  if (schema && !/^[a-z_][a-z0-9_]*$/.test(schema)) throw new Error('bad schema name');
  const poolOptions: pg.PoolConfig = {
    connectionString: url,
    max: 10,
    connectionTimeoutMillis: timeoutMs,
    keepAlive: true,
  };
  if (schema) poolOptions.options = `-c search_path=${schema}`;
  const health = new DependencyHealth('store');
  // One session holds the advisory lock while the migrator runs on the pool.
  const lock = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  // A connection PostgreSQL ends is reported here; the awaited query below fails on its own.
  lock.on('error', () => {});
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    // Migrations may take longer than a request's deadline: it applies once they are done.
    const pool = new GuardedPool(new pg.Pool(poolOptions), health, 0);
    const db = new Kysely<Database>({ dialect: new CurrentSchemaPostgresDialect({ pool }) });
    try {
      if (schema) await sql`create schema if not exists ${sql.id(schema)}`.execute(db);
      // Name the schema: Kysely otherwise takes migration tables found in any schema as ours.
      const current = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
      await migrate(db, migrations, current.rows[0]?.schema ?? schema ?? 'public');
    } catch (err) {
      await db.destroy();
      throw err;
    }
    pool.queryTimeoutMs = timeoutMs;
    return {
      db,
      dialect: 'postgres',
      health,
      ping: async () => {
        await sql`select 1`.execute(db);
        return true;
      },
      close: () => db.destroy(),
    } satisfies Store;
  } finally {
    await lock.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => {});
    await lock.end();
  }
}

/**
 * Whether a PostgreSQL error means the store is out of reach rather than that a statement was
 * refused: a connection refused, reset, ended by the server (`pg_terminate_backend`, a restart:
 * 57P01–57P03, class 08) or past its deadline, too many connections (53300), a statement
 * cancelled (57014).
 */
export function isPostgresUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (unavailableDependency(err) === 'store') return true;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code.startsWith('08') || code.startsWith('57P') || code === '53300' || code === '57014')
      return true;
    if (/^E(CONNREFUSED|CONNRESET|PIPE|TIMEDOUT|HOSTUNREACH|NETUNREACH|AI_AGAIN)$/.test(code))
      return true;
  }
  return /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|Connection refused/i.test(
    err.message,
  );
}

/**
 * Whether a write broke a foreign key (PostgreSQL 23503, SQLite's FOREIGN KEY constraint): the
 * row it refers to is gone, typically deleted between the read that found it and this write.
 */
export function isForeignKeyViolation(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

function unavailable(dependency: Dependency, err: unknown) {
  if (err instanceof DependencyUnavailableError) return err;
  return new DependencyUnavailableError(
    dependency,
    err instanceof Error ? err.message : String(err),
    { cause: err },
  );
}

/**
 * A statement whose text starts with `/* prepared <name> *\/` is sent to PostgreSQL as a named
 * prepared statement: parsed once per connection instead of on every execution (pg keeps the
 * names per connection). For hot statements of fixed text whose result's columns cannot change
 * with the schema (no `*` in what they return); the name must be unique to the text. SQLite
 * prepares every statement once per text anyway (see {@link cachingStatements}).
 */
export const PREPARED = /^\/\* prepared (\w+) \*\//;

/** How often a node that saw PostgreSQL down asks it again. */
const PROBE_INTERVAL_MS = 500;

/**
 * The pool Kysely uses, with the store's outage policy around pg's: every query has a deadline
 * (`queryTimeoutMs`, besides the pool's connect deadline); a connection whose query timed out or
 * broke is closed rather than reused; failures that mean PostgreSQL is out of reach are thrown
 * as {@link DependencyUnavailableError} and set {@link DependencyHealth} down. While it is down,
 * every query is refused at once (no request waits on a store known to be down) and the pool
 * asks PostgreSQL every 500 ms, within the same deadlines; the first answer sets it up again.
 * Idle connections that PostgreSQL ends are dropped by the pool (an `'error'` it would otherwise
 * raise as fatal), and so are checked-out ones that end between queries.
 */
class GuardedPool {
  private probe: NodeJS.Timeout | null = null;
  private probing = false;
  private ended = false;

  constructor(
    private pool: pg.Pool,
    private health: DependencyHealth,
    /** 0: no deadline (while migrating). */
    public queryTimeoutMs: number,
  ) {
    // An idle connection PostgreSQL ended (pg_terminate_backend, a restart): the pool drops it
    // and the next query opens another. Without a listener, pg's pool would raise it as fatal.
    pool.on('error', () => {});
    health.on('down', () => {
      if (this.probe || this.ended) return;
      this.probe = setInterval(() => void this.tryProbe(), PROBE_INTERVAL_MS).unref();
    });
  }

  private async tryProbe() {
    if (this.health.up || this.probing || this.ended) return this.stopProbing();
    this.probing = true;
    try {
      const client = await this.pool.connect();
      let broken: Error | undefined;
      const onError = (err: Error) => {
        broken = err;
      };
      client.on('error', onError);
      try {
        const probe: pg.QueryConfig & { query_timeout?: number } = { text: 'select 1' };
        if (this.queryTimeoutMs > 0) probe.query_timeout = this.queryTimeoutMs;
        await client.query(probe);
        this.health.markUp();
        this.stopProbing();
      } catch (err) {
        broken ??= err as Error;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    } catch {
      // Still down: asked again at the next interval.
    } finally {
      this.probing = false;
    }
  }

  private stopProbing() {
    if (this.probe) clearInterval(this.probe);
    this.probe = null;
  }

  async connect() {
    if (!this.health.up) throw this.health.refusal();
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      if (!isPostgresUnavailable(err)) throw err;
      this.health.markDown(err);
      throw unavailable('store', err);
    }
    let broken: unknown = null;
    // A connection that ends while checked out but between queries (PostgreSQL terminated it,
    // a restart) is reported as an 'error' on the client: without a listener, a fatal one.
    const onError = (err: Error) => {
      broken = err;
    };
    client.on('error', onError);
    const timeoutMs = this.queryTimeoutMs;
    const guarded = {
      query: (text: unknown, values?: unknown) => {
        if (typeof text !== 'string') return client.query(text as pg.Submittable);
        const config: pg.QueryConfig & { query_timeout?: number } = {
          text,
          values: values as unknown[],
          name: PREPARED.exec(text)?.[1],
        };
        if (timeoutMs > 0) config.query_timeout = timeoutMs;
        return client.query(config).then(
          (result) => {
            this.health.markUp();
            return result;
          },
          (err: unknown) => {
            if (!isPostgresUnavailable(err)) throw err;
            broken = err;
            this.health.markDown(err);
            throw unavailable('store', err);
          },
        );
      },
      release: (destroy?: boolean) => {
        client.off('error', onError);
        // A broken or timed-out connection is closed (a timed-out query may still be running).
        client.release(destroy || broken ? (broken as Error) || true : undefined);
      },
    };
    return guarded as unknown as pg.PoolClient;
  }

  end() {
    this.ended = true;
    this.stopProbing();
    return this.pool.end();
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

async function migrate(db: Kysely<Database>, areas: Migrations, migrationTableSchema?: string) {
  // Each area numbers its migrations in its own range, so an area's new migration may sort
  // before another area's already applied one: run it anyway (areas' migrations are independent).
  const migrator = new Migrator({
    db,
    provider: migrationProvider(areas),
    migrationTableSchema,
    allowUnorderedMigrations: true,
  });
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
