import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../server/src/app.ts';
import { loadConfig } from '../../server/src/areas.ts';
import { loadMediaConfig } from '../../server/src/media/config.ts';
import { JanusProcess } from '../../server/src/media/janus-process.ts';
import { TcpProxy } from '../../server/test/fixtures/tcp-proxy.ts';
import {
  DATABASE_URL,
  freshState,
  freshStore,
  REDIS_URL,
  uniqueName,
} from '../../server/test/helpers.ts';
import {
  ADMIN_SECRET,
  janusHandles,
  type MediaNetwork,
  mediaNetwork,
  mediaTestsPossible,
} from '../../server/test/media/media-harness.ts';
import {
  browserTestsPossible,
  bundlePage,
  openBrowser,
  type TestBrowser,
} from './media-browser.ts';

// The fleet: two Janus instances (SVC_JANUS_URLS) and two Svc nodes sharing PostgreSQL and Redis,
// one browser on each node. The room is placed on one instance; killing it moves the room to the
// other and both browsers decode again.
const skip =
  mediaTestsPossible() ??
  browserTestsPossible() ??
  (DATABASE_URL && REDIS_URL ? null : 'needs DATABASE_URL and REDIS_URL');

type Node = Awaited<ReturnType<typeof buildApp>> & { baseUrl: string };

