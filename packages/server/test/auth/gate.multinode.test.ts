import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type NodeProcess, spawnNode } from '../fixtures/spawn-node.ts';
import { DATABASE_URL, deleteRedisPrefix, REDIS_URL, uniqueName } from '../helpers.ts';

// Two server processes sharing PostgreSQL and Redis: what every node must agree on.
describe('key gate across two nodes (postgres+redis)', {
  skip: !(DATABASE_URL && REDIS_URL) && 'needs DATABASE_URL and REDIS_URL',
}, () => {
  const schema = uniqueName('t');
  const prefix = `${uniqueName('test')}:`;
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  let a: NodeProcess;
  let b: NodeProcess;
  let projectId: string;

  const admin = async (node: NodeProcess, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${node.url}/v1/admin${path}`, {
      method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    assert.ok(res.ok, `${method} ${path}: ${res.status}`);
    return res.status === 204 ? undefined : res.json();
  };
  const call = (node: NodeProcess, key: string) =>
    fetch(`${node.url}/v1/test/realtime`, {
      headers: { authorization: `Bearer ${key}`, 'x-project-id': projectId },
    });

  before(async () => {
    const env = {
      DATABASE_URL: DATABASE_URL!,
      REDIS_URL: REDIS_URL!,
      SVC_PG_SCHEMA: schema,
      SVC_REDIS_PREFIX: prefix,
      SVC_ADMIN_TOKEN: adminToken,
      SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
      SVC_TEST_ROUTES: 'gate',
      // A long cache TTL: only the invalidation message can make node B refuse in time.
      SVC_KEY_CACHE_TTL_MS: '600000',
    };
    // Both start at once: migrations must serialise.
    [a, b] = await Promise.all([spawnNode(env), spawnNode(env)]);
    projectId = (await admin(a, 'POST', '/projects', { name: 'multi' })).id;
  });

  after(async () => {
    await Promise.allSettled([a?.stop(), b?.stop()]);
    await deleteRedisPrefix(prefix);
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  });

  test('a key revoked on node A is refused by node B within 1 second', async () => {
    const key = await admin(a, 'POST', `/projects/${projectId}/keys`, { type: 'server' });
    assert.equal((await call(b, key.key)).status, 200, 'node B has the key cached');
    await admin(a, 'DELETE', `/projects/${projectId}/keys/${key.id}`);
    const revokedAt = Date.now();
    let status = 0;
    while (Date.now() - revokedAt < 1000) {
      status = (await call(b, key.key)).status;
      if (status === 401) break;
    }
    assert.equal(status, 401, 'node B still accepted the key 1 s after revocation');
    const body = await (await call(b, key.key)).json();
    assert.equal(body.code, 'api_key_revoked');
  });

  test('rate limit is exact across nodes: 150 concurrent requests, limit 120 → 120 pass, 30 get 429', async () => {
    const key = await admin(a, 'POST', `/projects/${projectId}/keys`, {
      type: 'client',
      rateLimitPerMinute: 120,
    });
    const responses = await Promise.all(
      Array.from({ length: 150 }, (_, i) => call(i % 2 ? a : b, key.key)),
    );
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    assert.equal(ok.length, 120);
    assert.equal(limited.length, 30);
    for (const r of limited) {
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
      assert.equal((await r.json()).code, 'rate_limited');
    }
  });

  test('a key busy on both nodes (admitted from permits) still gets exactly its limit: 400 requests at 300', async () => {
    const key = await admin(a, 'POST', `/projects/${projectId}/keys`, {
      type: 'client',
      rateLimitPerMinute: 300,
    });
    const statuses: number[] = [];
    // Rounds of 20 at once on each node: both see the key busy and hold permits while the
    // window fills, then run out of room together.
    for (let round = 0; round < 10; round++) {
      const responses = await Promise.all(
        Array.from({ length: 40 }, (_, i) => call(i % 2 ? a : b, key.key)),
      );
      statuses.push(...responses.map((r) => r.status));
    }
    assert.equal(statuses.filter((s) => s === 200).length, 300);
    assert.equal(statuses.filter((s) => s === 429).length, 100);
    assert.ok(statuses.indexOf(429) >= 280, 'no refusal while room was left');
  });
});
