import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { ANDROID_APP, createLink, IOS_APP, refused, sdk, UA, visit } from './fixtures.ts';

for (const backend of BACKENDS) {
  describe(`links errors (${backend.name})`, () => {
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

    async function countLinks() {
      return (await call('GET', '/v1/sdk/links?limit=1')).json().meta.total as number;
    }

    test('bad schemes and open-redirect attempts are refused and create nothing', async () => {
      const before = await countLinks();
      const attempts = [
        '//evil.com',
        '//evil.com/path',
        'https:evil.com',
        'https:/evil.com',
        'http:\\\\evil.com',
        'https://\\evil.com',
        '/\\evil.com',
        'javascript:alert(1)',
        'JavaScript:alert(document.cookie)',
        ' javascript:alert(1)',
        'data:text/html,<script>alert(1)</script>',
        'data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==',
        'vbscript:msgbox(1)',
        'file:///etc/passwd',
        'ftp://example.com/file',
        'intent://scan/#Intent;scheme=zxing;end',
        'myapp://open',
        'https://trusted.com@evil.com/',
        'https://user:pass@example.com/',
        'https://exa mple.com/',
        'https://example.com/\nLocation: https://evil.com',
        'https://example.com/\ttab',
        'https://',
        'http://[::1',
        'evil.com',
        '',
      ];
      for (const url of attempts) {
        const res = await call('POST', '/v1/sdk/links', { url });
        assert.equal(res.statusCode, 400, `${JSON.stringify(url)} → ${res.body}`);
        assert.ok(['invalid_destination', 'invalid_request'].includes(res.json().code), url);
      }
      for (const field of ['android', 'ios']) {
        refused(
          await call('POST', '/v1/sdk/links', {
            url: 'https://ok.example.com/',
            [field]: { fallbackUrl: 'javascript:alert(1)' },
          }),
          400,
          'invalid_destination',
        );
      }
      refused(
        await call('POST', '/v1/sdk/links', {
          url: 'https://ok.example.com/',
          social: { imageUrl: 'data:image/png;base64,AAAA' },
        }),
        400,
        'invalid_destination',
      );
      const link = await create({ url: 'https://ok.example.com/' });
      refused(
        await call('PATCH', `/v1/sdk/links/${link.id}`, { url: '//evil.com' }),
        400,
        'invalid_destination',
      );
      assert.equal(
        (await visit(s, `/l/${link.slug}`, UA.desktopChrome)).headers.location,
        'https://ok.example.com/',
      );
      assert.equal(await countLinks(), before + 1);
    });

    test('a link may not point at another short link', async () => {
      const inner = await create({ url: 'https://ok.example.com/' });
      refused(
        await call('POST', '/v1/sdk/links', { url: inner.shortUrl }),
        400,
        'invalid_destination',
      );
    });

    test('destination allow-list: exact host and *.subdomain patterns', async () => {
      const p = await s.admin('POST', '/projects', { name: 'allow-list' });
      const key = await s.admin('POST', `/projects/${p.id}/keys`, { type: 'server' });
      await s.admin('PATCH', `/projects/${p.id}`, {
        settings: { links: { allowedDestinations: ['example.com', '*.shop.example.com'] } },
      });
      const c = sdk(s, key.key, p.id);
      for (const ok of [
        'https://example.com/a',
        'https://eu.shop.example.com/b',
        'http://a.b.shop.example.com/',
      ]) {
        assert.equal((await c('POST', '/v1/sdk/links', { url: ok })).statusCode, 201, ok);
      }
      for (const no of [
        'https://evil.com/',
        'https://shop.example.com/',
        'https://example.com.evil.com/',
        'https://evilexample.com/',
        'https://sub.example.com/',
      ]) {
        refused(await c('POST', '/v1/sdk/links', { url: no }), 400, 'destination_not_allowed');
      }
      refused(
        await c('POST', '/v1/sdk/links', {
          url: 'https://example.com/',
          android: { fallbackUrl: 'https://evil.com/' },
        }),
        400,
        'destination_not_allowed',
      );
    });

    test('oversized and malformed params, bad fields', async () => {
      const big = { blob: 'x'.repeat(8 * 1024) };
      refused(
        await call('POST', '/v1/sdk/links', { url: 'https://a.example.com/', params: big }),
        400,
        'params_too_large',
      );
      const fits = { blob: 'x'.repeat(8 * 1024 - 20) };
      assert.equal(
        (await call('POST', '/v1/sdk/links', { url: 'https://a.example.com/', params: fits }))
          .statusCode,
        201,
      );
      refused(
        await call('POST', '/v1/sdk/links', { url: 'https://a.example.com/', params: [1, 2] }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links', { url: 'https://a.example.com/', params: 'x' }),
        400,
        'invalid_request',
      );
      const link = await create({ url: 'https://a.example.com/' });
      refused(
        await call('PATCH', `/v1/sdk/links/${link.id}`, { params: big }),
        400,
        'params_too_large',
      );
      refused(
        await call('POST', '/v1/sdk/links', { url: 'https://a.example.com/', slug: 'has space' }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links', {
          url: 'https://a.example.com/',
          slug: 'x'.repeat(65),
        }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links', { url: 'https://a.example.com/', extra: true }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links', { url: `https://a.example.com/${'p'.repeat(2100)}` }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links', {
          url: 'https://a.example.com/',
          domain: 'not-mine.test',
        }),
        400,
        'domain_not_allowed',
      );
      refused(
        await call('POST', '/v1/sdk/links', {
          url: 'https://a.example.com/',
          expiresAt: new Date(clock.now() - 1000).toISOString(),
        }),
        400,
        'invalid_request',
      );
      // A body too large for the route, and params nested too deep to serialise: no 500.
      const huge = JSON.stringify({
        url: 'https://a.example.com/',
        params: { a: 'y'.repeat(70_000) },
      });
      refused(
        await call('POST', '/v1/sdk/links', huge, {
          headers: { 'content-type': 'application/json' },
        }),
        413,
        'payload_too_large',
      );
      const deep = `{"url":"https://a.example.com/","params":{"a":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`;
      const res = await call('POST', '/v1/sdk/links', deep, {
        headers: { 'content-type': 'application/json' },
      });
      assert.ok([400, 413].includes(res.statusCode), res.body.slice(0, 200));
    });

    test('duplicate slug and externalId', async () => {
      await create({ url: 'https://a.example.com/', slug: 'taken', externalId: 'order-1' });
      refused(
        await call('POST', '/v1/sdk/links', { url: 'https://b.example.com/', slug: 'taken' }),
        409,
        'slug_taken',
      );
      refused(
        await call('POST', '/v1/sdk/links', {
          url: 'https://b.example.com/',
          externalId: 'order-1',
        }),
        409,
        'external_id_taken',
      );
      const second = await create({
        url: 'https://b.example.com/',
        slug: 'free',
        externalId: 'order-2',
      });
      refused(
        await call('PATCH', `/v1/sdk/links/${second.id}`, { slug: 'taken' }),
        409,
        'slug_taken',
      );
      refused(
        await call('PATCH', `/v1/sdk/links/${second.id}`, { externalId: 'order-1' }),
        409,
        'external_id_taken',
      );
      // The same slug in another project on the default domain is taken too (one namespace per domain),
      // but the same externalId is free there.
      const p = await s.admin('POST', '/projects', { name: 'other' });
      const key = await s.admin('POST', `/projects/${p.id}/keys`, { type: 'server' });
      const other = sdk(s, key.key, p.id);
      refused(
        await other('POST', '/v1/sdk/links', { url: 'https://c.example.com/', slug: 'taken' }),
        409,
        'slug_taken',
      );
      assert.equal(
        (
          await other('POST', '/v1/sdk/links', {
            url: 'https://c.example.com/',
            externalId: 'order-1',
          })
        ).statusCode,
        201,
      );
    });

    test('expired links: 410 page, never a redirect; resolve says link_expired', async () => {
      const link = await create({
        url: 'https://a.example.com/sale',
        slug: 'flash-sale',
        expiresAt: new Date(clock.now() + 60_000).toISOString(),
      });
      assert.equal((await visit(s, '/l/flash-sale', UA.desktopChrome)).statusCode, 302);
      clock.advance(60_000);
      for (const ua of [UA.desktopChrome, UA.androidChrome, UA.iosSafari, UA.facebook]) {
        const res = await visit(s, '/l/flash-sale', ua);
        assert.equal(res.statusCode, 410);
        assert.equal(res.headers.location, undefined);
        assert.match(String(res.headers['content-type']), /^text\/html/);
        assert.match(res.body, /expired/i);
      }
      refused(await call('GET', '/v1/sdk/links/resolve?slug=flash-sale'), 410, 'link_expired');
      // Clearing the expiry brings it back.
      await call('PATCH', `/v1/sdk/links/${link.id}`, { expiresAt: null });
      assert.equal((await visit(s, '/l/flash-sale', UA.desktopChrome)).statusCode, 302);
    });

    test('unknown links: 404 page, never a redirect', async () => {
      for (const path of [
        '/l/nope',
        '/l/%2F%2Fevil.com',
        '/l/..%2F..%2Fadmin',
        `/l/${'a'.repeat(200)}`,
      ]) {
        const res = await visit(s, path, UA.desktopChrome);
        assert.equal(res.statusCode, 404, path);
        assert.equal(res.headers.location, undefined);
        assert.match(String(res.headers['content-type']), /^text\/html/);
      }
      refused(await call('GET', '/v1/sdk/links/lnk_nope'), 404, 'link_not_found');
      refused(
        await call('PATCH', '/v1/sdk/links/lnk_nope', { url: 'https://a.example.com/' }),
        404,
        'link_not_found',
      );
      refused(await call('DELETE', '/v1/sdk/links/lnk_nope'), 404, 'link_not_found');
      refused(await call('GET', '/v1/sdk/links/lnk_nope/stats'), 404, 'link_not_found');
      refused(await call('GET', '/v1/sdk/links/resolve?slug=nope'), 404, 'link_not_found');
      refused(
        await call('GET', '/v1/sdk/links/resolve?url=javascript:alert(1)'),
        404,
        'link_not_found',
      );
      refused(
        await call('GET', '/v1/sdk/links/resolve?url=https://a.example.com/x'),
        404,
        'link_not_found',
      );
      refused(await call('GET', '/v1/sdk/links/resolve'), 400, 'invalid_request');
    });

    test('deferred: outside the window is no match; a click is never matched twice', async () => {
      const link = await create({ url: 'https://a.example.com/deferred' });
      const ip = '192.0.2.55';
      const open = (body: Record<string, unknown> = {}) =>
        call(
          'POST',
          '/v1/sdk/links/deferred',
          { platform: 'ios', userAgent: UA.iosSafari, ...body },
          {
            remoteAddress: ip,
          },
        );
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      clock.advance(60 * 60_000 + 1);
      assert.equal((await open()).json().matchType, 'none', 'one hour and a millisecond later');

      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      clock.advance(59 * 60_000);
      const first = (await open()).json();
      assert.equal(first.matchType, 'probable');
      assert.equal(first.link.id, link.id);
      assert.equal((await open()).json().matchType, 'none', 'the click was claimed');

      // Another device (other UA) or network (other IP), or another platform: no match.
      await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
      assert.equal((await open({ userAgent: UA.ipadSafari })).json().matchType, 'none');
      assert.equal(
        (
          await call(
            'POST',
            '/v1/sdk/links/deferred',
            { platform: 'ios', userAgent: UA.iosSafari },
            { remoteAddress: '192.0.2.56' },
          )
        ).json().matchType,
        'none',
      );
      assert.equal((await open({ platform: 'android' })).json().matchType, 'none');
      assert.equal((await open()).json().matchType, 'probable', 'the click was still there');

      // Android referrer: unique once; the same referrer again matches nothing.
      const res = await visit(s, `/l/${link.slug}`, UA.androidChrome, { ip: '192.0.2.77' });
      const referrer = new URL(String(res.headers.location)).searchParams.get('referrer')!;
      const unique = await call('POST', '/v1/sdk/links/deferred', {
        platform: 'android',
        installReferrer: referrer,
      });
      assert.equal(unique.json().matchType, 'unique');
      const twice = await call('POST', '/v1/sdk/links/deferred', {
        platform: 'android',
        installReferrer: referrer,
      });
      assert.equal(twice.json().matchType, 'none');
      assert.equal(twice.json().link, null);
      // The referrer's click cannot be claimed by fingerprint afterwards either.
      const byFingerprint = await call(
        'POST',
        '/v1/sdk/links/deferred',
        { platform: 'android', userAgent: UA.androidChrome },
        { remoteAddress: '192.0.2.77' },
      );
      assert.equal(byFingerprint.json().matchType, 'none');
    });

    test('deferred: a referrer click id past the referrer window, unknown or malformed ids', async () => {
      const link = await create({ url: 'https://a.example.com/old' });
      const res = await visit(s, `/l/${link.slug}`, UA.androidChrome, { ip: '192.0.2.90' });
      const clickId = new URLSearchParams(
        new URL(String(res.headers.location)).searchParams.get('referrer')!,
      ).get('svc_click_id')!;
      clock.advance(7 * 86_400_000 + 1);
      const late = await call('POST', '/v1/sdk/links/deferred', { platform: 'android', clickId });
      assert.equal(late.json().matchType, 'none');
      for (const body of [
        { platform: 'android', clickId: 'clk_unknown' },
        { platform: 'android', installReferrer: 'utm_source=google-play&utm_medium=organic' },
        { platform: 'android', installReferrer: '%E0%A4%A' },
        { platform: 'android', installReferrer: 'svc_click_id=%27%20or%201%3D1--' },
      ]) {
        const r = await call('POST', '/v1/sdk/links/deferred', body);
        assert.equal(r.statusCode, 200, r.body);
        assert.equal(r.json().matchType, 'none');
      }
      refused(
        await call('POST', '/v1/sdk/links/deferred', { platform: 'windows' }),
        400,
        'invalid_request',
      );
      refused(await call('POST', '/v1/sdk/links/deferred', {}), 400, 'invalid_request');
    });

    test('deferred window is configurable per project', async () => {
      await s.admin('PATCH', `/projects/${s.project.id}`, {
        settings: { links: { android: [ANDROID_APP], ios: [IOS_APP], deferredWindowSeconds: 600 } },
      });
      try {
        const link = await create({ url: 'https://a.example.com/window' });
        const ip = '192.0.2.99';
        await visit(s, `/l/${link.slug}`, UA.iosSafari, { ip });
        clock.advance(11 * 60_000);
        const res = await call(
          'POST',
          '/v1/sdk/links/deferred',
          { platform: 'ios', userAgent: UA.iosSafari },
          { remoteAddress: ip },
        );
        assert.equal(res.json().matchType, 'none', 'eleven minutes is outside a ten-minute window');
      } finally {
        await s.admin('PATCH', `/projects/${s.project.id}`, {
          settings: { links: { android: [ANDROID_APP], ios: [IOS_APP] } },
        });
      }
    });

    test('events and stats with bad input', async () => {
      const link = await create({ url: 'https://a.example.com/ev' });
      refused(await call('POST', '/v1/sdk/links/events', { type: 'open' }), 400, 'invalid_request');
      refused(
        await call('POST', '/v1/sdk/links/events', {
          type: 'open',
          linkId: link.id,
          slug: link.slug,
        }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links/events', { type: 'custom', linkId: link.id }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links/events', { type: 'share', linkId: link.id }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links/events', {
          type: 'custom',
          name: 'x',
          linkId: link.id,
          properties: { blob: 'x'.repeat(5000) },
        }),
        400,
        'invalid_request',
      );
      refused(
        await call('POST', '/v1/sdk/links/events', { type: 'open', linkId: 'lnk_nope' }),
        404,
        'link_not_found',
      );
      refused(
        await call('GET', `/v1/sdk/links/${link.id}/stats?from=2026-06-10&to=2026-06-01`),
        400,
        'invalid_request',
      );
      const tooLong = refused(
        await call('GET', `/v1/sdk/links/${link.id}/stats?from=2020-01-01&to=2026-06-01`),
        400,
        'invalid_request',
      );
      assert.equal(tooLong.errors[0].path, 'querystring.from');
      refused(
        await call('GET', `/v1/sdk/links/${link.id}/stats?from=yesterday`),
        400,
        'invalid_request',
      );
    });

    test("a slug on two of the project's domains needs the domain, and the error names it", async () => {
      const domain = 'go.twice.test';
      // On the server's own host, then on a custom domain (where the project's new links go).
      await create({ url: 'https://a.example.com/one', slug: 'twice' });
      await s.admin('PATCH', `/projects/${s.project.id}`, {
        settings: { links: { domains: [domain], android: [ANDROID_APP], ios: [IOS_APP] } },
      });
      try {
        const custom = await create({ url: 'https://a.example.com/two', slug: 'twice', domain });
        const event = refused(
          await call('POST', '/v1/sdk/links/events', { type: 'open', slug: 'twice' }),
          400,
          'invalid_request',
        );
        assert.equal(event.errors[0].path, 'body.domain');
        const resolve = refused(
          await call('GET', '/v1/sdk/links/resolve?slug=twice'),
          400,
          'invalid_request',
        );
        assert.equal(resolve.errors[0].path, 'querystring.domain');
        const resolved = await call('GET', `/v1/sdk/links/resolve?slug=twice&domain=${domain}`);
        assert.equal(resolved.statusCode, 200, resolved.body);
        assert.equal(resolved.json().link.id, custom.id);
      } finally {
        await s.admin('PATCH', `/projects/${s.project.id}`, {
          settings: { links: { android: [ANDROID_APP], ios: [IOS_APP] } },
        });
      }
    });

    test('an event for a link deleted at the same moment is 404, never 500', async () => {
      // The event's insert runs after its link was read; a delete in between used to break the
      // events' foreign key and answer 500.
      for (let round = 0; round < 30; round++) {
        const link = await create({ url: `https://a.example.com/race${round}` });
        const [event, deleted] = await Promise.all([
          call('POST', '/v1/sdk/links/events', { type: 'install', linkId: link.id }),
          call('DELETE', `/v1/sdk/links/${link.id}`),
        ]);
        assert.equal(deleted.statusCode, 204, deleted.body);
        if (event.statusCode !== 202) refused(event, 404, 'link_not_found');
      }
    });

    test('project link settings are validated', async () => {
      const patch = (links: unknown, id = s.project.id) =>
        s.app.inject({
          method: 'PATCH',
          url: `/v1/admin/projects/${id}`,
          headers: { authorization: `Bearer ${s.adminToken}` },
          payload: { settings: { links } },
        });
      for (const bad of [
        { domains: ['Not A Host'] },
        { domains: ['https://go.example.com'] },
        // A port outside 1–65535 is no port a link can be served on.
        { domains: ['a.com:99999'] },
        { domains: ['a.com:65536'] },
        { domains: ['a.com:0'] },
        { domains: ['a.com:080'] },
        {
          android: [
            {
              packageName: 'noDots',
              sha256CertFingerprints: [ANDROID_APP.sha256CertFingerprints[0]],
            },
          ],
        },
        { android: [{ packageName: 'com.a.b', sha256CertFingerprints: ['AB:CD'] }] },
        { android: [{ packageName: 'com.a.b', sha256CertFingerprints: [] }] },
        { ios: [{ teamId: 'short', bundleId: 'com.a', appStoreId: '1' }] },
        { ios: [{ teamId: 'ABCDE12345', bundleId: 'com.a', appStoreId: 'abc' }] },
        { allowedDestinations: ['https://example.com'] },
        { deferredWindowSeconds: 5 },
        { unknown: true },
        'not an object',
      ]) {
        refused(await patch(bad), 400, 'invalid_request');
      }
      refused(
        await patch({
          android: [{ ...ANDROID_APP, storeUrl: 'javascript:alert(1)' }],
        }),
        400,
        'invalid_destination',
      );
      const ownHost = refused(
        await patch({ domains: ['go.mine.test', 'localhost:8080'] }),
        400,
        'invalid_request',
      );
      assert.deepEqual(ownHost.errors, [
        { path: 'body.settings.links.domains.1', message: "is the server's own host" },
      ]);
      assert.equal(
        (await patch({ domains: ['go.mine.test'], android: [ANDROID_APP], ios: [IOS_APP] }))
          .statusCode,
        200,
      );
      for (const port of ['1', '8443', '65535']) {
        assert.equal(
          (
            await patch(
              { domains: [`go.port.test:${port}`] },
              (
                await s.admin('POST', '/projects', { name: `port${port}` })
              ).id,
            )
          ).statusCode,
          200,
          port,
        );
      }
      const other = await s.admin('POST', '/projects', { name: 'squatter' });
      refused(await patch({ domains: ['go.mine.test'] }, other.id), 409, 'domain_taken');
      assert.equal((await patch({ android: [ANDROID_APP], ios: [IOS_APP] })).statusCode, 200);
      assert.equal(
        (await patch({ domains: ['go.mine.test'] }, other.id)).statusCode,
        200,
        'released domains can be claimed',
      );
    });

    test('two projects claiming one domain at once: exactly one gets it', async () => {
      const patch = (id: string, domains: string[]) =>
        s.app.inject({
          method: 'PATCH',
          url: `/v1/admin/projects/${id}`,
          headers: { authorization: `Bearer ${s.adminToken}` },
          payload: { settings: { links: { domains } } },
        });
      const a = await s.admin('POST', '/projects', { name: 'claims-a' });
      const b = await s.admin('POST', '/projects', { name: 'claims-b' });
      for (let round = 0; round < 20; round++) {
        const domain = `go${round}.race.test`;
        // The second domain in opposite orders: the two updates must wait, not deadlock.
        const answers = await Promise.all([
          patch(a.id, [domain, `x${round}.race.test`]),
          patch(b.id, [`x${round}.race.test`, domain]),
        ]);
        const codes = answers.map((r) => r.statusCode).sort();
        assert.deepEqual(codes, [200, 409], answers.map((r) => r.body).join('\n'));
        const loser = answers.find((r) => r.statusCode === 409)!;
        assert.equal(loser.json().code, 'domain_taken');
        const holders = (await s.admin('GET', '/projects')).items.filter(
          (p: { settings: { links?: { domains?: string[] } } }) =>
            p.settings.links?.domains?.includes(domain),
        );
        assert.equal(holders.length, 1, `round ${round}: ${domain} held by ${holders.length}`);
      }
    });

    test('domains stored before claims existed are claimed at start', async () => {
      const owner = await s.admin('POST', '/projects', { name: 'old-owner' });
      const settings = JSON.stringify({ links: { domains: ['old.claims.test'] } });
      await s.store.db
        .updateTable('projects')
        .set({ settings })
        .where('id', '=', owner.id)
        .execute();
      await s.app.svc.projects.reconcileClaims();
      const other = await s.admin('POST', '/projects', { name: 'newcomer' });
      const res = await s.app.inject({
        method: 'PATCH',
        url: `/v1/admin/projects/${other.id}`,
        headers: { authorization: `Bearer ${s.adminToken}` },
        payload: { settings: { links: { domains: ['old.claims.test'] } } },
      });
      refused(res, 409, 'domain_taken');
    });
  });
}
