import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { HAS_REDIS_SERVER, RedisServer } from '../fixtures/redis-server.ts';
import type { NodeProcess } from '../fixtures/spawn-node.ts';
import { DATABASE_URL, dropSchemas, uniqueName } from '../helpers.ts';
import { RtClient } from '../realtime/rt-helpers.ts';
import { assertUnavailable, Fleet, report, request, type Timed, waitFor } from './fleet.ts';

// Two server processes on PostgreSQL and a redis-server of this file's own, which it stops,
// freezes (SIGSTOP) and flushes. The policy under test (README, "When a dependency fails"):
// keyed requests that need only PostgreSQL go on (rate limits counted per node, bounded by the
// key's limit on each), what needs Redis answers 503 with Retry-After, nothing waits longer than
// the Redis deadline, /readyz answers within a second, and everything recovers by itself.
describe('Redis outages, two nodes', {
  skip: !(DATABASE_URL && HAS_REDIS_SERVER) && 'needs DATABASE_URL and redis-server',
}, () => {
  const schema = uniqueName('t');
  const fleet = new Fleet();
  let redis: RedisServer;
  const stateTimeoutMs = 1000;
  const open: RtClient[] = [];

  const node = (i: number) => fleet.nodes[i]!;
  /** A keyed route that needs PostgreSQL only (the key check, the rate limit, a query). */
  const listLinks = (i: number, key?: string) =>
    fleet.call(node(i), 'GET', '/v1/sdk/links?limit=1', undefined, key);
  /** A keyed route that needs Redis (a new room's live state). */
  const token = (i: number, room = uniqueName('room'), userId = 'u1') =>
    fleet.call(node(i), 'POST', '/v1/realtime/token', {
      roomName: room,
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId, name: userId },
    });
  const ready = (i: number) => request(node(i), 'GET', '/readyz');
  let seen: Timed[] = [];
  const bounded = (res: Timed, what: string) => {
    seen.push(res);
    assert.ok(res.ms < stateTimeoutMs + 500, `${what} answered in ${Math.round(res.ms)} ms`);
  };

  const connect = async (n: NodeProcess, room: string, userId: string) => {
    const t = await token(fleet.nodes.indexOf(n), room, userId);
    assert.equal(t.status, 200, JSON.stringify(t.body));
    const ws = `ws://127.0.0.1:${n.port}/v1/realtime/ws`;
    const c = await RtClient.open(`${ws}?room=${room}&access_token=${t.body.token}`);
    open.push(c);
    await c.join();
    return c;
  };

  const recovered = async () => {
    const back = Date.now();
    for (const i of [0, 1]) {
      await waitFor(`node ${i} recovered`, async () => {
        fleet.assertAlive();
        const [t, r] = [await token(i), await ready(i)];
        assert.notEqual(t.status, 500, JSON.stringify(t.body));
        return t.status === 200 && r.status === 200 ? true : undefined;
      });
    }
    return Date.now() - back;
  };

  before(async () => {
    redis = await RedisServer.start();
    await fleet.start({
      DATABASE_URL: DATABASE_URL!,
      REDIS_URL: redis.url,
      SVC_PG_SCHEMA: schema,
      SVC_STATE_TIMEOUT_MS: String(stateTimeoutMs),
    });
  });

  after(async () => {
    for (const c of open) c.drop();
    await fleet.stop();
    await redis?.stop();
    await dropSchemas(schema);
  });

  test('Redis stopped: PostgreSQL-only requests go on within the rate limit per node, Redis ones get 503 + Retry-After, /readyz 503 within 1 s, revocations land within ~1 s; back: recovered', async () => {
    for (const i of [0, 1]) {
      assert.equal((await listLinks(i)).status, 200);
      assert.equal((await token(i)).status, 200);
    }
    await redis.stop();
    seen = [];
    const limited = await fleet.admin(node(0), 'POST', `/projects/${fleet.projectId}/keys`, {
      type: 'server',
      rateLimitPerMinute: 3,
    });
    try {
      for (const i of [0, 1]) {
        for (let n = 0; n < 3; n++) {
          const res = await listLinks(i);
          assert.equal(res.status, 200, JSON.stringify(res.body));
          bounded(res, `node ${i} PostgreSQL-only request`);
          const t = await token(i);
          assertUnavailable(t, `node ${i} token`);
          bounded(t, `node ${i} token`);
        }
        const r = await ready(i);
        assertUnavailable(r, `node ${i} /readyz`);
        assert.ok(r.ms < 1000, `/readyz answered in ${r.ms} ms`);
        assert.equal(r.body.checks.sharedState.status, 'down');
        assert.equal(r.body.checks.store.status, 'up');
        const metrics = await request(node(i), 'GET', '/metrics');
        assert.match(metrics.body, /svc_dependency_up\{dependency="shared_state"\} 0/);
        assert.match(metrics.body, /svc_dependency_up\{dependency="store"\} 1/);
      }
      // Counted per node while Redis is away: each node admits the key's limit, no more.
      for (const i of [0, 1]) {
        const statuses = [];
        for (let n = 0; n < 5; n++) statuses.push((await listLinks(i, limited.key)).status);
        assert.deepEqual(statuses, [200, 200, 200, 429, 429], `node ${i}`);
      }
      // A key revoked on node A is refused by node B soon, though no invalidation can be sent.
      const revoked = await fleet.admin(node(0), 'POST', `/projects/${fleet.projectId}/keys`, {
        type: 'server',
      });
      assert.equal((await listLinks(1, revoked.key)).status, 200, 'node B has the key cached');
      await fleet.admin(node(0), 'DELETE', `/projects/${fleet.projectId}/keys/${revoked.id}`);
      const at = Date.now();
      await waitFor(
        'node B refuses the revoked key',
        async () => ((await listLinks(1, revoked.key)).status === 401 ? true : undefined),
        3000,
      );
      console.log(`# revocation reached node B after ${Date.now() - at} ms without Redis`);
      // A link made now is stored and answered, though no node can be told of it, and the
      // other node redirects it (it reads links it has not cached from PostgreSQL).
      const made = await fleet.call(node(0), 'POST', '/v1/sdk/links', {
        url: 'https://shop.example.com/during-outage',
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const visit = await request(node(1), 'GET', `/l/${made.body.slug}`);
      assert.equal(visit.status, 302);
      assert.equal(visit.headers.location, 'https://shop.example.com/during-outage');
      report('Redis stopped: keyed requests (PostgreSQL-only and Redis-needing)', seen);
      fleet.assertAlive();
    } finally {
      await redis.start();
    }
    console.log(`# Redis back: both nodes recovered within ${await recovered()} ms`);
    // Two sockets on two nodes, after the restart: fan-out works again.
    const a = await connect(node(0), 'after-restart', 'alice');
    const b = await connect(node(1), 'after-restart', 'bob');
    const ack = await a.request('message.send', { message: 'hello again' });
    assert.equal(ack.type, 'ack', JSON.stringify(ack));
    await b.wait((f) => f.type === 'message.received' && f.data?.message === 'hello again');
  });

  test('Redis frozen (SIGSTOP): no request waits past the deadline, /readyz within 1 s, sockets get service_unavailable; thawed: fan-out and everything else recovered', async () => {
    const a = await connect(node(0), 'frozen-room', 'alice');
    const b = await connect(node(1), 'frozen-room', 'bob');
    redis.freeze();
    seen = [];
    try {
      for (const i of [0, 1]) {
        const answers = await Promise.all(Array.from({ length: 5 }, () => listLinks(i)));
        for (const res of answers) {
          assert.equal(res.status, 200, JSON.stringify(res.body));
          bounded(res, `node ${i} PostgreSQL-only request`);
        }
        const t = await token(i);
        assertUnavailable(t, `node ${i} token`);
        bounded(t, `node ${i} token`);
        const r = await ready(i);
        assertUnavailable(r, `node ${i} /readyz`);
        assert.ok(r.ms < 1000, `/readyz answered in ${r.ms} ms`);
      }
      const refused = await a.request('message.send', { message: 'while frozen' });
      assert.equal(refused.type, 'error', JSON.stringify(refused));
      assert.equal(refused.code, 'service_unavailable');
      fleet.assertAlive();
      report(`Redis frozen (deadline ${stateTimeoutMs} ms): keyed requests`, seen);
    } finally {
      redis.thaw();
    }
    console.log(`# Redis thawed: both nodes recovered within ${await recovered()} ms`);
    const ack = await a.request('message.send', { message: 'after the thaw' });
    assert.equal(ack.type, 'ack', JSON.stringify(ack));
    await b.wait((f) => JSON.stringify(f).includes('after the thaw'));
  });

  test('Redis flushed (FLUSHALL): requests go on, rooms come back from their records, rate limits count again across nodes', async () => {
    assert.equal((await token(0)).status, 200);
    await redis.flushAll();
    for (const i of [0, 1]) {
      assert.equal((await listLinks(i)).status, 200);
      const t = await token(i);
      assert.equal(t.status, 200, JSON.stringify(t.body));
      assert.equal((await ready(i)).status, 200);
    }
    const limited = await fleet.admin(node(0), 'POST', `/projects/${fleet.projectId}/keys`, {
      type: 'server',
      rateLimitPerMinute: 3,
    });
    const statuses = [];
    for (const i of [0, 1, 0, 1, 0]) statuses.push((await listLinks(i, limited.key)).status);
    assert.deepEqual(statuses, [200, 200, 200, 429, 429], 'one count across both nodes');
    fleet.assertAlive();
  });
});
