import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { DomainEvent } from '../../server/src/events.ts';
import { signWebhook } from '../../server/src/webhooks/signing.ts';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import {
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
} from '../../server/test/media/media-harness.ts';
import { type ListeningServer, startListeningServer } from './helpers.ts';
import { bundlePage, openBrowser, type TestBrowser } from './media-browser.ts';
import { ffprobe, recordingTestsSkip } from './recordings-harness.ts';

// Recordings end to end: a real browser (Debian Chromium, fake camera + microphone) publishes
// through @svc/client into the embedded Janus (in its own network namespace `svcrrec`, on
// 10.78.1.0/24); the recordings API records it, janus-pp-rec + ffmpeg make the file, ffprobe
// checks it, and the signed URL serves it. The API-only checks run on both stores in
// packages/server/test/recordings/recordings.api.test.ts.
const skip = recordingTestsSkip();

describe('recordings of a real browser through Janus', {
  skip: skip ?? false,
  timeout: 300_000,
}, () => {
  let net: MediaNetwork;
  let s: ListeningServer;
  let browser: TestBrowser;
  let skewMs = 0;
  const events: DomainEvent[] = [];
  const hooks: { type: string; data: Record<string, unknown>; signed: boolean }[] = [];
  let hookSecret = '';
  let receiver: http.Server;
  const room = uniqueName('rec');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svcr-dl-'));

  const headers = (key: 'server' | 'client', roomToken?: string) => ({
    authorization: `Bearer ${key === 'server' ? s.project.serverKey : s.project.clientKey}`,
    'x-project-id': s.project.id,
    'content-type': 'application/json',
    ...(roomToken ? { 'x-room-token': roomToken } : {}),
  });
  async function api(
    method: string,
    url: string,
    body?: unknown,
    key: 'server' | 'client' = 'server',
    roomToken?: string,
  ) {
    const res = await fetch(`${s.baseUrl}/v1/realtime${url}`, {
      method,
      headers: headers(key, roomToken),
      ...(body === undefined && method === 'GET' ? {} : { body: JSON.stringify(body ?? {}) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }
  async function token(userId: string, isHost: boolean) {
    const res = await api('POST', '/token', {
      roomName: room,
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId, name: userId, isHost },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.token as string;
  }

  before(async () => {
    net = mediaNetwork('rec', 1, { prefix: 'svcr', octet: 78 });
    // A webhook receiver: every delivery, its signature checked with the endpoint's secret.
    receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => {
        body += c;
      });
      req.on('end', () => {
        const id = String(req.headers['webhook-id']);
        const ts = Number(req.headers['webhook-timestamp']);
        const sigs = String(req.headers['webhook-signature'] ?? '').split(' ');
        const parsed = JSON.parse(body);
        hooks.push({
          type: parsed.type,
          data: parsed.data,
          signed: sigs.includes(signWebhook(hookSecret, id, ts, body)),
        });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const bundle = await bundlePage();
    s = await startListeningServer(
      BACKENDS[0]!,
      {
        ...mediaEnv(net),
        SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
        SVC_RECORDING_STOP_WAIT_MS: '60000',
      },
      { now: () => Date.now() + skewMs },
    );
    s.app.svc.events.addSink(async (ev) => {
      if (ev.type.startsWith('recording.')) events.push(ev);
    });
    const hook = await s.admin('POST', `/projects/${s.project.id}/webhooks`, {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
    });
    hookSecret = hook.secret;
    await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    await s.app.svc.media!.ready(10_000);
    browser = await openBrowser(s.baseUrl, bundle);
    const connected = await browser.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
      { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl },
      {
        roomName: room,
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId: 'alice', name: 'Alice', isHost: true },
      },
    ] as const);
    assert.equal(connected.ok, true, JSON.stringify(connected));
    for (const src of ['camera', 'microphone']) {
      const r = await browser.page.evaluate((x) => (window as any).svcm.enable(x), src);
      assert.equal(r.ok, true, JSON.stringify(r));
    }
  });

  after(async () => {
    await browser?.close();
    await s?.close();
    net?.down();
    receiver?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** Resolves once Janus has created the recording's track files (media is being written). */
  async function mediaWritten(egressId: string) {
    const mjrDir = path.join(s.config.media.recordingsDir, 'mjr', egressId);
    const deadline = Date.now() + 10_000;
    while (
      !(
        fs.existsSync(mjrDir) &&
        fs.readdirSync(mjrDir).filter((f) => f.endsWith('.mjr')).length >= 2
      )
    ) {
      assert.ok(Date.now() < deadline, `no .mjr files in ${mjrDir}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Records `seconds` of the browser's media (from the first `.mjr` file written) and stops. */
  async function record(
    fileType: string,
    seconds: number,
    key: 'server' | 'client' = 'server',
    roomToken?: string,
  ) {
    const started = await api('POST', '/recordings', { roomName: room, fileType }, key, roomToken);
    assert.equal(started.status, 201, JSON.stringify(started.body));
    assert.equal(started.body.status, 'STARTED');
    assert.equal(started.body.fileType, fileType);
    await mediaWritten(started.body.egressId);
    const t0 = Date.now();
    while (Date.now() - t0 < seconds * 1000) await new Promise((r) => setTimeout(r, 100));
    const stopAt = Date.now();
    const stopped = await api(
      'POST',
      `/recordings/${started.body.egressId}/stop`,
      {},
      key,
      roomToken,
    );
    return { started: started.body, stopped, recordedMs: stopAt - t0, stopMs: Date.now() - stopAt };
  }

  test('client keys need the token of a host present in the room', async () => {
    const refused = await api('POST', '/recordings', { roomName: room }, 'client');
    assert.equal(refused.status, 403);
    assert.equal(refused.body.code, 'server_key_required');
    const guest = await api(
      'POST',
      '/recordings',
      { roomName: room },
      'client',
      await token('bob', false),
    );
    assert.equal(guest.body.code, 'host_required');
    const absentHost = await api(
      'POST',
      '/recordings',
      { roomName: room },
      'client',
      await token('carol', true),
    );
    assert.equal(absentHost.body.code, 'host_required');
    const forged = await api('POST', '/recordings', { roomName: room }, 'client', 'not.a.token');
    assert.equal(forged.body.code, 'token_invalid');
    // Alice (host, in the room) may; her token minted again names the same user.
    const alice = await token('alice', true);
    const r = await record('WEBM', 4, 'client', alice);
    assert.equal(r.stopped.status, 200, JSON.stringify(r.stopped.body));
    assert.equal(r.stopped.body.status, 'COMPLETED', JSON.stringify(r.stopped.body));
    // The client key's view is the room's recordings; get works with the same token.
    const one = await api('GET', `/recordings/${r.started.egressId}`, undefined, 'client', alice);
    assert.equal(one.body.status, 'COMPLETED');
    const listed = await api('GET', '/recordings?limit=1', undefined, 'client', alice);
    assert.equal(listed.status, 200);
    assert.ok(listed.body.meta.total >= 1);
    assert.equal(listed.body.items.length, 1);
  });

  test('a second start while one runs is refused with recording_in_progress', async () => {
    const first = await api('POST', '/recordings', { roomName: room, fileType: 'OGG' });
    assert.equal(first.status, 201);
    const active = await api('GET', `/recordings/active?roomName=${room}`);
    assert.deepEqual(
      active.body.items.map((i: { egressId: string }) => i.egressId),
      [first.body.egressId],
    );
    const second = await api('POST', '/recordings', { roomName: room, fileType: 'MP4' });
    assert.equal(second.status, 409);
    assert.equal(second.body.code, 'recording_in_progress');
    // Stopped once media is written (an instant stop can hold no audio packet: FAILED no_media).
    await mediaWritten(first.body.egressId);
    const stopped = await api('POST', `/recordings/${first.body.egressId}/stop`);
    assert.equal(stopped.body.status, 'COMPLETED', JSON.stringify(stopped.body));
    assert.equal((await api('GET', `/recordings/active?roomName=${room}`)).body.items.length, 0);
  });

  const expect = {
    WEBM: { format: 'matroska,webm', video: 'vp8', audio: 'opus' },
    MP4: { format: 'mov,mp4,m4a,3gp,3g2,mj2', video: 'h264', audio: 'aac' },
    OGG: { format: 'ogg', video: null, audio: 'opus' },
  } as const;

  for (const fileType of ['WEBM', 'MP4', 'OGG'] as const) {
    test(`${fileType}: the file has the published length and codecs, and downloads by its signed URL`, async () => {
      const r = await record(fileType, 5);
      assert.equal(r.stopped.status, 200);
      const info = r.stopped.body;
      assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
      console.log(
        `${fileType}: recorded ${r.recordedMs} ms, file ${info.duration} s, ${info.size} bytes, stop → COMPLETED ${r.stopMs} ms`,
      );
      // Janus writes from the first packet after the start until the stop: about what was timed.
      assert.ok(
        Math.abs(info.duration - r.recordedMs / 1000) < 0.6,
        `${info.duration} s vs ${r.recordedMs} ms`,
      );
      const file = path.join(s.config.media.recordingsDir, 'files', s.project.id, info.filepath);
      assert.equal(fs.statSync(file).size, info.size);
      // Download with the signed URL, no API key: whole, then a range.
      const url = await api('GET', `/recordings/${info.egressId}/download-url?expiresIn=600`);
      assert.equal(url.status, 200);
      assert.equal(url.body.expiresIn, 600);
      const whole = await fetch(url.body.downloadUrl);
      assert.equal(whole.status, 200);
      assert.equal(whole.headers.get('accept-ranges'), 'bytes');
      const bytes = Buffer.from(await whole.arrayBuffer());
      assert.equal(bytes.length, info.size);
      const local = path.join(tmp, `dl.${fileType.toLowerCase()}`);
      fs.writeFileSync(local, bytes);
      const p = ffprobe(local);
      assert.equal(p.format.format_name, expect[fileType].format);
      const codecs = (t: string) =>
        p.streams.filter((x) => x.codec_type === t).map((x) => x.codec_name);
      assert.deepEqual(codecs('video'), expect[fileType].video ? [expect[fileType].video] : []);
      assert.deepEqual(codecs('audio'), [expect[fileType].audio]);
      assert.ok(Math.abs(Number(p.format.duration) - r.recordedMs / 1000) < 0.6);
      const part = await fetch(url.body.downloadUrl, { headers: { range: 'bytes=100-199' } });
      assert.equal(part.status, 206);
      assert.equal(part.headers.get('content-range'), `bytes 100-199/${info.size}`);
      assert.deepEqual(Buffer.from(await part.arrayBuffer()), bytes.subarray(100, 200));
      const tail = await fetch(url.body.downloadUrl, { headers: { range: 'bytes=-10' } });
      assert.deepEqual(Buffer.from(await tail.arrayBuffer()), bytes.subarray(bytes.length - 10));
      const outside = await fetch(url.body.downloadUrl, {
        headers: { range: `bytes=${info.size}-` },
      });
      assert.equal(outside.status, 416);
      assert.equal((await outside.json()).code, 'range_not_satisfiable');
      // Altered signature or expiry: refused.
      const u = new URL(url.body.downloadUrl);
      const sig = u.searchParams.get('sig')!;
      u.searchParams.set('sig', `${sig[0] === 'A' ? 'B' : 'A'}${sig.slice(1)}`);
      const altered = await fetch(u);
      assert.equal(altered.status, 403);
      assert.equal((await altered.json()).code, 'download_url_invalid');
      const later = new URL(url.body.downloadUrl);
      later.searchParams.set('exp', String(Number(later.searchParams.get('exp')) + 3600));
      assert.equal((await (await fetch(later)).json()).code, 'download_url_invalid');
      const other = new URL(
        url.body.downloadUrl.replace(
          info.egressId,
          r.started.egressId === info.egressId ? 'eg_other' : info.egressId,
        ),
      );
      assert.equal((await fetch(other)).status, 403);
      // Expired: the server's clock moves past the expiry.
      skewMs += 601_000;
      try {
        const expired = await fetch(url.body.downloadUrl);
        assert.equal(expired.status, 410);
        assert.equal((await expired.json()).code, 'download_url_expired');
      } finally {
        skewMs -= 601_000;
      }
    });
  }

  test('a conversion that keeps failing ends FAILED with its reason and webhook', async () => {
    const rec = s.app.svc.recordings!;
    const saved = rec.tools;
    rec.tools = { ...saved, ffmpeg: '/bin/false' };
    try {
      const r = await record('WEBM', 1);
      assert.equal(r.stopped.body.status, 'FAILED', JSON.stringify(r.stopped.body));
      assert.equal(r.stopped.body.error, 'conversion_failed');
      const url = await api('GET', `/recordings/${r.started.egressId}/download-url`);
      assert.equal(url.body.code, 'recording_not_ready');
    } finally {
      rec.tools = saved;
    }
  });

  test('a recording left STARTED by a node that died is finished from its .mjr files on start', async () => {
    const started = await api('POST', '/recordings', { roomName: room, fileType: 'WEBM' });
    assert.equal(started.status, 201);
    const id = started.body.egressId as string;
    const mjrDir = path.join(s.config.media.recordingsDir, 'mjr', id);
    const deadline = Date.now() + 10_000;
    while (
      !(
        fs.existsSync(mjrDir) &&
        fs.readdirSync(mjrDir).filter((f) => f.endsWith('.mjr')).length >= 2
      )
    ) {
      assert.ok(Date.now() < deadline, `no .mjr files in ${mjrDir}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const t0 = Date.now();
    while (Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 100));
    const row = await s.app.svc.store.db
      .selectFrom('realtime_recordings')
      .selectAll()
      .where('egress_id', '=', id)
      .executeTakeFirstOrThrow();
    // The node "dies": Janus's recording ends with it, the row stays STARTED; the next start runs
    // the restart path over it.
    await s.app.svc.media!.stopRecording(row.room_id, row.engine);
    const writtenMs = Date.now() - t0;
    await s.app.svc.recordings!.recover();
    let info = (await api('GET', `/recordings/${id}`)).body;
    const until = Date.now() + 30_000;
    while (info.status === 'PROCESSING' || info.status === 'STARTED') {
      assert.ok(Date.now() < until, JSON.stringify(info));
      await new Promise((r) => setTimeout(r, 50));
      info = (await api('GET', `/recordings/${id}`)).body;
    }
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    assert.ok(
      Math.abs(info.duration - writtenMs / 1000) < 0.6,
      `${info.duration} s vs ${writtenMs} ms`,
    );
  });

  test('webhooks: started then completed (or failed) per recording, in order, signed', async () => {
    const list = await api('GET', `/recordings?limit=100`);
    const ids = list.body.items.map((i: { egressId: string }) => i.egressId);
    const expected = (): string[] =>
      events
        .filter((e) => ids.includes(e.data.egressId))
        .map((e) => `${e.type}:${e.data.egressId}`);
    // Every delivery reaches the receiver (the outbox retries in the background).
    const deadline = Date.now() + 30_000;
    while (hooks.filter((h) => h.type.startsWith('recording.')).length < expected().length) {
      assert.ok(Date.now() < deadline, JSON.stringify(hooks));
      await new Promise((r) => setTimeout(r, 50));
    }
    const got = hooks.filter((h) => h.type.startsWith('recording.'));
    assert.ok(got.every((h) => h.signed));
    assert.deepEqual(
      got.map((h) => `${h.type}:${h.data.egressId}`),
      expected(),
    );
    for (const id of ids) {
      const mine = got.filter((h) => h.data.egressId === id).map((h) => h.type);
      assert.equal(mine[0], 'recording.started');
      assert.equal(mine.length, 2, `${id}: ${mine}`);
      assert.match(mine[1]!, /^recording\.(completed|failed)$/);
    }
    const done = got.find((h) => h.type === 'recording.completed')!;
    assert.ok(Number(done.data.duration) > 0 && Number(done.data.size) > 0 && done.data.fileType);
    const failed = got.find((h) => h.type === 'recording.failed')!;
    assert.equal(failed.data.error, 'conversion_failed');
  });

  test('@svc/client: a connected host records with a client key (its token goes as X-Room-Token)', async () => {
    const rest = async (method: string, ...args: unknown[]) => {
      const r = await browser.page.evaluate(([m, a]) => (window as any).svcm.rest(m, a), [
        method,
        args,
      ] as const);
      assert.equal(r.ok, true, `${method}: ${JSON.stringify(r)}`);
      return r.value as any;
    };
    const started = await rest('startRecord', { roomName: room, fileType: 'WEBM' });
    assert.equal(started.status, 'STARTED');
    assert.equal(started.fileType, 'WEBM');
    const active = await rest('listActiveRecordings');
    assert.deepEqual(
      active.map((i: { egressId: string }) => i.egressId),
      [started.egressId],
    );
    assert.equal((await rest('getRecording', started.egressId)).status, 'STARTED');
    const stopped = await rest('stopRecord', started.egressId);
    assert.equal(stopped.status, 'COMPLETED', JSON.stringify(stopped));
    const page = await rest('listRecordings');
    assert.equal(page.meta.page, 1);
    assert.equal(page.meta.limit, 10);
    assert.equal(page.items[0].egressId, started.egressId);
    const url = await rest('getRecordingDownloadUrl', started.egressId);
    assert.equal(url.expiresIn, 3600);
    assert.equal((await fetch(url.downloadUrl)).status, 200);
    // MP4 is the default type.
    const mp4 = await rest('startRecord', { roomName: room });
    assert.equal(mp4.fileType, 'MP4');
    await rest('stopRecord', mp4.egressId);
  });

  test('a room that ends stops its recording, and the file is made', async () => {
    const started = await api('POST', '/recordings', { roomName: room, fileType: 'OGG' });
    assert.equal(started.status, 201);
    const mjrDir = path.join(s.config.media.recordingsDir, 'mjr', started.body.egressId);
    const deadline = Date.now() + 10_000;
    while (!(fs.existsSync(mjrDir) && fs.readdirSync(mjrDir).some((f) => f.includes('-audio-')))) {
      assert.ok(Date.now() < deadline, `no audio .mjr in ${mjrDir}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const t0 = Date.now();
    while (Date.now() - t0 < 1000) await new Promise((r) => setTimeout(r, 100));
    const deleted = await fetch(`${s.baseUrl}/v1/realtime/rooms/${room}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
    });
    assert.equal(deleted.status, 204);
    let info = (await api('GET', `/recordings/${started.body.egressId}`)).body;
    const until = Date.now() + 30_000;
    while (info.status === 'STARTED' || info.status === 'PROCESSING') {
      assert.ok(Date.now() < until, JSON.stringify(info));
      await new Promise((r) => setTimeout(r, 50));
      info = (await api('GET', `/recordings/${started.body.egressId}`)).body;
    }
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    assert.ok(info.duration > 0.5 && info.duration < 5, String(info.duration));
  });
});
