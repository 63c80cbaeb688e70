import assert from 'node:assert/strict';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import type { DomainEvent } from '../../src/events.ts';
import type { RealtimeRecordingsTable } from '../../src/realtime/tables.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

// The recordings API without a media engine, on every store the suite runs: who may call, input
// checks, listing, signed download URLs (Range, tampering, expiry) over a stored recording, and
// the restart path of a recording that had written nothing. The media path (real Janus, real
// files) is packages/client/test/recordings.browser.test.ts.
for (const backend of BACKENDS) {
  describe(`recordings API (${backend.name})`, () => {
    let s: TestServer;
    const clock = new ManualClock(Date.parse('2026-03-01T10:00:00.000Z'));
    const events: DomainEvent[] = [];

    before(async () => {
      s = await startTestServer(backend, { clock });
      s.app.svc.events.addSink(async (ev) => {
        if (ev.type.startsWith('recording.')) events.push(ev);
      });
      await call('POST', '/rooms', { roomName: 'r1', liveType: 'VIDEO_CONFERENCE' });
    });
    after(() => s.close());

    async function call(
      method: 'GET' | 'POST',
      url: string,
      body?: unknown,
      opts: {
        key?: 'server' | 'client';
        roomToken?: string;
        noKey?: boolean;
        headers?: Record<string, string>;
      } = {},
    ) {
      const res = await s.app.inject({
        method,
        url: `/v1/realtime${url}`,
        headers: {
          ...(opts.noKey
            ? {}
            : {
                authorization: `Bearer ${opts.key === 'client' ? s.project.clientKey : s.project.serverKey}`,
                'x-project-id': s.project.id,
              }),
          ...(opts.roomToken ? { 'x-room-token': opts.roomToken } : {}),
          ...opts.headers,
        },
        ...(body === undefined ? {} : { payload: body as object }),
      });
      return res;
    }
    const code = (res: { json(): { code?: string } }) => res.json().code;

    /** A recording as a finished one is stored, with its file. */
    async function stored(status: RealtimeRecordingsTable['status'], n: number, content?: Buffer) {
      const egressId = `eg_test${status}${n}`;
      const filepath = `r1/${egressId}.webm`;
      const row: RealtimeRecordingsTable = {
        egress_id: egressId,
        project_id: s.project.id,
        room_name: 'r1',
        room_id: 'rm_x',
        status,
        file_type: 'WEBM',
        filepath,
        mjr_dir: path.join(s.config.media.recordingsDir, 'mjr', egressId),
        engine: 'embedded',
        started_at: new Date(clock.now() + n * 1000).toISOString(),
        ended_at: null,
        completed_at: null,
        duration: status === 'COMPLETED' ? 5.02 : null,
        size: content ? content.length : null,
        error: null,
        error_detail: null,
        attempts: 0,
      };
      await s.app.svc.store.db.insertInto('realtime_recordings').values(row).execute();
      if (content) {
        const file = path.join(s.config.media.recordingsDir, 'files', s.project.id, filepath);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, content);
      }
      return egressId;
    }

    test('bad input gets its code', async () => {
      const cases: [unknown, number, string][] = [
        [{ roomName: 'nope' }, 404, 'room_not_found'],
        [{ roomName: 'r1', fileType: 'AVI' }, 400, 'invalid_request'],
        [{ roomName: 'r1', filepath: '../escape' }, 400, 'recording_invalid_filepath'],
        [{ roomName: 'r1', filepath: '/etc/passwd' }, 400, 'recording_invalid_filepath'],
        [{ roomName: 'r1', filepath: 'a/../../b' }, 400, 'recording_invalid_filepath'],
        [{ roomName: 'r1', filepath: 'a//b' }, 400, 'recording_invalid_filepath'],
        [{ roomName: 'r1', filepath: 'x'.repeat(300) }, 400, 'invalid_request'],
        [{ roomName: 'r1', extra: 1 }, 400, 'invalid_request'],
        // A valid request on a server without media.
        [{ roomName: 'r1', filepath: 'meetings/2026/r1' }, 503, 'media_unavailable'],
      ];
      for (const [body, status, want] of cases) {
        const res = await call('POST', '/recordings', body);
        assert.equal(res.statusCode, status, `${JSON.stringify(body)}: ${res.body}`);
        assert.equal(code(res), want);
        assert.match(String(res.headers['content-type']), /application\/problem\+json/);
      }
      assert.equal(code(await call('GET', '/recordings/eg_none')), 'recording_not_found');
      assert.equal(code(await call('POST', '/recordings/eg_none/stop', {})), 'recording_not_found');
      for (const q of ['-1', '0', '59', '604801', '1000000000', 'abc']) {
        const res = await call('GET', `/recordings/eg_none/download-url?expiresIn=${q}`);
        assert.equal(code(res), 'invalid_request', q);
      }
      assert.equal(code(await call('GET', '/recordings?status=DONE')), 'invalid_request');
      assert.equal(code(await call('GET', '/recordings?limit=101')), 'invalid_request');
      // Nothing was stored by the refusals.
      assert.equal((await call('GET', '/recordings')).json().meta.total, 0);
      assert.deepEqual(events, []);
    });

    test('client keys: refused without a host token on every route; no API key at all: refused', async () => {
      const routes: ['GET' | 'POST', string, unknown?][] = [
        ['POST', '/recordings', { roomName: 'r1' }],
        ['POST', '/recordings/eg_x/stop', {}],
        ['GET', '/recordings/active'],
        ['GET', '/recordings'],
        ['GET', '/recordings/eg_x'],
        ['GET', '/recordings/eg_x/download-url'],
      ];
      const tok = await call('POST', '/token', {
        roomName: 'r1',
        participant: { userId: 'h', name: 'H', isHost: true },
      });
      const hostToken = tok.json().token as string;
      for (const [method, url, body] of routes) {
        const bare = await call(method, url, body, { key: 'client' });
        assert.equal(bare.statusCode, 403, url);
        assert.equal(code(bare), 'server_key_required', url);
        // A host's token, but the host is not in the room.
        const absent = await call(method, url, body, { key: 'client', roomToken: hostToken });
        assert.equal(code(absent), 'host_required', url);
        const forged = await call(method, url, body, { key: 'client', roomToken: `${hostToken}x` });
        assert.equal(code(forged), 'token_invalid', url);
        const none = await call(method, url, body, { noKey: true });
        assert.equal(none.statusCode, 401, url);
      }
    });

    test('list: newest first, status filter, pages with meta.total', async () => {
      for (let i = 0; i < 3; i++) await stored('COMPLETED', i, Buffer.from(`file ${i}`));
      await stored('FAILED', 9);
      const all = (await call('GET', '/recordings')).json();
      assert.equal(all.meta.total, 4);
      assert.deepEqual(all.meta, { total: 4, page: 1, limit: 10 });
      assert.equal(all.items[0].egressId, 'eg_testFAILED9');
      const page2 = (await call('GET', '/recordings?status=COMPLETED&page=2&limit=2')).json();
      assert.deepEqual(page2.meta, { total: 3, page: 2, limit: 2 });
      assert.deepEqual(
        page2.items.map((i: { egressId: string }) => i.egressId),
        ['eg_testCOMPLETED0'],
      );
      assert.equal((await call('GET', '/recordings?roomName=other')).json().meta.total, 0);
      const one = (await call('GET', '/recordings/eg_testCOMPLETED1')).json();
      assert.equal(one.status, 'COMPLETED');
      assert.equal(one.duration, 5.02);
      assert.equal(one.size, 6);
      assert.deepEqual((await call('GET', '/recordings/active')).json(), { items: [] });
      assert.equal(
        code(await call('GET', '/recordings/eg_testFAILED9/download-url')),
        'recording_not_ready',
      );
    });

    test('signed download URL: no API key, Range, refused when altered or expired', async () => {
      const content = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));
      const id = await stored('COMPLETED', 20, content);
      const res = await call('GET', `/recordings/${id}/download-url`);
      assert.equal(res.statusCode, 200);
      const { downloadUrl, expiresIn } = res.json();
      assert.equal(expiresIn, 3600);
      const u = new URL(downloadUrl);
      assert.equal(u.origin, s.config.publicUrl);
      const get = (url: string, headers: Record<string, string> = {}) =>
        s.app.inject({ method: 'GET', url, headers });
      const rel = u.pathname + u.search;
      const whole = await get(rel);
      assert.equal(whole.statusCode, 200);
      assert.equal(whole.headers['content-type'], 'video/webm');
      assert.equal(whole.headers['accept-ranges'], 'bytes');
      assert.deepEqual(whole.rawPayload, content);
      const part = await get(rel, { range: 'bytes=10-19' });
      assert.equal(part.statusCode, 206);
      assert.equal(part.headers['content-range'], 'bytes 10-19/1000');
      assert.deepEqual(part.rawPayload, content.subarray(10, 20));
      const open = await get(rel, { range: 'bytes=990-' });
      assert.deepEqual(open.rawPayload, content.subarray(990));
      for (const bad of ['bytes=1000-', 'bytes=20-10', 'items=0-1', 'bytes=-']) {
        const r = await get(rel, { range: bad });
        assert.equal(r.statusCode, 416, bad);
        assert.equal(r.headers['content-range'], 'bytes */1000');
      }
      const sig = u.searchParams.get('sig')!;
      const exp = u.searchParams.get('exp')!;
      const variants = [
        // Every other last character: some decode to the same bytes (base64url's spare bits).
        ...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
          .split('')
          .filter((c) => c !== sig.at(-1))
          .map((c) => `/v1/realtime/recordings/${id}/file?exp=${exp}&sig=${sig.slice(0, -1)}${c}`),
        `/v1/realtime/recordings/${id}/file?exp=${Number(exp) + 1}&sig=${sig}`,
        `/v1/realtime/recordings/eg_testCOMPLETED0/file?exp=${exp}&sig=${sig}`,
        `/v1/realtime/recordings/${id}/file?exp=${exp}&sig=`,
      ];
      for (const v of variants) {
        const r = await get(v);
        assert.equal(r.statusCode, 403, v);
        assert.equal(r.json().code, 'download_url_invalid');
      }
      assert.equal((await get(`/v1/realtime/recordings/${id}/file`)).statusCode, 400);
      const short = (await call('GET', `/recordings/${id}/download-url?expiresIn=60`)).json();
      clock.advance(61_000);
      const expired = await get(
        new URL(short.downloadUrl).pathname + new URL(short.downloadUrl).search,
      );
      assert.equal(expired.statusCode, 410);
      assert.equal(expired.json().code, 'download_url_expired');
      assert.equal((await get(rel)).statusCode, 200);
    });

    test('a recording left STARTED by a dead node without media ends FAILED engine_lost, with its webhook', async () => {
      const id = await stored('STARTED', 30);
      await s.app.svc.recordings!.recover();
      const info = (await call('GET', `/recordings/${id}`)).json();
      assert.equal(info.status, 'FAILED');
      assert.equal(info.error, 'engine_lost');
      const failed = events.filter((e) => e.type === 'recording.failed');
      assert.equal(failed.length, 1);
      assert.equal(failed[0]!.data.egressId, id);
      assert.equal(failed[0]!.orderingKey, `room:${s.project.id}:r1`);
    });

    test('a recording past SVC_RECORDING_MAX_SECONDS is stopped by the server; a younger one runs on', async () => {
      const maxMs = s.config.media.recordingMaxSeconds * 1000;
      const old = await stored('STARTED', 40);
      clock.advance(maxMs - 20_000);
      const young = await stored('STARTED', 41);
      assert.equal(await s.app.svc.recordings!.stopOverdue(), 0);
      clock.advance(61_000);
      assert.equal(await s.app.svc.recordings!.stopOverdue(), 1);
      assert.notEqual((await call('GET', `/recordings/${old}`)).json().status, 'STARTED');
      assert.equal((await call('GET', `/recordings/${young}`)).json().status, 'STARTED');
      await call('POST', `/recordings/${young}/stop`);
    });
  });
}

// Every server of this file keeps its files in DATA_DIR: none of them loaded the AWS SDK (about
// 20 MiB of RSS), which only a configured object store needs (recordings/storage.ts).
test('a node without an object store does not load the AWS SDK', () => {
  const loaded = Object.keys(createRequire(import.meta.url).cache).filter((file) =>
    file.includes(`${path.sep}@aws-sdk${path.sep}`),
  );
  assert.deepEqual(loaded, []);
});
