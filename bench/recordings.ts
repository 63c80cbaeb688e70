import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import type { Page } from 'playwright-core';
import { startListeningServer } from '../packages/client/test/helpers.ts';
import {
  bundlePage,
  openBrowser,
  type TestBrowser,
} from '../packages/client/test/media-browser.ts';
import { BACKENDS } from '../packages/server/test/helpers.ts';
import {
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from '../packages/server/test/media/media-harness.ts';
import { fmt } from './lib.ts';

/**
 * Recordings: the time from a stop request to the file being ready (COMPLETED), as a fraction
 * of the recording's length, for `SECONDS` of one publisher (camera + microphone) in WEBM, MP4
 * and OGG, and of a 4-publisher grid (MP4). Targets: WEBM and OGG ready within 1 s; MP4 of one
 * publisher within 0.1 × its length + 1 s; the 4-publisher grid within 0.5 × its length.
 * Also the CPU of a running recording: Janus (writing the .mjr files) and the server process,
 * over the same window with and without the recording. Each publisher is its own Chromium
 * (fake camera 640×480 + microphone) publishing through @svc/client into the embedded Janus.
 */

const SECONDS = Number(process.env.BENCH_RECORDING_SECONDS ?? 60);
const CPU_WINDOW_MS = 10_000;
const TICK = 100; // CLK_TCK

/** User + system CPU seconds of `pids` so far. */
function cpuSeconds(pids: number[]) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {}
  }
  return ticks / TICK;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function run(): Promise<string> {
  const cannot = mediaTestsPossible();
  if (cannot) return `## Recordings\n\nSkipped: ${cannot}.`;
  const net = mediaNetwork('bnr', 9, { prefix: 'svcr', octet: 78 });
  const s = await startListeningServer(BACKENDS[0]!, {
    ...mediaEnv(net),
    SVC_RECORDING_STOP_WAIT_MS: '600000',
    LOG_LEVEL: 'error',
  });
  const bundle = await bundlePage();
  const browsers: TestBrowser[] = [];
  try {
    await s.app.svc.media!.ready(10_000);
    const janusPids = execFileSync('ip', ['netns', 'pids', net.ns], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map(Number)
      .filter(Boolean);
    const config = { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl };
    for (let i = 0; i < 4; i++) browsers.push(await openBrowser(s.baseUrl, bundle));
    const api = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`${s.baseUrl}/v1/realtime${url}`, {
        method,
        headers: {
          authorization: `Bearer ${s.project.serverKey}`,
          'x-project-id': s.project.id,
          'content-type': 'application/json',
        },
        ...(method === 'GET' ? {} : { body: JSON.stringify(body ?? {}) }),
      });
      return res.json();
    };
    const join = async (page: Page, roomName: string, userId: string) => {
      const c = await page.evaluate(([cf, o]) => (window as any).svcm.connect(cf, o), [
        config,
        { roomName, liveType: 'VIDEO_CONFERENCE', participant: { userId, name: userId } },
      ] as const);
      if (!c.ok) throw new Error(JSON.stringify(c));
      for (const source of ['camera', 'microphone']) {
        const r = await page.evaluate((x) => (window as any).svcm.enable(x), source);
        if (!r.ok) throw new Error(JSON.stringify(r));
      }
    };
    const each = async (pages: Page[], op: 'enable' | 'disable') => {
      for (const page of pages) {
        for (const source of ['camera', 'microphone']) {
          const r = await page.evaluate(([o, x]) => (window as any).svcm[o](x), [
            op,
            source,
          ] as const);
          if (!r.ok) throw new Error(JSON.stringify(r));
        }
      }
    };
    /**
     * Records `roomName` for SECONDS, stops, and times stop → COMPLETED. The publishers stop
     * publishing just before the stop, so their browsers' encoders do not share the two cores
     * with the conversion (a server does not run its participants' browsers).
     */
    const measure = async (roomName: string, fileType: string, pages: Page[]) => {
      const started = await api('POST', '/recordings', { roomName, fileType });
      if (started.status !== 'STARTED') throw new Error(JSON.stringify(started));
      await sleep(SECONDS * 1000);
      await each(pages, 'disable');
      const t = performance.now();
      const done = await api('POST', `/recordings/${started.egressId}/stop`);
      const ms = performance.now() - t;
      if (done.status !== 'COMPLETED') throw new Error(JSON.stringify(done));
      await each(pages, 'enable');
      return { ms, duration: done.duration as number, size: done.size as number };
    };

    // One publisher: the three types one after the other, from the same browser.
    const single: Record<string, { ms: number; duration: number; size: number }> = {};
    await join(browsers[0]!.page, 'bench-rec-one', 'p0');
    const one = [browsers[0]!.page];
    for (const type of ['WEBM', 'MP4', 'OGG']) {
      single[type] = await measure('bench-rec-one', type, one);
    }
    await browsers[0]!.page.evaluate(() => (window as any).svcm.disconnect());

    // Four publishers: CPU with and without a recording, then the grid.
    for (const [i, b] of browsers.entries()) await join(b.page, 'bench-rec-grid', `p${i}`);
    const cpuOver = async () => {
      const j0 = cpuSeconds(janusPids);
      const n0 = process.cpuUsage();
      await sleep(CPU_WINDOW_MS);
      const n1 = process.cpuUsage(n0);
      return {
        janus: (cpuSeconds(janusPids) - j0) / (CPU_WINDOW_MS / 1000),
        node: (n1.user + n1.system) / 1e6 / (CPU_WINDOW_MS / 1000),
      };
    };
    const idle = await cpuOver();
    const started = await api('POST', '/recordings', {
      roomName: 'bench-rec-grid',
      fileType: 'MP4',
    });
    const recording = await cpuOver();
    await sleep(Math.max(0, SECONDS * 1000 - CPU_WINDOW_MS));
    await each(
      browsers.map((b) => b.page),
      'disable',
    );
    const t = performance.now();
    const gridDone = await api('POST', `/recordings/${started.egressId}/stop`);
    const gridMs = performance.now() - t;
    if (gridDone.status !== 'COMPLETED') throw new Error(JSON.stringify(gridDone));

    const row = (name: string, r: { ms: number; duration: number; size: number }, target: string) =>
      `| ${name} | ${fmt(r.duration, 1)} s | ${fmt(r.size / 1024)} KiB | ${fmt(r.ms)} ms | ${fmt(r.ms / 1000 / r.duration, 3)} | ${target} |`;
    const pct = (x: number) => `${fmt(x * 100, 1)} %`;
    return [
      '## Recordings',
      '',
      `Stop request → \`COMPLETED\` answer (the conversion: janus-pp-rec, ffmpeg, ffprobe) for ${SECONDS} s recordings, as a fraction of the recording's length. Each publisher is its own headless Chromium (fake 640×480 camera at 20 fps, VP8, and microphone, Opus) publishing into the embedded Janus on the same machine; they stop publishing just before the stop request, so the conversion does not share the cores with their encoders. One conversion runs at a time per node. ${os.cpus().length} cores.`,
      '',
      '| recording | length | size | stop → COMPLETED | ÷ length | target |',
      '| --- | --- | --- | --- | --- | --- |',
      row('1 publisher, WEBM (VP8 + Opus copied)', single.WEBM!, '≤ 1 s'),
      row('1 publisher, MP4 (libx264 superfast + AAC)', single.MP4!, `≤ 0.1 × length + 1 s`),
      row('1 publisher, OGG (Opus copied)', single.OGG!, '≤ 1 s'),
      row(
        '4 publishers, MP4 grid (1280×720, 24 fps, 4 tiles, 4 microphones mixed)',
        { ms: gridMs, duration: gridDone.duration, size: gridDone.size },
        '≤ 0.5 × length',
      ),
      '',
      `CPU while 4 publishers are recorded, over ${CPU_WINDOW_MS / 1000} s (share of one core): Janus ${pct(recording.janus)} recording vs ${pct(idle.janus)} not recording; the server process (which also runs this benchmark) ${pct(recording.node)} vs ${pct(idle.node)} (a recording costs the server nothing while it runs: Janus writes the .mjr files, the conversion runs after the stop).`,
    ].join('\n');
  } finally {
    for (const b of browsers) await b.close();
    await s.close();
    net.down();
  }
}
