import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { scrub } from '../../src/http/logging.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

test('scrub redacts secret and phone parameters, percent-encoded names included', () => {
  assert.equal(scrub('/ws?access%5Ftoken=abc.def&x=1'), '/ws?access%5Ftoken=[REDACTED]&x=1');
  assert.equal(scrub('/ws?ACCESS_TOKEN=abc'), '/ws?ACCESS_TOKEN=[REDACTED]');
  assert.equal(scrub('/a?x=1&api%5fkey=s'), '/a?x=1&api%5fkey=[REDACTED]');
  assert.equal(
    scrub('/v1/verify/logs?phoneNumber=%2B14155550100&page=2'),
    '/v1/verify/logs?phoneNumber=[REDACTED]&page=2',
  );
  assert.equal(scrub('/a?bad%E0name=v'), '/a?bad%E0name=v');
  assert.equal(scrub('/a?keyword=v'), '/a?keyword=v');
});

for (const backend of BACKENDS) {
  describe(`logging at debug (${backend.name})`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(backend, { env: { LOG_LEVEL: 'debug' } });
    });
    after(() => s.close());

    test('a token under an encoded parameter name and a phone number never reach the log', async () => {
      const headers = {
        authorization: `Bearer ${s.project.serverKey}`,
        'x-project-id': s.project.id,
      };
      await s.app.inject({
        url: '/v1/realtime/rooms?access%5Ftoken=eyJhbGciOiJFUzI1NiJ9.secretpart',
        headers,
      });
      await s.app.inject({ url: '/v1/realtime/ws?access%5Ftoken=eyJhbGciOiJFUzI1NiJ9.secretpart' });
      await s.app.inject({ url: '/v1/verify/logs?phoneNumber=%2B14155550123', headers });
      const text = s.logs.text;
      assert.ok(text.includes('[REDACTED]'), 'the requests were logged');
      assert.ok(!text.includes('secretpart'), 'the token reached the log');
      assert.ok(!text.includes('4155550123'), 'the phone number reached the log');
    });
  });
}
