import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { buildApp } from '../../server/src/app.ts';
import { loadConfig } from '../../server/src/config.ts';
import { loadMediaConfig } from '../../server/src/media/config.ts';
import { JanusProcess } from '../../server/src/media/janus-process.ts';
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

  after(async () => {
    for (const b of browsers) await b.close();
    for (const n of nodes) await n.close();
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
    for (const b of browsers) await b.page.evaluate(() => (window as any).svcm.disconnect());
  });
});
