import assert from 'node:assert/strict';
import type http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import {
  ANDROID_APP,
  createLink,
  DEFAULT_HOST,
  httpRequest,
  IOS_APP,
  sdk,
  UA,
} from './fixtures.ts';

/** The headers two answers must share (what varies per response left out). */
function stable(headers: http.IncomingHttpHeaders) {
  const { date, 'request-id': _id, location, ...rest } = headers;
  return { ...rest, location: location?.replace(/clk_[0-9A-Z]{26}/, 'clk_…') };
}

async function listen(s: TestServer) {
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  return (s.app.server.address() as { port: number }).port;
}

for (const backend of BACKENDS) {
  describe(`links redirect over HTTP (${backend.name})`, () => {
    let s: TestServer;
    let port: number;
    let call: ReturnType<typeof sdk>;
    const clock = new ManualClock(Date.now());
    before(async () => {
      s = await startTestServer(backend, { clock, env: { SVC_TRUST_PROXY: '127.0.0.1' } });
      call = sdk(s);
      await s.admin('PATCH', `/projects/${s.project.id}`, {
        settings: { links: { android: [ANDROID_APP], ios: [IOS_APP] } },
      });
      port = await listen(s);
    });
    after(() => s.close());

    const create = (body: Record<string, unknown>) => createLink(call, body);

    test('the first visit loads the link, the next ones are answered from memory, alike', async () => {
      const link = await create({ url: 'https://shop.example.com/p/1', utm: { source: 'mail' } });
      for (const userAgent of [UA.androidChrome, UA.iosSafari, UA.desktopChrome, UA.slack]) {
        const get = () =>
          httpRequest(port, `/l/${link.slug}`, { host: DEFAULT_HOST, 'user-agent': userAgent });
        const first = await get();
        const second = await get();
        const third = await get();
        for (const next of [second, third]) {
          assert.equal(next.status, first.status, userAgent);
          assert.deepEqual(stable(next.headers), stable(first.headers), userAgent);
          assert.equal(next.body, first.body);
          assert.match(String(next.headers['request-id']), /^req_/);
        }
        assert.notEqual(second.headers['request-id'], third.headers['request-id']);
      }
      // Every click counted, whichever way it was served; previews are not clicks.
      const stats = (await call('GET', `/v1/sdk/links/${link.id}/stats`)).json();
      assert.equal(stats.totals.click, 9);
    });

    test('non-ASCII destinations go out percent-encoded, hosts in punycode, cached or not', async () => {
      const link = await create({
        url: 'https://bücher.example/€/日本?q=ü',
        android: { fallbackUrl: 'https://example.com/android/ü' },
        ios: { fallbackUrl: 'https://example.com/ios/€' },
      });
      const expected = {
        [UA.desktopChrome]: 'https://xn--bcher-kva.example/%E2%82%AC/%E6%97%A5%E6%9C%AC?q=%C3%BC',
        [UA.androidChrome]: 'https://example.com/android/%C3%BC',
        [UA.iosSafari]: 'https://example.com/ios/%E2%82%AC',
      };
      for (const [userAgent, location] of Object.entries(expected)) {
        for (let i = 0; i < 3; i++) {
          const res = await httpRequest(port, `/l/${link.slug}`, {
            host: DEFAULT_HOST,
            'user-agent': userAgent,
          });
          assert.equal(res.status, 302, res.body);
          assert.equal(res.headers.location, location);
        }
      }
      // The link itself keeps the URL as it was given.
      assert.equal((await call('GET', `/v1/sdk/links/${link.id}`)).json().url, link.url);
      assert.equal(link.url, 'https://bücher.example/€/日本?q=ü');
    });

    test('Request-Id from the caller is kept; the metrics count redirects under the route', async () => {
      const link = await create({ url: 'https://shop.example.com/p/2' });
      const headers = { host: DEFAULT_HOST, 'user-agent': UA.desktopChrome };
      await httpRequest(port, `/l/${link.slug}`, headers);
      const res = await httpRequest(port, `/l/${link.slug}`, {
        ...headers,
        'request-id': 'abc-123',
      });
      assert.equal(res.headers['request-id'], 'abc-123');
      assert.equal(res.headers['content-length'], '0');
      const metrics = await httpRequest(port, '/metrics', {});
      const line = metrics.body
        .split('\n')
        .find(
          (l) =>
            l.startsWith('svc_http_requests_total{') &&
            l.includes('route="/l/:slug"') &&
            l.includes('status="302"'),
        );
      assert.ok(line, metrics.body);
      assert.ok(Number(line.split(' ').at(-1)) >= 2);
    });

    test('a query string, unknown and expired links, HEAD and other hosts', async () => {
      const link = await create({ url: 'https://shop.example.com/p/3' });
      const headers = { host: DEFAULT_HOST, 'user-agent': UA.desktopChrome };
      await httpRequest(port, `/l/${link.slug}`, headers);
      const withQuery = await httpRequest(port, `/l/${link.slug}?utm_source=share`, headers);
      assert.equal(withQuery.status, 302);
      assert.equal(withQuery.headers.location, 'https://shop.example.com/p/3');

      // Unknown: 404 page both times (the second from the cached absence).
      for (let i = 0; i < 2; i++) {
        const missing = await httpRequest(port, '/l/nope1234', headers);
        assert.equal(missing.status, 404);
        assert.match(String(missing.headers['content-type']), /^text\/html/);
        assert.equal(missing.headers.location, undefined);
      }
      // Not a slug at all: never a redirect.
      for (const path of ['/l/a%2F..%2Fb', '/l/x/y', '/l/', '/l/%00']) {
        const res = await httpRequest(port, path, headers);
        assert.ok(res.status === 404 || res.status === 400, `${path} → ${res.status}`);
        assert.equal(res.headers.location, undefined, path);
      }

      const expiring = await create({
        url: 'https://shop.example.com/p/4',
        expiresAt: new Date(clock.now() + 5_000).toISOString(),
      });
      assert.equal((await httpRequest(port, `/l/${expiring.slug}`, headers)).status, 302);
      clock.advance(6_000);
      const expired = await httpRequest(port, `/l/${expiring.slug}`, headers);
      assert.equal(expired.status, 410, 'the cached link is checked for expiry on every visit');

      const head = await httpRequest(port, `/l/${link.slug}`, headers, 'HEAD');
      assert.equal(head.status, 302);
      assert.equal(head.headers.location, 'https://shop.example.com/p/3');
      // HEAD (link checkers, prefetchers) is not a click: only the two GETs above count.
      const stats = (await call('GET', `/v1/sdk/links/${link.id}/stats`)).json();
      assert.equal(stats.totals.click, 2);

      // Another project's link domain: its own links, not the default host's.
      const brand = await s.admin('POST', '/projects', { name: 'brand' });
      await s.admin('PATCH', `/projects/${brand.id}`, {
        settings: { links: { domains: ['go.brand.test'] } },
      });
      for (let i = 0; i < 2; i++) {
        const other = await httpRequest(port, `/l/${link.slug}`, {
          ...headers,
          host: 'go.brand.test',
        });
        assert.equal(other.status, 404);
      }
    });

    test('behind a trusted proxy: the click is the client’s (X-Forwarded-For), the host X-Forwarded-Host', async () => {
      const brand = await s.admin('POST', '/projects', { name: 'proxied' });
      const brandKey = await s.admin('POST', `/projects/${brand.id}/keys`, { type: 'server' });
      await s.admin('PATCH', `/projects/${brand.id}`, {
        settings: { links: { domains: ['go.proxied.test'], ios: [IOS_APP] } },
      });
      const brandCall = sdk(s, brandKey.key, brand.id);
      const created = await brandCall('POST', '/v1/sdk/links', {
        url: 'https://shop.example.com/p/5',
        params: { screen: 'x' },
      });
      assert.equal(created.statusCode, 201, created.body);
      const link = created.json();
      const visit = () =>
        httpRequest(port, `/l/${link.slug}`, {
          host: 'internal:8080',
          'x-forwarded-host': 'go.proxied.test',
          'x-forwarded-for': '198.51.100.77',
          'user-agent': UA.iosSafari,
        });
      assert.equal((await visit()).status, 302);
      assert.equal((await visit()).status, 302);
      // Two clicks from 198.51.100.77: the app's first open from there matches one of them.
      const deferred = await brandCall(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'ios', userAgent: UA.iosSafari, deviceId: 'front-device' },
        { remoteAddress: '198.51.100.77' },
      );
      assert.equal(deferred.json().matchType, 'probable', deferred.body);
      assert.deepEqual(deferred.json().link.params, { screen: 'x' });
      // From the proxy's own address, nothing is left to match.
      const fromProxy = await brandCall(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'ios', userAgent: UA.iosSafari, deviceId: 'other-device' },
        { remoteAddress: '127.0.0.1' },
      );
      assert.equal(fromProxy.json().matchType, 'none');
    });
  });
}

