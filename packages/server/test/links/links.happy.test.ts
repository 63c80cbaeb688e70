import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import {
  ANDROID_APP,
  assertAasaFormat,
  assertAssetLinksFormat,
  createLink,
  DEFAULT_HOST,
  httpRequest,
  IOS_APP,
  sdk,
  UA,
  visit,
} from './fixtures.ts';

for (const backend of BACKENDS) {
  describe(`links happy paths (${backend.name})`, () => {
    let s: TestServer;
    let call: ReturnType<typeof sdk>;
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    before(async () => {
      s = await startTestServer(backend, { clock });
      call = sdk(s);
      await s.admin('PATCH', `/projects/${s.project.id}`, {
        settings: { links: { android: [ANDROID_APP], ios: [IOS_APP] } },
      });
    });
    after(() => s.close());

    const create = (body: Record<string, unknown>) => createLink(call, body);

    test('create, get, update, list, delete', async () => {
      const link = await create({
        url: 'https://shop.example.com/product/42',
        params: { productId: 42, tags: ['a', 'b'] },
        utm: { source: 'newsletter', campaign: 'june' },
        social: { title: 'Product 42', description: 'The best one' },
        externalId: 'prod-42',
        android: { minVersionCode: 10 },
        ios: { minVersion: '2.1' },
      });
      assert.match(link.id, /^lnk_/);
      assert.match(link.slug, /^[A-Za-z0-9]{8}$/);
      assert.equal(link.domain, DEFAULT_HOST);
      assert.equal(link.shortUrl, `http://localhost:8080/l/${link.slug}`);
      assert.deepEqual(link.params, { productId: 42, tags: ['a', 'b'] });
      assert.equal(link.externalId, 'prod-42');
      assert.equal(link.expiresAt, null);

      const got = await call('GET', `/v1/sdk/links/${link.id}`);
      assert.deepEqual(got.json(), link);

      clock.advance(1000);
      const updated = await call('PATCH', `/v1/sdk/links/${link.id}`, {
        slug: 'summer-sale',
        social: null,
        params: { productId: 43 },
      });
      assert.equal(updated.statusCode, 200, updated.body);
      assert.equal(updated.json().slug, 'summer-sale');
      assert.equal(updated.json().social, null);
      assert.deepEqual(updated.json().params, { productId: 43 });
      assert.notEqual(updated.json().updatedAt, link.updatedAt);
      assert.equal(
        (await visit(s, '/l/summer-sale', UA.desktopChrome)).statusCode,
        302,
        'the new slug redirects at once',
      );
      assert.equal((await visit(s, `/l/${link.slug}`, UA.desktopChrome)).statusCode, 404);

      const del = await call('DELETE', `/v1/sdk/links/${link.id}`);
      assert.equal(del.statusCode, 204);
      assert.equal((await call('GET', `/v1/sdk/links/${link.id}`)).json().code, 'link_not_found');
      assert.equal((await visit(s, '/l/summer-sale', UA.desktopChrome)).statusCode, 404);
    });

    test('list: pagination, newest first, search by slug, url and externalId', async () => {
      const made = [];
      for (let i = 0; i < 5; i++) {
        clock.advance(10);
        made.push(
          await create({
            url: `https://search.example.org/item/${i}`,
            slug: `find-me-${i}`,
            externalId: `ext-${i}`,
          }),
        );
      }
      const page1 = (await call('GET', '/v1/sdk/links?q=find-me&limit=2')).json();
      assert.equal(page1.meta.total, 5);
      assert.deepEqual(
        page1.items.map((l: any) => l.slug),
        ['find-me-4', 'find-me-3'],
      );
      const page3 = (await call('GET', '/v1/sdk/links?q=find-me&limit=2&page=3')).json();
      assert.deepEqual(
        page3.items.map((l: any) => l.slug),
        ['find-me-0'],
      );
      const byUrl = (await call('GET', '/v1/sdk/links?q=SEARCH.EXAMPLE.ORG/ITEM/2')).json();
      assert.deepEqual(
        byUrl.items.map((l: any) => l.slug),
        ['find-me-2'],
      );
      const byExternal = (await call('GET', '/v1/sdk/links?externalId=ext-3')).json();
      assert.deepEqual(
        byExternal.items.map((l: any) => l.slug),
        ['find-me-3'],
      );
      const bySlug = (await call('GET', '/v1/sdk/links?slug=find-me-1')).json();
      assert.equal(bySlug.items[0].id, made[1].id);
      const wildcard = (await call('GET', '/v1/sdk/links?q=%25')).json();
      assert.equal(wildcard.meta.total, 0, 'LIKE wildcards in q are matched literally');
    });

    test('redirect for each platform and preview bot', async () => {
      const link = await create({
        url: 'https://shop.example.com/p/1',
        utm: { source: 'sms' },
        social: {
          title: 'Spring <sale>',
          description: 'Up to "50%" off',
          imageUrl: 'https://cdn.example.com/card.png',
        },
      });
      const path = `/l/${link.slug}`;
      const cases: [keyof typeof UA, RegExp][] = [
        [
          'androidChrome',
          /^https:\/\/play\.google\.com\/store\/apps\/details\?id=com\.example\.shop&referrer=/,
        ],
        ['androidFacebookInApp', /^https:\/\/play\.google\.com\//],
        ['androidCubot', /^https:\/\/play\.google\.com\//],
        ['iosSafari', /^https:\/\/apps\.apple\.com\/app\/id1234567890$/],
        ['ipadSafari', /^https:\/\/apps\.apple\.com\/app\/id1234567890$/],
        ['desktopChrome', /^https:\/\/shop\.example\.com\/p\/1\?utm_source=sms$/],
        ['macSafari', /^https:\/\/shop\.example\.com\/p\/1\?utm_source=sms$/],
      ];
      for (const [name, location] of cases) {
        const res = await visit(s, path, UA[name]);
        assert.equal(res.statusCode, 302, name);
        assert.match(String(res.headers.location), location, name);
        assert.match(String(res.headers['cache-control']), /no-store/, name);
      }
      for (const bot of [
        'facebook',
        'slack',
        'twitter',
        'whatsapp',
        'linkedin',
        'discord',
      ] as const) {
        const res = await visit(s, path, UA[bot]);
        assert.equal(res.statusCode, 200, bot);
        assert.equal(res.headers.location, undefined, `${bot} is not redirected`);
        assert.match(String(res.headers['content-type']), /^text\/html/);
        assert.match(res.body, /<meta property="og:title" content="Spring &lt;sale&gt;">/);
        assert.match(
          res.body,
          /<meta property="og:description" content="Up to &quot;50%&quot; off">/,
        );
        assert.match(
          res.body,
          /<meta property="og:image" content="https:\/\/cdn\.example\.com\/card\.png">/,
        );
        assert.match(res.body, /<meta name="twitter:card" content="summary_large_image">/);
        assert.ok(!res.body.includes('<sale>'), 'social text is escaped');
      }
      const stats = (await call('GET', `/v1/sdk/links/${link.id}/stats`)).json();
      assert.equal(stats.totals.click, cases.length, 'every browser visit is a click, no bot is');
    });

    test('Android store redirect carries the click id in the Play install referrer', async () => {
      const link = await create({
        url: 'https://shop.example.com/p/2',
        utm: { source: 'mail', campaign: 'spring sale' },
      });
      const res = await visit(s, `/l/${link.slug}`, UA.androidChrome);
      const location = String(res.headers.location);
      // The referrer is one URL-encoded query value.
      assert.match(
        location,
        /&referrer=svc_click_id%3Dclk_[0-9A-Z]+%26utm_source%3Dmail%26utm_campaign%3Dspring%2Bsale$/,
      );
      const referrer = new URL(location).searchParams.get('referrer')!;
      const inner = new URLSearchParams(referrer);
      const clickId = inner.get('svc_click_id')!;
      assert.match(clickId, /^clk_/);
      assert.equal(inner.get('utm_campaign'), 'spring sale');

      // The app's first open hands the raw referrer back: a unique match, with the params.
      const deferred = await call('POST', '/v1/sdk/links/deferred', {
        platform: 'android',
        installReferrer: referrer,
        deviceId: 'device-a',
      });
      assert.equal(deferred.statusCode, 200, deferred.body);
      assert.equal(deferred.json().matchType, 'unique');
      assert.equal(deferred.json().clickId, clickId);
      assert.equal(deferred.json().link.id, link.id);
      assert.equal(deferred.json().event, 'install');
    });

    test('a per-link Android fallback and iOS fallback win over the stores', async () => {
      const link = await create({
        url: 'https://shop.example.com/p/3',
        android: { fallbackUrl: 'https://m.example.com/android' },
        ios: { fallbackUrl: 'https://m.example.com/ios' },
      });
      assert.equal(
        (await visit(s, `/l/${link.slug}`, UA.androidChrome)).headers.location,
        'https://m.example.com/android',
      );
      assert.equal(
        (await visit(s, `/l/${link.slug}`, UA.iosSafari)).headers.location,
        'https://m.example.com/ios',
      );
    });

    test('deferred by fingerprint inside the window, then reinstall for a known device', async () => {
      const link = await create({
        url: 'https://shop.example.com/p/4',
        params: { screen: 'cart' },
      });
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip: '198.51.100.20' });
      clock.advance(30 * 60_000);
      const res = await call(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'ios', userAgent: UA.iosSafari, deviceId: 'device-b' },
        { remoteAddress: '198.51.100.20' },
      );
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.json().matchType, 'probable');
      assert.deepEqual(res.json().link.params, { screen: 'cart' });
      assert.equal(res.json().event, 'install');

      // Same device again after a reinstall, with a fresh click: counted as a reinstall.
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip: '198.51.100.20' });
      const again = await call(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'ios', userAgent: UA.iosSafari, deviceId: 'device-b' },
        { remoteAddress: '198.51.100.20' },
      );
      assert.equal(again.json().matchType, 'probable');
      assert.equal(again.json().event, 'reinstall');
      const stats = (await call('GET', `/v1/sdk/links/${link.id}/stats`)).json();
      assert.equal(stats.totals.install, 1);
      assert.equal(stats.totals.reinstall, 1);
      assert.equal(stats.totals.click, 2);
    });

    test('resolve by URL and by slug records an open', async () => {
      const link = await create({ url: 'https://shop.example.com/p/5', params: { id: 5 } });
      const byUrl = await call(
        'GET',
        `/v1/sdk/links/resolve?url=${encodeURIComponent(link.shortUrl)}`,
      );
      assert.equal(byUrl.statusCode, 200, byUrl.body);
      assert.equal(byUrl.json().link.id, link.id);
      assert.deepEqual(byUrl.json().link.params, { id: 5 });
      const bySlug = await call('GET', `/v1/sdk/links/resolve?slug=${link.slug}`);
      assert.equal(bySlug.json().link.id, link.id);
      const stats = (await call('GET', `/v1/sdk/links/${link.id}/stats`)).json();
      assert.equal(stats.totals.open, 2);
    });

    test('events are accepted (202) and counted per type and per day', async () => {
      const link = await create({ url: 'https://shop.example.com/p/6', slug: 'events-link' });
      const day1 = clock.now();
      for (const body of [
        { type: 'open', linkId: link.id },
        { type: 'custom', slug: 'events-link', name: 'purchase', properties: { amount: 9.99 } },
        { type: 'install', linkId: link.id },
      ]) {
        const res = await call('POST', '/v1/sdk/links/events', body);
        assert.equal(res.statusCode, 202, res.body);
        assert.match(res.json().id, /^lev_/);
      }
      clock.advance(86_400_000);
      await call('POST', '/v1/sdk/links/events', { type: 'open', linkId: link.id });
      await visit(s, '/l/events-link', UA.desktopChrome);
      const from = new Date(day1).toISOString().slice(0, 10);
      const to = new Date(clock.now()).toISOString().slice(0, 10);
      const res = await call('GET', `/v1/sdk/links/${link.id}/stats?from=${from}&to=${to}`);
      assert.equal(res.statusCode, 200, res.body);
      assert.deepEqual(res.json(), {
        linkId: link.id,
        from,
        to,
        totals: { click: 1, install: 1, open: 2, reinstall: 0, custom: 1 },
        days: [
          { date: from, click: 0, install: 1, open: 1, reinstall: 0, custom: 1 },
          { date: to, click: 1, install: 0, open: 1, reinstall: 0, custom: 0 },
        ],
      });
      const defaults = (await call('GET', `/v1/sdk/links/${link.id}/stats`)).json();
      assert.equal(defaults.days.length, 30);
      assert.equal(defaults.to, to);
    });

    test('well-known files on the default host follow Google’s and Apple’s formats', async () => {
      const assetlinks = await s.app.inject({
        url: '/.well-known/assetlinks.json',
        headers: { host: DEFAULT_HOST },
      });
      assert.equal(assetlinks.statusCode, 200);
      assert.match(String(assetlinks.headers['content-type']), /^application\/json/);
      assertAssetLinksFormat(assetlinks.json());
      assert.deepEqual(assetlinks.json(), [
        {
          relation: ['delegate_permission/common.handle_all_urls'],
          target: {
            namespace: 'android_app',
            package_name: ANDROID_APP.packageName,
            sha256_cert_fingerprints: ANDROID_APP.sha256CertFingerprints,
          },
        },
      ]);
      const aasa = await s.app.inject({
        url: '/.well-known/apple-app-site-association',
        headers: { host: DEFAULT_HOST },
      });
      assert.equal(aasa.statusCode, 200);
      assert.match(String(aasa.headers['content-type']), /^application\/json/);
      assertAasaFormat(aasa.json());
      assert.deepEqual(aasa.json().applinks.details[0].appIDs, ['ABCDE12345.com.example.shop']);
    });

    test('custom link domain: its own links, short URLs and association files, over real HTTP', async () => {
      const other = await s.admin('POST', '/projects', { name: 'brand' });
      const otherKey = await s.admin('POST', `/projects/${other.id}/keys`, { type: 'server' });
      await s.admin('PATCH', `/projects/${other.id}`, {
        settings: {
          links: {
            domains: ['go.brand.test'],
            android: [
              {
                packageName: 'com.brand.app',
                // Lower case without colons is accepted and normalised.
                sha256CertFingerprints: ['aa'.repeat(32)],
                storeUrl: 'https://play.google.com/store/apps/details?id=com.brand.app&hl=en',
              },
            ],
            ios: [{ teamId: 'ZYXWV98765', bundleId: 'com.brand.app', appStoreId: '42' }],
          },
        },
      });
      const brand = sdk(s, otherKey.key, other.id);
      const res = await brand('POST', '/v1/sdk/links', {
        url: 'https://brand.test/x',
        slug: 'promo',
      });
      assert.equal(res.statusCode, 201, res.body);
      assert.equal(res.json().domain, 'go.brand.test');
      assert.equal(res.json().shortUrl, 'https://go.brand.test/l/promo');
      // The same slug is free on another domain.
      assert.equal(
        (await call('POST', '/v1/sdk/links', { url: 'https://a.test/', slug: 'promo' })).statusCode,
        201,
      );

      await s.app.listen({ port: 0, host: '127.0.0.1' });
      const port = (s.app.server.address() as any).port;
      const get = (path: string, host: string, userAgent: string = UA.androidChrome) =>
        httpRequest(port, path, { host, 'user-agent': userAgent });
      const android = await get('/l/promo', 'go.brand.test');
      assert.equal(android.status, 302);
      const location = new URL(android.headers.location!);
      assert.equal(location.searchParams.get('id'), 'com.brand.app');
      assert.equal(location.searchParams.get('hl'), 'en', 'the configured store URL is kept');
      assert.match(location.searchParams.get('referrer')!, /^svc_click_id=clk_/);
      const desktop = await get('/l/promo', DEFAULT_HOST, UA.desktopChrome);
      assert.equal(desktop.headers.location, 'https://a.test/');

      const assetlinks = await get('/.well-known/assetlinks.json', 'go.brand.test');
      assert.equal(assetlinks.status, 200, 'served directly, no redirect');
      assert.match(assetlinks.headers['content-type']!, /^application\/json/);
      const statements = JSON.parse(assetlinks.body);
      assertAssetLinksFormat(statements);
      assert.equal(statements.length, 1);
      assert.equal(statements[0].target.package_name, 'com.brand.app');
      assert.deepEqual(statements[0].target.sha256_cert_fingerprints, [
        Array(32).fill('AA').join(':'),
      ]);
      const aasa = await get('/.well-known/apple-app-site-association', 'go.brand.test');
      assert.equal(aasa.status, 200);
      assert.match(aasa.headers['content-type']!, /^application\/json/);
      const aasaBody = JSON.parse(aasa.body);
      assertAasaFormat(aasaBody);
      assert.deepEqual(aasaBody.applinks.details[0].appIDs, ['ZYXWV98765.com.brand.app']);
    });
  });
}
