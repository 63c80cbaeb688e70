import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { get, headers, lastCode, newNumber, post, problem, wrongCode } from './fixtures.ts';

for (const backend of BACKENDS) {
  describe(`verify security (${backend.name})`, () => {
    let s: TestServer;
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    before(async () => {
      s = await startTestServer(backend, { clock, env: { LOG_LEVEL: 'debug' } });
    });
    after(() => s.close());

    async function approvedToken(projectId = s.project.id, key = s.project.serverKey) {
      const phone = newNumber();
      await post(s, '/auth/sms/send', { phoneNumber: phone }, { key, projectId });
      const res = await post(
        s,
        '/verify',
        { phoneNumber: phone, code: await lastCode(s, phone, projectId) },
        { key, projectId },
      );
      assert.equal(res.statusCode, 200, res.body);
      return { token: res.json().token as string, phone };
    }

    test('20 parallel checks with the right code produce exactly one approval', async () => {
      const phone = newNumber();
      const { verificationId } = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      const code = await lastCode(s, phone);
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          post(s, '/verify', i % 2 ? { phoneNumber: phone, code } : { verificationId, code }, {
            ip: `198.51.100.${i + 1}`,
          }),
        ),
      );
      const statuses = results.map((r) => r.statusCode);
      assert.equal(statuses.filter((x) => x === 200).length, 1, String(statuses));
      for (const r of results.filter((x) => x.statusCode !== 200)) {
        assert.equal(r.json().code, 'verification_not_found', r.body);
      }
      const row = await s.app.svc.store.db
        .selectFrom('verifications')
        .selectAll()
        .where('id', '=', verificationId)
        .executeTakeFirstOrThrow();
      assert.equal(row.status, 'approved');
    });

    test('20 parallel wrong codes never grant more than 5 checks', async () => {
      const phone = newNumber();
      const { verificationId } = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      const code = await lastCode(s, phone);
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          post(s, '/verify', { verificationId, code: wrongCode(code) }),
        ),
      );
      const codes = results.map((r) => r.json().code);
      assert.equal(codes.filter((c) => c === 'invalid_code').length, 5, String(codes));
      assert.equal(codes.filter((c) => c === 'max_attempts_reached').length, 15);
      await problem(
        await post(s, '/verify', { verificationId, code }),
        429,
        'max_attempts_reached',
      );
    });

    test('parallel first sends to one number create one verification', async () => {
      const phone = newNumber();
      const results = await Promise.all(
        Array.from({ length: 10 }, () => post(s, '/auth/sms/send', { phoneNumber: phone })),
      );
      const ok = results.filter((r) => r.statusCode === 200);
      assert.equal(ok.length, 1, results.map((r) => r.body).join('\n'));
      for (const r of results.filter((x) => x.statusCode !== 200))
        assert.equal(r.json().code, 'resend_too_soon');
      const rows = await s.app.svc.store.db
        .selectFrom('verifications')
        .select('id')
        .where('phone_number', '=', phone)
        .execute();
      assert.equal(rows.length, 1);
    });

    test('codes are stored only as HMACs and never logged except by the console sender', async () => {
      const phone = newNumber();
      const { verificationId } = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      const code = await lastCode(s, phone);
      await post(s, '/verify', { phoneNumber: phone, code: wrongCode(code) });
      await post(s, '/verify', { phoneNumber: phone, code });
      const row = await s.app.svc.store.db
        .selectFrom('verifications')
        .selectAll()
        .where('id', '=', verificationId)
        .executeTakeFirstOrThrow();
      assert.match(row.code_hmac, /^[0-9a-f]{64}$/);
      assert.ok(!JSON.stringify(row).includes(code), 'the code is not at rest');
      const logs = await s.app.svc.store.db.selectFrom('verify_logs').selectAll().execute();
      assert.ok(!JSON.stringify(logs).includes(code));
      assert.ok(!JSON.stringify(logs).includes(phone), 'log rows keep only masked numbers');

      let consoleLines = 0;
      for (const line of s.logs.lines.flatMap((l) => l.split('\n')).filter(Boolean)) {
        const entry = JSON.parse(line);
        // Timestamps and durations are digits too: only what could carry a code is searched.
        delete entry.time;
        delete entry.responseTime;
        const text = JSON.stringify(entry);
        if (entry.msg === 'console SMS sender') {
          consoleLines += 1;
          continue;
        }
        assert.ok(!text.includes(code), `code leaked: ${line}`);
        assert.ok(!text.includes(wrongCode(code)), `tried code leaked: ${line}`);
      }
      assert.ok(consoleLines > 0, 'the console sender did log');
      assert.ok(
        s.logs.text.includes('"req"'),
        'request logging was on (debug), so the check means something',
      );
    });

    test('answers do not reveal whether a number was seen before', async () => {
      const seen = newNumber();
      await post(s, '/auth/sms/send', { phoneNumber: seen });
      await post(s, '/verify', { phoneNumber: seen, code: await lastCode(s, seen) });
      clock.advance(2 * 3_600_000);
      const fresh = newNumber();
      const strip = (body: any) => ({ ...body, verificationId: undefined, requestId: undefined });
      const a = await post(s, '/auth/sms/send', { phoneNumber: seen });
      const b = await post(s, '/auth/sms/send', { phoneNumber: fresh });
      assert.equal(a.statusCode, b.statusCode);
      assert.deepEqual(strip(a.json()), strip(b.json()));

      // Checks against a number with old history and one never seen read the same.
      const old = newNumber();
      await post(s, '/auth/sms/send', { phoneNumber: old });
      clock.advance(2 * 3_600_000);
      const c = await post(s, '/verify', { phoneNumber: old, code: '123456' });
      const d = await post(s, '/verify', { phoneNumber: newNumber(), code: '123456' });
      assert.equal(c.statusCode, 404);
      assert.deepEqual(strip(c.json()), strip(d.json()));
    });

    test('validate-token: consume makes a token single-use; expired, tampered, other audience', async () => {
      const { token, phone } = await approvedToken();
      const first = (await post(s, '/verify/validate-token', { token, consume: true })).json();
      assert.equal(first.valid, true);
      assert.equal(first.phoneNumber, phone);
      assert.deepEqual((await post(s, '/verify/validate-token', { token, consume: true })).json(), {
        valid: false,
        reason: 'already_used',
      });
      assert.deepEqual((await post(s, '/verify/validate-token', { token })).json(), {
        valid: false,
        reason: 'already_used',
      });

      const parallel = await approvedToken();
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          post(s, '/verify/validate-token', { token: parallel.token, consume: true }),
        ),
      );
      assert.equal(results.filter((r) => r.json().valid === true).length, 1);

      const later = await approvedToken();
      const [h, p, sig] = later.token.split('.');
      const forged = JSON.parse(Buffer.from(p, 'base64url').toString());
      forged.phone_number = '+14155552671';
      const tampered = `${h}.${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${sig}`;
      assert.deepEqual((await post(s, '/verify/validate-token', { token: tampered })).json(), {
        valid: false,
        reason: 'invalid',
      });
      assert.deepEqual((await post(s, '/verify/validate-token', { token: 'not.a.jwt' })).json(), {
        valid: false,
        reason: 'invalid',
      });
      const realtime = await s.app.svc.signingKeys.sign(
        { project_id: s.project.id, phone_number: '+14155552671', verification_id: 'vrf_x' },
        { audience: 'svc:realtime', subject: 'u', expiresInSeconds: 600 },
      );
      assert.deepEqual(
        (await post(s, '/verify/validate-token', { token: realtime.token })).json(),
        {
          valid: false,
          reason: 'invalid',
        },
      );
      clock.advance(601_000);
      assert.deepEqual((await post(s, '/verify/validate-token', { token: later.token })).json(), {
        valid: false,
        reason: 'expired',
      });
    });

    test("a token from another project is invalid for this project's keys", async () => {
      const other = await s.admin('POST', '/projects', { name: 'other' });
      const otherKey = (await s.admin('POST', `/projects/${other.id}/keys`, { type: 'server' }))
        .key;
      const { token } = await approvedToken(other.id, otherKey);
      assert.deepEqual((await post(s, '/verify/validate-token', { token })).json(), {
        valid: false,
        reason: 'invalid',
      });
      const own = await post(
        s,
        '/verify/validate-token',
        { token },
        { key: otherKey, projectId: other.id },
      );
      assert.equal(own.json().valid, true);
      // Logs and stats are per project too.
      const logs = (await get(s, '/verify/logs', { key: otherKey, projectId: other.id })).json();
      assert.ok(logs.items.length > 0);
      const mine = (await get(s, '/verify/logs?limit=100')).json();
      const theirs = new Set(logs.items.map((i: any) => i.id));
      assert.ok(mine.items.every((i: any) => !theirs.has(i.id)));
    });

    test('the outbox is admin-only', async () => {
      const url = `/v1/admin/projects/${s.project.id}/verify/outbox`;
      await problem(await s.app.inject({ method: 'GET', url }), 401, 'missing_admin_token');
      await problem(
        await s.app.inject({ method: 'GET', url, headers: { authorization: 'Bearer nope' } }),
        401,
        'invalid_admin_token',
      );
      await problem(
        await s.app.inject({ method: 'GET', url, headers: headers(s) }),
        401,
        'invalid_admin_token',
      );
      await problem(
        await s.app.inject({
          method: 'GET',
          url: '/v1/admin/projects/prj_nope/verify/outbox',
          headers: { authorization: `Bearer ${s.adminToken}` },
        }),
        404,
        'project_not_found',
      );
    });

    test('permission matrix for the five Verify routes', async () => {
      const linksOnly = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        scopes: ['links'],
      });
      const other = await s.admin('POST', '/projects', {
        name: 'no verify',
        products: ['links', 'realtime'],
      });
      const otherServer = await s.admin('POST', `/projects/${other.id}/keys`, { type: 'server' });
      const routes: {
        name: string;
        clientKeys: boolean;
        call: (h: Record<string, string>) => Promise<any>;
      }[] = [
        {
          name: 'POST /auth/sms/send',
          clientKeys: true,
          call: (h) =>
            s.app.inject({
              method: 'POST',
              url: '/v1/auth/sms/send',
              headers: h,
              payload: { phoneNumber: newNumber() },
              remoteAddress: `203.0.113.${Math.floor(Math.random() * 250)}`,
            }),
        },
        {
          name: 'POST /verify',
          clientKeys: true,
          call: (h) =>
            s.app.inject({
              method: 'POST',
              url: '/v1/verify',
              headers: h,
              payload: { phoneNumber: newNumber(), code: '123456' },
            }),
        },
        {
          name: 'POST /verify/validate-token',
          clientKeys: false,
          call: (h) =>
            s.app.inject({
              method: 'POST',
              url: '/v1/verify/validate-token',
              headers: h,
              payload: { token: 'x.y.z' },
            }),
        },
        {
          name: 'GET /verify/logs',
          clientKeys: false,
          call: (h) => s.app.inject({ method: 'GET', url: '/v1/verify/logs', headers: h }),
        },
        {
          name: 'GET /verify/stats',
          clientKeys: false,
          call: (h) => s.app.inject({ method: 'GET', url: '/v1/verify/stats', headers: h }),
        },
      ];
      const h = (key: string, projectId = s.project.id) => ({
        authorization: `Bearer ${key}`,
        'x-project-id': projectId,
      });
      const allowed = (res: any, name: string, who: string) => {
        assert.ok(
          ![401, 403].includes(res.statusCode),
          `${who} on ${name}: ${res.statusCode} ${res.body}`,
        );
        assert.ok(res.statusCode < 500, res.body);
      };
      for (const r of routes) {
        await problem(await r.call({ 'x-project-id': s.project.id }), 401, 'missing_api_key');
        await problem(await r.call(h(s.project.clientKey, other.id)), 401, 'invalid_api_key');
        await problem(await r.call(h(s.project.serverKey, other.id)), 401, 'invalid_api_key');
        await problem(await r.call(h(linksOnly.key)), 403, 'insufficient_scope');
        const client = await r.call(h(s.project.clientKey));
        if (r.clientKeys) allowed(client, r.name, 'client key with verify');
        else await problem(client, 403, 'server_key_required');
        allowed(await r.call(h(s.project.serverKey)), r.name, 'server key');
        await problem(await r.call(h(otherServer.key, other.id)), 403, 'product_not_enabled');
      }
    });
  });
}
