import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { generateKey } from '../../src/auth/key-format.ts';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { gateTestRoutes } from './gate-routes.ts';

for (const backend of BACKENDS) {
  describe(`key gate (${backend.name})`, () => {
    let s: TestServer;
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    before(async () => {
      s = await startTestServer(backend, { clock, routes: gateTestRoutes });
    });
    after(() => s.close());

    const call = (
      url: string,
      headers: Record<string, string> = {},
      extra: Partial<InjectOptions> = {},
    ) => s.app.inject({ method: 'GET', url, headers, ...extra });
    const auth = (key: string, projectId = s.project.id) => ({
      authorization: `Bearer ${key}`,
      'x-project-id': projectId,
    });

    async function refused(res: Awaited<ReturnType<typeof call>>, status: number, code: string) {
      assert.equal(res.statusCode, status, res.body);
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
      const body = res.json();
      assert.equal(body.code, code);
      assert.equal(body.status, status);
      assert.equal(body.requestId, res.headers['request-id']);
      assert.ok(body.title);
      return body;
    }

    async function newKey(body: Record<string, unknown>, projectId = s.project.id) {
      return s.admin('POST', `/projects/${projectId}/keys`, body);
    }

    test('client and server keys pass on their routes, with rate-limit headers', async () => {
      const res = await call('/v1/test/realtime', auth(s.project.clientKey));
      assert.equal(res.statusCode, 200);
      assert.deepEqual(res.json(), { ok: true, projectId: s.project.id, keyType: 'client' });
      assert.equal(res.headers['ratelimit-policy'], '"default";q=120;w=60');
      assert.match(String(res.headers.ratelimit), /^"default";r=\d+;t=\d+$/);
      assert.ok(res.headers['request-id']);
      const server = await call('/v1/test/realtime-admin', auth(s.project.serverKey));
      assert.equal(server.statusCode, 200);
      assert.equal(server.headers['ratelimit-policy'], '"default";q=6000;w=60');
    });

    test('X-Api-Key is accepted; a conflict with Authorization is refused', async () => {
      const res = await call('/v1/test/realtime', {
        'x-api-key': s.project.clientKey,
        'x-project-id': s.project.id,
      });
      assert.equal(res.statusCode, 200);
      const same = await call('/v1/test/realtime', {
        ...auth(s.project.clientKey),
        'x-api-key': s.project.clientKey,
      });
      assert.equal(same.statusCode, 200);
      await refused(
        await call('/v1/test/realtime', {
          ...auth(s.project.clientKey),
          'x-api-key': s.project.serverKey,
        }),
        400,
        'conflicting_credentials',
      );
    });

    test('missing key, missing project id, malformed headers', async () => {
      await refused(
        await call('/v1/test/realtime', { 'x-project-id': s.project.id }),
        401,
        'missing_api_key',
      );
      await refused(
        await call('/v1/test/realtime', { authorization: `Bearer ${s.project.clientKey}` }),
        400,
        'missing_project_id',
      );
      await refused(
        await call('/v1/test/realtime', {
          authorization: `Basic abc`,
          'x-project-id': s.project.id,
        }),
        401,
        'invalid_api_key',
      );
      await refused(
        await call('/v1/test/realtime', auth(s.project.clientKey, 'x'.repeat(5000))),
        400,
        'invalid_header',
      );
      await refused(
        await call('/v1/test/realtime', auth('y'.repeat(8000))),
        401,
        'invalid_api_key',
      );
    });

    test('bad checksum, unknown key and another project all read invalid_api_key', async () => {
      const key = s.project.clientKey;
      const bad = key.slice(0, 10) + (key[10] === 'A' ? 'B' : 'A') + key.slice(11);
      await refused(await call('/v1/test/realtime', auth(bad)), 401, 'invalid_api_key');
      await refused(
        await call('/v1/test/realtime', auth(generateKey('client'))),
        401,
        'invalid_api_key',
      );
      const other = await s.admin('POST', '/projects', { name: 'other' });
      await refused(
        await call('/v1/test/realtime', auth(s.project.clientKey, other.id)),
        401,
        'invalid_api_key',
      );
    });

    test('a key with a bad checksum is refused without any store query', async () => {
      const db = s.app.svc.store.db;
      const original = db.selectFrom.bind(db);
      let queries = 0;
      (db as any).selectFrom = (...args: any[]) => {
        queries += 1;
        return (original as any)(...args);
      };
      try {
        const key = generateKey('server');
        const bad = `${key.slice(0, -6)}000000`;
        s.app.svc.keyStore.clear();
        await refused(await call('/v1/test/realtime', auth(bad)), 401, 'invalid_api_key');
        assert.equal(queries, 0);
        await refused(await call('/v1/test/realtime', auth(key)), 401, 'invalid_api_key');
        assert.equal(queries, 1, 'a well-formed unknown key is looked up once');
      } finally {
        (db as any).selectFrom = original;
      }
    });

    test('expired and revoked keys', async () => {
      const expiring = await newKey({
        type: 'client',
        expiresAt: new Date(clock.now() + 60_000).toISOString(),
      });
      assert.equal((await call('/v1/test/realtime', auth(expiring.key))).statusCode, 200);
      clock.advance(61_000);
      await refused(await call('/v1/test/realtime', auth(expiring.key)), 401, 'api_key_expired');
      const revoked = await newKey({ type: 'server' });
      assert.equal((await call('/v1/test/realtime', auth(revoked.key))).statusCode, 200);
      await s.admin('DELETE', `/projects/${s.project.id}/keys/${revoked.id}`);
      await refused(await call('/v1/test/realtime', auth(revoked.key)), 401, 'api_key_revoked');
    });

    test('product not enabled, insufficient scope, server key required', async () => {
      const p = await s.admin('POST', '/projects', { name: 'links only', products: ['links'] });
      const server = await newKey({ type: 'server' }, p.id);
      await refused(
        await call('/v1/test/realtime', auth(server.key, p.id)),
        403,
        'product_not_enabled',
      );
      assert.equal((await call('/v1/test/links', auth(server.key, p.id))).statusCode, 200);
      await refused(
        await call('/v1/test/mail', auth(server.key, p.id)),
        403,
        'product_not_enabled',
      );
      await s.admin('PATCH', `/projects/${p.id}`, { products: ['links', 'mail'] });
      assert.equal(
        (await call('/v1/test/mail', auth(server.key, p.id))).statusCode,
        200,
        'enabling a product takes effect at once',
      );

      const linksOnly = await newKey({ type: 'client', scopes: ['links'] });
      await refused(
        await call('/v1/test/realtime', auth(linksOnly.key)),
        403,
        'insufficient_scope',
      );
      assert.equal((await call('/v1/test/links', auth(linksOnly.key))).statusCode, 200);
      await refused(
        await call('/v1/test/realtime-admin', auth(s.project.clientKey)),
        403,
        'server_key_required',
      );
      await refused(
        await call('/v1/test/mail', auth(s.project.clientKey)),
        403,
        'insufficient_scope',
      );
    });

    test('origin lock: exact, wildcard, Referer fallback, none sent', async () => {
      const k = await newKey({
        type: 'client',
        allowedOrigins: ['https://*.example.com', 'https://app.test'],
      });
      const withOrigin = (origin: string) => call('/v1/test/realtime', { ...auth(k.key), origin });
      for (const ok of ['https://a.example.com', 'https://a.b.example.com', 'https://app.test']) {
        assert.equal((await withOrigin(ok)).statusCode, 200, ok);
      }
      for (const no of [
        'https://example.com',
        'https://evilexample.com',
        'https://example.com.evil.com',
        'http://a.example.com',
        'https://a.example.com:8443',
        'null',
      ]) {
        await refused(await withOrigin(no), 403, 'origin_not_allowed');
      }
      assert.equal(
        (await call('/v1/test/realtime', { ...auth(k.key), referer: 'https://x.example.com/page' }))
          .statusCode,
        200,
      );
      await refused(
        await call('/v1/test/realtime', {
          ...auth(k.key),
          referer: 'https://evil.com/https://a.example.com',
        }),
        403,
        'origin_not_allowed',
      );
      await refused(await call('/v1/test/realtime', auth(k.key)), 403, 'origin_not_allowed');
    });

    test('bundle-id lock, and either lock satisfying a key with both', async () => {
      const k = await newKey({ type: 'client', allowedBundleIds: ['com.example.app'] });
      assert.equal(
        (await call('/v1/test/realtime', { ...auth(k.key), 'x-bundle-id': 'com.example.app' }))
          .statusCode,
        200,
      );
      await refused(
        await call('/v1/test/realtime', { ...auth(k.key), 'x-bundle-id': 'com.evil.app' }),
        403,
        'bundle_id_not_allowed',
      );
      await refused(await call('/v1/test/realtime', auth(k.key)), 403, 'bundle_id_not_allowed');
      const both = await newKey({
        type: 'client',
        allowedBundleIds: ['com.example.app'],
        allowedOrigins: ['https://app.test'],
      });
      assert.equal(
        (await call('/v1/test/realtime', { ...auth(both.key), 'x-bundle-id': 'com.example.app' }))
          .statusCode,
        200,
      );
      assert.equal(
        (await call('/v1/test/realtime', { ...auth(both.key), origin: 'https://app.test' }))
          .statusCode,
        200,
      );
      await refused(
        await call('/v1/test/realtime', { ...auth(both.key), 'x-bundle-id': 'com.evil' }),
        403,
        'bundle_id_not_allowed',
      );
    });

    test('server-key IP allow-list: v4, v6, mapped; X-Forwarded-For is not believed without a trusted proxy', async () => {
      const k = await newKey({ type: 'server', allowedIps: ['10.0.0.0/8', '2001:db8::/32'] });
      const from = (remoteAddress: string, headers: Record<string, string> = {}) =>
        call('/v1/test/realtime', { ...auth(k.key), ...headers }, { remoteAddress });
      assert.equal((await from('10.9.8.7')).statusCode, 200);
      assert.equal((await from('::ffff:10.1.1.1')).statusCode, 200);
      assert.equal((await from('2001:db8::42')).statusCode, 200);
      await refused(await from('192.0.2.1'), 403, 'ip_not_allowed');
      await refused(await from('2001:db9::1'), 403, 'ip_not_allowed');
      await refused(
        await from('192.0.2.1', { 'x-forwarded-for': '10.0.0.1' }),
        403,
        'ip_not_allowed',
      );
    });

    test('malformed JSON, wrong content type, unknown fields, oversized body, no 500 leaks', async () => {
      const headers = { ...auth(s.project.clientKey), 'content-type': 'application/json' };
      const post = (payload: string, h: Record<string, string> = headers) =>
        s.app.inject({ method: 'POST', url: '/v1/test/echo', headers: h, payload });
      assert.equal((await post('{"name":"ok"}')).statusCode, 200);
      await refused(await post('{"name":'), 400, 'malformed_json');
      await refused(
        await post('name=x', { ...headers, 'content-type': 'text/plain' }),
        415,
        'unsupported_media_type',
      );
      const unknown = await refused(
        await post('{"name":"x","admin":true}'),
        400,
        'invalid_request',
      );
      assert.deepEqual(unknown.errors, [{ path: 'body.admin', message: 'is not a known field' }]);
      const missing = await refused(await post('{}'), 400, 'invalid_request');
      assert.deepEqual(missing.errors, [{ path: 'body.name', message: 'is required' }]);
      await refused(
        await post(JSON.stringify({ name: 'x'.repeat(2_000_000) })),
        413,
        'payload_too_large',
      );
      await refused(await post('{"__proto__":{"x":1},"name":"a"}'), 400, 'malformed_json');
      const boom = await refused(
        await call('/v1/test/boom', auth(s.project.clientKey)),
        500,
        'internal_error',
      );
      assert.doesNotMatch(JSON.stringify(boom), /hunter2|internals/);
      const conflict = await call('/v1/test/deadlock', auth(s.project.clientKey));
      await refused(conflict, 503, 'service_unavailable');
      assert.equal(conflict.headers['retry-after'], '2');
      await refused(await call('/v1/nope', auth(s.project.clientKey)), 404, 'not_found');
    });

    test('legacy keys act as server keys', async () => {
      const legacy = 'svc_legacy_3f9a8b7c6d5e4f3a2b1c';
      const imported = await s.admin('POST', `/projects/${s.project.id}/keys/import-legacy`, {
        key: legacy,
      });
      assert.equal(imported.type, 'legacy');
      assert.equal(imported.key, undefined);
      const res = await call('/v1/test/realtime-admin', auth(legacy));
      assert.equal(res.statusCode, 200);
      assert.equal(res.json().keyType, 'legacy');
      const again = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/projects/${s.project.id}/keys/import-legacy`,
        headers: { authorization: `Bearer ${s.adminToken}` },
        payload: { key: legacy },
      });
      assert.equal(again.json().code, 'key_exists');
    });

    test('rotation with and without a grace period', async () => {
      const k = await newKey({ type: 'client', scopes: ['realtime'], rateLimitPerMinute: 50 });
      const rotated = await s.admin('POST', `/projects/${s.project.id}/keys/${k.id}/rotate`, {
        gracePeriodSeconds: 30,
      });
      assert.notEqual(rotated.key, k.key);
      assert.deepEqual(rotated.scopes, ['realtime']);
      assert.equal(rotated.rateLimitPerMinute, 50);
      assert.equal((await call('/v1/test/realtime', auth(rotated.key))).statusCode, 200);
      assert.equal(
        (await call('/v1/test/realtime', auth(k.key))).statusCode,
        200,
        'old key works during grace',
      );
      clock.advance(30_001);
      await refused(await call('/v1/test/realtime', auth(k.key)), 401, 'api_key_revoked');
      const now = await s.admin('POST', `/projects/${s.project.id}/keys/${rotated.id}/rotate`, {});
      await refused(await call('/v1/test/realtime', auth(rotated.key)), 401, 'api_key_revoked');
      assert.equal((await call('/v1/test/realtime', auth(now.key))).statusCode, 200);
      const listed = await s.admin('GET', `/projects/${s.project.id}/keys`);
      assert.equal(listed.items.find((x: any) => x.id === rotated.id).replacedBy, now.id);
    });

    test('rate limit: 429 with Retry-After once the per-key quota is used', async () => {
      const k = await newKey({ type: 'client', rateLimitPerMinute: 5 });
      for (let i = 0; i < 5; i++)
        assert.equal((await call('/v1/test/realtime', auth(k.key))).statusCode, 200);
      const res = await call('/v1/test/realtime', auth(k.key));
      await refused(res, 429, 'rate_limited');
      assert.ok(Number(res.headers['retry-after']) >= 1);
      assert.equal(res.headers['ratelimit-policy'], '"default";q=5;w=60');
      clock.advance(120_000);
      assert.equal((await call('/v1/test/realtime', auth(k.key))).statusCode, 200, 'quota returns');
    });

    test('the gate runs once for a HEAD request and never on a public route', async () => {
      const k = await newKey({ type: 'client', rateLimitPerMinute: 3 });
      const head = await call('/v1/test/realtime', auth(k.key), { method: 'HEAD' });
      assert.equal(head.statusCode, 200);
      assert.match(String(head.headers.ratelimit), /^"default";r=2;t=\d+$/);
      const anonymous = await call('/v1/test/realtime', {}, { method: 'HEAD' });
      assert.equal(anonymous.statusCode, 401);
      assert.equal(anonymous.body, '');
      const open = await call('/healthz');
      assert.equal(open.statusCode, 200);
      assert.equal(open.headers.ratelimit, undefined);
    });

    test('metrics count requests, auth refusals and rate-limit refusals', async () => {
      const res = await call('/metrics');
      assert.equal(res.statusCode, 200);
      assert.match(
        res.body,
        /svc_http_requests_total\{route="\/v1\/test\/realtime",method="GET",status="200"\} \d+/,
      );
      assert.match(res.body, /svc_auth_refusals_total\{code="invalid_api_key"\} \d+/);
      assert.match(res.body, /svc_rate_limit_refusals_total\{key_type="client"\} [1-9]/);
      // The duration histogram: cumulative buckets per route, ending at +Inf = count.
      const inf =
        /svc_http_request_duration_seconds_bucket\{le="\+Inf",route="\/v1\/test\/realtime"\} (\d+)/.exec(
          res.body,
        );
      const count =
        /svc_http_request_duration_seconds_count\{route="\/v1\/test\/realtime"\} (\d+)/.exec(
          res.body,
        );
      assert.ok(inf && count, res.body);
      assert.equal(inf[1], count[1]);
      assert.ok(Number(count[1]) >= 5);
      assert.match(res.body, /# TYPE svc_http_request_duration_seconds histogram/);
      assert.match(res.body, /# TYPE svc_http_requests_total counter/);
    });

    test('keys never appear in captured log output', async () => {
      const boom = await call(
        `/v1/test/boom?access_token=${s.project.clientKey}`,
        auth(s.project.clientKey),
      );
      // The request's logger (made on first use) carries its request id.
      assert.ok(s.logs.text.includes(`"reqId":"${boom.headers['request-id']}"`), s.logs.text);
      await call('/v1/test/realtime', auth(s.project.serverKey));
      s.app.log.info(
        { key: s.project.serverKey, headers: { authorization: `Bearer ${s.project.clientKey}` } },
        'careless',
      );
      const text = s.logs.text;
      assert.ok(text.length > 0, 'something was logged');
      assert.ok(!text.includes(s.project.clientKey), 'client key leaked to logs');
      assert.ok(!text.includes(s.project.serverKey), 'server key leaked to logs');
      assert.ok(!text.includes(s.adminToken));
    });
  });
}
