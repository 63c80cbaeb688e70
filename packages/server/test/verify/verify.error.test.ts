import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import {
  get,
  lastCode,
  newNumber,
  post,
  problem,
  setVerifySettings,
  wrongCode,
} from './fixtures.ts';

for (const backend of BACKENDS) {
  describe(`verify refusals (${backend.name})`, () => {
    let s: TestServer;
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    before(async () => {
      s = await startTestServer(backend, { clock });
    });
    after(() => s.close());

    test('invalid_phone_number: not E.164, not a real number, or badly written', async () => {
      for (const phoneNumber of [
        '4155552671',
        '+0155552671',
        '+1415555267112345678',
        '+1 415 555 2671',
        '+15555550100', // fictional range: invalid unless listed as a test number
        '+1415abc2671',
        '',
      ]) {
        const res = await post(s, '/auth/sms/send', { phoneNumber });
        if (phoneNumber === '') await problem(res, 400, 'invalid_request');
        else await problem(res, 400, 'invalid_phone_number');
      }
      await problem(await post(s, '/auth/sms/send', {}), 400, 'invalid_request');
      await problem(
        await post(s, '/auth/sms/send', { phoneNumber: '+14155552671', extra: 1 }),
        400,
        'invalid_request',
      );
      await problem(
        await post(s, '/verify', { phoneNumber: '14155552671', code: '123456' }),
        400,
        'invalid_phone_number',
      );
    });

    test('verify needs exactly one of phoneNumber and verificationId, and a code of digits', async () => {
      await problem(await post(s, '/verify', { code: '123456' }), 400, 'invalid_request');
      await problem(
        await post(s, '/verify', {
          phoneNumber: '+14155552671',
          verificationId: 'vrf_x',
          code: '123456',
        }),
        400,
        'invalid_request',
      );
      await problem(
        await post(s, '/verify', { phoneNumber: '+14155552671', code: '12ab56' }),
        400,
        'invalid_request',
      );
      await problem(
        await post(s, '/verify', { verificationId: '../etc', code: '123456' }),
        400,
        'invalid_request',
      );
    });

    test('country_not_allowed when the project has an allow-list', async () => {
      await setVerifySettings(s, { allowedCountries: ['US', 'DE'] });
      try {
        await problem(
          await post(s, '/auth/sms/send', { phoneNumber: newNumber() }),
          403,
          'country_not_allowed',
        );
        const us = await post(s, '/auth/sms/send', { phoneNumber: '+12025550123' });
        assert.equal(us.statusCode, 200, us.body);
        // +800 (international freephone) has no country: refused under an allow-list.
        const global = await post(s, '/auth/sms/send', { phoneNumber: '+80012345678' });
        if (global.statusCode !== 400) await problem(global, 403, 'country_not_allowed');
      } finally {
        await setVerifySettings(s, {});
      }
    });

    test('resend_too_soon inside the cooldown, then max_sends_reached after 5 sends', async () => {
      const phone = newNumber();
      assert.equal((await post(s, '/auth/sms/send', { phoneNumber: phone })).statusCode, 200);
      clock.advance(20_000);
      const soon = await post(s, '/auth/sms/send', { phoneNumber: phone });
      const body = await problem(soon, 429, 'resend_too_soon');
      assert.equal(soon.headers['retry-after'], '40');
      assert.equal(body.retryAfter, 40);
      clock.advance(40_000);
      for (let i = 2; i <= 5; i++) {
        const res = await post(s, '/auth/sms/send', { phoneNumber: phone });
        assert.equal(res.statusCode, 200, `send ${i}: ${res.body}`);
        clock.advance(60_000);
      }
      const sixth = await post(s, '/auth/sms/send', { phoneNumber: phone });
      await problem(sixth, 429, 'max_sends_reached');
      assert.equal(
        sixth.headers['retry-after'],
        String(600 - 60),
        'until the verification expires',
      );
      clock.advance(600_000);
      assert.equal(
        (await post(s, '/auth/sms/send', { phoneNumber: phone })).statusCode,
        200,
        'a new verification once the old one expired',
      );
    });

    test('too_many_requests: the per-number hourly cap, then the per-IP cap', async () => {
      await setVerifySettings(s, {
        limits: { sendsPerNumberPerHour: 2, sendsPerIpPerHour: 3, resendCooldownSeconds: 0 },
      });
      try {
        const phone = newNumber();
        const ip = '192.0.2.10';
        for (let i = 0; i < 2; i++) {
          assert.equal(
            (await post(s, '/auth/sms/send', { phoneNumber: phone }, { ip })).statusCode,
            200,
          );
        }
        const capped = await post(
          s,
          '/auth/sms/send',
          { phoneNumber: phone },
          { ip: '192.0.2.11' },
        );
        await problem(capped, 429, 'too_many_requests');
        assert.ok(Number(capped.headers['retry-after']) > 0);
        assert.equal(
          (await post(s, '/auth/sms/send', { phoneNumber: newNumber() }, { ip })).statusCode,
          200,
        );
        const ipCapped = await post(s, '/auth/sms/send', { phoneNumber: newNumber() }, { ip });
        await problem(ipCapped, 429, 'too_many_requests');
        assert.ok(Number(ipCapped.headers['retry-after']) > 0);
        assert.equal(
          (await post(s, '/auth/sms/send', { phoneNumber: newNumber() }, { ip: '192.0.2.12' }))
            .statusCode,
          200,
          'another client is not affected',
        );
        clock.advance(2 * 3_600_000);
        assert.equal(
          (await post(s, '/auth/sms/send', { phoneNumber: phone }, { ip })).statusCode,
          200,
          'caps reset',
        );
      } finally {
        await setVerifySettings(s, {});
      }
    });

    test('per-IP check cap', async () => {
      await setVerifySettings(s, { limits: { checksPerIpPerHour: 2 } });
      try {
        const phone = newNumber();
        await post(s, '/auth/sms/send', { phoneNumber: phone });
        const code = await lastCode(s, phone);
        const ip = '192.0.2.20';
        await problem(
          await post(s, '/verify', { phoneNumber: phone, code: wrongCode(code) }, { ip }),
          400,
          'invalid_code',
        );
        await problem(
          await post(s, '/verify', { phoneNumber: newNumber(), code }, { ip }),
          404,
          'verification_not_found',
        );
        await problem(
          await post(s, '/verify', { phoneNumber: phone, code }, { ip }),
          429,
          'too_many_requests',
        );
        assert.equal(
          (await post(s, '/verify', { phoneNumber: phone, code }, { ip: '192.0.2.21' })).statusCode,
          200,
        );
      } finally {
        await setVerifySettings(s, {});
      }
    });

    test('5 wrong codes lock the verification: invalid_code with attemptsRemaining, then max_attempts_reached', async () => {
      const phone = newNumber();
      await post(s, '/auth/sms/send', { phoneNumber: phone });
      const code = await lastCode(s, phone);
      for (let remaining = 4; remaining >= 0; remaining--) {
        const body = await problem(
          await post(s, '/verify', { phoneNumber: phone, code: wrongCode(code) }),
          400,
          'invalid_code',
        );
        assert.equal(body.attemptsRemaining, remaining);
      }
      const locked = await post(s, '/verify', { phoneNumber: phone, code });
      await problem(locked, 429, 'max_attempts_reached');
      assert.ok(Number(locked.headers['retry-after']) > 0);
      // A resend cannot unlock it while it lasts.
      clock.advance(60_000);
      await problem(
        await post(s, '/auth/sms/send', { phoneNumber: phone }),
        429,
        'max_attempts_reached',
      );
      clock.advance(600_000);
      assert.equal((await post(s, '/auth/sms/send', { phoneNumber: phone })).statusCode, 200);
      assert.equal(
        (await post(s, '/verify', { phoneNumber: phone, code: await lastCode(s, phone) }))
          .statusCode,
        200,
      );
    });

    test('a resend does not reset the attempts: resending never buys more guesses', async () => {
      const phone = newNumber();
      await post(s, '/auth/sms/send', { phoneNumber: phone });
      const first = await lastCode(s, phone);
      for (let i = 0; i < 3; i++) {
        await problem(
          await post(s, '/verify', { phoneNumber: phone, code: wrongCode(first) }),
          400,
          'invalid_code',
        );
      }
      clock.advance(60_000);
      assert.equal((await post(s, '/auth/sms/send', { phoneNumber: phone })).statusCode, 200);
      const second = await lastCode(s, phone);
      const body = await problem(
        await post(s, '/verify', { phoneNumber: phone, code: wrongCode(second) }),
        400,
        'invalid_code',
      );
      assert.equal(body.attemptsRemaining, 1);
      await problem(
        await post(s, '/verify', { phoneNumber: phone, code: wrongCode(second) }),
        400,
        'invalid_code',
      );
      await problem(
        await post(s, '/verify', { phoneNumber: phone, code: second }),
        429,
        'max_attempts_reached',
      );
    });

    test('verification_expired after 10 minutes; verification_not_found for unknown, used and old', async () => {
      const phone = newNumber();
      const { verificationId } = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      const code = await lastCode(s, phone);
      clock.advance(600_000);
      await problem(
        await post(s, '/verify', { phoneNumber: phone, code }),
        410,
        'verification_expired',
      );
      await problem(
        await post(s, '/verify', { verificationId, code }),
        410,
        'verification_expired',
      );
      clock.advance(3_600_000);
      // Long after: by number, indistinguishable from a number never seen; by id still expired.
      await problem(
        await post(s, '/verify', { phoneNumber: phone, code }),
        404,
        'verification_not_found',
      );
      await problem(
        await post(s, '/verify', { verificationId, code }),
        410,
        'verification_expired',
      );
      await problem(
        await post(s, '/verify', { verificationId: 'vrf_01JDUNKNOWN0000000000000', code }),
        404,
        'verification_not_found',
      );
      await problem(
        await post(s, '/verify', { phoneNumber: newNumber(), code }),
        404,
        'verification_not_found',
      );
    });

    test('a code is single-use', async () => {
      const phone = newNumber();
      const { verificationId } = (await post(s, '/auth/sms/send', { phoneNumber: phone })).json();
      const code = await lastCode(s, phone);
      assert.equal((await post(s, '/verify', { phoneNumber: phone, code })).statusCode, 200);
      await problem(
        await post(s, '/verify', { phoneNumber: phone, code }),
        404,
        'verification_not_found',
      );
      await problem(
        await post(s, '/verify', { verificationId, code }),
        404,
        'verification_not_found',
      );
    });

    test('logs and stats queries are validated', async () => {
      for (const url of [
        '/verify/stats?from=yesterday',
        '/verify/stats?to=2026-02-30T99:00:00Z',
        '/verify/stats?bogus=1',
        '/verify/logs?phoneNumber=12345',
        '/verify/logs?status=lost',
        '/verify/logs?limit=1000',
        '/verify/logs?page=0',
        '/verify/logs?from=2026',
      ]) {
        await problem(await get(s, url), 400, 'invalid_request');
      }
      await problem(
        await post(s, '/verify/validate-token', { token: 'x'.repeat(9000) }),
        400,
        'invalid_request',
      );
      await problem(await post(s, '/verify/validate-token', {}), 400, 'invalid_request');
    });

    test('settings.verify is validated', async () => {
      const bad = async (verify: unknown, path: RegExp) => {
        const res = await s.app.inject({
          method: 'PATCH',
          url: `/v1/admin/projects/${s.project.id}`,
          headers: { authorization: `Bearer ${s.adminToken}` },
          payload: { settings: { verify } },
        });
        const body = await problem(res, 400, 'invalid_request');
        assert.match(body.errors[0].path, path, res.body);
      };
      await bad({ testNumbers: [{ phoneNumber: '123', code: '123456' }] }, /testNumbers/);
      await bad({ testNumbers: [{ phoneNumber: '+15555550100', code: '12' }] }, /testNumbers/);
      await bad(
        {
          testNumbers: [
            { phoneNumber: '+15555550100', code: '123456' },
            { phoneNumber: '+15555550100', code: '654321' },
          ],
        },
        /testNumbers\.1/,
      );
      await bad({ allowedCountries: ['usa'] }, /allowedCountries/);
      await bad({ limits: { codeTtlSeconds: 5 } }, /limits/);
      await bad({ limits: { unknown: 5 } }, /limits/);
      await bad({ sender: { type: 'twilio', accountSid: 'AC1', authToken: 't' } }, /sender/);
      await bad({ sender: { type: 'twilio', accountSid: 'AC1', from: '+1' } }, /sender\.authToken/);
      await bad(
        {
          sender: {
            type: 'twilio',
            accountSid: 'AC1',
            authToken: 't',
            from: '+1',
            baseUrl: 'ftp://x',
          },
        },
        /sender\.baseUrl/,
      );
      await bad(
        {
          sender: { type: 'twilio', accountSid: 'AC1', authTokenEncrypted: 'v1.a.b.c', from: '+1' },
        },
        /authTokenEncrypted/,
      );
      await bad({ sender: { type: 'pigeon' } }, /sender/);
      await bad('nope', /verify/);
    });
  });
}
