import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/areas.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

const PAGE = 'https://app.example.com';
const OTHER = 'https://evil.example.net';
const ADMIN_PAGE = 'https://console.example.com';

for (const backend of BACKENDS) {
  describe(`CORS (${backend.name})`, () => {
    let s: TestServer;
    let lockedKey: string;
    before(async () => {
      s = await startTestServer(backend, { env: { SVC_ADMIN_CORS_ORIGINS: ADMIN_PAGE } });
      lockedKey = (
        await s.admin('POST', `/projects/${s.project.id}/keys`, {
          type: 'client',
          allowedOrigins: [PAGE],
        })
      ).key;
    });
    after(() => s.close());

    const preflight = (url: string, origin: string, method = 'POST') =>
      s.app.inject({
        method: 'OPTIONS',
        url,
        headers: {
          origin,
          'access-control-request-method': method,
          'access-control-request-headers': 'authorization,content-type,x-project-id',
        },
      });
    const call = (key: string, origin: string) =>
      s.app.inject({
        method: 'POST',
        url: '/v1/realtime/token',
        headers: { authorization: `Bearer ${key}`, 'x-project-id': s.project.id, origin },
        payload: {
          roomName: 'cors-room',
          participant: { userId: 'u1', name: 'U' },
          liveType: 'VIDEO_CALL',
        },
      });

    test('a preflight to the public API is answered for any origin (it carries no key)', async () => {
      for (const origin of [PAGE, OTHER]) {
        const res = await preflight('/v1/realtime/token', origin);
        assert.equal(res.statusCode, 204);
        assert.equal(res.headers['access-control-allow-origin'], origin);
        assert.match(String(res.headers.vary), /Origin/);
        assert.match(String(res.headers['access-control-allow-methods']), /POST/);
        const allowed = String(res.headers['access-control-allow-headers']).toLowerCase();
        for (const h of ['authorization', 'content-type', 'x-project-id', 'x-api-key']) {
          assert.ok(allowed.includes(h), h);
        }
        assert.ok(Number(res.headers['access-control-max-age']) > 0);
        assert.equal(res.headers['access-control-allow-credentials'], undefined);
      }
    });

    test('an API response names the caller origin, never *, and exposes the headers clients read; a redirect does not', async () => {
      const res = await call(s.project.clientKey, OTHER);
      assert.equal(res.statusCode, 200);
      assert.equal(res.headers['access-control-allow-origin'], OTHER);
      assert.match(String(res.headers.vary), /Origin/);
      const exposed = String(res.headers['access-control-expose-headers']);
      for (const h of ['Request-Id', 'RateLimit', 'RateLimit-Policy', 'Retry-After']) {
        assert.ok(exposed.split(/,\s*/).includes(h), h);
      }
      assert.equal(res.headers['access-control-allow-credentials'], undefined);
      // An error is readable too (the page learns why).
      const refused = await call('svc_pk_nonsense', OTHER);
      assert.equal(refused.statusCode, 401);
      assert.equal(refused.headers['access-control-allow-origin'], OTHER);
      // Short-link redirects carry none: they are for navigation.
      const link = await s.app.inject({
        method: 'POST',
        url: '/v1/sdk/links',
        headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
        payload: { url: 'https://shop.example.com/p' },
      });
      assert.equal(link.statusCode, 201);
      const redirect = await s.app.inject({
        method: 'GET',
        url: `/l/${link.json().slug}`,
        headers: { origin: PAGE },
      });
      assert.equal(redirect.statusCode, 302);
      assert.equal(redirect.headers['access-control-allow-origin'], undefined);
    });

    test("a key's origin lock: its origin is allowed, another gets 403 without CORS headers", async () => {
      const ok = await call(lockedKey, PAGE);
      assert.equal(ok.statusCode, 200);
      assert.equal(ok.headers['access-control-allow-origin'], PAGE);
      const refused = await call(lockedKey, OTHER);
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().code, 'origin_not_allowed');
      assert.equal(refused.headers['access-control-allow-origin'], undefined);
      assert.equal(refused.headers['access-control-expose-headers'], undefined);
    });

    test('the admin API is open only to SVC_ADMIN_CORS_ORIGINS', async () => {
      const refused = await preflight('/v1/admin/projects', PAGE, 'GET');
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().code, 'origin_not_allowed');
      assert.equal(refused.headers['access-control-allow-origin'], undefined);
      const allowed = await preflight('/v1/admin/projects', ADMIN_PAGE, 'GET');
      assert.equal(allowed.statusCode, 204);
      assert.equal(allowed.headers['access-control-allow-origin'], ADMIN_PAGE);
      for (const [origin, acao] of [
        [PAGE, undefined],
        [ADMIN_PAGE, ADMIN_PAGE],
      ]) {
        const res = await s.app.inject({
          method: 'GET',
          url: '/v1/admin/projects',
          headers: { authorization: `Bearer ${s.adminToken}`, origin: origin! },
        });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['access-control-allow-origin'], acao);
      }
      const metrics = await s.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: { origin: PAGE },
      });
      assert.equal(metrics.headers['access-control-allow-origin'], undefined);
    });

    test('an Origin of null or junk is never echoed', async () => {
      for (const origin of [
        'null',
        'file://',
        'https://a.example.com/path',
        'javascript:alert(1)',
      ]) {
        const pre = await preflight('/v1/realtime/token', origin);
        assert.equal(pre.statusCode, 403, origin);
        assert.equal(pre.headers['access-control-allow-origin'], undefined);
        const res = await call(s.project.clientKey, origin);
        assert.equal(res.headers['access-control-allow-origin'], undefined, origin);
      }
    });
  });
}

test('SVC_ADMIN_CORS_ORIGINS takes exact origins only', () => {
  assert.deepEqual(
    loadConfig({ SVC_ADMIN_CORS_ORIGINS: 'https://a.example.com, http://localhost:3000' })
      .adminCorsOrigins,
    ['https://a.example.com', 'http://localhost:3000'],
  );
  for (const bad of ['*', 'https://*.example.com', 'https://a.example.com/path', 'example.com']) {
    assert.throws(() => loadConfig({ SVC_ADMIN_CORS_ORIGINS: bad }), /SVC_ADMIN_CORS_ORIGINS/);
  }
});