describe('links redirect without trusted proxies, and with request logging', () => {
  const backend = BACKENDS[0];

  test('X-Forwarded-For and X-Forwarded-Host are ignored without SVC_TRUST_PROXY', async () => {
    const s = await startTestServer(backend);
    try {
      const link = (
        await sdk(s)('POST', '/v1/sdk/links', { url: 'https://shop.example.com/p/6' })
      ).json();
      const port = await listen(s);
      const headers = {
        host: DEFAULT_HOST,
        'x-forwarded-host': 'go.elsewhere.test',
        'x-forwarded-for': '198.51.100.88',
        'user-agent': UA.androidChrome,
      };
      await httpRequest(port, `/l/${link.slug}`, headers);
      assert.equal((await httpRequest(port, `/l/${link.slug}`, headers)).status, 302);
      const spoofed = await sdk(s)(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'android', userAgent: UA.androidChrome, deviceId: 'd1' },
        { remoteAddress: '198.51.100.88' },
      );
      assert.equal(spoofed.json().matchType, 'none', 'the spoofed address was not believed');
      const real = await sdk(s)(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'android', userAgent: UA.androidChrome, deviceId: 'd2' },
        { remoteAddress: '127.0.0.1' },
      );
      assert.equal(real.json().matchType, 'probable');
    } finally {
      await s.close();
    }
  });

  test('with LOG_LEVEL=debug every redirect is logged', async () => {
    const s = await startTestServer(backend, { env: { LOG_LEVEL: 'debug' } });
    try {
      const link = (
        await sdk(s)('POST', '/v1/sdk/links', { url: 'https://shop.example.com/p/7' })
      ).json();
      const port = await listen(s);
      for (let i = 0; i < 3; i++) {
        const res = await httpRequest(port, `/l/${link.slug}`, {
          host: DEFAULT_HOST,
          'user-agent': UA.desktopChrome,
        });
        assert.equal(res.status, 302);
      }
      assert.ok((s.logs.text.match(/"url":"\/l\//g)?.length ?? 0) >= 3, s.logs.text);
    } finally {
      await s.close();
    }
  });
});
