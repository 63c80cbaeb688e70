import fs from 'node:fs';
import v8 from 'node:v8';
import vm from 'node:vm';
import { startListeningServer } from '../packages/client/test/helpers.ts';
import { bundlePage, openBrowser } from '../packages/client/test/media-browser.ts';
import { BACKENDS } from '../packages/server/test/helpers.ts';
import {
  fakeOffer,
  janusHandles,
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from '../packages/server/test/media/media-harness.ts';
import { RtClient } from '../packages/server/test/realtime/rt-helpers.ts';
import { fmt } from './lib.ts';

/**
 * Media: time from `connect()` to the first decoded frame of a remote camera through Svc (token,
 * signaling join, auto-subscribe through the server, Janus offer, answer, ICE, DTLS, first
 * frame), against the same browser subscribing to Janus directly with a bare Janus client
 * (session, attach, join, offer, answer, first frame) in the same run, rounds alternating.
 * Target: Svc adds at most 50 ms at the median and 100 ms at p95. Janus runs embedded in a test
 * network namespace; one Chromium publishes (fake camera), another subscribes.
 */

const ROUNDS = 15;
/** Participants publishing a (fake, signaling-only) microphone for the heap-per-participant figure. */
const HEAP_PARTICIPANTS = 100;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const heapUsed = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

/** Publishers of the Janus-CPU comparison, the measuring window, and the scaling steps (rooms of 4). */
const CPU_PUBLISHERS = 4;
const WINDOW_MS = 8000;
const SCALE_ROOMS = [1, 5, 10];

/** CPU seconds (user + system) process `pid` has used (/proc/<pid>/stat, clock ticks of 10 ms). */
function cpuSeconds(pid: number) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const pct = (values: number[], p: number) => {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

export async function run(): Promise<string> {
  const cannot = mediaTestsPossible();
  if (cannot) return `## Media\n\nSkipped: ${cannot}.`;
  const net = mediaNetwork('bn', 24);
  const s = await startListeningServer(BACKENDS[0]!, mediaEnv(net));
  const bundle = await bundlePage();
  const pub = await openBrowser(s.baseUrl, bundle);
  const sub = await openBrowser(s.baseUrl, bundle);
  try {
    await s.app.svc.media!.ready(10_000);
    // Server heap per media participant: joined sockets in rooms of 10, each publishing one track
    // (a Janus publisher handle), against the same number of joined sockets without media.
    const joinMany = async (tag: string, publish: boolean) => {
      const clients: RtClient[] = [];
      for (let i = 0; i < HEAP_PARTICIPANTS; i++) {
        const roomName = `heap-${tag}-${Math.floor(i / 10)}`;
        const res = await s.app.inject({
          method: 'POST',
          url: '/v1/realtime/token',
          headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
          payload: {
            roomName,
            liveType: 'AUDIO_CONFERENCE',
            participant: { userId: `u${i}`, name: 'u' },
          },
        });
        const c = await RtClient.open(res.json().wsUrl);
        await c.join();
        if (publish) {
          const ack = await c.request('media.publish', {
            source: 'microphone',
            sdp: fakeOffer('audio'),
          });
          if (ack.type !== 'ack') throw new Error(JSON.stringify(ack));
        }
        clients.push(c);
      }
      return clients;
    };
    // Measured first, while nothing else the process did can be freed meanwhile (a departure's
    // grace period ending, the browsers' protocol buffers), and with every group still joined
    // when the next is measured: a warm-up group pays the first join's one-time costs.
    const warm = await joinMany('warm', true);
    const base = heapUsed();
    const plain = await joinMany('plain', false);
    const plainHeap = heapUsed() - base;
    const handlesBefore = await janusHandles(net);
    const base2 = heapUsed();
    const media = await joinMany('media', true);
    const mediaHeap = heapUsed() - base2;
    const handles = (await janusHandles(net)) - handlesBefore;
    for (const c of [...warm, ...plain, ...media]) await c.close();
    const perParticipantKiB = (mediaHeap - plainHeap) / HEAP_PARTICIPANTS / 1024;
    const config = { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl };
    const janusUrl = `ws://${net.janusIp}:8188`;
    const svcTimes: number[] = [];
    const rawTimes: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      // Svc: a new room with a publishing camera, then the subscriber's connect().
      const roomName = `bench-${i}-${Date.now()}`;
      const opts = (userId: string) => ({
        roomName,
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId, name: userId },
      });
      const c = await pub.page.evaluate(([cf, o]) => (window as any).svcm.connect(cf, o), [
        config,
        opts('pub'),
      ] as const);
      if (!c.ok) throw new Error(JSON.stringify(c));
      const cam = await pub.page.evaluate(() => (window as any).svcm.enable('camera'));
      if (!cam.ok) throw new Error(JSON.stringify(cam));
      await pub.page.evaluate(() => (window as any).svcm.sending());
      svcTimes.push(
        await sub.page.evaluate(([cf, o]) => (window as any).svcFirstFrame(cf, o), [
          config,
          opts('sub'),
        ] as const),
      );
      await pub.page.evaluate(() => (window as any).svcm.disconnect());
      // Raw Janus: the same publisher browser publishes directly (and waits until its media
      // flows, as above), then the same subscriber subscribes.
      const { room, feed } = await pub.page.evaluate(
        (u) => (window as any).raw.publish(u),
        janusUrl,
      );
      rawTimes.push(
        await sub.page.evaluate(([u, r, f]) => (window as any).raw.firstFrame(u, r, f), [
          janusUrl,
          room,
          feed,
        ] as const),
      );
    }

    // Janus CPU per publisher: small cameras published through Svc (nobody subscribing) against
    // the same cameras published straight to Janus, each measured over the same window.
    const janusPid = (s.app.svc.media!.engineForTests as unknown as { pid: number }).pid;
    const small = { width: 320, height: 240, frameRate: 15 };
    const cpuWindow = async () => {
      await new Promise((r) => setTimeout(r, 2000));
      const j0 = cpuSeconds(janusPid);
      const s0 = process.cpuUsage();
      const t0 = performance.now();
      await new Promise((r) => setTimeout(r, WINDOW_MS));
      const secs = (performance.now() - t0) / 1000;
      const server = process.cpuUsage(s0);
      return {
        janus: (cpuSeconds(janusPid) - j0) / secs,
        server: (server.user + server.system) / 1e6 / secs,
      };
    };
    const pubJoins = Array.from({ length: CPU_PUBLISHERS }, (_, i) => ({
      roomName: `cpu-${i}-${Date.now()}`,
      userId: `p${i}`,
    }));
    // The latency rounds' bare publishers are still sending: stop them first.
    await pub.page.evaluate(() => (window as any).many.rawStop());
    const svcStart = await pub.page.evaluate(
      ([c, j, v]) => (window as any).many.start(c, j, v, false),
      [config, pubJoins, small] as const,
    );
    if (!svcStart.ok) throw new Error(JSON.stringify(svcStart));
    const svcCpu = await cpuWindow();
    await pub.page.evaluate(() => (window as any).many.stop());
    await pub.page.evaluate(([u, n, v]) => (window as any).many.raw(u, n, v), [
      janusUrl,
      CPU_PUBLISHERS,
      small,
    ] as const);
    const rawCpu = await cpuWindow();
    await pub.page.evaluate(() => (window as any).many.rawStop());

    // How cost grows: rooms of 4 publishers, each receiving the other 3 (two per room in each
    // browser), 1, 5 and 10 rooms.
    const steps: string[] = [];
    for (const rooms of SCALE_ROOMS) {
      const stamp = Date.now();
      const joins = (b: number) =>
        Array.from({ length: rooms * 2 }, (_, i) => ({
          roomName: `scale-${rooms}-${Math.floor(i / 2)}-${stamp}`,
          userId: `b${b}u${i}`,
        }));
      const h0 = heapUsed();
      const t0 = performance.now();
      const started = await Promise.all(
        [pub, sub].map((b, i) =>
          b.page.evaluate(([c, j, v]) => (window as any).many.start(c, j, v, true), [
            config,
            joins(i),
            small,
          ] as const),
        ),
      );
      for (const r of started) if (!r.ok) throw new Error(JSON.stringify(r));
      const want = rooms * 4 * 3;
      let decoding = 0;
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        decoding = 0;
        for (const b of [pub, sub])
          decoding += await b.page.evaluate(() => (window as any).many.decoding());
        if (decoding >= want) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      const readyMs = performance.now() - t0;
      const heap = (heapUsed() - h0) / (rooms * 4) / 1024;
      const cpu = await cpuWindow();
      steps.push(
        `| ${rooms} | ${rooms * 4} | ${decoding} of ${want} | ${fmt(readyMs / 1000, 1)} | ${fmt(cpu.janus * 100, 1)} | ${fmt((cpu.janus * 100) / (rooms * 4), 2)} | ${fmt(cpu.server * 100, 1)} | ${fmt((cpu.server * 100) / (rooms * 4), 2)} | ${fmt(heap, 1)} |`,
      );
      for (const b of [pub, sub]) await b.page.evaluate(() => (window as any).many.stop());
    }

    const row = (name: string, v: number[]) =>
      `| ${name} | ${fmt(pct(v, 50))} | ${fmt(pct(v, 95))} | ${fmt(Math.min(...v))} | ${fmt(Math.max(...v))} |`;
    const addedMedian = pct(svcTimes, 50) - pct(rawTimes, 50);
    const addedP95 = pct(svcTimes, 95) - pct(rawTimes, 95);
    return [
      '## Media',
      '',
      `connect() → first decoded remote video frame, ${ROUNDS} rounds each, alternating, ms (two headless Chromium, fake camera, embedded Janus in a network namespace):`,
      '',
      '| path | median | p95 | min | max |',
      '| --- | --- | --- | --- | --- |',
      row('Svc (`@svc/client` connect, auto-subscribe)', svcTimes),
      row('bare Janus client (same browsers)', rawTimes),
      '',
      `Svc adds ${fmt(addedMedian)} ms at the median and ${fmt(addedP95)} ms at p95 (targets: 50 and 100). The Svc path includes the token request and the signaling join, which the bare path has no equivalent of.`,
      '',
      `Janus CPU per publisher (${CPU_PUBLISHERS} cameras of ${small.width}×${small.height} at ${small.frameRate} fps, nobody subscribing, ${WINDOW_MS / 1000} s): through Svc ${fmt((svcCpu.janus * 100) / CPU_PUBLISHERS, 2)} % of a core, straight to Janus ${fmt((rawCpu.janus * 100) / CPU_PUBLISHERS, 2)} % (ratio ${fmt(svcCpu.janus / rawCpu.janus, 2)}); the server meanwhile ${fmt((svcCpu.server * 100) / CPU_PUBLISHERS, 2)} % per publisher (the bench process, server and browser driver).`,
      '',
      `Rooms of 4 publishers, each receiving the other 3 (${small.width}×${small.height} at ${small.frameRate} fps, two publishers per room in each browser): time until every subscription decodes, then CPU over ${WINDOW_MS / 1000} s (% of a core) and server heap growth per participant.`,
      '',
      '| rooms | publishers | subscriptions decoding | ready s | Janus CPU % | per publisher | server CPU % | per publisher | server heap KiB / participant |',
      '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
      ...steps,
      '',
      `Server heap per media participant (${HEAP_PARTICIPANTS} joined sockets in rooms of 10 each publishing one track, ${handles} more Janus handles, minus the same sockets without media; the test clients share the process): ${fmt(perParticipantKiB, 1)} KiB (target < 100 KiB); ${fmt(plainHeap / HEAP_PARTICIPANTS / 1024, 1)} KiB per participant without media.`,
    ].join('\n');
  } finally {
    await pub.close();
    await sub.close();
    await s.close();
    net.down();
  }
}
