import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import {
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
} from '../../server/test/media/media-harness.ts';
import { type ListeningServer, startListeningServer } from './helpers.ts';
import { bundlePage, openBrowser, type TestBrowser } from './media-browser.ts';
import { ffprobe, recordingTestsSkip } from './recordings-harness.ts';

// Recordings of several publishers: two real Chromiums (fake camera + microphone each)
// publish through @svc/client into the embedded Janus (network namespace `svcrmul`,
// 10.78.2.0/24). The room's file composes every camera in a grid that follows them coming and
// going, with every microphone mixed.
const skip = recordingTestsSkip();

/**
 * The chroma (U) plane of the 1280×720 frame at `at` seconds: 640 × 360 bytes. Chromium's fake
 * camera paints its picture on the luma plane with U = V = 0 (it looks green), while the
 * canvas is black (U = V = 128): chroma tells a camera's tile from the background.
 */
function chromaAt(file: string, at: number) {
  const yuv = execFileSync(
    'ffmpeg',
    ['-v', 'error', '-ss', at.toFixed(2), '-i', file, '-frames:v', '1'].concat([
      '-f',
      'rawvideo',
      '-pix_fmt',
      'yuv420p',
      '-',
    ]),
    { maxBuffer: 64 * 1024 * 1024 },
  );
  return yuv.subarray(1280 * 720, 1280 * 720 + 640 * 360);
}

/** The share of the columns [x0, x1), rows [y0, y1) (canvas pixels) showing a camera, 0 to 1. */
function cameraShare(u: Buffer, x0: number, x1: number, y0 = 0, y1 = 720) {
  let n = 0;
  let on = 0;
  for (let y = y0 / 2; y < y1 / 2; y++) {
    for (let x = x0 / 2; x < x1 / 2; x++) {
      n++;
      if (Math.abs(u[y * 640 + x]! - 128) > 40) on++;
    }
  }
  return on / n;
}

