import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import proxyAddr from '@fastify/proxy-addr';
import Fastify from 'fastify';
import { proxyTrust } from '../../src/http/proxy-trust.ts';

const ENTRY_LISTS = [
  ['127.0.0.1'],
  ['10.0.0.1', '::1'],
  ['loopback'],
  ['10.0.0.0/8', '192.168.1.7'],
  ['::ffff:127.0.0.1'],
  ['2001:db8::1', 'uniquelocal', '172.16.0.0/255.240.0.0'],
];
const ADDRESSES = [
  '127.0.0.1',
  '127.0.0.2',
  '::1',
  '::ffff:127.0.0.1',
  '::ffff:7f00:1',
  '10.0.0.1',
  '10.200.3.4',
  '192.168.1.7',
  '192.168.1.8',
  '2001:db8::1',
  '2001:0db8::1',
  '2001:db8:0:0:0:0:0:1',
  'fd00::5',
  '172.20.1.1',
  'not an address',
  '',
];

describe('proxy trust (SVC_TRUST_PROXY)', () => {
  test('answers as proxy-addr does for every address, hop and list', () => {
    for (const entries of ENTRY_LISTS) {
      const expected = proxyAddr.compile(entries);
      const trust = proxyTrust(entries);
      for (const address of ADDRESSES) {
        for (const hop of [0, 1, 3]) {
          assert.equal(
            trust(address, hop),
            expected(address, hop),
            `${address} (hop ${hop}) behind ${entries.join(',')}`,
          );
        }
      }
    }
  });

  test('a bad entry fails at start as it does in proxy-addr', () => {
    assert.throws(() => proxyTrust(['10.0.0.0/99']));
    assert.throws(() => proxyAddr.compile(['10.0.0.0/99']));
  });

  test("Fastify reads the client's address through it: trusted peers only", async () => {
    for (const [entries, expected] of [
      [['127.0.0.1'], ['198.51.100.7', 'go.example.com']],
      [['10.0.0.0/8'], ['127.0.0.1', 'localhost:80']],
    ] as const) {
      const app = Fastify({ trustProxy: proxyTrust(entries) });
      app.get('/', async (request) => [request.ip, request.host]);
      const res = await app.inject({
        url: '/',
        remoteAddress: '127.0.0.1',
        headers: {
          host: 'localhost:80',
          'x-forwarded-for': '203.0.113.9, 198.51.100.7',
          'x-forwarded-host': 'go.example.com',
        },
      });
      assert.deepEqual(res.json(), expected);
      await app.close();
    }
  });
});
