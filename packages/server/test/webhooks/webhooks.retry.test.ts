import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { eventually, type Received, Receiver, verifyStandard } from './receiver.ts';

const ENV = {
  SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
  SVC_WEBHOOK_RETRY_SCHEDULE: '0,50ms,50ms',
  // Long enough that an answered attempt does not time out on a loaded machine (an extra
  // attempt would break the exact counts asserted here), short enough for the timeout test.
  SVC_WEBHOOK_TIMEOUT_MS: '1500',
};

for (const backend of BACKENDS) {
  describe(`webhooks: retries, order, failures (${backend.name})`, () => {
    let s: TestServer;
    let receiver: Receiver;
    /** Per-path answers; default 200. */
    const answers = new Map<string, (r: Received, n: number) => ReturnType<Receiver['answer']>>();
    const seen = new Map<string, number>();
    before(async () => {
      s = await startTestServer(backend, { env: ENV });
      receiver = await Receiver.start((r) => {
        const key = `${r.path} ${r.id}`;
        const n = (seen.get(key) ?? 0) + 1;
        seen.set(key, n);
        const path = r.path.split('?')[1] ?? '';
        return answers.get(path)?.(r, n) ?? { status: 200 };
      });
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });
    const base = `/projects/PID/webhooks`;
    const path = (p: string) => base.replace('PID', s.project.id) + p;
    const endpoint = (name: string, body: Record<string, unknown> = {}) =>
      s.admin('POST', path(''), { url: `${receiver.url}?${name}`, ...body });
    const emit = (type: string, data: Record<string, unknown>, orderingKey?: string) =>
      s.app.svc.events.emit({
        projectId: s.project.id,
        type,
        data,
        orderingKey,
        occurredAtMs: Date.now(),
      });
    const on = (name: string) => receiver.requests.filter((r) => r.path.endsWith(`?${name}`));
    const deliveries = (id: string) => s.admin('GET', path(`/${id}/deliveries`));

    test('a receiver that fails twice then succeeds gets one success and two recorded failures', async () => {
      answers.set('flaky', (_r, n) => (n <= 2 ? { status: 500, body: 'boom' } : { status: 200 }));
      const ep = await endpoint('flaky');
      await emit('room.started', { room: 'flaky' });
      await receiver.until(() => on('flaky').some((r) => r.status === 200), 'success');
      const got = on('flaky');
      assert.equal(got.length, 3);
      assert.equal(new Set(got.map((r) => r.id)).size, 1, 'webhook-id is stable across retries');
      assert.deepEqual(
        got.map((r) => r.status),
        [500, 500, 200],
      );
      for (const r of got) verifyStandard(ep.secret, r);
      const list = await eventually(
        () => deliveries(ep.id),
        (l: any) => l.items[0]?.status === 'succeeded',
        'succeeded',
      );
      assert.equal(list.items.length, 1);
      const d = list.items[0];
      assert.equal(d.attemptCount, 3);
      assert.deepEqual(
        d.attempts.map((a: any) => a.statusCode),
        [500, 500, 200],
      );
      assert.equal(d.attempts[0].error, 'HTTP 500');
      assert.equal(d.attempts[0].responseBody, 'boom');
      assert.ok(d.attempts[0].nextAttemptAt);
      assert.equal(d.attempts[2].nextAttemptAt, null);
      assert.equal(d.attempts[2].error, null);
    });

    test('events of one room arrive in order while an earlier one is retried; other rooms go on', async () => {
      // Room A's first event fails until room B's event has arrived (and at least twice): if
      // room B were held back behind room A, this would never succeed.
      const bArrived = () => on('order').some((r) => r.json.data.room === 'B');
      answers.set('order', (r, n) =>
        r.json.data.room === 'A' && r.json.data.n === 1 && (n <= 2 || !bArrived())
          ? // Retry-After stretches the three attempts over ~2 s, time for room B to arrive.
            { status: 503, headers: { 'retry-after': '1' } }
          : { status: 200 },
      );
      await endpoint('order');
      const roomA = `room:${s.project.id}:A`;
      await emit('room.started', { room: 'A', n: 1 }, roomA);
      await emit('participant.joined', { room: 'A', n: 2 }, roomA);
      await emit('participant.left', { room: 'A', n: 3 }, roomA);
      await emit('room.ended', { room: 'A', n: 4 }, roomA);
      await emit('room.started', { room: 'B', n: 1 }, `room:${s.project.id}:B`);
      await receiver.until(
        () => on('order').filter((r) => r.status === 200).length === 5,
        'five successes',
      );
      const a = on('order').filter((r) => r.json.data.room === 'A');
      const firstSuccess = a.findIndex((r) => r.status === 200);
      assert.ok(firstSuccess >= 2, 'the first event failed at least twice');
      // Nothing later in room A was sent before its first event succeeded, and every request,
      // failures included, came in emission order.
      assert.ok(a.slice(0, firstSuccess).every((r) => r.json.data.n === 1));
      assert.deepEqual(
        a.slice(firstSuccess).map((r) => [r.json.data.n, r.json.type, r.status]),
        [
          [1, 'room.started', 200],
          [2, 'participant.joined', 200],
          [3, 'participant.left', 200],
          [4, 'room.ended', 200],
        ],
      );
    });

    test('Retry-After is honoured', async () => {
      answers.set('after', (_r, n) =>
        n === 1 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 },
      );
      const ep = await endpoint('after');
      await emit('room.started', { room: 'after' });
      await receiver.until(() => on('after').some((r) => r.status === 200), 'success');
      const [d] = (
        await eventually(
          () => deliveries(ep.id),
          (l: any) => l.items[0]?.status === 'succeeded',
          'succeeded',
        )
      ).items;
      const [first, second] = d.attempts;
      assert.equal(first.statusCode, 429);
      const waited = Date.parse(second.attemptedAt) - Date.parse(first.attemptedAt);
      assert.ok(waited >= 1000, `waited ${waited} ms`);
      assert.ok(Date.parse(first.nextAttemptAt) - Date.parse(first.attemptedAt) >= 1000);
    });

    test('410 Gone disables the endpoint; nothing more is queued for it', async () => {
      answers.set('gone', () => ({ status: 410 }));
      const ep = await endpoint('gone');
      await emit('room.started', { room: 'gone' });
      await receiver.until(() => on('gone').length === 1, 'first request');
      const list = await eventually(
        () => deliveries(ep.id),
        (l: any) => l.items[0]?.status === 'failed',
        'failed',
      );
      assert.equal(list.items[0].attemptCount, 1);
      const after = await s.admin('GET', path(`/${ep.id}`));
      assert.equal(after.enabled, false);
      assert.equal(after.disabledReason, 'gone');
      await emit('room.ended', { room: 'gone' });
      assert.equal((await deliveries(ep.id)).meta.total, 1);
      const retry = await s.app.inject({
        method: 'POST',
        url: `/v1/admin${path(`/${ep.id}/deliveries/${list.items[0].id}/retry`)}`,
        headers: { authorization: `Bearer ${s.adminToken}` },
      });
      assert.equal(retry.statusCode, 409);
      assert.equal(retry.json().code, 'webhook_endpoint_disabled');
      assert.equal(on('gone').length, 1);
    });

    test('redirects are not followed: a 3xx is a failure', async () => {
      answers.set('redirect', () => ({
        status: 302,
        headers: { location: `${receiver.url}?redirect-target` },
      }));
      const ep = await endpoint('redirect');
      await emit('room.started', { room: 'redirect' });
      const list = await eventually(
        () => deliveries(ep.id),
        (l: any) => l.items[0]?.status === 'failed',
        'failed after the schedule ran out',
      );
      assert.equal(list.items[0].attemptCount, 3);
      assert.match(list.items[0].lastError, /redirects are not followed/);
      assert.equal(on('redirect').length, 3);
      assert.equal(on('redirect-target').length, 0);
    });

    test('a receiver that does not answer times out and is retried', async () => {
      answers.set('slow', (_r, n) => (n === 1 ? { status: 0, hold: true } : { status: 200 }));
      const ep = await endpoint('slow');
      await emit('room.started', { room: 'slow' });
      await receiver.until(() => on('slow').some((r) => r.status === 200), 'success');
      const [d] = (
        await eventually(
          () => deliveries(ep.id),
          (l: any) => l.items[0]?.status === 'succeeded',
          'succeeded',
        )
      ).items;
      assert.equal(d.attempts[0].statusCode, null);
      assert.match(d.attempts[0].error, /timed out after 1500 ms/);
      assert.ok(d.attempts[0].latencyMs >= 1500);
    });

    test('receiver response bodies are stored truncated', async () => {
      answers.set('big', () => ({ status: 200, body: 'x'.repeat(100_000) }));
      const ep = await endpoint('big');
      await emit('room.started', { room: 'big' });
      const [d] = (
        await eventually(
          () => deliveries(ep.id),
          (l: any) => l.items[0]?.status === 'succeeded',
          'succeeded',
        )
      ).items;
      assert.equal(d.attempts[0].responseBody, 'x'.repeat(2048));
    });

    test('a delivery that ran out of attempts can be retried by hand', async () => {
      let up = false;
      answers.set('manual', () => ({ status: up ? 204 : 500 }));
      const ep = await endpoint('manual');
      await emit('room.started', { room: 'manual' });
      const list = await eventually(
        () => deliveries(ep.id),
        (l: any) => l.items[0]?.status === 'failed',
        'failed',
      );
      assert.equal(list.items[0].attemptCount, 3);
      up = true;
      const retried = await s.admin('POST', path(`/${ep.id}/deliveries/${list.items[0].id}/retry`));
      assert.equal(retried.status, 'pending');
      await receiver.until(() => on('manual').some((r) => r.status === 204), 'manual success');
      const done = await eventually(
        () => deliveries(ep.id),
        (l: any) => l.items[0]?.status === 'succeeded',
        'succeeded',
      );
      assert.equal(done.items[0].attemptCount, 4);
      assert.equal(on('manual').length, 4);
      // Retrying a succeeded delivery sends it again; both successes stay listed, in order.
      const again = await s.admin('POST', path(`/${ep.id}/deliveries/${done.items[0].id}/retry`));
      assert.equal(again.status, 'pending');
      assert.deepEqual(
        again.attempts.map((a: any) => [a.attempt, a.statusCode]),
        [
          [1, 500],
          [2, 500],
          [3, 500],
          [4, 204],
        ],
      );
      const twice = await eventually(
        () => deliveries(ep.id),
        (l: any) => l.items[0]?.status === 'succeeded' && l.items[0].attemptCount === 5,
        'succeeded again',
      );
      assert.deepEqual(
        twice.items[0].attempts.map((a: any) => [a.attempt, a.statusCode, a.error]),
        [
          [1, 500, 'HTTP 500'],
          [2, 500, 'HTTP 500'],
          [3, 500, 'HTTP 500'],
          [4, 204, null],
          [5, 204, null],
        ],
      );
      assert.equal(on('manual').length, 5);
    });
  });
}
