import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { AREA_MIGRATIONS } from '../../src/areas.ts';
import { openStore } from '../../src/storage/db.ts';
import { DATABASE_URL, uniqueName } from '../helpers.ts';
import { NodeProcess } from './nodes.ts';
import { Receiver } from './receiver.ts';

const TOTAL = 1000;

describe('webhooks: two server processes on PostgreSQL', { skip: !DATABASE_URL }, () => {
  const token = `admin_${randomBytes(16).toString('hex')}`;
  const schema = uniqueName('t');
  const env = {
    SVC_ADMIN_TOKEN: token,
    SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
    DATABASE_URL: DATABASE_URL ?? '',
    SVC_TEST_PG_SCHEMA: schema,
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
    SVC_WEBHOOK_POLL_MS: '100',
  };
  const nodes: NodeProcess[] = [];
  let receiver: Receiver;
  after(async () => {
    for (const n of nodes) await n.stop();
    await receiver?.close();
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  });

  test(`a burst of ${TOTAL} events: each delivered exactly once, in order per room`, async () => {
    receiver = await Receiver.start(() => ({ status: 200 }));
    const a = await NodeProcess.start(env);
    nodes.push(a);
    const b = await NodeProcess.start(env);
    nodes.push(b);
    const project = await a.call('POST', '/v1/admin/projects', token, {
      name: 'multinode',
      webhooksEnabled: true,
    });
    await a.call('POST', `/v1/admin/projects/${project.id}/webhooks`, token, { url: receiver.url });
    const burst = (node: NodeProcess, from: number, prefix: string) =>
      fetch(`${node.base}/test/emit`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ projectId: project.id, from, count: TOTAL / 2, rooms: 25, prefix }),
      }).then((r) => assert.equal(r.status, 200));
    // Each node emits its own rooms' events; both nodes' workers deliver all of them.
    await Promise.all([burst(a, 0, 'a'), burst(b, TOTAL / 2, 'b')]);
    await receiver.until(() => receiver.requests.length >= TOTAL, `${TOTAL} deliveries`, 50_000);

    const store = await openStore({
      databaseUrl: DATABASE_URL,
      pgSchema: schema,
      migrations: AREA_MIGRATIONS,
    });
    try {
      // Wait until the store agrees every delivery is done, then check nothing came twice.
      const deadline = Date.now() + 20_000;
      let pending = -1;
      while (pending !== 0 && Date.now() < deadline) {
        const row = await store.db
          .selectFrom('webhook_deliveries')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('status', '!=', 'succeeded')
          .executeTakeFirstOrThrow();
        pending = Number(row.n);
      }
      assert.equal(pending, 0);
      // A success is kept on its delivery row; attempt rows are for failed attempts only.
      const failed = await store.db
        .selectFrom('webhook_attempts')
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow();
      assert.equal(Number(failed.n), 0, 'no failed attempt');
      const byNode = await store.db
        .selectFrom('webhook_deliveries')
        .select(['success_node_id as node_id', (eb) => eb.fn.countAll<string>().as('n')])
        .where('attempt_count', '=', 1)
        .groupBy('success_node_id')
        .execute();
      const attempts = byNode.reduce((sum, r) => sum + Number(r.n), 0);
      assert.equal(attempts, TOTAL, 'one attempt per event');
      assert.equal(byNode.length, 2, `both nodes delivered: ${JSON.stringify(byNode)}`);
    } finally {
      await store.close();
    }
    const ids = receiver.requests.map((r) => r.id);
    assert.equal(ids.length, TOTAL);
    assert.equal(new Set(ids).size, TOTAL, 'no webhook-id was received twice');
    // Per room, events arrived in emission order even though two nodes delivered them.
    const lastByRoom = new Map<string, number>();
    for (const r of receiver.requests) {
      const { room, n } = r.json.data;
      assert.ok(
        (lastByRoom.get(room) ?? -1) < n,
        `room ${room}: ${n} after ${lastByRoom.get(room)}`,
      );
      lastByRoom.set(room, n);
    }
    assert.equal(lastByRoom.size, 50);
  });
});
