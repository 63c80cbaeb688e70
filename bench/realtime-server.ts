/**
 * The Svc node the realtime bench drives (embedded default, or Redis when REDIS_URL is set).
 * Prints `{"port"}` once listening; answers IPC requests: `{cmd: "tokens", room, count}` →
 * access tokens (`hostFirst`: the first is a host's); `{cmd: "memory"}` → memory after a full GC (run with --expose-gc).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildApp } from '../packages/server/src/app.ts';
import { loadConfig } from '../packages/server/src/areas.ts';

const config = loadConfig({
  ...process.env,
  LOG_LEVEL: 'warn',
  SVC_BOOTSTRAP: 'false',
  DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-bench-')),
  SVC_REDIS_PREFIX: `bench:${randomBytes(4).toString('hex')}:`,
});
const app = await buildApp({ config, adminToken: 'bench-admin', secret: 'bench' });
await app.listen({ port: 0, host: '127.0.0.1' });
const project = await app.svc.projects.create({ name: 'bench' });
const key = await app.svc.keys.create(project.id, {
  type: 'server',
  rateLimitPerMinute: 10_000_000,
});

process.on(
  'message',
  async (msg: { id: number; cmd: string; room?: string; count?: number; hostFirst?: boolean }) => {
    if (msg.cmd === 'tokens') {
      const tokens: string[] = [];
      for (let i = 0; i < msg.count!; i++) {
        const res = await app.inject({
          method: 'POST',
          url: '/v1/realtime/token',
          headers: { authorization: `Bearer ${key.key}`, 'x-project-id': project.id },
          payload: {
            roomName: msg.room,
            liveType: 'VIDEO_CONFERENCE',
            participant: {
              userId: `u${i}`,
              name: `User ${i}`,
              isHost: msg.hostFirst === true && i === 0,
            },
          },
        });
        tokens.push(res.json().token);
      }
      process.send!({ id: msg.id, tokens });
    } else if (msg.cmd === 'memory') {
      global.gc?.();
      global.gc?.();
      process.send!({ id: msg.id, memory: process.memoryUsage() });
    }
  },
);
const address = app.server.address() as { port: number };
process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
process.on('SIGTERM', async () => {
  await app.close();
  process.exit(0);
});
