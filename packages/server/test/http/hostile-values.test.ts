// Values the schemas' syntax lets through but no store can keep as sent: date-times that name no
// storable instant (a leap second, an offset past the year 9999) and strings that are not
// well-formed UTF-16 (lone surrogates). Each is refused with 400 invalid_request naming the
// field; nothing is stored, and every read of what is stored still answers.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

/** An offset that moves the instant into the year 10000 in UTC; a leap second; a bare hour offset. */
const UNSTORABLE = ['9999-12-31T23:59:59-23:59', '2016-12-31T23:59:60Z', '2099-01-01T00:00:00+01'];

for (const backend of BACKENDS) {
  describe(`hostile values (${backend.name})`, () => {
    let s: TestServer;
    let linkId: string;
    let keyId: string;
    before(async () => {
      s = await startTestServer(backend);
      linkId = (await call('POST', '/v1/sdk/links', { url: 'https://example.com/a' })).json().id;
      keyId = s.project.clientKeyId;
    });
    after(() => s.close());

    function call(method: InjectOptions['method'], url: string, payload?: unknown) {
      const admin = url.startsWith('/v1/admin');
      return s.app.inject({
        method,
        url,
        headers: admin
          ? { authorization: `Bearer ${s.adminToken}` }
          : { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
    }

    function refusedAt(
      res: Awaited<ReturnType<typeof call>>,
      path: string,
      what: string,
    ): { detail: string } {
      assert.equal(res.statusCode, 400, `${what} → ${res.body}`);
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
      const problem = res.json();
      assert.equal(problem.code, 'invalid_request', what);
      assert.ok(
        problem.errors.some((e: { path: string }) => e.path === path),
        `${what}: ${JSON.stringify(problem.errors)} names no ${path}`,
      );
      return problem;
    }

    /** Every read of links and keys answers, and the stored state is as it was. */
    async function readsAnswer(links: number, keys: number) {
      const list = await call('GET', '/v1/sdk/links');
      assert.equal(list.statusCode, 200, list.body);
      assert.equal(list.json().meta.total, links, 'no link was stored');
      const one = await call('GET', `/v1/sdk/links/${linkId}`);
      assert.equal(one.statusCode, 200, one.body);
      assert.equal(one.json().expiresAt, null);
      const resolved = await call('GET', `/v1/sdk/links/resolve?slug=${one.json().slug}`);
      assert.equal(resolved.statusCode, 200, resolved.body);
      const keyList = await call('GET', `/v1/admin/projects/${s.project.id}/keys`);
      assert.equal(keyList.statusCode, 200, keyList.body);
      assert.equal(keyList.json().items.length, keys, 'no key was stored');
      const key = keyList.json().items.find((k: { id: string }) => k.id === keyId);
      assert.equal(key.expiresAt, null);
    }

    test('date-times with no storable instant are refused everywhere, and nothing is stored', async () => {
      const links = (await call('GET', '/v1/sdk/links')).json().meta.total;
      const keys = (await call('GET', `/v1/admin/projects/${s.project.id}/keys`)).json().items
        .length;
      const keysUrl = `/v1/admin/projects/${s.project.id}/keys`;
      for (const value of UNSTORABLE) {
        const at = (what: string) => `${what} ${value}`;
        refusedAt(
          await call('POST', '/v1/sdk/links', { url: 'https://example.com/b', expiresAt: value }),
          'body.expiresAt',
          at('POST link'),
        );
        refusedAt(
          await call('PATCH', `/v1/sdk/links/${linkId}`, { expiresAt: value }),
          'body.expiresAt',
          at('PATCH link'),
        );
        refusedAt(
          await call('POST', keysUrl, { type: 'client', expiresAt: value }),
          'body.expiresAt',
          at('POST key'),
        );
        refusedAt(
          await call('PATCH', `${keysUrl}/${keyId}`, { expiresAt: value }),
          'body.expiresAt',
          at('PATCH key'),
        );
        for (const route of ['/v1/verify/stats', '/v1/verify/logs']) {
          for (const field of ['from', 'to']) {
            const problem = refusedAt(
              await call('GET', `${route}?${field}=${encodeURIComponent(value)}`),
              `querystring.${field}`,
              at(`${route} ${field}`),
            );
            assert.match(problem.detail, /0000–9999/, 'the answer says what is accepted');
          }
        }
      }
      await readsAnswer(links, keys);
    });

    test('date-times at the edges of the years 0000–9999 and with offsets are kept as instants', async () => {
      const link = await call('POST', '/v1/sdk/links', {
        url: 'https://example.com/c',
        expiresAt: '9999-12-31T23:59:59.9999+00:00',
      });
      assert.equal(link.statusCode, 201, link.body);
      assert.equal(link.json().expiresAt, '9999-12-31T23:59:59.999Z');
      const again = await call('GET', `/v1/sdk/links/${link.json().id}`);
      assert.equal(again.json().expiresAt, '9999-12-31T23:59:59.999Z');
      const key = await call('POST', `/v1/admin/projects/${s.project.id}/keys`, {
        type: 'server',
        expiresAt: '2099-06-01T00:30:00+02:00',
      });
      assert.equal(key.statusCode, 201, key.body);
      assert.equal(key.json().expiresAt, '2099-05-31T22:30:00.000Z');
      const stats = await call(
        'GET',
        `/v1/verify/stats?from=0000-01-01T00:00:00Z&to=${encodeURIComponent('2099-01-01T00:00:00-05:00')}`,
      );
      assert.equal(stats.statusCode, 200, stats.body);
      // Default windows that would start before the year 0000 start with it.
      const early = await call('GET', '/v1/verify/stats?to=0000-01-02T00:00:00Z');
      assert.equal(early.json().from, '0000-01-01T00:00:00.000Z', early.body);
      const days = await call('GET', `/v1/sdk/links/${linkId}/stats?to=0000-01-02`);
      assert.equal(days.statusCode, 200, days.body);
      assert.equal(days.json().from, '0000-01-01', days.body);
      assert.deepEqual(
        days.json().days.map((d: { date: string }) => d.date),
        ['0000-01-01', '0000-01-02'],
      );
      assert.equal(
        (await call('DELETE', `/v1/sdk/links/${link.json().id}`)).statusCode,
        204,
        'cleanup',
      );
      await call('DELETE', `/v1/admin/projects/${s.project.id}/keys/${key.json().id}`);
    });

    test('strings and member names with lone UTF-16 surrogates are refused, well-formed ones kept', async () => {
      const links = (await call('GET', '/v1/sdk/links')).json().meta.total;
      const keys = (await call('GET', `/v1/admin/projects/${s.project.id}/keys`)).json().items
        .length;
      const keysUrl = `/v1/admin/projects/${s.project.id}/keys`;
      const cases: [InjectOptions['method'], string, unknown, string][] = [
        ['POST', '/v1/sdk/links', { url: 'https://example.com/\ud800', slug: 'sur1' }, 'body.url'],
        ['POST', '/v1/sdk/links', { url: 'https://example.com/\udfff\ud800' }, 'body.url'],
        [
          'POST',
          '/v1/sdk/links',
          { url: 'https://example.com/d', params: { a: 'x\udc00y' } },
          'body.params.a',
        ],
        [
          'POST',
          '/v1/sdk/links',
          { url: 'https://example.com/d', params: { 'k\ud83d': 1 } },
          'body.params.k\\ud83d',
        ],
        ['PATCH', `/v1/sdk/links/${linkId}`, { url: 'https://example.com/\ud800' }, 'body.url'],
        ['POST', keysUrl, { type: 'client', name: 'web \udbff' }, 'body.name'],
        ['PATCH', `${keysUrl}/${keyId}`, { name: '\udc00' }, 'body.name'],
        ['GET', '/v1/sdk/links?q=%ED%A0%80', undefined, ''],
      ];
      for (const [method, url, body, path] of cases) {
        const res = await call(method, url, body);
        if (path === '') {
          // Percent-encoded bytes that are not UTF-8 decode to U+FFFD, never to a surrogate.
          assert.equal(res.statusCode, 200, res.body);
          continue;
        }
        const problem = refusedAt(res, path, `${method} ${url} ${JSON.stringify(body)}`);
        assert.match(problem.detail, /surrogate/);
      }
      await readsAnswer(links, keys);
      // A well-formed pair (an emoji outside the BMP) is kept as sent, on every store.
      const named = await call('PATCH', `${keysUrl}/${keyId}`, { name: 'web 😀' });
      assert.equal(named.statusCode, 200, named.body);
      const listed = (await call('GET', keysUrl)).json().items;
      assert.equal(listed.find((k: { id: string }) => k.id === keyId).name, 'web 😀');
      const link = await call('POST', '/v1/sdk/links', {
        url: 'https://example.com/😀',
        params: { '😀': '😀' },
      });
      assert.equal(link.statusCode, 201, link.body);
      const read = (await call('GET', `/v1/sdk/links/${link.json().id}`)).json();
      assert.deepEqual(read.params, { '😀': '😀' });
      assert.equal(read.url, link.json().url);
    });
  });
}

describe('errors of the HTTP parser', () => {
  let s: TestServer;
  let port: number;
  before(async () => {
    s = await startTestServer(BACKENDS[0]);
    const address = await s.app.listen({ port: 0, host: '127.0.0.1' });
    port = Number(new URL(address).port);
  });
  after(() => s.close());

  /** Sends `raw` on a new connection; resolves with all the server wrote once it closed. */
  function send(raw: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let data = '';
      socket.setEncoding('latin1');
      socket.on('data', (chunk) => {
        data += chunk;
      });
      socket.on('error', reject);
      socket.on('close', () => resolve(data));
      socket.setTimeout(10_000, () => socket.destroy(new Error(`no close; got ${data}`)));
      socket.write(raw);
    });
  }

  function parse(answer: string) {
    const [head = '', body = ''] = answer.split('\r\n\r\n');
    const [statusLine = '', ...lines] = head.split('\r\n');
    const headers = Object.fromEntries(
      lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 2)]),
    );
    return { status: Number(statusLine.split(' ')[1]), headers, body };
  }

  test('are answered as problem+json and the connection is closed', async () => {
    const cases: [string, string, number, string][] = [
      ['a control character in a header', 'X-A: a\x01b\r\n', 400, 'invalid_request'],
      ['headers over the limit', `X-A: ${'a'.repeat(20_000)}\r\n`, 431, 'headers_too_large'],
      [
        'Content-Length and Transfer-Encoding',
        'Content-Length: 3\r\nTransfer-Encoding: chunked\r\n',
        400,
        'invalid_request',
      ],
      ['NUL in Host', '', 400, 'invalid_request'],
    ];
    for (const [what, extra, status, code] of cases) {
      const host = what === 'NUL in Host' ? 'Host: a\x00b\r\n' : 'Host: localhost\r\n';
      const answer = await send(`POST /v1/sdk/links HTTP/1.1\r\n${host}${extra}\r\nabc`);
      const res = parse(answer);
      assert.equal(res.status, status, `${what}: ${answer}`);
      assert.match(res.headers['content-type'] ?? '', /^application\/problem\+json/, what);
      assert.equal(res.headers.connection, 'close', what);
      assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body), what);
      const problem = JSON.parse(res.body);
      assert.equal(problem.code, code, what);
      assert.equal(problem.status, status, what);
      assert.equal(problem.requestId, res.headers['request-id'], what);
    }
    // A request line that is not HTTP at all.
    const garbage = parse(await send('\x16\x03\x01 hello\r\n\r\n'));
    assert.equal(garbage.status, 400);
    assert.equal(JSON.parse(garbage.body).code, 'invalid_request');
    // The server answers the next connection as usual.
    const ok = parse(
      await send('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'),
    );
    assert.equal(ok.status, 200);
  });
});
