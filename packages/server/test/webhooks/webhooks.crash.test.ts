import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { AREA_MIGRATIONS } from '../../src/areas.ts';
import { openStore } from '../../src/storage/db.ts';
import { DATABASE_URL, uniqueName } from '../helpers.ts';
import { NodeProcess } from './nodes.ts';
import { Receiver, verifyStandard } from './receiver.ts';

const TOTAL = 500;

for (const db of ['sqlite', ...(DATABASE_URL ? ['postgres'] : [])] as const) {
  describe(`webhooks: SIGKILL during a burst loses nothing (${db})`, () => {
    const token = `admin_${randomBytes(16).toString('hex')}`;
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-wh-crash-'));
    const schema = uniqueName('t');
    const env: Record<string, string> = {
      SVC_ADMIN_TOKEN: token,
      SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
      DATA_DIR: dataDir,
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      SVC_WEBHOOK_RETRY_SCHEDULE: '0,100ms,200ms,500ms,1s,1s,1s,1s,1s,1s',
      SVC_WEBHOOK_TIMEOUT_MS: '2000',
      // A dead node's claims expire after this (PostgreSQL); SQLite restarts take them back.
      SVC_WEBHOOK_LEASE_MS: '2500',
      // Empty means unset: the SQLite case must not inherit the runner's DATABASE_URL.
      DATABASE_URL: db === 'postgres' ? DATABASE_URL! : '',
      REDIS_URL: '',
      SVC_TEST_PG_SCHEMA: db === 'postgres' ? schema : '',
    };
    const nodes: NodeProcess[] = [];
    let receiver: Receiver;
    after(async () => {
      for (const n of nodes) await n.stop();
      await receiver?.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
      if (db === 'postgres') {
        const client = new pg.Client({ connectionString: DATABASE_URL });
        await client.connect();
        await client.query(`drop schema if exists ${schema} cascade`);
        await client.end();
      }
    });

    test(`${TOTAL} events: killed mid-burst with deliveries in flight, restarted, all delivered`, async () => {
      // Phase 1: the receiver holds every request, so deliveries are in flight at the kill.
      let open = false;
      receiver = await Receiver.start(() => (open ? { status: 200 } : { status: 0, hold: true }));
      const first = await NodeProcess.start(env);
      nodes.push(first);
      const project = await first.call('POST', '/v1/admin/projects', token, {
        name: 'crash',
        webhooksEnabled: true,
      });
      const endpoint = await first.call(
        'POST',
        `/v1/admin/projects/${project.id}/webhooks`,
        token,
        {
          url: receiver.url,
        },
      );
      const burst = (node: NodeProcess, from: number) =>
        fetch(`${node.base}/test/emit`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            projectId: project.id,
            from,
            count: TOTAL - from,
            rooms: 20,
            prefix: 'r',
            intervalMs: 3,
          }),
        });
      const pending = burst(first, 0).catch(() => null);
      await first.until(() => first.acks.size >= TOTAL / 2);
      await receiver.until(() => receiver.requests.length >= 1, 'a delivery in flight');
      await first.kill();
      await pending;
      const acked = first.acks.size;
      assert.ok(acked >= TOTAL / 2 && acked < TOTAL, `killed mid-burst (acked ${acked})`);
      assert.equal(receiver.successes.length, 0, 'nothing was answered before the kill');

      // Phase 2: restart on the same store; the emitter resends what was not acknowledged.
      open = true;
      const second = await NodeProcess.start(env);
      nodes.push(second);
      const res = await burst(second, acked);
      assert.equal(res.status, 200);
      const delivered = () => new Set(receiver.successes.map((r) => r.json.data.n as number));
      await receiver.until(() => delivered().size === TOTAL, `all ${TOTAL} events`, 45_000);

      // Every event in the outbox (including any committed but not acknowledged before the
      // kill) was delivered, by webhook-id, and every delivery verifies.
      const store = await openStore(
        db === 'postgres'
          ? { databaseUrl: DATABASE_URL, pgSchema: schema, migrations: AREA_MIGRATIONS }
          : { sqliteFile: path.join(dataDir, 'svc.sqlite'), migrations: AREA_MIGRATIONS },
      );
      try {
        const events = await store.db.selectFrom('webhook_events').select('id').execute();
        assert.ok(events.length >= TOTAL, `${events.length} events in the outbox`);
        await receiver.until(() => {
          const ids = new Set(receiver.successes.map((r) => r.id));
          return events.every((e) => ids.has(e.id));
        }, 'every outbox event by webhook-id');
      } finally {
        await store.close();
      }
      for (const r of receiver.successes) verifyStandard(endpoint.secret, r);
    });
  });
}
