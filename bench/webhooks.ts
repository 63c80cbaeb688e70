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

const EVENTS = 3000;
const CONCURRENCY = 16;
const CASE_LIMIT_MS = 20_000;

class CountingReceiver {
  count = 0;
  /** performance.now() of the first and latest request since `expect`. */
  firstAt = 0;
  lastAt = 0;
  private target = Number.POSITIVE_INFINITY;
  private done: (() => void) | null = null;
  readonly server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200).end();
      this.count++;
      this.lastAt = performance.now();
      if (this.firstAt === 0) this.firstAt = this.lastAt;
      if (this.count >= this.target) this.done?.();
    });
  });
  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hook`;
  }
  /** Resolves when `n` more requests arrived, or CASE_LIMIT_MS after the first of them. */
  expect(n: number) {
    this.target = this.count + n;
    this.firstAt = 0;
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const check = setInterval(() => {
        if (this.firstAt && !timer) timer = setTimeout(finish, CASE_LIMIT_MS);
      }, 50);
      const finish = () => {
        clearInterval(check);
        clearTimeout(timer);
        resolve();
      };
      this.done = finish;
    });
  }
  /** Requests per second between the first and the latest request since `expect`. */
  rate(delivered: number) {
    return delivered > 1 ? ((delivered - 1) / (this.lastAt - this.firstAt)) * 1000 : 0;
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

async function dropSchema(databaseUrl: string, schema: string) {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(`drop schema if exists ${schema} cascade`);
  await client.end();
}

/**
 * Fills the outbox with EVENTS events (50 rooms) through svc.events on a node whose worker is
 * off, so the drain that follows measures delivery alone. Returns the project and enqueue rate.
 */
async function fill(env: Record<string, string>, url: string) {
  const config = loadConfig({
    LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP: 'false',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    ...env,
    SVC_WEBHOOK_WORKER: 'false',
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
    return (EVENTS / (performance.now() - started)) * 1000;
  } finally {
    await app.close();
  }
}

/** One node in this process drains the outbox. */
async function drainInProcess(env: Record<string, string>, receiver: CountingReceiver) {
  const before = receiver.count;
  const arrived = receiver.expect(EVENTS);
  const config = loadConfig({
    LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP: 'false',
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
    await arrived;
    const delivered = receiver.count - before;
    return { delivered, perSecond: receiver.rate(delivered) };
  } finally {
    await app.close();
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
  await new Promise<void>((resolve) => {
    lines.on('line', (line) => {
      if (line.startsWith('listening ')) resolve();
    });
  });
  return {
    async stop() {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function oneNode(env: Record<string, string>, receiver: CountingReceiver, url: string) {
  const enqueuePerSecond = await fill(env, url);
  const { delivered, perSecond } = await drainInProcess(env, receiver);
  return { enqueuePerSecond, deliveriesPerSecond: perSecond, delivered } satisfies CaseResult;
}

/** Two nodes (child processes, workers on) drain one PostgreSQL outbox. */
async function twoNodes(databaseUrl: string, receiver: CountingReceiver, url: string) {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const env = {
    DATABASE_URL: databaseUrl,
    SVC_TEST_PG_SCHEMA: schema,
    SVC_ADMIN_TOKEN: 'bench',
    SVC_SECRET: 'bench',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    SVC_WEBHOOK_CONCURRENCY: String(CONCURRENCY),
  };
  try {
    const enqueuePerSecond = await fill(env, url);
    const before = receiver.count;
    const arrived = receiver.expect(EVENTS);
    const nodes = await Promise.all([startNode(env), startNode(env)]);
    try {
      await arrived;
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
    const delivered = receiver.count - before;
    // Timed from the first delivery, so the nodes' start-up is not counted.
    return {
      enqueuePerSecond,
      deliveriesPerSecond: receiver.rate(delivered),
      delivered,
    } satisfies CaseResult;
  } finally {
    await dropSchema(databaseUrl, schema);
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
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-wh-'));
    try {
      row(
        'one node, SQLite',
        await oneNode({ DATA_DIR: dataDir, DATABASE_URL: '' }, receiver, url),
      );
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
    const databaseUrl = process.env.DATABASE_URL;
    if (databaseUrl) {
      const schema = `bench_${randomBytes(4).toString('hex')}`;
      try {
        row(
          'one node, PostgreSQL',
          await oneNode({ DATABASE_URL: databaseUrl, SVC_TEST_PG_SCHEMA: schema }, receiver, url),
        );
      } finally {
        await dropSchema(databaseUrl, schema);
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
    `The outbox is first filled with ${fmt(EVENTS)} events over 50 rooms (ordering keys) by a node whose worker is off ("enqueue/s": sequential \`svc.events.emit\` calls, each committed); then worker node(s) drain it: ${CONCURRENCY} attempts in flight per node, each signed and recorded. Baseline: plain keep-alive POSTs of the same body with the same concurrency. Each drain is timed from its first to its last delivery (start-up excluded) and cut at 20 s.`,
    '',
    '| case | enqueue/s | deliveries/s | vs baseline |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}
