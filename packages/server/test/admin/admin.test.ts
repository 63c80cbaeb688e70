import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

for (const backend of BACKENDS) {
  describe(`admin API (${backend.name})`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(backend);
    });
    after(() => s.close());

    const raw = (
      method: InjectOptions['method'],
      url: string,
      payload?: unknown,
      token = s.adminToken,
    ) =>
      s.app.inject({
        method,
        url: `/v1/admin${url}`,
        headers: token ? { authorization: `Bearer ${token}` } : {},
        ...(payload === undefined ? {} : { payload: payload as object }),
      });

    test('the admin token is required and checked', async () => {
      assert.equal(
        (await raw('GET', '/projects', undefined, '')).json().code,
        'missing_admin_token',
      );
      const bad = await raw('GET', '/projects', undefined, 'nope');
      assert.equal(bad.statusCode, 401);
      assert.equal(bad.json().code, 'invalid_admin_token');
      const apiKey = await raw('GET', '/projects', undefined, s.project.serverKey);
      assert.equal(apiKey.json().code, 'invalid_admin_token', 'an API key is not an admin token');
    });

    test('projects: create with defaults, get, update, list, delete', async () => {
      const p = await s.admin('POST', '/projects', { name: 'Acme' });
      assert.match(p.id, /^prj_[0-9A-Z]{26}$/);
      assert.deepEqual(p.products, [
        'realtime',
        'links',
        'verify',
        'mail',
        'stream',
        'video_editor',
      ]);
      assert.equal(p.webhooksEnabled, false);
      const updated = await s.admin('PATCH', `/projects/${p.id}`, {
        name: 'Acme 2',
        products: ['links'],
        webhooksEnabled: true,
      });
      assert.equal(updated.name, 'Acme 2');
      assert.deepEqual(updated.products, ['links']);
      assert.equal(updated.webhooksEnabled, true);
      assert.ok((await s.admin('GET', '/projects')).items.some((x: any) => x.id === p.id));
      await s.admin('DELETE', `/projects/${p.id}`);
      const gone = await raw('GET', `/projects/${p.id}`);
      assert.equal(gone.statusCode, 404);
      assert.equal(gone.json().code, 'project_not_found');
    });

    test('project bodies are validated and change nothing when bad', async () => {
      for (const body of [
        {},
        { name: '' },
        { name: 'x', products: ['teleport'] },
        { name: 'x', extra: 1 },
        { name: 'x', products: ['links', 'links'] },
      ]) {
        const res = await raw('POST', '/projects', body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        assert.equal(res.json().code, 'invalid_request');
      }
      const patch = await raw('PATCH', `/projects/${s.project.id}`, { settings: { teleport: {} } });
      assert.equal(patch.statusCode, 400);
      assert.equal((await raw('PATCH', `/projects/${s.project.id}`, {})).statusCode, 400);
      assert.equal((await s.admin('GET', `/projects/${s.project.id}`)).name, 'test');
    });

    test('concurrent settings updates of two products keep both', async () => {
      const projects = s.app.svc.projects;
      const p = await s.admin('POST', '/projects', { name: 'race' });
      // "slow" validates only once "fast" has written its part: without the conditional write,
      // the slow update would store the settings it read before, dropping "fast".
      let release!: () => void;
      const fastWritten = new Promise<void>((resolve) => {
        release = resolve;
      });
      let slowRead!: () => void;
      const slowHasRead = new Promise<void>((resolve) => {
        slowRead = resolve;
      });
      let slowRounds = 0;
      projects.registerSettings('slow', async (value) => {
        slowRounds++;
        slowRead();
        await fastWritten;
        return value as Record<string, unknown>;
      });
      projects.registerSettings('fast', (value) => value as Record<string, unknown>);
      const slow = projects.update(p.id, { settings: { slow: { n: 1 } } } as never);
      // A validator runs after its update has read the project: "slow" holds the old settings.
      await slowHasRead;
      await projects.update(p.id, { settings: { fast: { n: 2 } } } as never);
      release();
      const updated = await slow;
      assert.deepEqual(updated.settings, { slow: { n: 1 }, fast: { n: 2 } });
      assert.equal(slowRounds, 2, 'the slow update read and validated again');
      assert.deepEqual((await projects.get(p.id)).settings, updated.settings);
    });

    test('keys: created once with plaintext, listed without secrets', async () => {
      const created = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        name: 'web',
        scopes: ['links', 'realtime'],
        allowedOrigins: ['https://*.example.com', 'https://app.example.org:443'],
        rateLimitPerMinute: 60,
      });
      assert.match(created.key, /^svc_pk_/);
      assert.deepEqual(created.allowedOrigins, [
        'https://*.example.com',
        'https://app.example.org',
      ]);
      assert.equal(created.prefix, created.key.slice(0, 11));
      assert.equal(created.last4, created.key.slice(-4));
      const listed = await raw('GET', `/projects/${s.project.id}/keys`);
      assert.ok(!listed.body.includes(created.key), 'list must not show the key');
      assert.doesNotMatch(listed.body, /key_hash|"key":/);
      const one = listed.json().items.find((k: any) => k.id === created.id);
      assert.equal(one.rateLimitPerMinute, 60);
      const got = await s.admin('GET', `/projects/${s.project.id}/keys/${created.id}`);
      assert.equal(got.key, undefined);
    });

    test('key restrictions are validated per type', async () => {
      const bad: [Record<string, unknown>, string][] = [
        [{ type: 'client', allowedIps: ['10.0.0.1'] }, 'body.allowedIps'],
        [{ type: 'server', scopes: ['links'] }, 'body.scopes'],
        [{ type: 'server', allowedOrigins: ['https://a.com'] }, 'body.allowedOrigins'],
        [{ type: 'client', allowedOrigins: ['example.com'] }, 'body.allowedOrigins.0'],
        [{ type: 'client', allowedOrigins: ['https://a.com/path'] }, 'body.allowedOrigins.0'],
        [{ type: 'server', allowedIps: ['10.0.0.0/40'] }, 'body.allowedIps.0'],
        [{ type: 'client', scopes: [] }, 'body.scopes'],
        [{ type: 'client', scopes: ['mail'] }, 'body.scopes.0'],
        [{ type: 'admin' }, 'body.type'],
        [{ type: 'client', expiresAt: '2001-01-01T00:00:00Z' }, 'body.expiresAt'],
        [{ type: 'client', rateLimitPerMinute: 0 }, 'body.rateLimitPerMinute'],
      ];
      const before = (await s.admin('GET', `/projects/${s.project.id}/keys`)).items.length;
      for (const [body, path] of bad) {
        const res = await raw('POST', `/projects/${s.project.id}/keys`, body);
        assert.equal(res.statusCode, 400, JSON.stringify(body));
        const problem = res.json();
        assert.equal(problem.code, 'invalid_request');
        assert.ok(
          problem.errors.some((e: any) => e.path.startsWith(path)),
          `${JSON.stringify(body)} → ${JSON.stringify(problem.errors)}`,
        );
      }
      assert.equal(
        (await s.admin('GET', `/projects/${s.project.id}/keys`)).items.length,
        before,
        'nothing was created',
      );
    });

    test('update restrictions, revoke, unknown keys and projects', async () => {
      const k = await s.admin('POST', `/projects/${s.project.id}/keys`, { type: 'server' });
      const updated = await s.admin('PATCH', `/projects/${s.project.id}/keys/${k.id}`, {
        allowedIps: ['192.0.2.0/24'],
        rateLimitPerMinute: null,
        name: 'ci',
      });
      assert.deepEqual(updated.allowedIps, ['192.0.2.0/24']);
      assert.equal(updated.name, 'ci');
      await s.admin('DELETE', `/projects/${s.project.id}/keys/${k.id}`);
      assert.ok((await s.admin('GET', `/projects/${s.project.id}/keys/${k.id}`)).revokedAt);
      assert.equal(
        (await raw('POST', `/projects/${s.project.id}/keys/${k.id}/rotate`, {})).json().code,
        'invalid_request',
      );
      assert.equal(
        (await raw('GET', `/projects/${s.project.id}/keys/key_nope`)).json().code,
        'key_not_found',
      );
      assert.equal((await raw('GET', '/projects/prj_nope/keys')).json().code, 'project_not_found');
      const other = await s.admin('POST', '/projects', { name: 'other' });
      assert.equal(
        (await raw('DELETE', `/projects/${other.id}/keys/${k.id}`)).json().code,
        'key_not_found',
        'a key is only reachable through its project',
      );
    });

    test('a key is rotated once: a second rotation is 409 and changes nothing', async () => {
      const keys = `/projects/${s.project.id}/keys`;
      const k = await s.admin('POST', keys, { type: 'server', name: 'once' });
      const k1 = await s.admin('POST', `${keys}/${k.id}/rotate`, { gracePeriodSeconds: 60 });
      const rotated = await s.admin('GET', `${keys}/${k.id}`);
      assert.equal(rotated.replacedBy, k1.id);
      const count = (await s.admin('GET', keys)).items.length;
      for (const body of [{ gracePeriodSeconds: 2592000 }, {}]) {
        const again = await raw('POST', `${keys}/${k.id}/rotate`, body);
        assert.equal(again.statusCode, 409, again.body);
        assert.match(String(again.headers['content-type']), /^application\/problem\+json/);
        assert.equal(again.json().code, 'api_key_already_rotated');
        assert.equal(again.json().replacedBy, k1.id);
      }
      assert.deepEqual(
        await s.admin('GET', `${keys}/${k.id}`),
        rotated,
        'the old key is as it was',
      );
      assert.equal((await s.admin('GET', keys)).items.length, count, 'no key was issued');
      // The replacement rotates as usual; a revoked key is refused as revoked.
      const k2 = await s.admin('POST', `${keys}/${k1.id}/rotate`, { gracePeriodSeconds: 60 });
      assert.equal((await s.admin('GET', `${keys}/${k1.id}`)).replacedBy, k2.id);
      await s.admin('DELETE', `${keys}/${k2.id}`);
      const revoked = await raw('POST', `${keys}/${k2.id}/rotate`, {});
      assert.equal(revoked.statusCode, 400, revoked.body);
      assert.equal(revoked.json().code, 'invalid_request');
    });

    test('of concurrent rotations of one key exactly one wins and only its new key exists', async () => {
      const keys = `/projects/${s.project.id}/keys`;
      for (const grace of [600, 0]) {
        const k = await s.admin('POST', keys, { type: 'client', name: `race ${grace}` });
        const before = new Set((await s.admin('GET', keys)).items.map((x: any) => x.id));
        const answers = await Promise.all(
          Array.from({ length: 12 }, () =>
            raw('POST', `${keys}/${k.id}/rotate`, { gracePeriodSeconds: grace }),
          ),
        );
        const won = answers.filter((a) => a.statusCode === 201);
        assert.equal(won.length, 1, answers.map((a) => `${a.statusCode} ${a.body}`).join('\n'));
        for (const lost of answers.filter((a) => a.statusCode !== 201)) {
          assert.equal(lost.statusCode, 409, lost.body);
          assert.equal(lost.json().code, 'api_key_already_rotated');
        }
        const winner = won[0]!.json();
        const after = (await s.admin('GET', keys)).items;
        const added = after.filter((x: any) => !before.has(x.id));
        assert.deepEqual(
          added.map((x: any) => x.id),
          [winner.id],
          'one new key, the winner’s',
        );
        assert.equal(after.find((x: any) => x.id === k.id).replacedBy, winner.id);
      }
    });

    test('legacy import validates the key shape', async () => {
      for (const key of ['svc_pk_abcdefghijkl', 'not_a_legacy_key', 'svc_x']) {
        const res = await raw('POST', `/projects/${s.project.id}/keys/import-legacy`, { key });
        assert.equal(res.statusCode, 400, key);
      }
    });

    test('OpenAPI document and docs page are served', async () => {
      const doc = (await s.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      assert.equal(doc.openapi, '3.1.0');
      assert.ok(doc.paths['/v1/admin/projects/{projectId}/keys']);
      const docs = await s.app.inject({ method: 'GET', url: '/docs/' });
      assert.equal(docs.statusCode, 200);
      const jwks = (await s.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
      assert.equal(jwks.keys[0].kty, 'EC');
      assert.equal(jwks.keys[0].d, undefined, 'no private part');
      const ready = await s.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(ready.statusCode, 200);
      assert.equal((await s.app.inject({ method: 'GET', url: '/healthz' })).json().status, 'ok');
    });
  });
}

test('the error registry, the OpenAPI Problem schema and the codes in use agree', async () => {
  const { ERROR_CODES } = await import('@svc/protocol');
  const s = await startTestServer(BACKENDS[0]);
  try {
    const doc = (await s.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const problem = doc.components.schemas.Problem;
    const documented = [...problem.properties.code.enum].sort();
    assert.deepEqual(documented, Object.keys(ERROR_CODES).sort());
    for (const [code, { status, title }] of Object.entries(ERROR_CODES)) {
      assert.match(code, /^[a-z][a-z0-9_]*$/);
      assert.ok(status >= 400 && status < 600, code);
      assert.ok(title.length > 5, code);
    }
    const keys = doc.paths['/v1/admin/projects/{projectId}/keys'].post;
    assert.equal(
      keys.responses['4XX'].content['application/problem+json'].schema.$ref,
      '#/components/schemas/Problem',
    );
  } finally {
    await s.close();
  }
});
