/**
 * The server the gate bench drives: a full Svc app with two routes running the same handler,
 * one behind the key gate (client key, realtime scope) and one with no auth. Prints
 * `{"port", "projectId", "clientKeys"}` once listening (`GATE_BENCH_KEYS` of them).
 */
import { randomBytes } from 'node:crypto';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/areas.ts';
import { cpuMicros } from './lib.ts';

const config = loadConfig({
  ...process.env,
  LOG_LEVEL: 'warn',
  SVC_BOOTSTRAP: 'false',
  // No embedded Janus: the gate bench measures HTTP, and a Janus that exits and restarts in the
  // background (it does on this VM) loads the machine unevenly between rounds.
  SVC_MEDIA: 'off',
  SVC_REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`,
});
const app = await buildApp({ config, adminToken: 'bench-admin', secret: 'bench' });
const handler = async () => ({ ok: true });
app.get('/__bench/cpu', { schema: { hide: true } }, async () => cpuMicros());
app.get('/bench/bare', handler);
app.get('/v1/bench/auth', { config: { auth: { product: 'realtime', clientKeys: true } } }, handler);
await app.listen({ port: 0, host: '127.0.0.1' });
const project = await app.svc.projects.create({ name: 'bench' });
// A key per round (and one for the warm-up): at the API's highest limit, 1,000,000 requests a
// minute, one key would run out within the bench, whose client sends 50,000-70,000 a second.
const keys = await Promise.all(
  Array.from({ length: Number(process.env.GATE_BENCH_KEYS ?? 1) }, () =>
    app.svc.keys.create(project.id, { type: 'client', rateLimitPerMinute: 1_000_000 }),
  ),
);
const address = app.server.address() as { port: number };
process.stdout.write(
  `${JSON.stringify({ port: address.port, projectId: project.id, clientKeys: keys.map((k) => k.key) })}\n`,
);
process.on('SIGTERM', async () => {
  await app.close();
  process.exit(0);
});
