import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { type NodeProcess, spawnNode } from '../fixtures/spawn-node.ts';
import { DATABASE_URL, deleteRedisPrefix, REDIS_URL, uniqueName } from '../helpers.ts';
import { newNumber } from './fixtures.ts';

// Two server processes sharing PostgreSQL and Redis, sending through one fake provider.
describe('verify across two nodes (postgres+redis)', {
  skip: !(DATABASE_URL && REDIS_URL) && 'needs DATABASE_URL and REDIS_URL',
}, () => {
  const schema = uniqueName('t');
  const prefix = `${uniqueName('test')}:`;
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  const messages = new Map<string, string>();
  const provider = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const form = new URLSearchParams(body);
      messages.set(form.get('To')!, /\b(\d{6})\b/.exec(form.get('Body')!)![1]);
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"sid":"SM1"}');
    });
  });
  let a: NodeProcess;
  let b: NodeProcess;
  let projectId: string;
  let serverKey: string;

  const call = (node: NodeProcess, path: string, body: unknown) =>
    fetch(`${node.url}/v1${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${serverKey}`,
        'x-project-id': projectId,
        'content-type': 'application/json',
      },
      body: JSON.stringify(body),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as any }));

  before(async () => {
    provider.listen(0, '127.0.0.1');
    await once(provider, 'listening');
    const env = {
      DATABASE_URL: DATABASE_URL!,
      REDIS_URL: REDIS_URL!,
      SVC_PG_SCHEMA: schema,
      SVC_REDIS_PREFIX: prefix,
      SVC_ADMIN_TOKEN: adminToken,
      SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
      SVC_SMS_SENDER: 'twilio',
      SVC_TWILIO_ACCOUNT_SID: 'AC1',
      SVC_TWILIO_AUTH_TOKEN: 'token',
      SVC_TWILIO_FROM: '+15005550006',
      SVC_TWILIO_BASE_URL: `http://127.0.0.1:${(provider.address() as AddressInfo).port}`,
    };
    [a, b] = await Promise.all([spawnNode(env), spawnNode(env)]);
    const admin = async (path: string, body: unknown) => {
      const res = await fetch(`${a.url}/v1/admin${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      assert.ok(res.ok);
      return res.json() as Promise<any>;
    };
    projectId = (await admin('/projects', { name: 'multi' })).id;
    serverKey = (await admin(`/projects/${projectId}/keys`, { type: 'server' })).key;
  });

  after(async () => {
    await Promise.allSettled([a?.stop(), b?.stop()]);
    provider.closeAllConnections();
    provider.close();
    await deleteRedisPrefix(prefix);
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
  });

  test('20 parallel right answers split over two nodes approve once; the token is single-use on both', async () => {
    const phone = newNumber();
    const sent = await call(a, '/auth/sms/send', { phoneNumber: phone });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const code = messages.get(phone)!;
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(i % 2 ? a : b, '/verify', { phoneNumber: phone, code }),
      ),
    );
    const approved = results.filter((r) => r.status === 200);
    assert.equal(approved.length, 1, JSON.stringify(results.map((r) => r.status)));
    assert.deepEqual(
      [...new Set(results.filter((r) => r.status !== 200).map((r) => r.body.code))],
      ['verification_not_found'],
    );

    const token = approved[0].body.token;
    const validations = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call(i % 2 ? a : b, '/verify/validate-token', { token, consume: true }),
      ),
    );
    assert.equal(validations.filter((v) => v.body.valid === true).length, 1);
    assert.deepEqual(
      [...new Set(validations.filter((v) => v.body.valid !== true).map((v) => v.body.reason))],
      ['already_used'],
    );
  });

  test('the cooldown and the send limit hold across nodes', async () => {
    const phone = newNumber();
    assert.equal((await call(a, '/auth/sms/send', { phoneNumber: phone })).status, 200);
    const again = await call(b, '/auth/sms/send', { phoneNumber: phone });
    assert.equal(again.status, 429);
    assert.equal(again.body.code, 'resend_too_soon');
    // Concurrent first sends to one number from both nodes create one verification.
    const other = newNumber();
    const both = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(i % 2 ? a : b, '/auth/sms/send', { phoneNumber: other }),
      ),
    );
    assert.equal(
      both.filter((r) => r.status === 200).length,
      1,
      JSON.stringify(both.map((r) => r.body)),
    );
  });
});
