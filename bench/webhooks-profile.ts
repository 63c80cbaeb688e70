/**
 * Where a webhook delivery's time goes (`npm run bench -- webhooks-profile`): fills the outbox
 * like bench/webhooks.ts, then drains it with one node in this process while every stage of the
 * worker is timed (wall time summed over calls; stages overlap, since attempts run concurrently)
 * and PostgreSQL's CPU time (all its processes, from /proc) and this process's are read before
 * and after. PostgreSQL's wait events are sampled from pg_stat_activity during the drain (lock
 * contention shows there as `Lock` waits).
 */

import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/areas.ts';
import { Outbox } from '../packages/server/src/webhooks/outbox.ts';
import { WebhookSender } from '../packages/server/src/webhooks/sender.ts';
import { DeliveryWorker } from '../packages/server/src/webhooks/worker.ts';
import { fmt } from './lib.ts';

const EVENTS = 3000;
const CONCURRENCY = 16;

interface Stage {
  calls: number;
  ms: number;
}
const stages = new Map<string, Stage>();

/** Wraps `proto[name]` (an async method) so its calls and wall time are summed under `label`. */
function time(proto: any, name: string, label = name) {
  const original = proto[name];
  if (typeof original !== 'function' || original.__timed) return;
  const wrapped = async function (this: unknown, ...args: unknown[]) {
    const started = performance.now();
    try {
      const result = await original.apply(this, args);
      if (label === 'claim' && Array.isArray(result)) {
        const c = stages.get('claim: chains') ?? { calls: 0, ms: 0 };
        c.calls += result.length;
        c.ms += result.reduce((n: number, chain: unknown[]) => n + chain.length, 0);
        stages.set('claim: chains', c);
        if (result.length === 0) {
          const e = stages.get('claim: empty') ?? { calls: 0, ms: 0 };
          e.calls++;
          stages.set('claim: empty', e);
        }
      }
      return result;
    } finally {
      const s = stages.get(label) ?? { calls: 0, ms: 0 };
      s.calls++;
      s.ms += performance.now() - started;
      stages.set(label, s);
    }
  };
  (wrapped as any).__timed = true;
  proto[name] = wrapped;
}

/** CPU seconds of every process whose command name is `postgres` (clock ticks of /proc/PID/stat). */
function postgresCpuSeconds(): number {
  let ticks = 0;
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (name !== 'postgres') continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // the process ended meanwhile
    }
  }
  return ticks / 100;
}

const ownCpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

async function receiver() {
  let count = 0;
  let done: (() => void) | null = null;
  let target = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200).end();
      count++;
      if (count >= target) done?.();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    expect(n: number) {
      target = count + n;
      return new Promise<void>((r) => {
        done = r;
      });
    },
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}

