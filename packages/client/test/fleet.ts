import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  DATABASE_URL,
  deleteRedisPrefix,
  REDIS_URL,
  type TestServer,
  uniqueName,
} from '../../server/test/helpers.ts';
import { freePort, TestClient } from './helpers.ts';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = fileURLToPath(new URL('../../server/src/main.ts', import.meta.url));
/**
 * Every node names one public address, as behind a load balancer; each test client plays the
 * balancer by sending its sockets to the node it was given (port 1 itself is never used).
 */
const PUBLIC_URL = 'http://127.0.0.1:1';

/** A fleet needs PostgreSQL and Redis (DATABASE_URL and REDIS_URL). */
export const FLEET_ENABLED = Boolean(DATABASE_URL && REDIS_URL);

export interface FleetNode {
  port: number;
  baseUrl: string;
  child: ChildProcess;
}

type ClientOptions = ConstructorParameters<typeof TestClient>[1];

/** Server processes (`packages/server/src/main.ts`) sharing a fresh database and Redis prefix. */
export interface Fleet {
  nodes: FleetNode[];
  /** A project made through the admin API, with a client and a server key. */
  project: TestServer['project'];
  /** A client of node `i`: REST and sockets go to that node. */
  clientOn(i: number, options?: ClientOptions): TestClient;
  /** Points a client's next sockets at node `i` (as a load balancer moving it would). */
  route(client: TestClient, i: number): void;
  stopNode(node: FleetNode): Promise<void>;
  /** Disconnects every client, stops the nodes, drops the database and the Redis keys. */
  close(): Promise<void>;
}

/** Starts one node and resolves once it listens. */
function startNode(env: Record<string, string>): Promise<FleetNode> {
  return freePort().then(
    (port) =>
      new Promise<FleetNode>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
          cwd: REPO_ROOT,
          env: { SVC_MEDIA: 'off', ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        const onData = (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('Svc is running')) {
            child.stdout!.off('data', onData);
            child.off('exit', onExit);
            resolve({ port, baseUrl: `http://127.0.0.1:${port}`, child });
          }
        };
        const onExit = (code: number | null) =>
          reject(new Error(`node exited (${code}) before listening: ${out}`));
        child.stdout!.on('data', onData);
        child.stderr!.on('data', (chunk: Buffer) => {
          out += chunk.toString();
        });
        child.once('exit', onExit);
      }),
  );
}

function stopNode(node: FleetNode): Promise<void> {
  return new Promise((resolve) => {
    if (node.child.exitCode !== null) return resolve();
    node.child.once('exit', () => resolve());
    node.child.kill('SIGTERM');
  });
}

/** Starts `count` nodes, one after the other (the first runs the migrations), with `env` added. */
export async function startFleet(env: Record<string, string>, count = 2): Promise<Fleet> {
  const database = uniqueName('svc_fleet');
  const redisPrefix = `${uniqueName('fleet')}:`;
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  const root = new pg.Client({ connectionString: DATABASE_URL });
  await root.connect();
  await root.query(`create database ${database}`);
  await root.end();
  const url = new URL(DATABASE_URL!);
  url.pathname = `/${database}`;
  const nodeEnv = {
    DATABASE_URL: url.toString(),
    REDIS_URL: REDIS_URL!,
    SVC_REDIS_PREFIX: redisPrefix,
    SVC_ADMIN_TOKEN: adminToken,
    SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
    SVC_BOOTSTRAP: 'false',
    SVC_PUBLIC_URL: PUBLIC_URL,
    LOG_LEVEL: 'warn',
    ...env,
  };
  const nodes: FleetNode[] = [];
  for (let i = 0; i < count; i++) nodes.push(await startNode(nodeEnv));

  async function admin(method: string, path: string, body?: unknown) {
    const res = await fetch(`${nodes[0]!.baseUrl}/v1/admin${path}`, {
      method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    assert.ok(res.ok, `${method} ${path} → ${res.status}`);
    return res.json() as Promise<any>;
  }
  const created = await admin('POST', '/projects', { name: 'fleet' });
  const clientKey = await admin('POST', `/projects/${created.id}/keys`, { type: 'client' });
  const serverKey = await admin('POST', `/projects/${created.id}/keys`, { type: 'server' });
  const project = {
    id: created.id,
    clientKey: clientKey.key,
    serverKey: serverKey.key,
    clientKeyId: clientKey.id,
    serverKeyId: serverKey.id,
  };
  const clients: TestClient[] = [];
  const route = (client: TestClient, i: number) => {
    client.rewriteUrl = (raw) => {
      const u = new URL(raw);
      u.port = String(nodes[i]!.port);
      return u.toString();
    };
  };
  return {
    nodes,
    project,
    clientOn(i, options) {
      const c = new TestClient({ baseUrl: nodes[i]!.baseUrl, project }, options);
      route(c, i);
      clients.push(c);
      return c;
    },
    route,
    stopNode,
    async close() {
      await Promise.all(clients.map((c) => c.client.disconnect()));
      await Promise.all(nodes.map(stopNode));
      const client = new pg.Client({ connectionString: DATABASE_URL });
      await client.connect();
      await client.query(`drop database if exists ${database} with (force)`);
      await client.end();
      await deleteRedisPrefix(redisPrefix);
    },
  };
}
