import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { Redis } from 'ioredis';
import pg from 'pg';
import { buildApp } from '../src/app.ts';
import { AREA_MIGRATIONS, type Config, loadConfig } from '../src/areas.ts';
import { type Clock, systemClock } from '../src/clock.ts';
import { MemoryState, RedisState, type SharedState } from '../src/state/index.ts';
import { openStore, type Store } from '../src/storage/db.ts';

/** A store + shared-state combination the suites run on. */
export interface Backend {
  name: string;
  db: 'sqlite' | 'postgres';
  state: 'memory' | 'redis';
}

export const DATABASE_URL = process.env.DATABASE_URL;
export const REDIS_URL = process.env.REDIS_URL;

/**
 * SQLite + in-process always; PostgreSQL + Redis when DATABASE_URL and REDIS_URL are set (CI
 * sets both). Suites loop over these, like Kysely's `for (const dialect of DIALECTS)`.
 */
export const BACKENDS: Backend[] = [
  { name: 'sqlite+memory', db: 'sqlite', state: 'memory' },
  ...(DATABASE_URL && REDIS_URL
    ? [{ name: 'postgres+redis', db: 'postgres', state: 'redis' } as Backend]
    : []),
];

export const DIALECTS: Backend['db'][] = ['sqlite', ...(DATABASE_URL ? ['postgres' as const] : [])];

/**
 * Redis's deadline per call in test servers: a loaded CI machine (browsers, Janus, Maven on two
 * cores) can stall a healthy call past the 1 s default and turn it into a 503. The outage tests
 * set their own short deadlines.
 */
export const TEST_STATE_TIMEOUT_MS = 5000;

export function uniqueName(prefix: string) {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/**
 * A fresh store: a SQLite file in a new temporary folder (as the embedded default runs, WAL and
 * all), or a new PostgreSQL schema; either is removed on drop.
 */
export async function freshStore(
  db: Backend['db'],
): Promise<{ store: Store; schema?: string; file?: string; drop(): Promise<void> }> {
  if (db === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
    const file = path.join(dir, 'svc.sqlite');
    const store = await openStore({ sqliteFile: file, migrations: AREA_MIGRATIONS });
    return {
      store,
      file,
      async drop() {
        await store.close();
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const schema = uniqueName('t');
  const store = await openStore({
    databaseUrl: DATABASE_URL,
    pgSchema: schema,
    migrations: AREA_MIGRATIONS,
  });
  return {
    store,
    schema,
    async drop() {
      await store.close();
      await dropSchemas(schema);
    },
  };
}

/** Drops every PostgreSQL schema whose name starts with `prefix` (a test's own, by its name). */
export async function dropSchemas(prefix: string) {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(
      `select nspname as name from pg_namespace where starts_with(nspname, $1)`,
      [prefix],
    );
    for (const { name } of rows) await client.query(`drop schema if exists "${name}" cascade`);
  } finally {
    await client.end();
  }
}

/** A fresh shared state; Redis ones get their own key prefix, deleted on close. */
export function freshState(
  kind: Backend['state'],
  prefix = `${uniqueName('test')}:`,
): { state: SharedState; prefix: string; drop(): Promise<void> } {
  if (kind === 'memory') {
    const state = new MemoryState();
    return { state, prefix, drop: () => state.close() };
  }
  const state = new RedisState(REDIS_URL!, prefix, TEST_STATE_TIMEOUT_MS);
  return {
    state,
    prefix,
    async drop() {
      await state.close();
      await deleteRedisPrefix(prefix);
    },
  };
}

export async function deleteRedisPrefix(prefix: string) {
  const redis = new Redis(REDIS_URL!);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
    if (keys.length) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
  await redis.quit();
}

/** Collects log lines, so tests can check what was (not) logged. */
export class LogCapture extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    this.lines.push(chunk.toString());
    done();
  }
  get text() {
    return this.lines.join('');
  }
}

export interface TestServer {
  app: FastifyInstance;
  adminToken: string;
  config: Config;
  logs: LogCapture;
  /** The server's store, for tests that change rows behind its back (as another node would). */
  store: Store;
  /** The server's shared state. */
  state: SharedState;
  /** Calls the admin API; throws on a non-2xx answer. */
  admin<T = any>(method: InjectOptions['method'], url: string, body?: unknown): Promise<T>;
  /** A project with every product and its keys. */
  project: {
    id: string;
    clientKey: string;
    serverKey: string;
    clientKeyId: string;
    serverKeyId: string;
  };
  close(): Promise<void>;
}

export interface TestServerOptions {
  clock?: Clock;
  env?: Record<string, string>;
  /** Register extra routes before the app is ready (e.g. gate test routes). */
  routes?: (app: FastifyInstance) => void;
}

/** A full server on a fresh store and shared state, with one project and its two keys. */
export async function startTestServer(
  backend: Backend,
  options: TestServerOptions = {},
): Promise<TestServer> {
  const fresh = await freshStore(backend.db);
  const shared = freshState(backend.state);
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  // Media is off unless a test asks for it (a Janus per test server would cost every suite).
  const config = loadConfig({
    LOG_LEVEL: 'info',
    SVC_BOOTSTRAP: 'false',
    SVC_MEDIA: 'off',
    SVC_STATE_TIMEOUT_MS: String(TEST_STATE_TIMEOUT_MS),
    ...options.env,
  });
  const logs = new LogCapture();
  const app = await buildApp({
    config,
    adminToken,
    clock: options.clock ?? systemClock,
    secret: `secret_${randomBytes(16).toString('hex')}`,
    store: fresh.store,
    state: shared.state,
    logStream: logs,
  });
  options.routes?.(app);
  await app.ready();
  const admin = async (method: InjectOptions['method'], url: string, body?: unknown) => {
    const res = await app.inject({
      method,
      url: `/v1/admin${url}`,
      headers: { authorization: `Bearer ${adminToken}` },
      ...(body === undefined ? {} : { payload: body as object }),
    });
    if (res.statusCode >= 300)
      throw new Error(`admin ${method} ${url} → ${res.statusCode} ${res.body}`);
    return res.body ? res.json() : undefined;
  };
  const project = await admin('POST', '/projects', { name: 'test' });
  const client = await admin('POST', `/projects/${project.id}/keys`, { type: 'client' });
  const server = await admin('POST', `/projects/${project.id}/keys`, { type: 'server' });
  return {
    app,
    adminToken,
    config,
    logs,
    store: fresh.store,
    state: shared.state,
    admin,
    project: {
      id: project.id,
      clientKey: client.key,
      serverKey: server.key,
      clientKeyId: client.id,
      serverKeyId: server.id,
    },
    async close() {
      await app.close();
      await shared.drop();
      await fresh.drop();
    },
  };
}
