import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { newId } from '../../src/ids.ts';
import { addressAllowed } from '../../src/webhooks/ssrf.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { eventually, Receiver } from './receiver.ts';

test('address policy: public unicast only, unless private targets are allowed; metadata never', () => {
  const cases: [string, boolean, boolean][] = [
    // address, allowed by default, allowed with SVC_WEBHOOK_ALLOW_PRIVATE
    ['93.184.215.14', true, true],
    ['2606:4700::1111', true, true],
    ['127.0.0.1', false, true],
    ['::1', false, true],
    ['::ffff:127.0.0.1', false, true],
    ['10.0.0.1', false, true],
    ['172.16.5.4', false, true],
    ['192.168.1.1', false, true],
    ['fd12::1', false, true],
    // Link-local space holds cloud credential endpoints: never, even with private allowed.
    ['169.254.1.1', false, false],
    ['fe80::1', false, false],
    ['169.254.170.23', false, false],
    ['169.254.170.2', false, false],
    ['169.254.169.253', false, false],
    ['fd00:ec2::23', false, false],
    ['fd00:ec2::123', false, false],
    // IPv4 embedded in IPv6 is judged as the IPv4 address.
    ['::127.0.0.1', false, true],
    ['::169.254.169.254', false, false],
    ['::ffff:0:169.254.169.254', false, false],
    ['::8.8.8.8', true, true],
    ['100.64.0.1', false, true],
    ['169.254.169.254', false, false],
    ['::ffff:169.254.169.254', false, false],
    ['fd00:ec2::254', false, false],
    ['100.100.100.200', false, false],
    ['0.0.0.0', false, false],
    ['::', false, false],
    ['224.0.0.1', false, false],
    ['255.255.255.255', false, false],
    ['not-an-ip', false, false],
  ];
  for (const [ip, byDefault, withPrivate] of cases) {
    assert.equal(addressAllowed(ip, false), byDefault, `${ip} by default`);
    assert.equal(addressAllowed(ip, true), withPrivate, `${ip} with private allowed`);
  }
});

