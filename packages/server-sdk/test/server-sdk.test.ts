import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { SvcError, SvcServer, SvcWebhookError, WebhookReceiver } from '../src/index.ts';

async function listen(server: Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function rejectsWith(promise: Promise<unknown>, code: string) {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof SvcError, String(err));
    assert.equal(err.code, code, err.message);
    return true;
  });
}

/** A webhook receiver: keeps each delivery's raw body and headers. */
function hookSink() {
  const got: { body: string; headers: IncomingMessage['headers'] }[] = [];
  const waiters: (() => void)[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => {
      body += d;
    });
    req.on('end', () => {
      got.push({ body, headers: req.headers });
      res.writeHead(204).end();
      for (const w of waiters.splice(0)) w();
    });
  });
  return {
    server,
    got,
    next: () =>
      got.length > 0 ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve)),
  };
}

for (const backend of BACKENDS) {
  describe(`server library against the server (${backend.name})`, () => {
    let s: TestServer;
    let base: string;
    let svc: SvcServer;
    const sink = hookSink();
    let sinkUrl: string;

    before(async () => {
      s = await startTestServer(backend, { env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
      await s.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
      svc = new SvcServer({
        baseUrl: base,
        projectId: s.project.id,
        apiKey: s.project.serverKey,
        adminToken: s.adminToken,
      });
      sinkUrl = await listen(sink.server);
    });
    after(async () => {
      sink.server.close();
      await s.close();
    });

    test('rooms: create, get, list by status, participants, message, delete', async () => {
      const room = await svc.rooms.create({ roomName: 'sdk-room', liveType: 'VIDEO_CONFERENCE' });
      assert.equal(room.roomName, 'sdk-room');
      assert.equal((await svc.rooms.get('sdk-room')).liveType, 'VIDEO_CONFERENCE');
      const idle = await svc.rooms.list({ status: 'IDLE' });
      assert.ok(idle.items.some((r) => r.roomName === 'sdk-room'));
      assert.deepEqual((await svc.rooms.participants('sdk-room')).items, []);
      const sent = await svc.rooms.sendMessage('sdk-room', {
        message: 'hello',
        sender: { userId: 'backend', name: 'Backend' },
      });
      assert.equal(typeof sent.seq, 'number');
      await rejectsWith(
        svc.rooms.create({ roomName: 'sdk-room', liveType: 'VIDEO_CONFERENCE' }),
        'room_exists',
      );
      await svc.rooms.delete('sdk-room');
      await rejectsWith(svc.rooms.get('no-such-room'), 'room_not_found');
    });

    test('tokens: a host token for a user', async () => {
      const t = await svc.tokens.create({
        roomName: 'sdk-token-room',
        liveType: 'AUDIO_CONFERENCE',
        participant: { userId: 'u1', name: 'User One', isHost: true },
      });
      assert.equal(t.userId, 'u1');
      assert.match(t.wsUrl, /access_token=/);
      assert.equal(t.token.split('.').length, 3);
    });

    test('recordings: lists, lookups and a room without media', async () => {
      const page = await svc.recordings.list({ limit: 5 });
      assert.deepEqual(page.items, []);
      assert.equal(page.meta.total, 0);
      assert.deepEqual((await svc.recordings.listActive('nowhere')).items, []);
      await rejectsWith(svc.recordings.get('egr_none'), 'recording_not_found');
      await rejectsWith(svc.recordings.downloadUrl('egr_none'), 'recording_not_found');
      await svc.rooms.create({ roomName: 'sdk-rec-room', liveType: 'VIDEO_CONFERENCE' });
      // The test server runs without a media engine (SVC_MEDIA=off).
      await rejectsWith(svc.recordings.start({ roomName: 'sdk-rec-room' }), 'media_unavailable');
    });

    test('verify: validate a token, logs and stats', async () => {
      const result = await svc.verify.validateToken('not-a-token');
      assert.equal(result.valid, false);
      const logs = await svc.verify.logs({ limit: 5 });
      assert.ok(Array.isArray(logs.items));
      const stats = await svc.verify.stats();
      assert.equal(typeof stats.verifications, 'number');
    });

    test('links: create, get, list, update, stats, delete', async () => {
      const link = await svc.links.create({ url: 'https://example.com/sdk' });
      assert.equal((await svc.links.get(link.id)).id, link.id);
      assert.ok((await svc.links.list({ limit: 100 })).items.some((l) => l.id === link.id));
      const updated = await svc.links.update(link.id, { params: { from: 'sdk' } });
      assert.deepEqual(updated.params, { from: 'sdk' });
      const stats = await svc.links.stats(link.id);
      assert.equal(stats.linkId, link.id);
      await svc.links.delete(link.id);
      await rejectsWith(svc.links.get(link.id), 'link_not_found');
    });

    test('errors carry the registry code: a client key cannot do server-key operations', async () => {
      const asClient = new SvcServer({
        baseUrl: base,
        projectId: s.project.id,
        apiKey: s.project.clientKey,
      });
      await rejectsWith(asClient.rooms.list(), 'server_key_required');
      const bad = new SvcServer({ baseUrl: base, projectId: s.project.id, apiKey: 'svc_sk_nope' });
      await rejectsWith(bad.rooms.list(), 'invalid_api_key');
      await rejectsWith(asClient.webhooks.list(), 'missing_admin_token');
    });

    test('webhook endpoints and the receiver: a test event arrives verified and typed', async () => {
      const endpoint = await svc.webhooks.create({ url: `${sinkUrl}/hook` });
      assert.match(endpoint.secret, /^whsec_/);
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
      const sent = await svc.webhooks.test(endpoint.id);
      await sink.next();
      const delivery = sink.got[0]!;
      const receiver = new WebhookReceiver(endpoint.secret);
      const event = receiver.receive(delivery.body, delivery.headers);
      assert.equal(event.type, 'webhook.test');
      assert.equal(event.id, sent.eventId);
      assert.equal(event.projectId, s.project.id);
      assert.throws(() => receiver.receive(`${delivery.body} `, delivery.headers), SvcWebhookError);
      assert.throws(
        () =>
          new WebhookReceiver(`whsec_${Buffer.alloc(24).toString('base64')}`).receive(
            delivery.body,
            delivery.headers,
          ),
        SvcWebhookError,
      );
      // During a rotation both secrets verify.
      const rotated = await svc.webhooks.rotateSecret(endpoint.id, 60);
      assert.equal(
        new WebhookReceiver([rotated.secret, endpoint.secret]).receive(
          delivery.body,
          delivery.headers,
        ).id,
        event.id,
      );
      assert.equal((await svc.webhooks.get(endpoint.id)).id, endpoint.id);
      await svc.webhooks.delete(endpoint.id);
    });
  });
}

describe('server library transport', () => {
  test('idempotent requests are retried on 503 honouring Retry-After; POSTs are sent once', async () => {
    let hits = 0;
    const server = createServer((req, res) => {
      hits += 1;
      if (req.method === 'GET' && hits < 3) {
        res.writeHead(503, { 'retry-after': '0', 'content-type': 'application/problem+json' });
        res.end(JSON.stringify({ code: 'service_unavailable', status: 503, title: 'x' }));
        return;
      }
      if (req.method === 'POST') {
        res.writeHead(503, { 'retry-after': '0', 'content-type': 'application/problem+json' });
        res.end(JSON.stringify({ code: 'service_unavailable', status: 503, title: 'x' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [], meta: { total: 0, page: 1, limit: 10 } }));
    });
    const base = await listen(server);
    try {
      const svc = new SvcServer({ baseUrl: base, projectId: 'prj_x', apiKey: 'svc_sk_x' });
      const list = await svc.rooms.list();
      assert.deepEqual(list.items, []);
      assert.equal(hits, 3);
      hits = 0;
      await assert.rejects(
        svc.links.create({ url: 'https://example.com' }),
        (err: SvcError) => err.status === 503,
      );
      assert.equal(hits, 1);
    } finally {
      server.close();
    }
  });

  test('a server that never answers fails with timeout; an unreachable one with network_error', async () => {
    const silent = createServer(() => {});
    const base = await listen(silent);
    try {
      const svc = new SvcServer({
        baseUrl: base,
        projectId: 'prj_x',
        apiKey: 'svc_sk_x',
        timeoutMs: 150,
        retry: { retries: 1, baseDelayMs: 1 },
      });
      await rejectsWith(svc.rooms.get('r'), 'timeout');
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
    const closed = createServer();
    const gone = await listen(closed);
    closed.close();
    const svc = new SvcServer({
      baseUrl: gone,
      projectId: 'prj_x',
      apiKey: 'svc_sk_x',
      retry: { retries: 0 },
    });
    await rejectsWith(svc.rooms.get('r'), 'network_error');
  });
});
