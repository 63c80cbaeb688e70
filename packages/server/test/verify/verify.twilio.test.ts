import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { get, newNumber, post, problem, setVerifySettings } from './fixtures.ts';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  form: Record<string, string>;
}

/**
 * A fake Twilio on 127.0.0.1: records each request and answers as the Messages API does
 * (201 with a message resource, or an error body with Twilio's `code`).
 */
class FakeTwilio {
  received: Received[] = [];
  failNext = 0;
  private server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString()));
      this.received.push({ method: req.method!, url: req.url!, headers: req.headers, form });
      res.setHeader('content-type', 'application/json');
      if (this.failNext > 0) {
        this.failNext -= 1;
        res.statusCode = 400;
        res.end(
          JSON.stringify({ code: 21211, message: "The 'To' number is not valid.", status: 400 }),
        );
        return;
      }
      res.statusCode = 201;
      res.end(
        JSON.stringify({
          sid: `SM${this.received.length}`,
          status: 'queued',
          to: form.To,
          body: form.Body,
        }),
      );
    });
  });
  async start() {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
  last() {
    const r = this.received.at(-1);
    assert.ok(r, 'the provider received a request');
    return r;
  }
  codeOf(r: Received) {
    return /\b(\d{6})\b/.exec(r.form.Body)![1];
  }
  close() {
    this.server.closeAllConnections();
    this.server.close();
  }
}