/** `volumedetect`'s max_volume of [from, to) seconds of the audio, in dB (-91 = silence). */
function loudest(file: string, from: number, to: number): number {
  const text = execFileSync(
    'sh',
    [
      '-c',
      `ffmpeg -nostats -ss ${from.toFixed(2)} -t ${(to - from).toFixed(2)} -i "$1" -map 0:a:0 -af volumedetect -f null - 2>&1`,
      'sh',
      file,
    ],
    { encoding: 'utf8' },
  );
  const m = /max_volume: (-?[\d.]+) dB/.exec(text);
  return m ? Number(m[1]) : -91;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('recordings of several publishers', { skip: skip ?? false, timeout: 180_000 }, () => {
  let net: MediaNetwork;
  let s: ListeningServer;
  let browser: TestBrowser;
  let browser2: TestBrowser;
  let alice: Page;
  let bob: Page;
  const room = uniqueName('recm');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svcr-multi-'));

  async function api(method: string, url: string, body?: unknown) {
    const res = await fetch(`${s.baseUrl}/v1/realtime${url}`, {
      method,
      headers: {
        authorization: `Bearer ${s.project.serverKey}`,
        'x-project-id': s.project.id,
        'content-type': 'application/json',
      },
      ...(body === undefined && method === 'GET' ? {} : { body: JSON.stringify(body ?? {}) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }
  async function media(page: Page, op: 'enable' | 'disable', source: string) {
    const r = await page.evaluate(([o, x]) => (window as any).svcm[o](x), [op, source] as const);
    assert.equal(r.ok, true, `${op} ${source}: ${JSON.stringify(r)}`);
  }
  /** Waits until the recording's folder has `n` `.mjr` files (media is being written). */
  async function mjrFiles(egressId: string, n: number) {
    const dir = path.join(s.config.media.recordingsDir, 'mjr', egressId);
    const deadline = Date.now() + 10_000;
    const count = () =>
      fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.mjr')).length : 0;
    while (count() < n) {
      assert.ok(Date.now() < deadline, `${count()} of ${n} .mjr files in ${dir}`);
      await sleep(50);
    }
  }
  async function download(egressId: string, name: string) {
    const url = await api('GET', `/recordings/${egressId}/download-url`);
    assert.equal(url.status, 200, JSON.stringify(url.body));
    const res = await fetch(url.body.downloadUrl);
    assert.equal(res.status, 200);
    const file = path.join(tmp, name);
    fs.writeFileSync(file, Buffer.from(await res.arrayBuffer()));
    return { file, urls: url.body };
  }

  before(async () => {
    net = mediaNetwork('mul', 2, { prefix: 'svcr', octet: 78 });
    const bundle = await bundlePage();
    s = await startListeningServer(BACKENDS[0]!, {
      ...mediaEnv(net),
      SVC_RECORDING_STOP_WAIT_MS: '60000',
    });
    await s.app.svc.media!.ready(10_000);
    // A browser each (a background tab's encoder does not answer the SFU's keyframe requests).
    browser = await openBrowser(s.baseUrl, bundle);
    browser2 = await openBrowser(s.baseUrl, bundle);
    alice = browser.page;
    bob = browser2.page;
    for (const [page, userId] of [
      [alice, 'alice'],
      [bob, 'bob'],
    ] as const) {
      const connected = await page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
        { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl },
        {
          roomName: room,
          liveType: 'VIDEO_CONFERENCE',
          participant: { userId, name: userId, isHost: userId === 'alice' },
        },
      ] as const);
      assert.equal(connected.ok, true, JSON.stringify(connected));
    }
    await media(alice, 'enable', 'camera');
    await media(alice, 'enable', 'microphone');
    await media(bob, 'enable', 'camera');
  });

  after(async () => {
    await browser?.close();
    await browser2?.close();
    await s?.close();
    net?.down();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('room: every camera in a grid that follows them, every microphone mixed', async () => {
    const started = await api('POST', '/recordings', { roomName: room, fileType: 'MP4' });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const id = started.body.egressId as string;
    await mjrFiles(id, 3);
    const t0 = Date.now();
    await sleep(2500);
    // Bob's camera leaves, Alice's microphone stops and Bob's starts: the grid goes back to
    // one tile, and the mix has sound before (Alice's) and after (Bob's).
    await media(bob, 'disable', 'camera');
    await media(alice, 'disable', 'microphone');
    await media(bob, 'enable', 'microphone');
    await sleep(2500);
    const stopAt = Date.now();
    const stopped = await api('POST', `/recordings/${id}/stop`);
    const info = stopped.body;
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    console.log(
      `grid: recorded ${stopAt - t0} ms, file ${info.duration} s, stop → COMPLETED ${Date.now() - stopAt} ms`,
    );
    const { file } = await download(id, 'grid.mp4');
    const p = ffprobe(file);
    const video = p.streams.filter((x) => x.codec_type === 'video');
    const audio = p.streams.filter((x) => x.codec_type === 'audio');
    assert.equal(video.length, 1);
    assert.equal(audio.length, 1);
    assert.equal(video[0]!.codec_name, 'h264');
    assert.deepEqual([video[0]!.width, video[0]!.height], [1280, 720]);
    // The file spans the recording: it starts within half a second of the start request's answer
    // and may run on past the stop request for as long as the SFU keeps writing before the stop
    // takes effect (up to about a second on a loaded machine).
    const duration = Number(p.format.duration);
    const recorded = (stopAt - t0) / 1000;
    assert.ok(
      duration > recorded - 0.5 && duration < recorded + 1.5,
      `${duration} s vs ${stopAt - t0} ms`,
    );
    // While both cameras are on, two tiles side by side (640 wide each): both outer edges
    // show a camera. After Bob's camera left, one tile (960 wide, centred): the edges are black.
    // Both cameras are on from the file's start to at least 2 s in; a camera's tile shows from
    // its stream's first keyframe, which a loaded machine can put past 1.2 s, so a frame at
    // 1.2 s or one at 1.9 s must show both.
    const edges = (f: Buffer) => [cameraShare(f, 0, 150), cameraShare(f, 1130, 1280)];
    const early = [1.2, 1.9].map((at) => edges(chromaAt(file, at)));
    const one = chromaAt(file, duration - 0.7);
    console.log(
      `camera share: both ${early.map((e) => e.map((x) => x.toFixed(2)).join()).join(' / ')}, one ${edges(one).map((x) => x.toFixed(2))} centre ${cameraShare(one, 400, 880).toFixed(2)}`,
    );
    // 640×480 in a 640×720 tile: two thirds of the height.
    assert.ok(
      early.some((e) => e.every((share) => share > 0.5)),
      `a tile is missing: ${early.join(' / ')}`,
    );
    for (const share of edges(one)) assert.ok(share < 0.05, `not one tile: ${edges(one)}`);
    assert.ok(cameraShare(one, 400, 880) > 0.9);
    // Alice's microphone before the change, Bob's after: both are in the mix.
    const first = loudest(file, 0.2, 2.2);
    const last = loudest(file, duration - 2.2, duration - 0.2);
    console.log(`audio: max ${first} dB before, ${last} dB after`);
    assert.ok(first > -30 && last > -30, `${first} / ${last} dB`);
  });

  test('participant mode: one file per participant, each with its own signed URL', async () => {
    // Now: Alice has her camera, Bob his microphone; Bob's camera comes back.
    await media(bob, 'enable', 'camera');
    const started = await api('POST', '/recordings', {
      roomName: room,
      fileType: 'WEBM',
      mode: 'participant',
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    assert.equal(started.body.mode, 'participant');
    const id = started.body.egressId as string;
    assert.equal(started.body.filepath, `${room}/${id}`);
    await mjrFiles(id, 3);
    const t0 = Date.now();
    await sleep(2500);
    const stopAt = Date.now();
    const info = (await api('POST', `/recordings/${id}/stop`)).body;
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    assert.deepEqual(
      info.files.map((f: { userId: string; filepath: string }) => [f.userId, f.filepath]),
      [
        ['alice', `${room}/${id}/alice.webm`],
        ['bob', `${room}/${id}/bob.webm`],
      ],
    );
    const urls = await api('GET', `/recordings/${id}/download-url`);
    assert.equal(urls.status, 200);
    assert.equal(urls.body.files.length, 2);
    assert.equal(urls.body.downloadUrl, urls.body.files[0].downloadUrl);
    const kinds: Record<string, string[]> = {};
    for (const [i, f] of (urls.body.files as { userId: string; downloadUrl: string }[]).entries()) {
      const res = await fetch(f.downloadUrl);
      assert.equal(res.status, 200);
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(bytes.length, info.files[i].size);
      const local = path.join(tmp, `${f.userId}.webm`);
      fs.writeFileSync(local, bytes);
      const p = ffprobe(local);
      kinds[f.userId] = p.streams.map((x) => `${x.codec_type}:${x.codec_name}`).sort();
      assert.ok(Math.abs(Number(p.format.duration) - (stopAt - t0) / 1000) < 0.6);
      // One participant's URL does not open another's file.
      const other = new URL(f.downloadUrl);
      other.searchParams.set('file', String(1 - i));
      assert.equal((await fetch(other)).status, 403);
    }
    // Alice: camera only (her microphone is off); Bob: camera and microphone.
    assert.deepEqual(kinds, { alice: ['video:vp8'], bob: ['audio:opus', 'video:vp8'] });
  });

  test('pause and resume: one file, the paused time cut', async () => {
    await media(bob, 'disable', 'camera');
    const started = await api('POST', '/recordings', { roomName: room, fileType: 'OGG' });
    assert.equal(started.status, 201);
    const id = started.body.egressId as string;
    await mjrFiles(id, 1);
    let t = Date.now();
    await sleep(2000);
    const paused = await api('POST', `/recordings/${id}/pause`);
    let recorded = Date.now() - t;
    assert.equal(paused.status, 200);
    assert.equal(paused.body.status, 'STARTED');
    assert.ok(paused.body.pausedAt);
    assert.equal(
      (await api('POST', `/recordings/${id}/pause`)).body.pausedAt,
      paused.body.pausedAt,
    );
    await sleep(2000);
    const resumed = await api('POST', `/recordings/${id}/resume`);
    t = Date.now();
    assert.equal(resumed.status, 200);
    assert.equal(resumed.body.pausedAt, undefined);
    await mjrFiles(id, 2);
    await sleep(2000);
    recorded += Date.now() - t;
    const info = (await api('POST', `/recordings/${id}/stop`)).body;
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    console.log(`pause: recorded ${recorded} ms around a 2 s pause, file ${info.duration} s`);
    // The cut is never longer than the gap: the file may keep what the SFU wrote while the pause
    // reached it (up to a second on a loaded machine), and without the cut it would be 2 s longer.
    const cutOk = (d: number) => d > recorded / 1000 - 0.5 && d < recorded / 1000 + 1;
    assert.ok(cutOk(info.duration), `${info.duration} vs ${recorded}`);
    const { file } = await download(id, 'paused.ogg');
    assert.ok(cutOk(Number(ffprobe(file).format.duration)));
    // Sound on both sides of the cut.
    assert.ok(
      loudest(file, 0.2, 1.8) > -30 &&
        loudest(file, info.duration - 1.8, info.duration - 0.2) > -30,
    );
    // Only a running recording pauses.
    const again = await api('POST', `/recordings/${id}/pause`);
    assert.equal(again.status, 409);
    assert.equal(again.body.code, 'recording_not_active');
  });

  test('room: a screen share takes the main tile, the cameras stack on the right', async () => {
    await media(bob, 'enable', 'camera');
    await media(alice, 'enable', 'screen');
    const started = await api('POST', '/recordings', { roomName: room, fileType: 'MP4' });
    assert.equal(started.status, 201);
    const id = started.body.egressId as string;
    await mjrFiles(id, 4);
    await sleep(2500);
    const info = (await api('POST', `/recordings/${id}/stop`)).body;
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    const { file } = await download(id, 'screen.mp4');
    const u = chromaAt(file, Number(ffprobe(file).format.duration) - 0.7);
    const main = cameraShare(u, 0, 960);
    const side = cameraShare(u, 960, 1280, 0, 360);
    const below = cameraShare(u, 960, 1280, 360, 720);
    console.log(
      `screen: main ${main.toFixed(2)}, side ${side.toFixed(2)}, below ${below.toFixed(2)}`,
    );
    // The 1280×720 screen in the 960×720 main tile (960×540); two 320×180 camera tiles on the
    // right (240×180 pictures), nothing under them.
    assert.ok(main > 0.7, String(main));
    assert.ok(side > 0.6, String(side));
    assert.ok(below < 0.05, String(below));
    await media(alice, 'disable', 'screen');
  });
});
