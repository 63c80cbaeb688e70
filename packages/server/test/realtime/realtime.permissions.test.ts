import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

interface RouteCase {
  method: 'GET' | 'POST' | 'DELETE';
  /** The OpenAPI path, to check that the table covers every realtime route. */
  path: string;
  clientKeys: boolean;
  /** Status of an allowed call. */
  ok: number;
  /** Builds the request (fresh names where a call consumes something). */
  make(): Promise<{ url: string; body?: unknown }>;
}

for (const backend of BACKENDS) {
  describe(`realtime permission matrix (${backend.name})`, () => {
    let s: TestServer;
    let n = 0;
    const fresh = () => `perm-${++n}`;
    const room = async () => {
      const name = fresh();
      await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/rooms',
        headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
        payload: { roomName: name, liveType: 'VIDEO_CALL' },
      });
      return name;
    };
    const ROUTES: RouteCase[] = [
      {
        method: 'POST',
        path: '/v1/realtime/rooms',
        clientKeys: true,
        ok: 201,
        make: async () => ({
          url: '/v1/realtime/rooms',
          body: { roomName: fresh(), liveType: 'VIDEO_CALL' },
        }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/rooms',
        clientKeys: false,
        ok: 200,
        make: async () => ({ url: '/v1/realtime/rooms' }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/rooms/{roomName}',
        clientKeys: true,
        ok: 200,
        make: async () => ({ url: `/v1/realtime/rooms/${await room()}` }),
      },
      {
        method: 'DELETE',
        path: '/v1/realtime/rooms/{roomName}',
        clientKeys: true,
        ok: 204,
        make: async () => ({ url: `/v1/realtime/rooms/${await room()}` }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/rooms/{roomName}/participants',
        clientKeys: true,
        ok: 200,
        make: async () => ({ url: `/v1/realtime/rooms/${await room()}/participants` }),
      },
      {
        method: 'POST',
        path: '/v1/realtime/token',
        clientKeys: true,
        ok: 200,
        make: async () => ({
          url: '/v1/realtime/token',
          body: {
            roomName: fresh(),
            liveType: 'VIDEO_CALL',
            participant: { userId: 'u', name: 'U' },
          },
        }),
      },
      {
        method: 'POST',
        path: '/v1/realtime/rooms/{roomName}/messages',
        clientKeys: true,
        ok: 202,
        make: async () => ({
          url: `/v1/realtime/rooms/${await room()}/messages`,
          body: { message: 'hi', sender: { userId: 'u', name: 'U' } },
        }),
      },
      // Recordings: client keys only with a present host's X-Room-Token (recordings tests), so
      // a bare client key is refused here. The server has no media engine and no recordings: an
      // allowed call reaches the recordings area and gets its own answer.
      {
        method: 'POST',
        path: '/v1/realtime/recordings',
        clientKeys: false,
        ok: 503,
        make: async () => ({ url: '/v1/realtime/recordings', body: { roomName: await room() } }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/recordings',
        clientKeys: false,
        ok: 200,
        make: async () => ({ url: '/v1/realtime/recordings' }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/recordings/active',
        clientKeys: false,
        ok: 200,
        make: async () => ({ url: '/v1/realtime/recordings/active' }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/recordings/{egressId}',
        clientKeys: false,
        ok: 404,
        make: async () => ({ url: '/v1/realtime/recordings/egr_none' }),
      },
      {
        method: 'POST',
        path: '/v1/realtime/recordings/{egressId}/stop',
        clientKeys: false,
        ok: 404,
        make: async () => ({ url: '/v1/realtime/recordings/egr_none/stop' }),
      },
      {
        method: 'POST',
        path: '/v1/realtime/recordings/{egressId}/pause',
        clientKeys: false,
        ok: 404,
        make: async () => ({ url: '/v1/realtime/recordings/egr_none/pause' }),
      },
      {
        method: 'POST',
        path: '/v1/realtime/recordings/{egressId}/resume',
        clientKeys: false,
        ok: 404,
        make: async () => ({ url: '/v1/realtime/recordings/egr_none/resume' }),
      },
      {
        method: 'GET',
        path: '/v1/realtime/recordings/{egressId}/download-url',
        clientKeys: false,
        ok: 404,
        make: async () => ({ url: '/v1/realtime/recordings/egr_none/download-url' }),
      },
    ];
    /** Public, no key: the signed download URL (recordings tests cover it). */
    const KEYLESS = new Set(['GET /v1/realtime/recordings/{egressId}/file']);

    const keys: Record<string, { key: string; projectId: string }> = {};
    before(async () => {
      s = await startTestServer(backend, { env: { SVC_CLIENT_KEY_RATE_LIMIT: '100000' } });
      const other = await s.admin('POST', '/projects', { name: 'other' });
      const linksOnly = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        scopes: ['links'],
      });
      const noRealtime = await s.admin('POST', '/projects', {
        name: 'no realtime',
        products: ['links'],
      });
      const noRealtimeServer = await s.admin('POST', `/projects/${noRealtime.id}/keys`, {
        type: 'server',
      });
      const noRealtimeClient = await s.admin('POST', `/projects/${noRealtime.id}/keys`, {
        type: 'client',
        scopes: ['realtime', 'links'],
      });
      keys.client = { key: s.project.clientKey, projectId: s.project.id };
      keys.server = { key: s.project.serverKey, projectId: s.project.id };
      keys.wrongProject = { key: s.project.serverKey, projectId: other.id };
      keys.linksOnly = { key: linksOnly.key, projectId: s.project.id };
      keys.disabledServer = { key: noRealtimeServer.key, projectId: noRealtime.id };
      keys.disabledClient = { key: noRealtimeClient.key, projectId: noRealtime.id };
    });
    after(() => s.close());

    test('the table covers every realtime route in the OpenAPI document', async () => {
      const doc = s.app.swagger() as { paths: Record<string, Record<string, unknown>> };
      const documented = Object.entries(doc.paths)
        .filter(([p]) => p.startsWith('/v1/realtime'))
        .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${p}`))
        .filter((op) => !KEYLESS.has(op))
        .sort();
      assert.deepEqual(documented, ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    });

    const CASES: { who: string; expect: (r: RouteCase) => [number, string | null] }[] = [
      { who: 'none', expect: () => [401, 'missing_api_key'] },
      { who: 'wrongProject', expect: () => [401, 'invalid_api_key'] },
      { who: 'linksOnly', expect: () => [403, 'insufficient_scope'] },
      {
        who: 'client',
        expect: (r) => (r.clientKeys ? [r.ok, null] : [403, 'server_key_required']),
      },
      { who: 'server', expect: (r) => [r.ok, null] },
      { who: 'disabledServer', expect: () => [403, 'product_not_enabled'] },
      { who: 'disabledClient', expect: () => [403, 'product_not_enabled'] },
    ];

    for (const c of CASES) {
      test(`caller: ${c.who}`, async () => {
        for (const route of ROUTES) {
          const { url, body } = await route.make();
          const k = keys[c.who];
          const headers: Record<string, string> = k
            ? { authorization: `Bearer ${k.key}`, 'x-project-id': k.projectId }
            : { 'x-project-id': s.project.id };
          const res = await s.app.inject({
            method: route.method,
            url,
            headers,
            ...(body ? { payload: body as object } : {}),
          });
          const [status, code] = c.expect(route);
          const label = `${c.who} ${route.method} ${route.path}`;
          assert.equal(res.statusCode, status, `${label}: ${res.body}`);
          if (code) assert.equal(res.json().code, code, label);
        }
      });
    }
  });
}
