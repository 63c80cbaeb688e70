/**
 * A server node for multi-process webhook tests (spawned with `node --import tsx` from the repo
 * root). Configured by the environment like main.ts, plus SVC_TEST_PG_SCHEMA (PostgreSQL
 * schema). Adds POST /test/emit, which emits events one after another through svc.events and
 * prints `ack <n>` on stdout once each emit has resolved (the event is in the outbox).
 * Prints `listening <port>` when ready.
 */
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/areas.ts';

const config = loadConfig({ SVC_MEDIA: 'off', ...process.env });
const app = await buildApp({
  config,
  adminToken: process.env.SVC_ADMIN_TOKEN!,
  secret: process.env.SVC_SECRET ?? 'test-secret-for-a-webhooks-node-process',
  pgSchema: process.env.SVC_TEST_PG_SCHEMA,
});
interface EmitBody {
  projectId: string;
  from: number;
  count: number;
  rooms: number;
  prefix: string;
  /** Pause between events (ms), so a burst spans some time. */
  intervalMs?: number;
}
app.post<{ Body: EmitBody }>('/test/emit', async (request) => {
  const { projectId, from, count, rooms, prefix, intervalMs = 0 } = request.body;
  for (let n = from; n < from + count; n++) {
    if (intervalMs > 0) await new Promise((r) => setTimeout(r, intervalMs));
    await app.svc.events.emit({
      projectId,
      type: 'participant.joined',
      data: { n, room: `${prefix}${n % rooms}` },
      orderingKey: `room:${projectId}:${prefix}${n % rooms}`,
      occurredAtMs: Date.now(),
    });
    process.stdout.write(`ack ${n}\n`);
  }
  return { ok: true };
});
await app.listen({ port: 0, host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
