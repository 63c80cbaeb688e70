/**
 * The server the gate bench drives: a full Svc app with two routes running the same handler,
 * one behind the key gate (client key, realtime scope) and one with no auth. Prints
 * `{"port", "projectId", "clientKey"}` once listening.
 */
import { randomBytes } from 'node:crypto';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/config.ts';
import { cpuMicros } from './lib.ts';

const config = loadConfig({
  ...process.env,
  LOG_LEVEL: 'warn',
  SVC_BOOTSTRAP: 'false',
  SVC_REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`,
});
const app = await buildApp({ config, adminToken: 'bench-admin', secret: 'bench' });
const handler = async () => ({ ok: true });
app.get('/__bench/cpu', { schema: { hide: true } }, async () => cpuMicros());
app.get('/bench/bare', handler);
app.get('/v1/bench/auth', { config: { auth: { product: 'realtime', clientKeys: true } } }, handler);
await app.listen({ port: 0, host: '127.0.0.1' });
const project = await app.svc.projects.create({ name: 'bench' });
const key = await app.svc.keys.create(project.id, {
  type: 'client',
  rateLimitPerMinute: 1_000_000,
});
const address = app.server.address() as { port: number };
process.stdout.write(
  `${JSON.stringify({ port: address.port, projectId: project.id, clientKey: key.key })}\n`,
);
process.on('SIGTERM', async () => {
  await app.close();
  process.exit(0);
});
