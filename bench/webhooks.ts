/**
 * Webhook delivery throughput: deliveries per second from the outbox to a local receiver that
 * answers 200 at once, against a baseline of plain keep-alive POSTs to the same receiver with
 * the same concurrency (what the network path alone allows). Cases: one node on SQLite, one
 * node on PostgreSQL, two nodes (child processes) on PostgreSQL. Each case is bounded to 20 s.
 */

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import pg from 'pg';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/config.ts';
import { fmt, ROOT } from './lib.ts';

const EVENTS = 4000;
const CONCURRENCY = 16;
const CASE_LIMIT_MS = 20_000;

class CountingReceiver {
  count = 0;
  private target = Number.POSITIVE_INFINITY;
  private done: (() => void) | null = null;
  readonly server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200).end();
      this.count++;
      if (this.count >= this.target) this.done?.();
    });
  });
  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  /** Resolves when `n` more requests arrived, or after the case limit. */
  expect(n: number) {
    this.target = this.count + n;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, CASE_LIMIT_MS);
      this.done = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
  close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}

const body = JSON.stringify({
  type: 'participant.joined',
  id: 'evt_bench',
  createdAt: new Date().toISOString(),
  projectId: 'prj_bench',
  data: { room: 'r', identity: 'alice' },
});

/** Plain keep-alive POSTs, CONCURRENCY at a time: the ceiling for the HTTP path alone. */
async function baseline(url: string, receiver: CountingReceiver) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const started = performance.now();
  const before = receiver.count;
  let sent = 0;
  const worker = async () => {
    while (sent < EVENTS && performance.now() - started < CASE_LIMIT_MS) {
      sent++;
      await new Promise<void>((resolve, reject) => {
        const req = http.request(
          url,
          { method: 'POST', agent, headers: { 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            res.on('end', resolve);
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  agent.destroy();
  return ((receiver.count - before) / (performance.now() - started)) * 1000;
}

interface CaseResult {
  enqueuePerSecond: number;
  deliveriesPerSecond: number;
  delivered: number;
}

/** One node in this process: emit EVENTS (50 rooms) and time until all are received. */
async function inProcess(env: Record<string, string>, receiver: CountingReceiver, url: string) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wh-'));
  const config = loadConfig({
    LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP: 'false',
    DATA_DIR: dataDir,
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    SVC_WEBHOOK_CONCURRENCY: String(CONCURRENCY),
    ...env,
  });
  const app = await buildApp({
    config,
    adminToken: 'bench',
    secret: 'bench',
    pgSchema: env.SVC_TEST_PG_SCHEMA,
  });
  await app.ready();
  try {
    const project = await app.svc.projects.create({ name: 'bench', webhooksEnabled: true });
    await app.svc.webhooks!.endpoints.create(project.id, { url });
    const before = receiver.count;
    const arrived = receiver.expect(EVENTS);
    const started = performance.now();
    for (let n = 0; n < EVENTS; n++) {
      await app.svc.events.emit({
        projectId: project.id,
        type: 'participant.joined',
        data: { n, room: `r${n % 50}` },
        orderingKey: `room:${project.id}:r${n % 50}`,
        occurredAtMs: Date.now(),
      });
    }
    const enqueued = performance.now();
    await arrived;
    const elapsed = performance.now() - started;
    const delivered = receiver.count - before;
    return {
      enqueuePerSecond: (EVENTS / (enqueued - started)) * 1000,
      deliveriesPerSecond: (delivered / elapsed) * 1000,
      delivered,
    } satisfies CaseResult;
  } finally {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function startNode(env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'packages/server/test/webhooks/node-process.ts'],
    {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'warn', SVC_BOOTSTRAP: 'false', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = readline.createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve) => {
    lines.on('line', (line) => {
      if (line.startsWith('listening ')) resolve(Number(line.split(' ')[1]));
    });
  });
  return {
    base: `http://127.0.0.1:${port}`,
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Two nodes as child processes on one PostgreSQL schema; each emits half the events. */
async function twoNodes(databaseUrl: string, receiver: CountingReceiver, url: string) {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const env = {
    DATABASE_URL: databaseUrl,
    SVC_TEST_PG_SCHEMA: schema,
    SVC_ADMIN_TOKEN: 'bench',
    SVC_SECRET: 'bench',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    SVC_WEBHOOK_CONCURRENCY: String(CONCURRENCY),
    SVC_WEBHOOK_POLL_MS: '200',
  };
  const a = await startNode(env);
  const b = await startNode(env);
  try {
    const call = async (base: string, p: string, payload: unknown) => {
      const res = await fetch(`${base}${p}`, {
        method: 'POST',
        headers: { authorization: 'Bearer bench', 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      return res.json() as Promise<any>;
    };
    const project = await call(a.base, '/v1/admin/projects', {
      name: 'bench',
      webhooksEnabled: true,
    });
    await call(a.base, `/v1/admin/projects/${project.id}/webhooks`, { url });
    const arrived = receiver.expect(EVENTS);
    const before = receiver.count;
    const started = performance.now();
    const emit = (base: string, from: number, prefix: string) =>
      fetch(`${base}/test/emit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ projectId: project.id, from, count: EVENTS / 2, rooms: 25, prefix }),
      });
    await Promise.all([emit(a.base, 0, 'a'), emit(b.base, EVENTS / 2, 'b')]);
    const enqueued = performance.now();
    await arrived;
    const elapsed = performance.now() - started;
    return {
      enqueuePerSecond: (EVENTS / (enqueued - started)) * 1000,
      deliveriesPerSecond: ((receiver.count - before) / elapsed) * 1000,
      delivered: receiver.count - before,
    } satisfies CaseResult;
  } finally {
    await a.stop();
    await b.stop();
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  }
}

export async function run(): Promise<string> {
  const receiver = new CountingReceiver();
  const url = await receiver.start();
  const rows: string[] = [];
  try {
    const base = await baseline(url, receiver);
    rows.push(`| baseline: plain keep-alive POSTs | — | ${fmt(base)} | 1.00 |`);
    const row = (name: string, r: CaseResult) =>
      rows.push(
        `| ${name} | ${fmt(r.enqueuePerSecond)} | ${fmt(r.deliveriesPerSecond)}${r.delivered < EVENTS ? ` (${r.delivered}/${EVENTS} in 20 s)` : ''} | ${fmt(r.deliveriesPerSecond / base, 2)} |`,
      );
    row('one node, SQLite', await inProcess({}, receiver, url));
    const databaseUrl = process.env.DATABASE_URL;
    if (databaseUrl) {
      const schema = `bench_${randomBytes(4).toString('hex')}`;
      try {
        row(
          'one node, PostgreSQL',
          await inProcess({ DATABASE_URL: databaseUrl, SVC_TEST_PG_SCHEMA: schema }, receiver, url),
        );
      } finally {
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
      }
      row('two nodes (processes), PostgreSQL', await twoNodes(databaseUrl, receiver, url));
    } else {
      rows.push('| PostgreSQL cases | skipped: DATABASE_URL not set | | |');
    }
  } finally {
    receiver.close();
  }
  return [
    '### Webhooks: deliveries per second to a local receiver answering 200',
    '',
    `${fmt(EVENTS)} events over 50 rooms (ordering keys), ${CONCURRENCY} deliveries in flight per node, signed, every attempt recorded; the baseline is plain POSTs with the same concurrency. "enqueue/s" is the emitter's rate of events written to the outbox (sequential awaits).`,
    '',
    '| case | enqueue/s | deliveries/s | vs baseline |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}