async function profile(name: string, env: Record<string, string>, url: string, rx: any) {
  const base = {
    LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP: 'false',
    SVC_MEDIA: 'off',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    SVC_WEBHOOK_CONCURRENCY: String(CONCURRENCY),
    ...env,
  };
  const filler = await buildApp({
    config: loadConfig({ ...base, SVC_WEBHOOK_WORKER: 'false' }),
    adminToken: 'bench',
    secret: 'bench',
    pgSchema: env.SVC_TEST_PG_SCHEMA,
  });
  await filler.ready();
  stages.clear();
  let pgBefore = postgresCpuSeconds();
  let cpuBefore = ownCpuSeconds();
  let started = performance.now();
  const project = await filler.svc.projects.create({ name: 'bench', webhooksEnabled: true });
  await filler.svc.webhooks!.endpoints.create(project.id, { url });
  for (let n = 0; n < EVENTS; n++) {
    await filler.svc.events.emit({
      projectId: project.id,
      type: 'participant.joined',
      data: { n, room: `r${n % 50}` },
      orderingKey: `room:${project.id}:r${n % 50}`,
      occurredAtMs: Date.now(),
    });
  }
  const enqueueMs = performance.now() - started;
  const enqueueLines = [
    `${name} enqueue: ${fmt((EVENTS / enqueueMs) * 1000)} events/s; per event: wall ${fmt((enqueueMs * 1000) / EVENTS)} µs, node CPU ${fmt(((ownCpuSeconds() - cpuBefore) * 1e6) / EVENTS)} µs, PostgreSQL CPU ${fmt(((postgresCpuSeconds() - pgBefore) * 1e6) / EVENTS)} µs`,
  ];
  for (const [label, s] of stages)
    enqueueLines.push(`  ${label}: ${s.calls} calls, ${fmt((s.ms * 1000) / s.calls)} µs each`);
  await filler.close();

  stages.clear();
  const arrived = rx.expect(EVENTS);
  const node = await buildApp({
    config: loadConfig(base),
    adminToken: 'bench',
    secret: 'bench',
    pgSchema: env.SVC_TEST_PG_SCHEMA,
  });
  const waits = new Map<string, number>();
  let sampling = true;
  const sampler = (async () => {
    if (!env.DATABASE_URL) return;
    const client = new pg.Client({ connectionString: env.DATABASE_URL });
    await client.connect();
    while (sampling) {
      const { rows } = await client.query(
        `select coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-') as w, count(*)::int as n
           from pg_stat_activity where backend_type = 'client backend' and state = 'active' and pid <> pg_backend_pid()
           group by 1`,
      );
      for (const r of rows) waits.set(r.w, (waits.get(r.w) ?? 0) + r.n);
      await new Promise((r) => setTimeout(r, 20));
    }
    await client.end();
  })();
  pgBefore = postgresCpuSeconds();
  cpuBefore = ownCpuSeconds();
  started = performance.now();
  await node.ready();
  await arrived;
  const drainMs = performance.now() - started;
  const pgCpu = postgresCpuSeconds() - pgBefore;
  const nodeCpu = ownCpuSeconds() - cpuBefore;
  sampling = false;
  await sampler;
  await node.close();
  const lines = [
    ...enqueueLines,
    `${name} drain: ${fmt((EVENTS / drainMs) * 1000)} deliveries/s (incl. start-up); per delivery: wall ${fmt((drainMs * 1000) / EVENTS)} µs, node CPU ${fmt((nodeCpu * 1e6) / EVENTS)} µs, PostgreSQL CPU ${fmt((pgCpu * 1e6) / EVENTS)} µs`,
  ];
  for (const [label, s] of stages) {
    lines.push(
      `  ${label}: ${s.calls} calls (${fmt(s.calls / (EVENTS / 1000), 1)} per 1,000 deliveries), ${fmt((s.ms * 1000) / s.calls)} µs each, ${fmt((s.ms * 1000) / EVENTS)} µs per delivery`,
    );
  }
  if (waits.size) {
    const total = [...waits.values()].reduce((a, b) => a + b, 0);
    lines.push(
      `  PostgreSQL active backends by wait (samples): ${[...waits]
        .sort((a, b) => b[1] - a[1])
        .map(([w, n]) => `${w} ${Math.round((n / total) * 100)}%`)
        .join(', ')}`,
    );
  }
  return lines;
}

export async function run(): Promise<string> {
  for (const name of ['claim', 'release', 'record', 'writeOutcomes', 'untilNextDueMs'])
    time(DeliveryWorker.prototype, name);
  time(WebhookSender.prototype, 'send');
  for (const name of ['write', 'writeMany', 'flush'])
    time(Outbox.prototype, name, `outbox.${name}`);
  const rx = await receiver();
  const lines: string[] = [];
  try {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-whp-'));
    try {
      lines.push(...(await profile('SQLite', { DATA_DIR: dir, DATABASE_URL: '' }, rx.url, rx)));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const databaseUrl = process.env.DATABASE_URL;
    if (databaseUrl) {
      const schema = `bench_${randomBytes(4).toString('hex')}`;
      try {
        lines.push(
          ...(await profile(
            'PostgreSQL',
            { DATABASE_URL: databaseUrl, SVC_TEST_PG_SCHEMA: schema },
            rx.url,
            rx,
          )),
        );
      } finally {
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
      }
    }
  } finally {
    rx.close();
  }
  return ['## Webhooks: where the time goes', '', '```', ...lines, '```'].join('\n');
}
