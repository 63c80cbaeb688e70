// A real page in headless Chromium, served from another origin than the API, calls the API
// and opens a realtime WebSocket: what browsers let pages do is the test, not header strings.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

const CHROMIUM = '/usr/bin/chromium';

/** A page server on 127.0.0.2 (so its origin differs from the API's 127.0.0.1 by host too). */
async function pageServer(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>page</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.2:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** What a page's fetch saw: the status, the body and the headers it may read, or the failure. */
interface PageFetch {
  status?: number;
  body?: any;
  headers?: Record<string, string | null>;
  error?: string;
}

async function pageFetch(
  page: Page,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown },
): Promise<PageFetch> {
  return page.evaluate(
    async ({ url, init }) => {
      try {
        const res = await fetch(url, {
          method: init.method ?? 'GET',
          headers: init.headers,
          body: init.body === undefined ? undefined : JSON.stringify(init.body),
        });
        const headers: Record<string, string | null> = {};
        for (const name of ['request-id', 'ratelimit', 'ratelimit-policy', 'retry-after']) {
          headers[name] = res.headers.get(name);
        }
        return { status: res.status, body: await res.json(), headers };
      } catch (err) {
        return { error: String(err) };
      }
    },
    { url, init },
  );
}

if (!fs.existsSync(CHROMIUM)) {
  test('CORS from a browser', { skip: `${CHROMIUM} is not installed` }, () => {});
} else {
  for (const backend of BACKENDS) {
    describe(`CORS from a page in Chromium on another origin (${backend.name})`, () => {
      let s: TestServer;
      let api: string;
      let allowed: Awaited<ReturnType<typeof pageServer>>;
      let other: Awaited<ReturnType<typeof pageServer>>;
      let context: BrowserContext;
      let profile: string;
      let lockedKey: string;
      let limitedKey: string;

      before(async () => {
        [allowed, other] = await Promise.all([pageServer(), pageServer()]);
        s = await startTestServer(backend, { env: { SVC_ADMIN_CORS_ORIGINS: allowed.origin } });
        await s.app.listen({ port: 0, host: '127.0.0.1' });
        api = `http://127.0.0.1:${(s.app.server.address() as AddressInfo).port}`;
        const create = (body: object) =>
          s.admin('POST', `/projects/${s.project.id}/keys`, { type: 'client', ...body });
        lockedKey = (await create({ allowedOrigins: [allowed.origin] })).key;
        limitedKey = (await create({ rateLimitPerMinute: 1 })).key;
        profile = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-chromium-'));
        context = await chromium.launchPersistentContext(profile, {
          executablePath: CHROMIUM,
          headless: true,
          args: [
            '--headless',
            '--no-sandbox',
            '--disable-gpu',
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
          ],
        });
      });
      after(async () => {
        await context?.close();
        fs.rmSync(profile, { recursive: true, force: true });
        await Promise.all([allowed?.close(), other?.close()]);
        await s.close();
      });

      const openPage = async (origin: string) => {
        const page = await context.newPage();
        await page.goto(`${origin}/`);
        return page;
      };
      const tokenRequest = (key: string, roomName = 'browser-room') => ({
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'x-project-id': s.project.id,
          'content-type': 'application/json',
        },
        body: { roomName, participant: { userId: 'web', name: 'Web' }, liveType: 'VIDEO_CALL' },
      });

      test('a page calls the public API with a key (preflighted) and reads the exposed headers', async () => {
        const page = await openPage(other.origin);
        const res = await pageFetch(
          page,
          `${api}/v1/realtime/token`,
          tokenRequest(s.project.clientKey),
        );
        assert.equal(res.error, undefined);
        assert.equal(res.status, 200);
        assert.ok(res.body.token);
        assert.ok(res.headers!['request-id']);
        assert.match(res.headers!.ratelimit!, /^"default";r=\d+;t=\d+$/);
        assert.match(res.headers!['ratelimit-policy']!, /q=120/);
        await page.close();
      });

      test("a key's origin lock: the allowed origin works, another origin is refused", async () => {
        const good = await openPage(allowed.origin);
        const ok = await pageFetch(good, `${api}/v1/realtime/token`, tokenRequest(lockedKey));
        assert.equal(ok.status, 200);
        const bad = await openPage(other.origin);
        const refused = await pageFetch(bad, `${api}/v1/realtime/token`, tokenRequest(lockedKey));
        assert.equal(refused.status, undefined, 'the page may not read the refusal');
        assert.match(refused.error!, /TypeError/);
        // The server refused it too: the key's refusal is counted.
        const metrics = await s.app.inject({ method: 'GET', url: '/metrics' });
        assert.match(metrics.body, /code="origin_not_allowed"/);
        await Promise.all([good.close(), bad.close()]);
      });

      test('a 429 is readable, with Retry-After', async () => {
        const page = await openPage(other.origin);
        const first = await pageFetch(page, `${api}/v1/realtime/token`, tokenRequest(limitedKey));
        assert.equal(first.status, 200);
        const second = await pageFetch(page, `${api}/v1/realtime/token`, tokenRequest(limitedKey));
        assert.equal(second.status, 429);
        assert.equal(second.body.code, 'rate_limited');
        assert.match(second.headers!['retry-after']!, /^\d+$/);
        await page.close();
      });

      test('the admin API is open only to the pages of SVC_ADMIN_CORS_ORIGINS', async () => {
        const adminPage = await openPage(allowed.origin);
        const listed = await pageFetch(adminPage, `${api}/v1/admin/projects`, {
          headers: { authorization: `Bearer ${s.adminToken}` },
        });
        assert.equal(listed.status, 200);
        assert.ok(Array.isArray(listed.body.items));
        const page = await openPage(other.origin);
        const res = await pageFetch(page, `${api}/v1/admin/projects`, {
          headers: { authorization: `Bearer ${s.adminToken}` },
        });
        assert.equal(res.status, undefined);
        assert.match(res.error!, /TypeError/);
        await Promise.all([adminPage.close(), page.close()]);
      });

      test('a WebSocket from another origin joins a room with its token', async () => {
        const page = await openPage(allowed.origin);
        const minted = await pageFetch(
          page,
          `${api}/v1/realtime/token`,
          tokenRequest(lockedKey, 'ws-room'),
        );
        assert.equal(minted.status, 200);
        const wsUrl = `${api.replace('http', 'ws')}/v1/realtime/ws?access_token=${minted.body.token}`;
        const answer = await page.evaluate(
          (url) =>
            new Promise<string>((resolve) => {
              const ws = new WebSocket(url);
              ws.onopen = () => ws.send(JSON.stringify({ id: '1', type: 'session.join' }));
              ws.onmessage = (event) => {
                const frame = JSON.parse(String(event.data));
                if (frame.id === '1') {
                  ws.close();
                  resolve(`${frame.type}:${frame.data?.status ?? frame.code}`);
                }
              };
              ws.onclose = (event) => resolve(`closed:${event.code}`);
            }),
          wsUrl,
        );
        assert.equal(answer, 'ack:joined');
        await page.close();
      });
    });
  }
}
