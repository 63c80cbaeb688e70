import assert from 'node:assert/strict';
import { once } from 'node:events';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { type FastAnswer, FastFront, type FastHandler } from '../../src/http/front.ts';
import { Metrics } from '../../src/http/metrics.ts';

/** A server built as the app builds it, with `fallback` standing in for Fastify. */
async function serve(handler: FastHandler, fallback: http.RequestListener) {
  const front = new FastFront({
    trustProxy: [],
    requestId: () => 'req_test',
    metrics: new Metrics(),
    enabled: true,
  });
  front.get('/x/', '/x/:id', handler);
  const server = front.serverFactory()(fallback as never, {} as never) as http.Server;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { front, server, port: (server.address() as AddressInfo).port };
}

async function get(port: number, path: string) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { redirect: 'manual' });
  return {
    status: res.status,
    statusText: res.statusText,
    headers: res.headers,
    body: await res.text(),
  };
}

test('an answer with a header Node refuses goes to the fallback instead of ending the process', async () => {
  const fallbackHeaders: string[][] = [];
  const fallbackStatus: number[] = [];
  const { front, server, port } = await serve(
    (rest): FastAnswer =>
      rest === 'bad'
        ? { status: 302, headers: { location: 'https://example.com/€' } }
        : { status: 200, headers: { 'content-type': 'text/plain' }, body: `ok ${rest}` },
    (req, res) => {
      fallbackHeaders.push(res.getHeaderNames());
      fallbackStatus.push(res.statusCode);
      res.statusCode = req.url === '/x/bad' ? 404 : 500;
      res.end(`fallback ${req.url}`);
    },
  );
  try {
    const good = await get(port, '/x/1');
    assert.equal(good.status, 200);
    assert.equal(good.body, 'ok 1');
    assert.equal(good.headers.get('request-id'), 'req_test');
    assert.equal(good.headers.get('content-length'), '4');

    const bad = await get(port, '/x/bad');
    assert.equal(bad.status, 404);
    assert.equal(bad.statusText, 'Not Found', "not the refused answer's status message");
    assert.equal(bad.body, 'fallback /x/bad');
    assert.deepEqual(fallbackHeaders, [[]], 'the fallback starts from a clean response');
    assert.deepEqual(fallbackStatus, [200], 'with the default status');
    assert.equal(front.answered, 1);

    // Other paths and methods are not the front's.
    assert.equal((await get(port, '/y/1')).body, 'fallback /y/1');
    const post = await fetch(`http://127.0.0.1:${port}/x/1`, { method: 'POST' });
    assert.equal(await post.text(), 'fallback /x/1');
    assert.equal(front.answered, 1);
  } finally {
    server.close();
    server.closeAllConnections();
  }
});

test('a handler that throws, or declines, leaves the request to the fallback', async () => {
  const { front, server, port } = await serve(
    (rest) => {
      if (rest === 'throw') throw new Error('boom');
      return undefined;
    },
    (_req, res) => res.end('fallback'),
  );
  try {
    assert.equal((await get(port, '/x/throw')).body, 'fallback');
    assert.equal((await get(port, '/x/none')).body, 'fallback');
    assert.equal(front.answered, 0);
  } finally {
    server.close();
    server.closeAllConnections();
  }
});
