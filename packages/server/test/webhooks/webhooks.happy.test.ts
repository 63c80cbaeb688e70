import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { eventually, Receiver, verifyStandard } from './receiver.ts';

const ENV = { SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_RETRY_SCHEDULE: '0,50ms,50ms' };

for (const backend of BACKENDS) {
  describe(`webhooks: endpoints and delivery (${backend.name})`, () => {
    let s: TestServer;
    let receiver: Receiver;
    before(async () => {
      s = await startTestServer(backend, { env: ENV });
      receiver = await Receiver.start();
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });
    const base = () => `/projects/${s.project.id}/webhooks`;
    const emit = (type: string, data: Record<string, unknown>, orderingKey?: string) =>
      s.app.svc.events.emit({
        projectId: s.project.id,
        type,
        data,
        orderingKey,
        occurredAtMs: Date.now(),
      });

    test('create shows a whsec_ secret once; list, get, update, delete', async () => {
      const created = await s.admin('POST', base(), {
        url: receiver.url,
        events: ['room.started'],
        description: 'crud',
      });
      assert.match(created.id, /^whe_/);
      assert.match(created.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
      assert.deepEqual(created.events, ['room.started']);
      assert.equal(created.enabled, true);
      const listed = await s.admin('GET', base());
      const mine = listed.items.find((e: any) => e.id === created.id);
      assert.ok(mine);
      assert.equal(mine.secret, undefined, 'the secret is never listed');
      assert.equal((await s.admin('GET', `${base()}/${created.id}`)).secret, undefined);
      const updated = await s.admin('PATCH', `${base()}/${created.id}`, {
        events: [],
        enabled: false,
      });
      assert.deepEqual(updated.events, []);
      assert.equal(updated.enabled, false);
      assert.equal(updated.disabledReason, 'manual');
      await s.admin('DELETE', `${base()}/${created.id}`);
      const res = await s.app.inject({
        method: 'GET',
        url: `/v1/admin${base()}/${created.id}`,
        headers: { authorization: `Bearer ${s.adminToken}` },
      });
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'webhook_endpoint_not_found');
    });

    test('an emitted event arrives signed per Standard Webhooks (verified by standardwebhooks)', async () => {
      const endpoint = await s.admin('POST', base(), { url: receiver.url });
      await emit('participant.joined', { room: 'r1', identity: 'alice' }, 'room:p:r1');
      await receiver.until(
        () => receiver.requests.some((r) => r.json.data.identity === 'alice'),
        'participant.joined',
      );
      const r = receiver.requests.find((x) => x.json.data.identity === 'alice')!;
      const verified = verifyStandard(endpoint.secret, r) as any;
      assert.equal(verified.type, 'participant.joined');
      assert.equal(r.json.id, r.id, 'body id is the webhook-id');
      assert.match(r.id, /^evt_/);
      assert.equal(r.json.projectId, s.project.id);
      assert.deepEqual(Object.keys(r.json).sort(), [
        'createdAt',
        'data',
        'id',
        'projectId',
        'type',
      ]);
      assert.equal(r.headers['content-type'], 'application/json');
      // A wrong secret does not verify.
      const other = await s.admin('POST', base(), { url: receiver.url, enabled: false });
      assert.throws(() => verifyStandard(other.secret, r));
      await s.admin('DELETE', `${base()}/${endpoint.id}`);
      await s.admin('DELETE', `${base()}/${other.id}`);
    });

    test('event-type filter; webhook.test on demand; deliveries listing', async () => {
      const endpoint = await s.admin('POST', base(), {
        url: `${receiver.url}?filter`,
        events: ['room.ended'],
      });
      await emit('room.started', { room: 'f' });
      await emit('room.ended', { room: 'f' });
      await receiver.until(
        () =>
          receiver.requests.some((r) => r.path.endsWith('?filter') && r.json.type === 'room.ended'),
        'room.ended',
      );
      const test = await s.app.inject({
        method: 'POST',
        url: `/v1/admin${base()}/${endpoint.id}/test`,
        headers: { authorization: `Bearer ${s.adminToken}` },
      });
      assert.equal(test.statusCode, 202, test.body);
      const { eventId, deliveryId } = test.json();
      await receiver.until(() => receiver.requests.some((r) => r.id === eventId), 'webhook.test');
      const mine = receiver.requests.filter((r) => r.path.endsWith('?filter'));
      assert.deepEqual(
        mine.map((r) => r.json.type),
        ['room.ended', 'webhook.test'],
      );
      verifyStandard(endpoint.secret, mine[1]);
      const list = await eventually(
        () => s.admin('GET', `${base()}/${endpoint.id}/deliveries`),
        (l: any) => l.items.every((d: any) => d.status === 'succeeded'),
        'deliveries succeeded',
      );
      assert.equal(list.meta.total, 2);
      const d = list.items.find((x: any) => x.id === deliveryId);
      assert.equal(d.eventType, 'webhook.test');
      assert.equal(d.attemptCount, 1);
      assert.equal(d.attempts[0].statusCode, 200);
      assert.equal(typeof d.attempts[0].latencyMs, 'number');
      assert.equal(d.attempts[0].error, null);
      assert.equal(d.nextAttemptAt, null);
      const filtered = await s.admin('GET', `${base()}/${endpoint.id}/deliveries?status=failed`);
      assert.equal(filtered.meta.total, 0);
      await s.admin('DELETE', `${base()}/${endpoint.id}`);
    });

    test('secret rotation: both secrets sign during the overlap, then only the new one', async () => {
      const endpoint = await s.admin('POST', base(), { url: `${receiver.url}?rotate` });
      const rotated = await s.admin('POST', `${base()}/${endpoint.id}/rotate-secret`, {
        overlapSeconds: 3600,
      });
      assert.match(rotated.secret, /^whsec_/);
      assert.notEqual(rotated.secret, endpoint.secret);
      assert.ok(rotated.previousSecretExpiresAt);
      const t1 = await s.admin('POST', `${base()}/${endpoint.id}/test`);
      await receiver.until(() => receiver.requests.some((r) => r.id === t1.eventId), 'test 1');
      const r1 = receiver.requests.find((r) => r.id === t1.eventId)!;
      assert.equal(String(r1.headers['webhook-signature']).split(' ').length, 2);
      verifyStandard(endpoint.secret, r1);
      verifyStandard(rotated.secret, r1);
      // No overlap: the old secret stops signing at once.
      const again = await s.admin('POST', `${base()}/${endpoint.id}/rotate-secret`, {
        overlapSeconds: 0,
      });
      const t2 = await s.admin('POST', `${base()}/${endpoint.id}/test`);
      await receiver.until(() => receiver.requests.some((r) => r.id === t2.eventId), 'test 2');
      const r2 = receiver.requests.find((r) => r.id === t2.eventId)!;
      verifyStandard(again.secret, r2);
      assert.throws(() => verifyStandard(rotated.secret, r2));
      await s.admin('DELETE', `${base()}/${endpoint.id}`);
    });

    test('metrics: attempts, deliveries and queue depth are exported', async () => {
      const res = await s.app.inject({ method: 'GET', url: '/metrics' });
      assert.match(res.body, /svc_webhook_attempts_total\{result="success"\} \d+/);
      assert.match(res.body, /svc_webhook_deliveries_total\{status="succeeded"\} \d+/);
      assert.match(res.body, /svc_webhook_queue_depth \d+/);
      assert.match(res.body, /svc_webhook_events_enqueued_total\{type="participant.joined"\} 1/);
    });

    test('endpoints deleted while their outcomes are being written: every delete succeeds', async () => {
      // A delete takes the rows a claim, an outcome write and the outbox take; here it races
      // them round after round under live traffic. Nothing may fail: not the delete (it used
      // to deadlock with an outcome write), not the worker's claim, not an emitted event.
      for (let round = 0; round < 25; round++) {
        const endpoint = await s.admin('POST', base(), { url: `${receiver.url}?race${round}` });
        for (let i = 0; i < 8; i++)
          await emit('room.started', { room: `race${round}-${i}` }, `k${i}`);
        await receiver.until(
          () => receiver.requests.some((r) => r.path.endsWith(`?race${round}`)),
          `round ${round}`,
        );
        // Events keep coming while the endpoint goes: they are written for it or not at all.
        await Promise.all([
          s.admin('DELETE', `${base()}/${endpoint.id}`),
          ...[0, 1, 2, 3].map((i) => emit('room.ended', { room: `race${round}-${i}` }, `k${i}`)),
        ]);
        const gone = await s.app.inject({
          method: 'GET',
          url: `/v1/admin${base()}/${endpoint.id}/deliveries`,
          headers: { authorization: `Bearer ${s.adminToken}` },
        });
        assert.equal(gone.statusCode, 404);
      }
      assert.doesNotMatch(s.logs.text, /"level":50/, 'the worker logged no error');
    });

    test('the OpenAPI document lists the webhook admin routes', async () => {
      const doc = (await s.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      assert.ok(doc.paths['/v1/admin/projects/{projectId}/webhooks/{webhookId}/deliveries']);
      assert.ok(
        doc.paths[
          '/v1/admin/projects/{projectId}/webhooks/{webhookId}/deliveries/{deliveryId}/retry'
        ],
      );
    });
  });
}
