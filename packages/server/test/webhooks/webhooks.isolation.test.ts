import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { eventually, Receiver } from './receiver.ts';

/** A local address where nothing listens: connections are refused at once. */
async function deadUrl() {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}/dead`;
}

const DAY_MS = 86_400_000;

for (const backend of BACKENDS) {
  describe(`webhooks: isolation, auto-disable, retention, backlog metrics (${backend.name})`, () => {
    let s: TestServer;
    const receivers: Receiver[] = [];
    before(async () => {
      s = await startTestServer(backend, {
        env: {
          SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
          SVC_WEBHOOK_RETRY_SCHEDULE: '0,50ms,50ms',
          // 4 slots, 2 per endpoint: a slow endpoint can hold 2 at most.
          SVC_WEBHOOK_CONCURRENCY: '4',
          SVC_WEBHOOK_TIMEOUT_MS: '20000',
          SVC_WEBHOOK_DISABLE_AFTER: '1ms',
        },
      });
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    });
    after(async () => {
      // Receivers first: held requests end, so the server does not wait out their timeout.
      for (const r of receivers) await r.close();
      await s.close();
    });
    const base = () => `/projects/${s.project.id}/webhooks`;
    const receiver = async (...args: Parameters<typeof Receiver.start>) => {
      const r = await Receiver.start(...args);
      receivers.push(r);
      return r;
    };
    const emitMany = (rooms: number, count: number, type = 'room.started') =>
      s.app.svc.events.emitMany(
        Array.from({ length: count }, (_, n) => ({
          projectId: s.project.id,
          type,
          data: { n, room: `r${n % rooms}` },
          orderingKey: `room:${s.project.id}:r${n % rooms}`,
          occurredAtMs: Date.now(),
        })),
      );

    test('a slow endpoint and a dead one do not hold back a healthy one; the backlog shows in /metrics', async () => {
      const slow = await receiver(() => ({ status: 0, hold: true }));
      const healthy = await receiver();
      const eps = [];
      for (const url of [`${slow.url}?slow`, await deadUrl(), `${healthy.url}?healthy`]) {
        eps.push(await s.admin('POST', base(), { url, events: ['room.started'] }));
      }
      await emitMany(10, 60);
      // Every healthy delivery arrives while the slow endpoint still holds its first requests
      // (they answer only after the 20 s timeout): it never had more than its 2 slots.
      await healthy.until(() => healthy.successes.length === 60, 'all healthy deliveries');
      assert.ok(slow.requests.length <= 2, `slow endpoint got ${slow.requests.length} requests`);
      // Per room, in order.
      const last = new Map<string, number>();
      for (const r of healthy.requests) {
        const { room, n } = r.json.data;
        assert.ok((last.get(room) ?? -1) < n, `room ${room}: ${n} after ${last.get(room)}`);
        last.set(room, n);
      }
      const metrics = await s.app.inject({ method: 'GET', url: '/metrics' });
      const backlog = new RegExp(`svc_webhook_backlog\\{project="${s.project.id}"\\} (\\d+)`).exec(
        metrics.body,
      );
      assert.ok(backlog, 'backlog per project');
      // The slow and dead endpoints' deliveries are still pending.
      assert.ok(Number(backlog[1]) >= 60, `backlog ${backlog[1]}`);
      assert.match(
        metrics.body,
        new RegExp(
          `svc_webhook_oldest_pending_age_seconds\\{project="${s.project.id}"\\} [\\d.e-]+`,
        ),
      );
      assert.match(metrics.body, /svc_webhook_delivery_latency_seconds_count \d+/);
      assert.match(metrics.body, /svc_webhook_deliveries_total\{status="succeeded"\} \d+/);
      for (const ep of eps) await s.admin('DELETE', `${base()}/${ep.id}`);
    });

    test('an endpoint that keeps failing is disabled (reason failing) and can be re-enabled', async () => {
      let up = false;
      const flaky = await receiver(() => ({ status: up ? 200 : 500 }));
      const ep = await s.admin('POST', base(), { url: flaky.url, events: ['room.started'] });
      await emitMany(3, 3);
      const disabled = await eventually(
        () => s.admin('GET', `${base()}/${ep.id}`),
        (e: any) => e.enabled === false,
        'disabled',
      );
      assert.equal(disabled.disabledReason, 'failing');
      assert.ok(disabled.failingSince, 'failingSince is set');
      const listed = await s.admin('GET', base());
      assert.equal(listed.items.find((e: any) => e.id === ep.id).disabledReason, 'failing');
      // Nothing is queued or sent while it is disabled: what was pending is skipped.
      await emitMany(1, 1);
      await eventually(
        () => s.admin('GET', `${base()}/${ep.id}/deliveries?status=pending`),
        (l: any) => l.meta.total === 0,
        'no pending delivery',
      );
      const before = flaky.requests.length;
      up = true;
      const enabled = await s.admin('PATCH', `${base()}/${ep.id}`, { enabled: true });
      assert.equal(enabled.enabled, true);
      assert.equal(enabled.disabledReason, null);
      assert.equal(enabled.failingSince, null);
      await emitMany(1, 1);
      await flaky.until(() => flaky.successes.length === 1, 'a delivery after re-enabling');
      assert.equal(flaky.requests.length, before + 1);
      await s.admin('DELETE', `${base()}/${ep.id}`);
    });

    test('retention prunes finished events with their deliveries and attempts, in batches; pending ones stay', async () => {
      // The first request fails once: a failed attempt's row, to be pruned with its event.
      const ok = await receiver((r) => ({ status: r.index === 0 ? 500 : 200 }));
      const held = await receiver(() => ({ status: 0, hold: true }));
      const fast = await s.admin('POST', base(), { url: ok.url, events: ['room.started'] });
      await emitMany(20, 620);
      await ok.until(() => ok.successes.length === 620, 'all deliveries');
      const slow = await s.admin('POST', base(), { url: held.url, events: ['room.ended'] });
      await emitMany(1, 1, 'room.ended');
      await held.until(() => held.requests.length === 1, 'the held delivery');
      const db = s.app.svc.store.db;
      const count = async (table: 'webhook_events' | 'webhook_deliveries' | 'webhook_attempts') =>
        Number(
          (
            await db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const succeeded = async () =>
        Number(
          (
            await db
              .selectFrom('webhook_deliveries')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('status', '=', 'succeeded')
              .where('success_attempted_at', 'is not', null)
              .executeTakeFirstOrThrow()
          ).n,
        );
      await eventually(succeeded, (n) => n >= 620, 'successes recorded');
      assert.equal(await count('webhook_attempts'), 1);
      const worker = s.app.svc.webhooks!.worker!;
      // A lease a crashed holder left for an endpoint deleted since (leases have no foreign key)
      // goes once it has been expired for a lease length; the held chain's live lease stays.
      await db
        .insertInto('webhook_key_leases')
        .values({
          endpoint_id: 'whe_deleted',
          lease_key: 'k',
          lease_until: new Date(Date.now() - 3_600_000).toISOString(),
          lease_token: 'crashed',
        })
        .execute();
      const leases = () => db.selectFrom('webhook_key_leases').select('endpoint_id').execute();
      assert.equal((await leases()).length, 2);
      // Nothing is old enough yet.
      assert.equal(await worker.prune(), 0);
      assert.deepEqual(await leases(), [{ endpoint_id: slow.id }]);
      const pruned = await worker.prune(Date.now() + 31 * DAY_MS);
      assert.ok(pruned >= 620, `pruned ${pruned}`);
      // Only the pending (held) event is left, with its delivery.
      assert.equal(await count('webhook_events'), 1);
      assert.equal(await count('webhook_deliveries'), 1);
      assert.equal(await count('webhook_attempts'), 0);
      const left = await db.selectFrom('webhook_deliveries').select('status').execute();
      assert.deepEqual(
        left.map((r) => r.status),
        ['pending'],
      );
      await s.admin('DELETE', `${base()}/${fast.id}`);
      await s.admin('DELETE', `${base()}/${slow.id}`);
    });
  });

  describe(`webhooks: outcome batches (${backend.name})`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(backend, {
        env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_CONCURRENCY: '4' },
      });
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    });
    after(() => s.close());

    test('an outcome that finishes while another attempt is in flight waits for it: one batch for both', async () => {
      const held = await Receiver.start(() => ({ status: 0, hold: true }));
      try {
        await s.admin('POST', `/projects/${s.project.id}/webhooks`, {
          url: held.url,
          events: ['room.started'],
        });
        const worker = s.app.svc.webhooks!.worker! as unknown as {
          record(...args: unknown[]): Promise<void>;
          writeOutcomes(batch: unknown[]): Promise<void>;
        };
        let batches: number[] = [];
        const write = worker.writeOutcomes.bind(worker);
        worker.writeOutcomes = (batch) => {
          batches.push(batch.length);
          return write(batch);
        };
        const record = worker.record.bind(worker);
        let queued = () => {};
        worker.record = (...args) => {
          const recorded = record(...args);
          queued();
          return recorded;
        };
        // The wait is bounded (RECORD_GATHER_MS): on a machine stalled for longer, the second
        // answer can come too late. Up to three tries; a node that never waits fails each.
        const seen: number[][] = [];
        for (let round = 0; round < 3 && !seen.some((b) => b.length === 1); round++) {
          // Two rooms: two chains, their attempts in flight together (2 slots per endpoint).
          await s.app.svc.events.emitMany(
            ['r1', 'r2'].map((room) => ({
              projectId: s.project.id,
              type: 'room.started',
              data: { room, round },
              orderingKey: `room:${s.project.id}:${room}`,
              occurredAtMs: Date.now(),
            })),
          );
          await held.until(() => held.requests.length === 2 * (round + 1), 'both attempts');
          batches = [];
          const firstQueued = new Promise<void>((resolve) => {
            queued = resolve;
          });
          // The second answer leaves only once the first outcome waits to be written.
          held.releaseOne();
          await firstQueued;
          held.releaseOne();
          await eventually(
            () => s.app.svc.store.db.selectFrom('webhook_deliveries').select('status').execute(),
            (rows) =>
              rows.length === 2 * (round + 1) && rows.every((r) => r.status === 'succeeded'),
            'both deliveries succeeded',
          );
          seen.push(batches);
        }
        assert.ok(
          seen.some((b) => b.length === 1 && b[0] === 2),
          `outcome batches: ${JSON.stringify(seen)}`,
        );
      } finally {
        await held.close();
      }
    });
  });
}
