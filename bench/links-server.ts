/**
 * The servers the links bench drives. `LINKS_BENCH_MODE=svc`: a full Svc app (SQLite in a
 * temporary DATA_DIR, or PostgreSQL/Redis when their URLs are set) with one project, its app
 * settings and one link. `LINKS_BENCH_MODE=bare`: a bare Fastify app whose one route answers
 * 302 to a fixed URL, the baseline. Prints `{"port", "path"}` once listening.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import { Redis } from 'ioredis';
import pg from 'pg';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/areas.ts';
import { cpuMicros } from './lib.ts';

const mode = process.env.LINKS_BENCH_MODE ?? 'svc';
let close: () => Promise<unknown>;
let port: number;
let route: string;

if (mode === 'bare') {
  const app = Fastify({ logger: false });
  app.get('/__bench/cpu', async () => cpuMicros());
  app.get('/l/:slug', async (_request, reply) =>
    reply.code(302).header('location', 'https://shop.example.com/p/42?utm_source=bench').send(),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
  route = '/l/bench42';
  close = () => app.close();
} else {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-links-bench-'));
  const config = loadConfig({
    ...process.env,
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    SVC_BOOTSTRAP: 'false',
    // No media engine: the servers of a run would each start a Janus on the same ports, and
    // their restarts would take CPU from the redirects being measured.
    SVC_MEDIA: 'off',
    SVC_PUBLIC_URL: 'http://127.0.0.1:8080',
    SVC_REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`,
  });
  // A schema of its own on PostgreSQL, dropped at the end, so runs never see each other's links.
  const pgSchema = config.databaseUrl ? `bench_${randomBytes(6).toString('hex')}` : undefined;
  const app = await buildApp({ config, adminToken: 'bench-admin', secret: 'bench', pgSchema });
  app.get('/__bench/cpu', { schema: { hide: true } }, async () => cpuMicros());
  // The baseline's handler inside the full app: separates the platform's per-request cost
  // (hooks, request ids, metrics) from the redirect's own.
  app.get('/__bench/bare/:slug', { schema: { hide: true } }, async (_request, reply) =>
    reply.code(302).header('location', 'https://shop.example.com/p/42?utm_source=bench').send(),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  const project = await app.svc.projects.create({ name: 'bench' });
  await app.svc.projects.update(project.id, {
    settings: {
      links: {
        android: [{ packageName: 'com.example.shop', sha256CertFingerprints: ['AB'.repeat(32)] }],
        ios: [{ teamId: 'ABCDE12345', bundleId: 'com.example.shop', appStoreId: '1234567890' }],
      },
    },
  });
  const key = await app.svc.keys.create(project.id, { type: 'server' });
  const created = await app.inject({
    method: 'POST',
    url: '/v1/sdk/links',
    headers: { authorization: `Bearer ${key.key}`, 'x-project-id': project.id },
    payload: { url: 'https://shop.example.com/p/42', slug: 'bench42', utm: { source: 'bench' } },
  });
  if (created.statusCode !== 201) throw new Error(`link not created: ${created.body}`);
  port = (app.server.address() as { port: number }).port;
  route = '/l/bench42';
  close = async () => {
    await app.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
    if (config.redisUrl) {
      // Many visitors leave many candidates behind: delete what this run wrote.
      const redis = new Redis(config.redisUrl);
      const stream = redis.scanStream({ match: `${config.redisPrefix}*`, count: 1000 });
      for await (const keys of stream) if (keys.length > 0) await redis.unlink(...keys);
      await redis.quit();
    }
    if (pgSchema) {
      const client = new pg.Client({ connectionString: config.databaseUrl });
      await client.connect();
      await client.query(`drop schema if exists ${pgSchema} cascade`);
      await client.end();
    }
  };
}

process.stdout.write(`${JSON.stringify({ port, path: route })}\n`);
process.on('SIGTERM', async () => {
  await close();
  process.exit(0);
});
