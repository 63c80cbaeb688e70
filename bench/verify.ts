/**
 * Verify: throughput and latency of `POST /auth/sms/send` (console sender, a fresh number per
 * request) and `POST /verify` (the right code for each of those verifications, so every answer
 * is an approval with a signed token), against a bare Fastify POST route measured in the same
 * run. The server runs in this process, on a SQLite file and in-process state (and on
 * PostgreSQL + Redis as well when DATABASE_URL and REDIS_URL are set).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import pg from 'pg';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/areas.ts';
import { fmt } from './lib.ts';

const CONNECTIONS = 20;
const SECONDS = 8;

interface Result {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  total: number;
}

function summarise(r: autocannon.Result): Result {
  return {
    requestsPerSecond: r.requests.average,
    p50Ms: r.latency.p50,
    p99Ms: r.latency.p99,
    non2xx: r.non2xx,
    total: r.requests.total,
  };
}

/** Collects the console sender's messages from the log: phone number → code. */
class CodeCollector extends Writable {
  codes = new Map<string, string>();
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    for (const line of chunk.toString().split('\n')) {
      if (!line.includes('console SMS sender')) continue;
      const { sms } = JSON.parse(line) as { sms: { to: string; body: string } };
      this.codes.set(sms.to, /\b(\d{6})\b/.exec(sms.body)![1]);
    }
    done();
  }
}

async function baseline(): Promise<Result> {
  const app = Fastify({ logger: false });
  app.post('/baseline', async (request) => ({ ok: true, echo: request.body }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  const opts = {
    url: `http://127.0.0.1:${port}/baseline`,
    method: 'POST' as const,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ phoneNumber: '+33612345678' }),
    connections: CONNECTIONS,
  };
  await autocannon({ ...opts, duration: 2 });
  const r = summarise(await autocannon({ ...opts, duration: SECONDS }));
  await app.close();
  return r;
}

async function verifyCases(env: Record<string, string>): Promise<{ send: Result; check: Result }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-verify-'));
  const collector = new CodeCollector();
  const config = loadConfig({
    LOG_LEVEL: 'info',
    SVC_BOOTSTRAP: 'false',
    DATA_DIR: dataDir,
    SVC_REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`,
    ...env,
  });
  // PostgreSQL: a schema of its own, dropped afterwards.
  const pgSchema = config.databaseUrl ? `bench_${randomBytes(4).toString('hex')}` : undefined;
  const app = await buildApp({
    config,
    adminToken: 'bench-admin',
    secret: 'bench',
    logStream: collector,
    pgSchema,
  });
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as { port: number };
    const project = await app.svc.projects.create({ name: 'bench' });
    await app.svc.projects.update(project.id, {
      settings: {
        verify: {
          limits: {
            sendsPerIpPerHour: 1_000_000,
            sendsPerNumberPerHour: 1_000_000,
            checksPerIpPerHour: 1_000_000,
          },
        },
      },
    });
    const key = await app.svc.keys.create(project.id, {
      type: 'server',
      rateLimitPerMinute: 1_000_000,
    });
    const headers = {
      authorization: `Bearer ${key.key}`,
      'x-project-id': project.id,
      'content-type': 'application/json',
    };
    // French mobile numbers (+33 6 …): valid, and distinct for every request.
    let next = 10_000_000 + Math.floor(Math.random() * 1_000_000) * 10;
    const sendOpts = {
      url: `http://127.0.0.1:${port}/v1/auth/sms/send`,
      method: 'POST' as const,
      headers,
      connections: CONNECTIONS,
      requests: [
        {
          setupRequest: (req: any) => {
            next += 1;
            return { ...req, body: JSON.stringify({ phoneNumber: `+336${next}` }) };
          },
        },
      ],
    };
    await autocannon({ ...sendOpts, duration: 2 });
    const send = summarise(await autocannon({ ...sendOpts, duration: SECONDS }));

    const pairs = [...collector.codes.entries()];
    let i = 0;
    const checkOpts = {
      url: `http://127.0.0.1:${port}/v1/verify`,
      method: 'POST' as const,
      headers,
      connections: CONNECTIONS,
      requests: [
        {
          setupRequest: (req: any) => {
            const [phoneNumber, code] = pairs[i++ % pairs.length];
            return { ...req, body: JSON.stringify({ phoneNumber, code }) };
          },
        },
      ],
    };
    const warm = Math.min(2000, Math.floor(pairs.length / 4));
    await autocannon({ ...checkOpts, amount: warm });
    // Each verification approves once: run over the remaining ones, at most SECONDS long.
    const check = summarise(
      await autocannon({ ...checkOpts, amount: pairs.length - warm, duration: SECONDS }),
    );
    return { send, check };
  } finally {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (pgSchema) {
      const client = new pg.Client({ connectionString: config.databaseUrl });
      await client.connect();
      await client.query(`drop schema if exists ${pgSchema} cascade`);
      await client.end();
    }
  }
}

export async function run(): Promise<string> {
  const base = await baseline();
  const backends: [string, Record<string, string>][] = [
    ['SQLite + in-process', { DATABASE_URL: '', REDIS_URL: '' }],
  ];
  if (process.env.DATABASE_URL && process.env.REDIS_URL) {
    backends.push([
      'PostgreSQL + Redis',
      {
        DATABASE_URL: process.env.DATABASE_URL,
        REDIS_URL: process.env.REDIS_URL,
      },
    ]);
  }
  const row = (name: string, r: Result) =>
    `| ${name} | ${fmt(r.requestsPerSecond)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${fmt(r.requestsPerSecond / base.requestsPerSecond, 2)} | ${r.non2xx} / ${r.total} |`;
  const rows = [row('baseline: bare Fastify POST', base)];
  for (const [name, env] of backends) {
    const { send, check } = await verifyCases(env);
    rows.push(
      row(`send (${name}, console sender)`, send),
      row(`verify → approved (${name})`, check),
    );
  }
  return [
    '## Verify: send and verify vs a bare Fastify route',
    '',
    `${CONNECTIONS} connections, ${SECONDS} s after a warm-up, autocannon and the server in one process. Send: a fresh number per request (HMAC, limits, log row, console sender). Verify: the right code for each verification sent (conditional UPDATE, ES256 token, log row); it stops early when the verifications run out.`,
    '',
    '| case | req/s | p50 ms | p99 ms | vs baseline | non-2xx / total |',
    '|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${await run()}\n`);
}