describe('media fleet: two Janus instances, two nodes', {
  skip: skip ?? false,
  timeout: 240_000,
}, () => {
  let net: MediaNetwork;
  const janus: JanusProcess[] = [];
  const nodes: Node[] = [];
  const browsers: TestBrowser[] = [];
  let dropStore: () => Promise<void>;
  let dropState: () => Promise<void>;
  let project: { id: string; clientKey: string };
  const WS_PORTS = [8188, 8189];
  const ADMIN_PORTS = [7188, 7189];

  before(async () => {
    net = mediaNetwork('fl', 23);
    for (const [i, port] of WS_PORTS.entries()) {
      const cfg = loadMediaConfig(
        {
          SVC_JANUS_BINARY: net.janusWrapper,
          SVC_MEDIA_INTERFACE: net.janusIp,
          SVC_JANUS_WS_PORT: String(port),
          SVC_JANUS_ADMIN_PORT: String(ADMIN_PORTS[i]),
          SVC_MEDIA_RTP_PORTS: i === 0 ? '20000-20200' : '20201-20400',
        },
        path.join(net.dir, `janus${i}`),
      );
      const proc = new JanusProcess(cfg, ADMIN_SECRET);
      proc.start();
      janus.push(proc);
    }
    const fresh = await freshStore('postgres');
    dropStore = fresh.drop;
    const prefix = `${uniqueName('fleet')}:`;
    const secret = randomBytes(16).toString('hex');
    const adminToken = `admin_${randomBytes(8).toString('hex')}`;
    const states: { drop(): Promise<void> }[] = [];
    for (let i = 0; i < 2; i++) {
      const shared = freshState('redis', prefix);
      states.push(shared);
      const config = loadConfig({
        LOG_LEVEL: 'warn',
        SVC_BOOTSTRAP: 'false',
        SVC_MEDIA: 'auto',
        SVC_JANUS_URLS: WS_PORTS.map((p) => `ws://${net.janusIp}:${p}`).join(','),
        SVC_REALTIME_SWEEP_INTERVAL_MS: '50',
        DATA_DIR: path.join(net.dir, `node${i}`),
      });
      const app = await buildApp({
        config,
        adminToken,
        secret,
        store: fresh.store,
        state: shared.state,
      });
      await app.listen({ port: 0, host: '127.0.0.1' });
      const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      // Each node names itself as the public URL, so its tokens' wsUrl lead back to it.
      (app.svc.config as { publicUrl: string }).publicUrl = baseUrl;
      nodes.push(Object.assign(app, { baseUrl }));
    }
    dropState = async () => {
      for (const s of states) await s.drop();
    };
    for (const n of nodes) await n.svc.media!.ready(15_000);
    const admin = async (url: string, body: unknown) => {
      const res = await nodes[0]!.inject({
        method: 'POST',
        url: `/v1/admin${url}`,
        headers: { authorization: `Bearer ${adminToken}` },
        payload: body as object,
      });
      return res.json();
    };
    const p = await admin('/projects', { name: 'fleet' });
    const key = await admin(`/projects/${p.id}/keys`, { type: 'client' });
    project = { id: p.id, clientKey: key.key };
    const bundle = await bundlePage();
    for (const n of nodes) browsers.push(await openBrowser(n.baseUrl, bundle));
  });

  let proxy: TcpProxy | null = null;

  after(async () => {
    for (const b of browsers) await b.close();
    for (const n of nodes) await n.close();
    await proxy?.close();
    for (const j of janus) await j.stop();
    await dropState?.();
    await dropStore?.();
    net?.down();
  });

  async function remoteVideo(b: TestBrowser, userId: string, minFrames: number, not: string[]) {
    const deadline = Date.now() + 60_000;
    let last: any[] = [];
    while (Date.now() < deadline) {
      last = await b.page.evaluate(() => (window as any).svcm.remote());
      const t = last.find(
        (x) =>
          x.userId === userId &&
          x.kind === 'video' &&
          x.framesDecoded >= minFrames &&
          !not.includes(x.trackId),
      );
      if (t) return t;
      await b.page.waitForTimeout(100);
    }
    throw new Error(`no video from ${userId}: ${JSON.stringify(last)}`);
  }

  test('a room placed on one instance moves to the other when it dies; both nodes decode again', async () => {
    const room = uniqueName('fleet');
    const users = ['ann', 'ben'];
    for (const [i, b] of browsers.entries()) {
      const config = {
        projectId: project.id,
        apiKey: project.clientKey,
        baseUrl: nodes[i]!.baseUrl,
      };
      const opts = {
        roomName: room,
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId: users[i], name: users[i] },
      };
      const res = await b.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
        config,
        opts,
      ] as const);
      assert.equal(res.ok, true, JSON.stringify(res));
      const cam = await b.page.evaluate(() => (window as any).svcm.enable('camera'));
      assert.equal(cam.ok, true, JSON.stringify(cam));
    }
    const first = [
      await remoteVideo(browsers[0]!, 'ben', 20, []),
      await remoteVideo(browsers[1]!, 'ann', 20, []),
    ];
    // Every handle of the room is on one instance (besides each node's control handle there).
    const counts = [
      await janusHandles(net, ADMIN_PORTS[0]),
      await janusHandles(net, ADMIN_PORTS[1]),
    ];
    const placed = counts[0]! > 2 ? 0 : 1;
    assert.deepEqual(
      [counts[placed], counts[1 - placed]],
      [2 + 4, 2],
      `handles per instance ${counts}`,
    );

    const t0 = performance.now();
    await janus[placed]!.stop();
    const old = first.map((t) => t.trackId);
    await remoteVideo(browsers[0]!, 'ben', 10, old);
    await remoteVideo(browsers[1]!, 'ann', 10, old);
    console.log(
      `# fleet failover: both decoding on the other instance ${(performance.now() - t0).toFixed(0)} ms after its peer stopped`,
    );
    assert.equal(await janusHandles(net, ADMIN_PORTS[1 - placed]), 2 + 4);
    // Both clients showed the lost media as RECONNECTING and came back to CONNECTED.
    for (const b of browsers) {
      const states: string[] = await b.page.evaluate(() => (window as any).svcm.states);
      const tail = states.slice(states.lastIndexOf('RECONNECTING'));
      assert.deepEqual(tail, ['RECONNECTING', 'CONNECTED'], JSON.stringify(states));
    }
    for (const b of browsers) await b.page.evaluate(() => (window as any).svcm.disconnect());
    // Janus up again for the next test.
    await janus[placed]!.start();
    for (const n of nodes) await n.svc.media!.ready(15_000);
  });

  /** Frames decoded of `userId`'s video now and a moment later: the later count is higher. */
  async function decoding(b: TestBrowser, userId: string) {
    const frames = async () =>
      ((await b.page.evaluate(() => (window as any).svcm.remote())) as any[]).find(
        (x) => x.userId === userId && x.kind === 'video',
      )?.framesDecoded ?? 0;
    const first = await frames();
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if ((await frames()) >= first + 10) return;
      await b.page.waitForTimeout(100);
    }
    throw new Error(`${userId}'s video is not being decoded`);
  }

  test('a node that goes away: its sessions resume on the other node and publish and subscribe there again', async () => {
    // Browser 0 reaches node 0 through a proxy, as through a load balancer; "node 0 dies" is
    // the proxy cutting its connections and moving to node 1, then node 0 stopping (its Janus
    // sessions and handles end).
    const url0 = new URL(nodes[0]!.baseUrl);
    proxy = await TcpProxy.start({ host: url0.hostname, port: Number(url0.port) });
    const front = `http://127.0.0.1:${proxy.port}`;
    (nodes[0]!.svc.config as { publicUrl: string }).publicUrl = front;
    (nodes[1]!.svc.config as { publicUrl: string }).publicUrl = front;
    const room = uniqueName('moved');
    const users = ['cat', 'dan'];
    const urls = [front, nodes[1]!.baseUrl];
    for (const [i, b] of browsers.entries()) {
      await b.page.evaluate(() => (window as any).svcm.states.splice(0));
      const config = { projectId: project.id, apiKey: project.clientKey, baseUrl: urls[i] };
      const opts = {
        roomName: room,
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId: users[i], name: users[i] },
      };
      const res = await b.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
        config,
        opts,
      ] as const);
      assert.equal(res.ok, true, JSON.stringify(res));
      const cam = await b.page.evaluate(() => (window as any).svcm.enable('camera'));
      assert.equal(cam.ok, true, JSON.stringify(cam));
    }
    const before = await remoteVideo(browsers[1]!, 'cat', 20, []);
    await remoteVideo(browsers[0]!, 'dan', 20, []);

    const t0 = performance.now();
    const url1 = new URL(nodes[1]!.baseUrl);
    proxy.retarget({ host: url1.hostname, port: Number(url1.port) });
    await proxy.drop();
    await proxy.restore();
    const closing = nodes[0]!.close();
    // cat's camera comes back as a new track, published through node 1; dan's video reaches cat
    // again through a subscription node 1 holds.
    await remoteVideo(browsers[1]!, 'cat', 10, [before.trackId]);
    await decoding(browsers[0]!, 'dan');
    console.log(
      `# node gone: decoding both ways through the other node ${(performance.now() - t0).toFixed(0)} ms later`,
    );
    const stopped = (await browsers[1]!.page.evaluate(() => (window as any).svcm.events)).find(
      (e: { type: string; trackId: string }) =>
        e.type === 'stopped' && e.trackId === before.trackId,
    );
    assert.ok(stopped, "dan saw cat's old track stop");
    const states: string[] = await browsers[0]!.page.evaluate(() => (window as any).svcm.states);
    assert.equal(states.at(-1), 'CONNECTED', JSON.stringify(states));
    assert.ok(states.includes('RECONNECTING'), JSON.stringify(states));
    for (const b of browsers) await b.page.evaluate(() => (window as any).svcm.disconnect());
    await closing;
  });
});
