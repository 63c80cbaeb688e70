// One Svc node for multi-node tests: spawned with `node --import tsx` from the repo root.
// Env: DATABASE_URL, REDIS_URL, SVC_REDIS_PREFIX, TEST_PG_SCHEMA, TEST_ADMIN_TOKEN (+ SVC_*).
// Prints `READY <port>` once listening; closes cleanly on SIGTERM.
import type { AddressInfo } from 'node:net';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/areas.ts';

const config = loadConfig({ SVC_MEDIA: 'off', ...process.env });
const app = await buildApp({
  config,
  adminToken: process.env.TEST_ADMIN_TOKEN!,
  pgSchema: process.env.TEST_PG_SCHEMA,
});
await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`READY ${(app.server.address() as AddressInfo).port}\n`);
process.on('SIGTERM', () => {
  app.close().finally(() => process.exit(0));
});
