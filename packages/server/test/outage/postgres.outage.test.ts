import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { HAS_REDIS_SERVER, RedisServer } from '../fixtures/redis-server.ts';
import { TcpProxy } from '../fixtures/tcp-proxy.ts';
import { DATABASE_URL, dropSchemas, uniqueName } from '../helpers.ts';
import { RtClient } from '../realtime/rt-helpers.ts';
import { Receiver } from '../webhooks/receiver.ts';
import { assertUnavailable, Fleet, report, request, type Timed, waitFor } from './fleet.ts';

// Two server processes on PostgreSQL (through a proxy this file controls) and a Redis of this
// file's own. PostgreSQL drops connections, goes away, stalls and comes back: the nodes stay up,
// answer 503 with Retry-After for what needs it (never 500, never a hang), keep /readyz under a
// second, and recover by themselves.
describe('PostgreSQL outages, two nodes', {
  skip: !(DATABASE_URL && HAS_REDIS_SERVER) && 'needs DATABASE_URL and redis-server',
}, () => {
  const schema = uniqueName('t');
  // Names this file's connections in pg_stat_activity (the nodes', their click writer threads').
  const applicationName = uniqueName('svc_outage');
  const fleet = new Fleet();
  let redis: RedisServer;
  let proxy: TcpProxy;
  let receiver: Receiver;
  let admin: pg.Client;
  let link: { id: string; slug: string };
  let endpointId = '';
  const storeTimeoutMs = 1000;

  /** A keyed route that reads PostgreSQL (the key itself is cached after the first call). */
  const listLinks = (i: number) => fleet.call(fleet.nodes[i]!, 'GET', '/v1/sdk/links?limit=1');

  const clicks = async () => {
    const res = await fleet.call(fleet.nodes[0]!, 'GET', `/v1/sdk/links/${link.id}/stats`);
    return res.status === 200 ? (res.body.totals.click as number) : -1;
  };
  /** A desktop click on node `i`, over HTTP. */
  const click = (i: number) =>
    request(fleet.nodes[i]!, 'GET', `/l/${link.slug}`, {
      headers: {
        host: 'localhost:8080',
        'user-agent':
          'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
      },
    });
  const backends = async () =>
    (
      await admin.query<{ n: string }>(
        'select count(*) as n from pg_stat_activity where application_name = $1',
        [applicationName],
      )
    ).rows[0]!.n;

  before(async () => {
    redis = await RedisServer.start();
    proxy = await TcpProxy.start({
      host: '127.0.0.1',
      port: Number(new URL(DATABASE_URL!).port || 5432),
    });
    receiver = await Receiver.start();
    admin = new pg.Client({ connectionString: DATABASE_URL });
    await admin.connect();
    const url = new URL(DATABASE_URL!);
    url.host = `127.0.0.1:${proxy.port}`;
    url.searchParams.set('application_name', applicationName);
    await fleet.start({
      DATABASE_URL: url.toString(),
      REDIS_URL: redis.url,
      SVC_PG_SCHEMA: schema,
      SVC_STORE_TIMEOUT_MS: String(storeTimeoutMs),
      SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
      SVC_WEBHOOK_POLL_MS: '100',
      SVC_REALTIME_DEPARTURE_GRACE_MS: '300',
      SVC_REALTIME_SWEEP_INTERVAL_MS: '50',
    });
    const created = await fleet.call(fleet.nodes[0]!, 'POST', '/v1/sdk/links', {
      url: 'https://shop.example.com/outage',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    link = created.body;
    await fleet.admin(fleet.nodes[0]!, 'PATCH', `/projects/${fleet.projectId}`, {
      webhooksEnabled: true,
    });
    const endpoint = await fleet.admin(
      fleet.nodes[0]!,
      'POST',
      `/projects/${fleet.projectId}/webhooks`,
      { url: `${receiver.url}/hook` },
    );
    endpointId = endpoint.id;
  });

  after(async () => {
    await fleet.stop();
    await proxy?.close();
    await redis?.stop();
    await receiver?.close();
    await admin?.end();
    await dropSchemas(schema);
  });

  test('pg_terminate_backend on every connection: both nodes stay up, the next requests succeed, clicks and webhooks still get written', async () => {
    for (const i of [0, 1]) assert.equal((await listLinks(i)).status, 200);
    assert.equal((await click(0)).status, 302);
    await waitFor('the first click counted', async () =>
      (await clicks()) === 1 ? true : undefined,
    );
    assert.ok(Number(await backends()) > 0, 'the nodes hold connections to terminate');

    const { rows } = await admin.query<{ pid: number }>(
      'select pid, pg_terminate_backend(pid) from pg_stat_activity where application_name = $1',
      [applicationName],
    );
    assert.ok(rows.length > 0);
    const pids = rows.map((r) => r.pid);
    // The pools learn of it when the connections' ends arrive; the nodes must outlive that.
    await waitFor('the terminated backends gone', async () => {
      const left = await admin.query('select 1 from pg_stat_activity where pid = any($1)', [pids]);
      return left.rowCount === 0 ? true : undefined;
    });
    for (const i of [0, 1]) {
      const res = await waitFor(`node ${i} answers 200 again`, async () => {
        fleet.assertAlive();
        const r = await listLinks(i);
        assert.notEqual(r.status, 500, JSON.stringify(r.body));
        return r.status === 200 ? r : undefined;
      });
      assert.equal(res.status, 200);
    }
    fleet.assertAlive();

    // The click writer thread lost its connection too: the next click is still counted.
    assert.equal((await click(1)).status, 302);
    assert.equal((await click(0)).status, 302);
    await waitFor('clicks after the drop counted', async () =>
      (await clicks()) === 3 ? true : undefined,
    );
    // So did the webhook workers: a test event is still delivered.
    await fleet.admin(
      fleet.nodes[1]!,
      'POST',
      `/projects/${fleet.projectId}/webhooks/${endpointId}/test`,
    );
    await waitFor('the webhook delivered', async () =>
      receiver.requests.some((r) => r.json.type === 'webhook.test') ? true : undefined,
    );
    fleet.assertAlive();
  });

  test('PostgreSQL gone (connections dropped, new ones refused): 503 + Retry-After, /readyz 503 within 1 s; back: recovered by itself', async () => {
    for (const i of [0, 1]) assert.equal((await listLinks(i)).status, 200);
    const t = await fleet.call(fleet.nodes[0]!, 'POST', '/v1/realtime/token', {
      roomName: 'while-gone',
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId: 'dave', name: 'Dave' },
    });
    assert.equal(t.status, 200, JSON.stringify(t.body));
    await proxy.drop();
    const seen: Timed[] = [];
    try {
      for (const i of [0, 1]) {
        for (let n = 0; n < 3; n++) {
          const res = await listLinks(i);
          seen.push(res);
          assertUnavailable(res, `node ${i} keyed request`);
          assert.ok(res.ms < storeTimeoutMs + 1000, `answered in ${res.ms} ms`);
        }
        const ready = await request(fleet.nodes[i]!, 'GET', '/readyz');
        assertUnavailable(ready, `node ${i} /readyz`);
        assert.ok(ready.ms < 1000, `/readyz answered in ${ready.ms} ms`);
        seen.push(ready);
        assert.equal(ready.body.checks.store.status, 'down');
        assert.equal(ready.body.checks.sharedState.status, 'up');
        // The admin API needs the store too.
        assertUnavailable(
          await fleet.adminCall(fleet.nodes[i]!, 'GET', '/projects'),
          `node ${i} admin`,
        );
        // A click is still redirected (the link is cached); it is written once the store is back.
        assert.equal((await click(i)).status, 302);
        // A socket with a good token is told to come back later, not that its token is bad.
        const socket = await RtClient.open(
          `ws://127.0.0.1:${fleet.nodes[i]!.port}/v1/realtime/ws?room=while-gone&access_token=${t.body.token}`,
        );
        const frame = await socket.wait((f) => f.type === 'error');
        assert.equal(frame.code, 'service_unavailable', JSON.stringify(frame));
        assert.equal((await socket.closed).code, 1011);
      }
      fleet.assertAlive();
      report('PostgreSQL gone: keyed requests and /readyz', seen);
    } finally {
      await proxy.restore();
    }
    const back = Date.now();
    for (const i of [0, 1]) {
      await waitFor(`node ${i} recovered`, async () => {
        const [res, ready] = [await listLinks(i), await request(fleet.nodes[i]!, 'GET', '/readyz')];
        return res.status === 200 && ready.status === 200 ? true : undefined;
      });
    }
    console.log(`# PostgreSQL back: both nodes answered within ${Date.now() - back} ms`);
    await waitFor('clicks served during the outage written', async () =>
      (await clicks()) === 5 ? true : undefined,
    );
  });

  test('PostgreSQL stalled (nothing answers): requests get 503 within the deadline, /readyz within 1 s; then recovered', async () => {
    for (const i of [0, 1]) assert.equal((await listLinks(i)).status, 200);
    proxy.stall();
    const seen: Timed[] = [];
    try {
      for (const i of [0, 1]) {
        // Requests in flight when it stalls wait out the deadline (none longer)…
        const answers = await Promise.all(Array.from({ length: 5 }, () => listLinks(i)));
        seen.push(...answers);
        for (const res of answers) {
          assertUnavailable(res, `node ${i} keyed request`);
          assert.ok(res.ms < storeTimeoutMs * 2 + 1000, `answered in ${res.ms} ms`);
        }
        // …and once the node knows, the next are refused without waiting for it.
        const next = await listLinks(i);
        assertUnavailable(next, `node ${i} keyed request once known down`);
        assert.ok(next.ms < storeTimeoutMs / 2, `answered in ${next.ms} ms`);
        const ready = await request(fleet.nodes[i]!, 'GET', '/readyz');
        assertUnavailable(ready, `node ${i} /readyz`);
        assert.ok(ready.ms < 1000, `/readyz answered in ${ready.ms} ms`);
        seen.push(ready);
      }
      fleet.assertAlive();
      report(
        `PostgreSQL stalled (deadline ${storeTimeoutMs} ms): keyed requests and /readyz`,
        seen,
      );
    } finally {
      await proxy.restore();
    }
    for (const i of [0, 1]) {
      await waitFor(`node ${i} recovered`, async () =>
        (await listLinks(i)).status === 200 &&
        (await request(fleet.nodes[i]!, 'GET', '/readyz')).status === 200
          ? true
          : undefined,
      );
    }
    fleet.assertAlive();
  });
  test('a webhook event raised while PostgreSQL is gone (a participant leaving after the grace period) is held and delivered once it is back', async () => {
    const t = await fleet.call(fleet.nodes[0]!, 'POST', '/v1/realtime/token', {
      roomName: 'held-events',
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId: 'carol', name: 'Carol' },
    });
    assert.equal(t.status, 200, JSON.stringify(t.body));
    const socket = await RtClient.open(
      `ws://127.0.0.1:${fleet.nodes[0]!.port}/v1/realtime/ws?room=held-events&access_token=${t.body.token}`,
    );
    await socket.join();
    await waitFor('participant.joined delivered', async () =>
      receiver.requests.some((r) => r.json.type === 'participant.joined') ? true : undefined,
    );
    await proxy.drop();
    try {
      // The drop, the grace period and the leave happen in Redis; the event's outbox write
      // finds PostgreSQL gone.
      await socket.drop();
      await new Promise((r) => setTimeout(r, 50));
      const left = () => receiver.requests.some((r) => r.json.type === 'participant.left');
      // Held, not lost: nothing can be delivered before the outbox is written.
      assertUnavailable(await listLinks(0), 'node 0 keyed request');
      assert.equal(left(), false);
      fleet.assertAlive();
    } finally {
      await proxy.restore();
    }
    const back = Date.now();
    const left = await waitFor('participant.left delivered after the store came back', async () =>
      receiver.requests.find((r) => r.json.type === 'participant.left'),
    );
    console.log(`# held webhook event delivered ${Date.now() - back} ms after PostgreSQL was back`);
    assert.equal(left.json.data.participant.userId, 'carol');
    fleet.assertAlive();
  });
});
