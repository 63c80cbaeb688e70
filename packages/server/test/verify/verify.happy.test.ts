import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { get, lastCode, newNumber, post, problem, setVerifySettings } from './fixtures.ts';

for (const backend of BACKENDS) {
  describe(`verify happy paths (${backend.name})`, () => {
    let s: TestServer;
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    before(async () => {
      s = await startTestServer(backend, { clock });
    });
    after(() => s.close());

    test('send, read the console outbox, verify, and the backend validates the token', async () => {
      const phone = newNumber();
      const sent = await post(
        s,
        '/auth/sms/send',
        { phoneNumber: phone },
        { key: s.project.clientKey },
      );
      assert.equal(sent.statusCode, 200, sent.body);
      const body = sent.json();
      assert.match(body.verificationId, /^vrf_/);
      assert.deepEqual(
        { ...body, verificationId: 'x' },
        { verificationId: 'x', status: 'pending', expiresIn: 600, resendAfter: 60 },
      );
      const code = await lastCode(s, phone);
      const outbox = await s.admin('GET', `/projects/${s.project.id}/verify/outbox`);
      assert.match(
        outbox.items[0].body,
        /Your verification code is \d{6}\. It expires in 10 minutes\./,
      );

      const ok = await post(
        s,
        '/verify',
        { phoneNumber: phone, code },
        { key: s.project.clientKey },
      );
      assert.equal(ok.statusCode, 200, ok.body);
      const approved = ok.json();
      assert.equal(approved.status, 'approved');
      assert.equal(approved.expiresIn, 600);

      // The token verifies against the public JWKS like any backend would check it.
      const jwks = await s.app.inject({ method: 'GET', url: '/.well-known/jwks.json' });
      const { payload, protectedHeader } = await jwtVerify(
        approved.token,
        createLocalJWKSet(jwks.json()),
        {
          audience: 'svc:verify',
          issuer: s.config.publicUrl,
          currentDate: new Date(clock.now()),
        },
      );
      assert.equal(protectedHeader.alg, 'ES256');
      assert.equal(payload.project_id, s.project.id);
      assert.equal(payload.phone_number, phone);
      assert.equal(payload.verification_id, body.verificationId);
      assert.equal(payload.sub, phone);
      assert.equal(payload.exp! - payload.iat!, 600);
      assert.ok(typeof payload.jti === 'string' && payload.jti.length > 10);

      const validated = await post(s, '/verify/validate-token', { token: approved.token });
      assert.equal(validated.statusCode, 200, validated.body);
      assert.deepEqual(validated.json(), {
        valid: true,
        phoneNumber: phone,
        verificationId: body.verificationId,
        verifiedAt: new Date(clock.now()).toISOString(),
        expiresAt: new Date(clock.now() + 600_000).toISOString(),
      });
      // Without consume, a token validates again.
      assert.equal(
        (await post(s, '/verify/validate-token', { token: approved.token })).json().valid,
        true,
      );
    });

    test('verify by verificationId; a resend after the cooldown replaces the code in the same verification', async () => {
      const phone = newNumber();
      const first = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      const code1 = await lastCode(s, phone);
      clock.advance(60_000);
      const again = await post(s, '/auth/sms/send', { phoneNumber: phone });
      assert.equal(again.statusCode, 200, again.body);
      assert.equal(
        again.json().verificationId,
        first.verificationId,
        'the pending verification is refreshed',
      );
      const code2 = await lastCode(s, phone);
      if (code1 !== code2) {
        await problem(
          await post(s, '/verify', { verificationId: first.verificationId, code: code1 }),
          400,
          'invalid_code',
        );
      }
      const ok = await post(s, '/verify', { verificationId: first.verificationId, code: code2 });
      assert.equal(ok.statusCode, 200, ok.body);
      assert.equal(decodeJwt(ok.json().token).phone_number, phone);
    });

    test('a new verification starts once the previous one was approved', async () => {
      const phone = newNumber();
      const first = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      assert.equal(
        (await post(s, '/verify', { phoneNumber: phone, code: await lastCode(s, phone) }))
          .statusCode,
        200,
      );
      clock.advance(60_000);
      const second = await post(s, '/auth/sms/send', { phoneNumber: phone });
      assert.equal(second.statusCode, 200);
      assert.notEqual(second.json().verificationId, first.verificationId);
      assert.equal(
        (await post(s, '/verify', { phoneNumber: phone, code: await lastCode(s, phone) }))
          .statusCode,
        200,
      );
    });

    test('test numbers: fixed code, no SMS, no cooldown or quota', async () => {
      await setVerifySettings(s, {
        testNumbers: [{ phoneNumber: '+15555550100', code: '123456' }],
        limits: { sendsPerNumberPerHour: 1, sendsPerIpPerHour: 1 },
      });
      const before = (await s.admin('GET', `/projects/${s.project.id}/verify/outbox`)).items.length;
      for (let i = 0; i < 3; i++) {
        const sent = await post(s, '/auth/sms/send', { phoneNumber: '+15555550100' });
        assert.equal(sent.statusCode, 200, sent.body);
        assert.equal(sent.json().resendAfter, 0);
      }
      const after = (await s.admin('GET', `/projects/${s.project.id}/verify/outbox`)).items.length;
      assert.equal(after, before, 'no message was sent');
      const ok = await post(s, '/verify', { phoneNumber: '+15555550100', code: '123456' });
      assert.equal(ok.statusCode, 200, ok.body);
      const project = await s.admin('GET', `/projects/${s.project.id}`);
      assert.deepEqual(project.settings.verify.testNumbers, [
        { phoneNumber: '+15555550100', code: '123456' },
      ]);
      await setVerifySettings(s, {});
    });

    test('logs: every send and check, filtered by number, status, type and time, paginated', async () => {
      const phone = newNumber();
      const t0 = new Date(clock.now()).toISOString();
      await post(
        s,
        '/auth/sms/send',
        { phoneNumber: phone },
        { key: s.project.clientKey, ip: '203.0.113.9' },
      );
      const code = await lastCode(s, phone);
      clock.advance(1); // logs sort by time; events in one millisecond have no order
      await post(s, '/verify', {
        phoneNumber: phone,
        code: code === '000000' ? '000001' : '000000',
      });
      clock.advance(1);
      await post(s, '/verify', { phoneNumber: phone, code });
      const res = await get(s, `/verify/logs?phoneNumber=${encodeURIComponent(phone)}`);
      assert.equal(res.statusCode, 200, res.body);
      const { items, meta } = res.json();
      assert.equal(meta.total, 3);
      assert.deepEqual(
        items.map((i: any) => `${i.type}:${i.status}`),
        ['check:approved', 'check:invalid_code', 'send:sent'],
      );
      const send = items[2];
      assert.equal(send.phoneNumber, `+33*******${phone.slice(-2)}`);
      assert.equal(send.country, 'FR');
      assert.equal(send.keyId, s.project.clientKeyId);
      assert.equal(send.clientIp, '203.0.113.9');
      assert.equal(send.test, false);
      assert.equal(items[0].keyId, s.project.serverKeyId);
      const paged = (
        await get(s, `/verify/logs?phoneNumber=${encodeURIComponent(phone)}&limit=1&page=2`)
      ).json();
      assert.deepEqual(paged.meta, { total: 3, page: 2, limit: 1 });
      assert.equal(paged.items[0].status, 'invalid_code');
      const approved = (await get(s, `/verify/logs?status=approved&from=${t0}`)).json();
      assert.ok(approved.items.every((i: any) => i.status === 'approved'));
      assert.ok(approved.items.some((i: any) => i.verificationId === items[0].verificationId));
      const sends = (
        await get(s, `/verify/logs?type=send&phoneNumber=${encodeURIComponent(phone)}`)
      ).json();
      assert.equal(sends.meta.total, 1);
      const future = (
        await get(s, `/verify/logs?from=${new Date(clock.now() + 1000).toISOString()}`)
      ).json();
      assert.equal(future.meta.total, 0);
    });

    test('the OpenAPI document lists the Verify routes', async () => {
      const doc = (await s.app.inject({ method: 'GET', url: '/openapi.json' })).json();
      for (const [route, method] of [
        ['/v1/auth/sms/send', 'post'],
        ['/v1/verify', 'post'],
        ['/v1/verify/validate-token', 'post'],
        ['/v1/verify/logs', 'get'],
        ['/v1/verify/stats', 'get'],
        ['/v1/admin/projects/{projectId}/verify/outbox', 'get'],
      ]) {
        assert.ok(doc.paths[route]?.[method], `${method} ${route} is documented`);
      }
    });

    test('stats: sends, approvals, failed checks, expirations and conversion, per country', async () => {
      const other = await s.admin('POST', '/projects', { name: 'stats' });
      const key = (await s.admin('POST', `/projects/${other.id}/keys`, { type: 'server' })).key;
      const opts = { key, projectId: other.id };
      const from = new Date(clock.now()).toISOString();
      const fr = newNumber();
      const us = '+14155552671';
      const de = '+491711234567';
      for (const n of [fr, us, de]) {
        assert.equal((await post(s, '/auth/sms/send', { phoneNumber: n }, opts)).statusCode, 200);
      }
      await post(s, '/verify', { phoneNumber: fr, code: await lastCode(s, fr, other.id) }, opts);
      const usCode = await lastCode(s, us, other.id);
      await post(
        s,
        '/verify',
        { phoneNumber: us, code: usCode === '111111' ? '222222' : '111111' },
        opts,
      );
      await post(s, '/verify', { phoneNumber: us, code: usCode }, opts);
      clock.advance(601_000); // de expires unapproved
      const res = await s.app.inject({
        method: 'GET',
        url: `/v1/verify/stats?from=${from}&to=${new Date(clock.now()).toISOString()}`,
        headers: { authorization: `Bearer ${key}`, 'x-project-id': other.id },
      });
      assert.equal(res.statusCode, 200, res.body);
      const stats = res.json();
      assert.equal(stats.verifications, 3);
      assert.equal(stats.sends, 3);
      assert.equal(stats.approvals, 2);
      assert.equal(stats.failedChecks, 1);
      assert.equal(stats.expirations, 1);
      assert.equal(stats.conversionRate, 0.6667);
      const byCountry = Object.fromEntries(stats.countries.map((c: any) => [c.country, c]));
      assert.deepEqual(byCountry.DE, {
        country: 'DE',
        verifications: 1,
        sends: 1,
        approvals: 0,
        failedChecks: 0,
        expirations: 1,
        conversionRate: 0,
      });
      assert.equal(byCountry.US.failedChecks, 1);
      assert.equal(byCountry.US.conversionRate, 1);
      assert.equal(byCountry.FR.approvals, 1);
      const bad = await s.app.inject({
        method: 'GET',
        url: `/v1/verify/stats?from=${new Date(clock.now()).toISOString()}&to=${from}`,
        headers: { authorization: `Bearer ${key}`, 'x-project-id': other.id },
      });
      await problem(bad, 400, 'invalid_request');
    });
  });
}