for (const backend of BACKENDS) {
  describe(`webhooks: safety (${backend.name})`, () => {
    let s: TestServer;
    let receiver: Receiver;
    // SVC_WEBHOOK_ALLOW_PRIVATE is not set: the default policy.
    before(async () => {
      s = await startTestServer(backend, { env: { SVC_WEBHOOK_RETRY_SCHEDULE: '0,50ms' } });
      receiver = await Receiver.start();
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });
    const call = (
      method: 'GET' | 'POST' | 'PATCH' | 'DELETE',
      url: string,
      body?: object,
      token?: string | null,
    ) =>
      s.app.inject({
        method,
        url: `/v1/admin${url}`,
        headers: token === null ? {} : { authorization: `Bearer ${token ?? s.adminToken}` },
        ...(body ? { payload: body } : {}),
      });
    const base = () => `/projects/${s.project.id}/webhooks`;

    test('SSRF: loopback, private, link-local, metadata and names resolving to them are refused at creation', async () => {
      const refused: [string, string][] = [
        ['http://127.0.0.1/hook', 'webhook_url_forbidden'],
        ['http://10.0.0.1/hook', 'webhook_url_forbidden'],
        ['http://169.254.169.254/latest/meta-data', 'webhook_url_forbidden'],
        ['http://localhost:8080/hook', 'webhook_url_forbidden'],
        ['http://[::1]/hook', 'webhook_url_forbidden'],
        ['http://[::ffff:7f00:1]/hook', 'webhook_url_forbidden'],
        ['http://0x7f000001/hook', 'webhook_url_forbidden'],
        ['http://192.168.0.10/hook', 'webhook_url_forbidden'],
        ['ftp://example.com/hook', 'invalid_webhook_url'],
        ['http://user:pw@example.com/hook', 'invalid_webhook_url'],
        ['not a url at all', 'invalid_webhook_url'],
        // Port 0 reaches nothing; the URL parser keeps it.
        ['http://8.8.8.8:0/', 'invalid_webhook_url'],
        // The URL parser drops these silently: the URL stored would not be the one given.
        ['http://8.8.8.8/\r\nx', 'invalid_webhook_url'],
        ['http://8.8.8.8/\tx', 'invalid_webhook_url'],
        ['http://8.8.8.8/ x', 'invalid_webhook_url'],
        [' http://8.8.8.8/', 'invalid_webhook_url'],
      ];
      for (const [url, code] of refused) {
        const res = await call('POST', base(), { url });
        assert.equal(res.statusCode, 400, `${url}: ${res.body}`);
        assert.equal(res.json().code, code, url);
      }
      // The same check guards updates.
      const endpoints = (await call('GET', base())).json();
      assert.equal(endpoints.items.length, 0);
    });

    test('SSRF: checked again at delivery time, before connecting (a URL stored when it was allowed)', async () => {
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
      const now = new Date().toISOString();
      const id = newId('whe');
      // As if the name had resolved to a public address at creation and to loopback now.
      await s.app.svc.store.db
        .insertInto('webhook_endpoints')
        .values({
          id,
          project_id: s.project.id,
          url: receiver.url,
          description: null,
          events: '[]',
          enabled: 1,
          disabled_reason: null,
          secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
          previous_secret: null,
          previous_secret_expires_at: null,
          created_at: now,
          updated_at: now,
        })
        .execute();
      await s.app.svc.events.emit({
        projectId: s.project.id,
        type: 'room.started',
        data: { room: 'ssrf' },
        occurredAtMs: Date.now(),
      });
      const list = await eventually(
        () => s.admin('GET', `${base()}/${id}/deliveries`),
        (l: any) => l.items[0]?.status === 'failed',
        'failed',
      );
      const d = list.items[0];
      assert.equal(d.attemptCount, 2);
      assert.match(
        d.attempts[0].error,
        /refused before connecting: 127\.0\.0\.1 resolves to 127\.0\.0\.1/,
      );
      assert.equal(d.attempts[0].statusCode, null);
      assert.equal(receiver.requests.length, 0, 'no request reached the receiver');
      await s.admin('DELETE', `${base()}/${id}`);
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: false });
    });

    test('every webhook admin route requires the admin token', async () => {
      const routes: [Parameters<typeof call>[0], string][] = [
        ['POST', base()],
        ['GET', base()],
        ['GET', `${base()}/whe_x`],
        ['PATCH', `${base()}/whe_x`],
        ['DELETE', `${base()}/whe_x`],
        ['POST', `${base()}/whe_x/rotate-secret`],
        ['POST', `${base()}/whe_x/test`],
        ['GET', `${base()}/whe_x/deliveries`],
        ['POST', `${base()}/whe_x/deliveries/whd_x/retry`],
      ];
      for (const [method, url] of routes) {
        const missing = await call(method, url, undefined, null);
        assert.equal(missing.statusCode, 401, `${method} ${url}`);
        assert.equal(missing.json().code, 'missing_admin_token');
        const wrong = await call(method, url, undefined, 'nope');
        assert.equal(wrong.json().code, 'invalid_admin_token');
      }
    });

    test('bad input is refused with a clear code; other projects’ endpoints are not found', async () => {
      const bad = [
        { url: 'https://example.com/h', events: ['room.nope'] },
        { url: 'https://example.com/h', extra: 1 },
        { events: [] },
      ];
      for (const body of bad) {
        const res = await call('POST', base(), body);
        assert.equal(res.statusCode, 400, res.body);
        assert.equal(res.json().code, 'invalid_request');
      }
      const noProject = await call('POST', '/projects/prj_missing/webhooks', {
        url: 'http://127.0.0.1/',
      });
      assert.equal(noProject.json().code, 'project_not_found');
      const other = await s.admin('POST', '/projects', { name: 'other' });
      const res = await call('GET', `/projects/${other.id}/webhooks/whe_nope/deliveries`);
      assert.equal(res.statusCode, 404);
      assert.equal(res.json().code, 'webhook_endpoint_not_found');
    });
  });

  describe(`webhooks: the project switch (${backend.name})`, () => {
    let s: TestServer;
    let receiver: Receiver;
    let failFirst = true;
    before(async () => {
      s = await startTestServer(backend, {
        env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_RETRY_SCHEDULE: '0,300ms,300ms' },
      });
      receiver = await Receiver.start((r) =>
        r.json.data.room === 'pending' && failFirst ? { status: 500 } : { status: 200 },
      );
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });
    const emit = (room: string) =>
      s.app.svc.events.emit({
        projectId: s.project.id,
        type: 'room.started',
        data: { room },
        orderingKey: `room:${s.project.id}:${room}`,
        occurredAtMs: Date.now(),
      });

    test('webhooks switched off: nothing is stored or sent; test events are refused', async () => {
      const project = await s.admin('GET', `/projects/${s.project.id}`);
      assert.equal(project.webhooksEnabled, false);
      const ep = await s.admin('POST', `/projects/${s.project.id}/webhooks`, { url: receiver.url });
      await emit('off-1');
      await emit('off-2');
      const list = await s.admin('GET', `/projects/${s.project.id}/webhooks/${ep.id}/deliveries`);
      assert.equal(list.meta.total, 0);
      const testEvent = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/projects/${s.project.id}/webhooks/${ep.id}/test`,
        headers: { authorization: `Bearer ${s.adminToken}` },
      });
      assert.equal(testEvent.statusCode, 409);
      assert.equal(testEvent.json().code, 'webhooks_disabled');
      // Switched on: only what happens from now on is sent.
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
      await emit('on');
      await receiver.until(
        () => receiver.requests.length >= 1,
        'the first event after switching on',
      );
      assert.deepEqual(
        receiver.requests.map((r) => r.json.data.room),
        ['on'],
      );
      // Switched off while a delivery waits for its retry: it is skipped, not sent.
      await emit('pending');
      await receiver.until(
        () => receiver.requests.some((r) => r.json.data.room === 'pending'),
        'first attempt',
      );
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: false });
      failFirst = false;
      const after = await eventually(
        () =>
          s.admin('GET', `/projects/${s.project.id}/webhooks/${ep.id}/deliveries?status=skipped`),
        (l: any) => l.meta.total === 1,
        'skipped',
      );
      assert.match(after.items[0].lastError, /switched off/);
      assert.equal(receiver.requests.filter((r) => r.json.data.room === 'pending').length, 1);
    });
  });
}
