import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { ANDROID_APP, IOS_APP, refused, sdk, UA, visit } from './fixtures.ts';

interface RouteCase {
  method: InjectOptions['method'];
  /** The path as OpenAPI names it, to check that every /sdk/links route is in the matrix. */
  path: string;
  /** Builds a request that succeeds for an allowed caller (given a fresh link of the project). */
  request(link: { id: string; slug: string }): { url: string; payload?: unknown };
  status: number;
}

const ROUTES: RouteCase[] = [
  {
    method: 'POST',
    path: '/v1/sdk/links',
    request: () => ({ url: '/v1/sdk/links', payload: { url: 'https://ok.example.com/' } }),
    status: 201,
  },
  { method: 'GET', path: '/v1/sdk/links', request: () => ({ url: '/v1/sdk/links' }), status: 200 },
  {
    method: 'GET',
    path: '/v1/sdk/links/resolve',
    request: (l) => ({ url: `/v1/sdk/links/resolve?slug=${l.slug}` }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/sdk/links/deferred',
    request: () => ({ url: '/v1/sdk/links/deferred', payload: { platform: 'android' } }),
    status: 200,
  },
  {
    method: 'POST',
    path: '/v1/sdk/links/events',
    request: (l) => ({ url: '/v1/sdk/links/events', payload: { type: 'open', linkId: l.id } }),
    status: 202,
  },
  {
    method: 'GET',
    path: '/v1/sdk/links/{linkId}',
    request: (l) => ({ url: `/v1/sdk/links/${l.id}` }),
    status: 200,
  },
  {
    method: 'PATCH',
    path: '/v1/sdk/links/{linkId}',
    request: (l) => ({ url: `/v1/sdk/links/${l.id}`, payload: { params: { a: 1 } } }),
    status: 200,
  },
  {
    method: 'DELETE',
    path: '/v1/sdk/links/{linkId}',
    request: (l) => ({ url: `/v1/sdk/links/${l.id}` }),
    status: 204,
  },
  {
    method: 'GET',
    path: '/v1/sdk/links/{linkId}/stats',
    request: (l) => ({ url: `/v1/sdk/links/${l.id}/stats` }),
    status: 200,
  },
];

for (const backend of BACKENDS) {
  describe(`links security (${backend.name})`, () => {
    let s: TestServer;
    let call: ReturnType<typeof sdk>;
    before(async () => {
      s = await startTestServer(backend);
      call = sdk(s);
      await s.admin('PATCH', `/projects/${s.project.id}`, {
        settings: { links: { android: [ANDROID_APP], ios: [IOS_APP] } },
      });
    });
    after(() => s.close());

    async function freshLink() {
      const res = await call('POST', '/v1/sdk/links', { url: 'https://ok.example.com/' });
      assert.equal(res.statusCode, 201, res.body);
      return res.json();
    }

    test('the matrix covers every /sdk/links route', async () => {
      const paths = (s.app as any).swagger().paths as Record<string, Record<string, unknown>>;
      const documented = Object.entries(paths)
        .filter(([p]) => p.startsWith('/v1/sdk/links'))
        .flatMap(([p, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${p}`))
        .sort();
      assert.deepEqual(documented, ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    });

    test('permission matrix for every /sdk/links route', async () => {
      const noLinks = await s.admin('POST', '/projects', {
        name: 'without links',
        products: ['realtime', 'verify'],
      });
      const noLinksServer = await s.admin('POST', `/projects/${noLinks.id}/keys`, {
        type: 'server',
      });
      const noLinksClient = await s.admin('POST', `/projects/${noLinks.id}/keys`, {
        type: 'client',
        scopes: ['realtime'],
      });
      const otherProject = await s.admin('POST', '/projects', { name: 'other' });
      const unscoped = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        scopes: ['realtime', 'verify'],
      });
      const scoped = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        scopes: ['links'],
      });
      const callers: {
        name: string;
        headers: Record<string, string>;
        /** The refusal, or null when the call must succeed. */
        expect: [number, string] | null;
      }[] = [
        {
          name: 'no key',
          headers: { 'x-project-id': s.project.id },
          expect: [401, 'missing_api_key'],
        },
        {
          name: 'key of another project',
          headers: {
            authorization: `Bearer ${s.project.serverKey}`,
            'x-project-id': otherProject.id,
          },
          expect: [401, 'invalid_api_key'],
        },
        {
          name: 'client key without links scope',
          headers: { authorization: `Bearer ${unscoped.key}`, 'x-project-id': s.project.id },
          expect: [403, 'insufficient_scope'],
        },
        {
          name: 'client key with links scope',
          headers: { authorization: `Bearer ${scoped.key}`, 'x-project-id': s.project.id },
          expect: null,
        },
        {
          name: 'server key',
          headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
          expect: null,
        },
        {
          name: 'server key, links not enabled',
          headers: { authorization: `Bearer ${noLinksServer.key}`, 'x-project-id': noLinks.id },
          expect: [403, 'product_not_enabled'],
        },
        {
          name: 'client key, links not enabled',
          headers: { authorization: `Bearer ${noLinksClient.key}`, 'x-project-id': noLinks.id },
          expect: [403, 'product_not_enabled'],
        },
      ];
      for (const route of ROUTES) {
        for (const caller of callers) {
          const link = await freshLink();
          const { url, payload } = route.request(link);
          const res = await s.app.inject({
            method: route.method,
            url,
            headers: caller.headers,
            ...(payload === undefined ? {} : { payload: payload as object }),
          });
          const label = `${route.method} ${route.path} as ${caller.name}`;
          if (caller.expect === null)
            assert.equal(res.statusCode, route.status, `${label}: ${res.body}`);
          else {
            assert.equal(res.statusCode, caller.expect[0], `${label}: ${res.body}`);
            assert.equal(res.json().code, caller.expect[1], label);
            // A refused call changes nothing.
            assert.equal((await call('GET', `/v1/sdk/links/${link.id}`)).statusCode, 200, label);
          }
        }
      }
    });

    test('the redirect and well-known routes are public', async () => {
      const link = await freshLink();
      assert.equal((await visit(s, `/l/${link.slug}`, UA.desktopChrome)).statusCode, 302);
      for (const url of [
        '/.well-known/assetlinks.json',
        '/.well-known/apple-app-site-association',
      ]) {
        assert.equal((await s.app.inject({ url })).statusCode, 200, url);
      }
    });

    test('projects cannot see or touch each other’s links, clicks or events', async () => {
      const mine = await freshLink();
      const p = await s.admin('POST', '/projects', { name: 'neighbour' });
      const key = await s.admin('POST', `/projects/${p.id}/keys`, { type: 'server' });
      const them = sdk(s, key.key, p.id);
      refused(await them('GET', `/v1/sdk/links/${mine.id}`), 404, 'link_not_found');
      refused(
        await them('PATCH', `/v1/sdk/links/${mine.id}`, { url: 'https://evil.example/' }),
        404,
        'link_not_found',
      );
      refused(await them('DELETE', `/v1/sdk/links/${mine.id}`), 404, 'link_not_found');
      refused(await them('GET', `/v1/sdk/links/${mine.id}/stats`), 404, 'link_not_found');
      refused(await them('GET', `/v1/sdk/links/resolve?slug=${mine.slug}`), 404, 'link_not_found');
      refused(
        await them('GET', `/v1/sdk/links/resolve?url=${encodeURIComponent(mine.shortUrl)}`),
        404,
        'link_not_found',
      );
      refused(
        await them('POST', '/v1/sdk/links/events', { type: 'open', linkId: mine.id }),
        404,
        'link_not_found',
      );
      assert.equal((await them('GET', '/v1/sdk/links')).json().meta.total, 0);

      // Their deferred call from the same device cannot claim our click, by id or by fingerprint.
      const res = await visit(s, `/l/${mine.slug}`, UA.androidChrome, { ip: '198.51.100.3' });
      const referrer = new URL(String(res.headers.location)).searchParams.get('referrer')!;
      const stolen = await them(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'android', installReferrer: referrer, userAgent: UA.androidChrome },
        { remoteAddress: '198.51.100.3' },
      );
      assert.equal(stolen.json().matchType, 'none');
      const ours = await call('POST', '/v1/sdk/links/deferred', {
        platform: 'android',
        installReferrer: referrer,
      });
      assert.equal(ours.json().matchType, 'unique');
    });

    test('clicks keep a keyed hash of IP and user agent, never the raw IP', async () => {
      const link = await freshLink();
      const ip = '203.0.113.199';
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip: `::ffff:${ip}` });
      await call('GET', `/v1/sdk/links/${link.id}/stats`); // flushes queued clicks
      const db = s.app.svc.store.db;
      const clicks = await db
        .selectFrom('link_clicks')
        .selectAll()
        .where('link_id', '=', link.id)
        .execute();
      assert.equal(clicks.length, 2);
      assert.match(clicks[0].fingerprint, /^[A-Za-z0-9_-]{22}$/);
      assert.equal(
        clicks[0].fingerprint,
        clicks[1].fingerprint,
        'IPv4-mapped IPv6 is the same address',
      );
      for (const table of [
        'link_clicks',
        'link_click_claims',
        'link_click_days',
        'link_events',
        'links',
        'link_devices',
      ] as const) {
        const rows = await db.selectFrom(table).selectAll().execute();
        assert.ok(!JSON.stringify(rows).includes(ip), `${table} holds the raw IP`);
        assert.ok(!JSON.stringify(rows).includes('iPhone OS'), `${table} holds the raw user agent`);
      }
      assert.ok(!s.logs.text.includes(ip), 'the raw IP was logged');
    });

    test('parallel deferred calls claim one click once (fingerprint and referrer)', async () => {
      const link = await freshLink();
      const ip = '198.51.100.44';
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      const results = await Promise.all(
        Array.from({ length: 12 }, () =>
          call(
            'POST',
            '/v1/sdk/links/deferred',
            { platform: 'ios', userAgent: UA.iosSafari },
            { remoteAddress: ip },
          ),
        ),
      );
      const matched = results.map((r) => r.json()).filter((r) => r.matchType === 'probable');
      assert.equal(matched.length, 2, 'two clicks, two installs matched');
      assert.notEqual(matched[0].clickId, matched[1].clickId);

      const res = await visit(s, `/l/${link.slug}`, UA.androidChrome, { ip: '198.51.100.45' });
      const referrer = new URL(String(res.headers.location)).searchParams.get('referrer')!;
      const uniques = await Promise.all(
        Array.from({ length: 12 }, () =>
          call('POST', '/v1/sdk/links/deferred', {
            platform: 'android',
            installReferrer: referrer,
          }),
        ),
      );
      assert.equal(uniques.filter((r) => r.json().matchType === 'unique').length, 1);
    });

    test('many installs behind one address: each matches its own click once, then none', async () => {
      const link = await freshLink();
      const other = await freshLink();
      const ip = '198.51.100.48';
      // Seven clicks from one fingerprint (a shared NAT and one phone model), one of them on
      // `other`. (Newest first is not asserted: on the real clock they share milliseconds.)
      for (let i = 0; i < 6; i++) await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      await visit(s, `/l/${other.slug}`, UA.iosSafari, { ip });
      const open = () =>
        call(
          'POST',
          '/v1/sdk/links/deferred',
          { platform: 'ios', userAgent: UA.iosSafari },
          { remoteAddress: ip },
        );
      const seen = new Set<string>();
      const links: string[] = [];
      for (let i = 0; i < 7; i++) {
        const next = (await open()).json();
        assert.equal(next.matchType, 'probable');
        assert.ok(!seen.has(next.clickId), 'a click is matched once');
        seen.add(next.clickId);
        links.push(next.link.id);
      }
      assert.deepEqual(
        links.sort(),
        [...Array(6).fill(link.id), other.id].sort(),
        'every click matched, each to its own link',
      );
      assert.equal((await open()).json().matchType, 'none');
      // Android installs never take iOS clicks.
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      const android = await call(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'android', userAgent: UA.iosSafari },
        { remoteAddress: ip },
      );
      assert.equal(android.json().matchType, 'none');
    });

    test('two nodes: a link change reaches the other node’s cache; a click is claimed once across nodes', async () => {
      const nodeB: FastifyInstance = await buildApp({
        config: s.config,
        adminToken: s.adminToken,
        secret: (s.app.svc as any).secret,
        store: s.app.svc.store,
        state: s.app.svc.state,
        logStream: s.logs,
      });
      await nodeB.ready();
      try {
        const link = await freshLink();
        const onB = (ua: string, ip = '198.51.100.60') =>
          nodeB.inject({
            url: `/l/${link.slug}`,
            headers: { host: 'localhost:8080', 'user-agent': ua },
            remoteAddress: ip,
          });
        assert.equal((await onB(UA.desktopChrome)).headers.location, 'https://ok.example.com/');
        // Wait for the invalidation to be delivered (the test listens on the same channel).
        const delivered = new Promise<void>((resolve) => {
          void s.app.svc.state.subscribe('links:invalidate', () => resolve());
        });
        await call('PATCH', `/v1/sdk/links/${link.id}`, { url: 'https://moved.example.com/' });
        await delivered;
        assert.equal((await onB(UA.desktopChrome)).headers.location, 'https://moved.example.com/');

        // A click served by node B is matched on node A once B has written it.
        await onB(UA.iosSafari);
        const headers = {
          authorization: `Bearer ${s.project.serverKey}`,
          'x-project-id': s.project.id,
        };
        await nodeB.inject({ url: `/v1/sdk/links/${link.id}/stats`, headers }); // flushes B's queue
        const opens = await Promise.all([
          call(
            'POST',
            '/v1/sdk/links/deferred',
            { platform: 'ios', userAgent: UA.iosSafari },
            { remoteAddress: '198.51.100.60' },
          ),
          nodeB.inject({
            method: 'POST',
            url: '/v1/sdk/links/deferred',
            headers,
            payload: { platform: 'ios', userAgent: UA.iosSafari },
            remoteAddress: '198.51.100.60',
          }),
        ]);
        assert.deepEqual(opens.map((r) => r.json().matchType).sort(), ['none', 'probable']);
      } finally {
        await nodeB.close();
      }
    });

    test('a server secret change changes every fingerprint (the hash is keyed)', async () => {
      const a = s.app.svc as any;
      const other = await buildApp({
        // The store's sealed secrets still open with the first secret, as after a rotation.
        config: { ...s.config, secretPrevious: [a.secret] },
        adminToken: s.adminToken,
        secret: `other_${randomBytes(8).toString('hex')}`,
        store: s.app.svc.store,
        state: s.app.svc.state,
        logStream: s.logs,
      });
      await other.ready();
      try {
        const link = await freshLink();
        await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip: '198.51.100.70' });
        await call('GET', `/v1/sdk/links/${link.id}/stats`);
        const res = await other.inject({
          method: 'POST',
          url: '/v1/sdk/links/deferred',
          headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
          payload: { platform: 'ios', userAgent: UA.iosSafari },
          remoteAddress: '198.51.100.70',
        });
        assert.equal(res.json().matchType, 'none');
        assert.ok(a.secret);
      } finally {
        await other.close();
      }
    });
  });
}