function basic(user: string, password: string) {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

for (const backend of BACKENDS) {
  describe(`verify Twilio-compatible sender (${backend.name})`, () => {
    let s: TestServer;
    let envServer: TestServer;
    const fake = new FakeTwilio();
    let baseUrl: string;
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    before(async () => {
      baseUrl = await fake.start();
      s = await startTestServer(backend, { clock, env: { LOG_LEVEL: 'debug' } });
      envServer = await startTestServer(backend, {
        clock,
        env: {
          SVC_SMS_SENDER: 'twilio',
          SVC_TWILIO_ACCOUNT_SID: 'ACenv0001',
          SVC_TWILIO_AUTH_TOKEN: 'env-token',
          SVC_TWILIO_MESSAGING_SERVICE_SID: 'MGenv0001',
          SVC_TWILIO_BASE_URL: `${baseUrl}/`,
        },
      });
    });
    after(async () => {
      await s.close();
      await envServer.close();
      fake.close();
    });

    test('per-project settings: the request is exactly the Messages API call', async () => {
      await setVerifySettings(s, {
        sender: {
          type: 'twilio',
          accountSid: 'AC0123456789',
          authToken: 's3cr3t-token',
          from: '+15005550006',
          baseUrl,
        },
      });
      const phone = newNumber();
      const sent = await post(s, '/auth/sms/send', { phoneNumber: phone });
      assert.equal(sent.statusCode, 200, sent.body);
      const r = fake.last();
      assert.equal(r.method, 'POST');
      assert.equal(r.url, '/2010-04-01/Accounts/AC0123456789/Messages.json');
      assert.equal(r.headers['content-type'], 'application/x-www-form-urlencoded');
      assert.equal(r.headers.authorization, basic('AC0123456789', 's3cr3t-token'));
      assert.deepEqual(Object.keys(r.form).sort(), ['Body', 'From', 'To']);
      assert.equal(r.form.To, phone);
      assert.equal(r.form.From, '+15005550006');
      assert.match(
        r.form.Body,
        /^Your verification code is \d{6}\. It expires in 10 minutes\. Do not share it\.$/,
      );
      const ok = await post(s, '/verify', { phoneNumber: phone, code: fake.codeOf(r) });
      assert.equal(ok.statusCode, 200, ok.body);
    });

    test('the auth token is sealed in settings and kept when omitted', async () => {
      const project = await s.admin('GET', `/projects/${s.project.id}`);
      const sender = project.settings.verify.sender;
      assert.equal(sender.authToken, undefined);
      assert.match(sender.authTokenEncrypted, /^v2\./);
      assert.ok(!JSON.stringify(project).includes('s3cr3t-token'));
      await setVerifySettings(s, {
        sender: {
          type: 'twilio',
          accountSid: 'AC0123456789',
          messagingServiceSid: 'MG0001',
          baseUrl,
        },
      });
      const phone = newNumber();
      assert.equal((await post(s, '/auth/sms/send', { phoneNumber: phone })).statusCode, 200);
      const r = fake.last();
      assert.equal(r.headers.authorization, basic('AC0123456789', 's3cr3t-token'));
      assert.deepEqual(Object.keys(r.form).sort(), ['Body', 'MessagingServiceSid', 'To']);
      assert.equal(r.form.MessagingServiceSid, 'MG0001');
    });

    test('a refused first send: sms_delivery_failed, logged as failed, nothing consumed', async () => {
      const phone = newNumber();
      fake.failNext = 1;
      await problem(
        await post(s, '/auth/sms/send', { phoneNumber: phone }),
        502,
        'sms_delivery_failed',
      );
      const retry = await post(s, '/auth/sms/send', { phoneNumber: phone });
      assert.equal(retry.statusCode, 200, `no cooldown after a failure: ${retry.body}`);
      const logs = (await get(s, `/verify/logs?phoneNumber=${encodeURIComponent(phone)}`)).json();
      assert.deepEqual(logs.items.map((i: any) => `${i.status}:${i.reason}`).sort(), [
        'failed:sms_delivery_failed',
        'sent:null',
      ]);
      await problem(
        await post(s, '/verify', {
          phoneNumber: phone,
          code: fake.codeOf(fake.last()) === '000000' ? '000001' : '000000',
        }),
        400,
        'invalid_code',
      );
      assert.equal(
        (await post(s, '/verify', { phoneNumber: phone, code: fake.codeOf(fake.last()) }))
          .statusCode,
        200,
      );
    });

    test('a refused resend keeps the previous code valid and uses no send', async () => {
      await setVerifySettings(s, {
        sender: { type: 'twilio', accountSid: 'AC0123456789', from: '+15005550006', baseUrl },
        limits: { maxSendsPerVerification: 2 },
      });
      const phone = newNumber();
      assert.equal((await post(s, '/auth/sms/send', { phoneNumber: phone })).statusCode, 200);
      const firstCode = fake.codeOf(fake.last());
      clock.advance(60_000);
      fake.failNext = 3;
      for (let i = 0; i < 3; i++) {
        await problem(
          await post(s, '/auth/sms/send', { phoneNumber: phone }),
          502,
          'sms_delivery_failed',
        );
      }
      const resent = await post(s, '/auth/sms/send', { phoneNumber: phone });
      assert.equal(resent.statusCode, 200, 'failed sends did not count towards the 2 allowed');
      clock.advance(60_000);
      await problem(
        await post(s, '/auth/sms/send', { phoneNumber: phone }),
        429,
        'max_sends_reached',
      );
      const secondCode = fake.codeOf(fake.last());
      if (secondCode !== firstCode) {
        await problem(
          await post(s, '/verify', { phoneNumber: phone, code: firstCode }),
          400,
          'invalid_code',
        );
      }
      assert.equal(
        (await post(s, '/verify', { phoneNumber: phone, code: secondCode })).statusCode,
        200,
      );
      await setVerifySettings(s, {});
    });

    test('an unreachable provider is a delivery failure, not a 500', async () => {
      const closed = http.createServer();
      closed.listen(0, '127.0.0.1');
      await once(closed, 'listening');
      const deadUrl = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
      closed.close();
      await setVerifySettings(s, {
        sender: {
          type: 'twilio',
          accountSid: 'AC0123456789',
          authToken: 't',
          from: '+15005550006',
          baseUrl: deadUrl,
        },
      });
      await problem(
        await post(s, '/auth/sms/send', { phoneNumber: newNumber() }),
        502,
        'sms_delivery_failed',
      );
      await setVerifySettings(s, {});
    });

    test('no code reaches the server log with the Twilio sender', async () => {
      const codes = fake.received.map((r) => fake.codeOf(r));
      assert.ok(codes.length >= 4);
      for (const line of s.logs.lines.flatMap((l) => l.split('\n')).filter(Boolean)) {
        const entry = JSON.parse(line);
        delete entry.time;
        delete entry.responseTime;
        const text = JSON.stringify(entry);
        for (const code of codes) assert.ok(!text.includes(code), `code ${code} leaked: ${line}`);
        assert.ok(!text.includes('s3cr3t-token'), `auth token leaked: ${line}`);
      }
      assert.match(s.logs.text, /SMS delivery failed/, 'failures are logged');
    });

    test('the environment configures the default sender (messaging service)', async () => {
      const phone = newNumber();
      const res = await envServer.app.inject({
        method: 'POST',
        url: '/v1/auth/sms/send',
        headers: {
          authorization: `Bearer ${envServer.project.serverKey}`,
          'x-project-id': envServer.project.id,
        },
        payload: { phoneNumber: phone },
      });
      assert.equal(res.statusCode, 200, res.body);
      const r = fake.last();
      assert.equal(r.url, '/2010-04-01/Accounts/ACenv0001/Messages.json');
      assert.equal(r.headers.authorization, basic('ACenv0001', 'env-token'));
      assert.deepEqual(r.form, { To: phone, MessagingServiceSid: 'MGenv0001', Body: r.form.Body });
      const outbox = await envServer.admin(
        'GET',
        `/projects/${envServer.project.id}/verify/outbox`,
      );
      assert.deepEqual(outbox.items, [], 'the console outbox stays empty');
    });
  });
}

describe('SMS sender configuration', () => {
  test('bad SVC_SMS_SENDER settings name the variable', async () => {
    const { ConfigError, loadConfig } = await import('../../src/areas.ts');
    assert.deepEqual(loadConfig({}).verify.smsSender, { type: 'console' });
    assert.throws(() => loadConfig({ SVC_SMS_SENDER: 'carrier-pigeon' }), ConfigError);
    assert.throws(() => loadConfig({ SVC_SMS_SENDER: 'twilio' }), /SVC_TWILIO_ACCOUNT_SID/);
    assert.throws(
      () =>
        loadConfig({
          SVC_SMS_SENDER: 'twilio',
          SVC_TWILIO_ACCOUNT_SID: 'AC1',
          SVC_TWILIO_AUTH_TOKEN: 't',
        }),
      /SVC_TWILIO_FROM or SVC_TWILIO_MESSAGING_SERVICE_SID/,
    );
    assert.throws(
      () =>
        loadConfig({
          SVC_SMS_SENDER: 'twilio',
          SVC_TWILIO_ACCOUNT_SID: 'AC1',
          SVC_TWILIO_AUTH_TOKEN: 't',
          SVC_TWILIO_FROM: '+1',
          SVC_TWILIO_BASE_URL: 'file:///etc',
        }),
      /SVC_TWILIO_BASE_URL/,
    );
  });
});
