import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import {
  janusHandles,
  janusHangup,
  janusPeerHandles,
  logTails,
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from '../../server/test/media/media-harness.ts';
import { type ListeningServer, startListeningServer } from './helpers.ts';
import {
  browserTestsPossible,
  bundlePage,
  openBrowser,
  type TestBrowser,
} from './media-browser.ts';

// Two real browsers (Debian Chromium, fake devices) through @svc/client, the Svc server and an
// embedded Janus in its own network namespace. One backend: the media path does not depend on
// the store (the signaling tests run on both).
const skip = mediaTestsPossible() ?? browserTestsPossible();

interface Remote {
  trackId: string;
  sid: string;
  userId: string;
  source: string;
  kind: string;
  framesDecoded: number;
  samples: number;
  packets: number;
  width: number;
  /** The subscribing PeerConnection's transport, `<iceState>/<dtlsState>`. */
  transport: string;
}

describe('media in real browsers', { skip: skip ?? false, timeout: 240_000 }, () => {
  let net: MediaNetwork;
  let s: ListeningServer;
  let bundle: string;
  const browsers: TestBrowser[] = [];
  let alice: TestBrowser;
  let bob: TestBrowser;

  before(async () => {
    net = mediaNetwork('br', 21);
    bundle = await bundlePage();
    s = await startListeningServer(BACKENDS[0]!, {
      ...mediaEnv(net),
      SVC_REALTIME_DEPARTURE_GRACE_MS: '10000',
      SVC_REALTIME_PING_INTERVAL_MS: '2000',
    });
    await s.app.svc.media!.ready(10_000);
    alice = await openBrowser(s.baseUrl, bundle);
    browsers.push(alice);
    bob = await openBrowser(s.baseUrl, bundle);
    browsers.push(bob);
  });

  after(async () => {
    for (const b of browsers) await b.close();
    await s?.close();
    net?.down();
  });

  const config = () => ({
    projectId: s.project.id,
    apiKey: s.project.clientKey,
    baseUrl: s.baseUrl,
  });
  const options = (
    roomName: string,
    userId: string,
    liveType = 'VIDEO_CONFERENCE',
    isHost = false,
  ) => ({
    roomName,
    liveType,
    participant: { userId, name: userId, isHost },
  });

  async function connect(
    b: TestBrowser,
    roomName: string,
    userId: string,
    liveType?: string,
    isHost?: boolean,
  ) {
    const res = await b.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
      config(),
      options(roomName, userId, liveType, isHost),
    ] as const);
    assert.equal(res.ok, true, JSON.stringify(res));
    return res.value as string;
  }

  const enable = (b: TestBrowser, source: string) =>
    b.page.evaluate((src) => (window as any).svcm.enable(src), source);
  const disable = (b: TestBrowser, source: string) =>
    b.page.evaluate((src) => (window as any).svcm.disable(src), source);
  const remote = (b: TestBrowser): Promise<Remote[]> =>
    b.page.evaluate(() => (window as any).svcm.remote());

  /**
   * Waits (in the page, polling its own stats) until the remote tracks satisfy `want`; returns them.
   */
  async function waitRemote(
    b: TestBrowser,
    want: (r: Remote[]) => boolean,
    what: string,
    timeoutMs = 30_000,
  ) {
    const deadline = Date.now() + timeoutMs;
    let last: Remote[] = [];
    while (Date.now() < deadline) {
      last = await remote(b);
      if (want(last)) return last;
      await b.page.waitForTimeout(100);
    }
    throw new Error(`${what}: ${JSON.stringify(last)}\n${logTails(net)}`);
  }

  const decodingVideo = (
    r: Remote[],
    userId: string,
    source: string,
    minFrames: number,
    not: string[] = [],
  ) =>
    r.find(
      (t) =>
        t.userId === userId &&
        t.source === source &&
        t.framesDecoded >= minFrames &&
        !not.includes(t.trackId),
    );
  const hearing = (r: Remote[], userId: string, not: string[] = []) =>
    r.find(
      (t) =>
        t.userId === userId &&
        t.source === 'microphone' &&
        t.samples >= 24_000 &&
        !not.includes(t.trackId),
    );

  /** The `source` track of `userId` decoding on a connected PeerConnection (a hung-up one shows DTLS `closed`). */
  const decodingConnected = (r: Remote[], userId: string, source: string) =>
    r.find(
      (t) =>
        t.userId === userId &&
        t.source === source &&
        t.transport === 'connected/connected' &&
        (t.framesDecoded >= 5 || t.samples >= 24_000),
    );

  /** Waits until each browser decodes the other's tracks that are not in `old` (new ones). */
  async function bothDecodeNew(old: string[], timeoutMs: number) {
    await waitRemote(
      bob,
      (r) => !!decodingVideo(r, 'alice', 'screen', 5, old) && !!hearing(r, 'alice', old),
      'bob decodes alice’s new tracks',
      timeoutMs,
    );
    await waitRemote(
      alice,
      (r) => !!decodingVideo(r, 'bob', 'camera', 5, old) && !!hearing(r, 'bob', old),
      'alice decodes bob’s new tracks',
      timeoutMs,
    );
  }

  const room = uniqueName('call');

  test('two browsers publish camera and microphone and each decodes the other', async () => {
    await connect(alice, room, 'alice');
    await connect(bob, room, 'bob');
    for (const b of [alice, bob]) {
      for (const source of ['camera', 'microphone']) {
        const res = await enable(b, source);
        assert.equal(res.ok, true, JSON.stringify(res));
      }
    }
    const t0 = performance.now();
    const atBob = await waitRemote(
      bob,
      (r) => !!decodingVideo(r, 'alice', 'camera', 20) && !!hearing(r, 'alice'),
      'bob decodes alice',
    );
    const atAlice = await waitRemote(
      alice,
      (r) => !!decodingVideo(r, 'bob', 'camera', 20) && !!hearing(r, 'bob'),
      'alice decodes bob',
    );
    console.log(
      `# both decoding 20 frames + 0.5 s of audio ${(performance.now() - t0).toFixed(0)} ms after the last enable`,
    );
    assert.equal(decodingVideo(atBob, 'alice', 'camera', 20)!.kind, 'video');
    assert.ok(decodingVideo(atAlice, 'bob', 'camera', 20)!.width >= 320);
  });

  test('a fake screen share arrives as a screen track', async () => {
    const res = await enable(alice, 'screen');
    assert.equal(res.ok, true, JSON.stringify(res));
    const r = await waitRemote(
      bob,
      (x) => !!decodingVideo(x, 'alice', 'screen', 10),
      'bob decodes the screen',
    );
    assert.equal(decodingVideo(r, 'alice', 'screen', 10)!.width, 1280);
  });

  test('a server-side mute stops the SFU forwarding the track, whatever the publisher does', async () => {
    const token = await s.app.inject({
      method: 'POST',
      url: '/v1/realtime/token',
      headers: { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id },
      payload: {
        roomName: room,
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId: 'moderator', name: 'm' },
      },
    });
    const rid = JSON.parse(
      Buffer.from(token.json().token.split('.')[1], 'base64url').toString(),
    ).rid;
    const mic = (await remote(bob)).find((t) => t.userId === 'alice' && t.source === 'microphone')!;
    const screen = () =>
      remote(bob).then((r) => r.find((t) => t.userId === 'alice' && t.source === 'screen')!);
    const media = s.app.svc.media!;
    const muted = await media.moderateTrack(rid, mic.trackId, true, 'server');
    assert.equal(muted?.track.muted, true);
    const at = (await remote(bob)).find((t) => t.trackId === mic.trackId)!.packets;
    const frames = (await screen()).framesDecoded;
    // While 40 more screen frames (2 s) arrive, the muted microphone's packets stop.
    await waitRemote(
      bob,
      (r) =>
        !!r.find(
          (t) => t.userId === 'alice' && t.source === 'screen' && t.framesDecoded > frames + 40,
        ),
      'screen keeps coming',
    );
    const after = (await remote(bob)).find((t) => t.trackId === mic.trackId)!.packets;
    assert.ok(after - at < 10, `muted microphone still delivered ${after - at} packets`);
    await bob.page.waitForFunction(
      (id) => (window as any).svcm.events.some((e: any) => e.type === 'muted' && e.trackId === id),
      mic.trackId,
    );
    await media.moderateTrack(rid, mic.trackId, false, 'server');
    await waitRemote(
      bob,
      (r) => !!r.find((t) => t.trackId === mic.trackId && t.packets > after + 25),
      'unmuted microphone flows again',
    );
  });

  test('disabling the camera reaches the other side as media.stopped', async () => {
    const cam = (await remote(bob)).find((t) => t.userId === 'alice' && t.source === 'camera')!;
    const res = await disable(alice, 'camera');
    assert.equal(res.ok, true, JSON.stringify(res));
    await bob.page.waitForFunction(
      (id) =>
        (window as any).svcm.events.some((e: any) => e.type === 'stopped' && e.trackId === id),
      cam.trackId,
    );
    const r = await remote(bob);
    assert.equal(
      r.some((t) => t.trackId === cam.trackId),
      false,
    );
  });

  test('a dropped socket resumed within the grace keeps the remote video playing', async () => {
    const before = decodingVideo(await remote(bob), 'alice', 'screen', 1)!;
    const mine = decodingVideo(await remote(alice), 'bob', 'camera', 1)!;
    const statesBefore = await alice.page.evaluate(() => (window as any).svcm.states.length);
    await alice.page.evaluate(() => (window as any).svcm.dropSocket());
    await alice.page.waitForFunction((n) => {
      const st: string[] = (window as any).svcm.states.slice(n);
      return st.includes('RECONNECTING') && st[st.length - 1] === 'CONNECTED';
    }, statesBefore);
    await waitRemote(
      bob,
      (r) =>
        !!r.find(
          (t) => t.trackId === before.trackId && t.framesDecoded > before.framesDecoded + 20,
        ),
      'bob keeps decoding alice',
    );
    await waitRemote(
      alice,
      (r) =>
        !!r.find((t) => t.trackId === mine.trackId && t.framesDecoded > mine.framesDecoded + 20),
      'alice keeps decoding bob',
    );
    const stopped = await bob.page.evaluate(
      () => (window as any).svcm.events.filter((e: any) => e.type === 'stopped').length,
    );
    assert.equal(stopped, 1, 'only the camera that was disabled stopped');
  });

  test('Janus killed mid-call is restarted and both browsers decode again', async () => {
    const old = [...(await remote(alice)), ...(await remote(bob))].map((t) => t.trackId);
    const engine = s.app.svc.media!.engineForTests as unknown as { pid: number };
    const statesBefore = await Promise.all(
      [alice, bob].map((b) => b.page.evaluate(() => (window as any).svcm.states.length as number)),
    );
    const t0 = performance.now();
    process.kill(engine.pid, 'SIGKILL');
    await bothDecodeNew(old, 60_000);
    const ms = performance.now() - t0;
    console.log(
      `# janus restart: both browsers decoding new tracks ${ms.toFixed(0)} ms after SIGKILL`,
    );
    assert.ok(ms < 30_000, `recovered in ${ms} ms`);
    // Each client showed its lost media as RECONNECTING, then CONNECTED once it was back.
    for (const [i, b] of [alice, bob].entries()) {
      const deadline = Date.now() + 10_000;
      let states: string[] = [];
      for (;;) {
        states = (await b.page.evaluate(() => (window as any).svcm.states)).slice(statesBefore[i]);
        if (states.at(-1) === 'CONNECTED') break;
        if (Date.now() > deadline) break;
        await b.page.waitForTimeout(50);
      }
      assert.deepEqual(states, ['RECONNECTING', 'CONNECTED']);
    }
  });

  /** Waits until every client's state since `before` ends CONNECTED; returns those states. */
  async function statesSince(b: TestBrowser, before: number) {
    const deadline = Date.now() + 10_000;
    let states: string[] = [];
    for (;;) {
      states = (await b.page.evaluate(() => (window as any).svcm.states)).slice(before);
      if (states.at(-1) === 'CONNECTED' || Date.now() > deadline) return states;
      await b.page.waitForTimeout(50);
    }
  }
  /**
   * The client showed RECONNECTING while its media was re-established, then CONNECTED. Each
   * hang-up reaches it on its own, so a recovery may end before the next one starts (one or more
   * RECONNECTING → CONNECTED rounds).
   */
  async function recovered(b: TestBrowser, before: number) {
    const states = await statesSince(b, before);
    assert.ok(
      states.length >= 2 &&
        states.every((st, i) => st === (i % 2 === 0 ? 'RECONNECTING' : 'CONNECTED')) &&
        states.length % 2 === 0,
      JSON.stringify(states),
    );
  }
  const stateCount = (b: TestBrowser) =>
    b.page.evaluate(() => (window as any).svcm.states.length as number);

  test('subscriptions whose PeerConnection Janus hangs up are subscribed to again', async () => {
    const hungUp = (await janusPeerHandles(net)).filter((h) => h.type === 'subscriber');
    assert.ok(hungUp.length >= 4, JSON.stringify(hungUp));
    const tracks = [...(await remote(alice)), ...(await remote(bob))].map((t) => t.trackId);
    const before = await Promise.all([alice, bob].map(stateCount));
    for (const h of hungUp) await janusHangup(net, h);
    // New PeerConnections for the same tracks.
    await waitRemote(
      bob,
      (r) =>
        !!decodingConnected(r, 'alice', 'screen') && !!decodingConnected(r, 'alice', 'microphone'),
      'bob decodes alice again',
      20_000,
    );
    await waitRemote(
      alice,
      (r) => !!decodingConnected(r, 'bob', 'camera') && !!decodingConnected(r, 'bob', 'microphone'),
      'alice decodes bob again',
      20_000,
    );
    assert.deepEqual(
      [...(await remote(alice)), ...(await remote(bob))].map((t) => t.trackId).sort(),
      tracks.sort(),
      'the same tracks',
    );
    const now = (await janusPeerHandles(net)).map((h) => h.handleId);
    assert.equal(
      hungUp.some((h) => now.includes(h.handleId)),
      false,
      'the hung-up handles are gone',
    );
    for (const [i, b] of [alice, bob].entries()) {
      await recovered(b, before[i]!);
    }
  });

  test('a publication whose PeerConnection Janus hangs up is published again', async () => {
    const old = [...(await remote(alice)), ...(await remote(bob))].map((t) => t.trackId);
    const camera = (await remote(alice)).find((t) => t.userId === 'bob' && t.source === 'camera')!;
    const handles = await janusPeerHandles(net);
    const before = await stateCount(bob);
    // Janus's admin API names no track ids: every publisher is hung up, and each comes back as
    // a new track.
    for (const h of handles.filter((x) => x.type === 'publisher')) await janusHangup(net, h);
    await bothDecodeNew(old, 20_000);
    const stopped = await alice.page.evaluate(
      (id) =>
        (window as any).svcm.events.find((e: any) => e.type === 'stopped' && e.trackId === id),
      camera.trackId,
    );
    assert.ok(stopped, 'alice saw bob’s old camera stop');
    await recovered(bob, before);
  });

  test('PeerConnections that fail are published and subscribed to again', async () => {
    const old = [...(await remote(alice)), ...(await remote(bob))].map((t) => t.trackId);
    const subscribers = (await janusPeerHandles(net)).filter((h) => h.type === 'subscriber');
    const before = await stateCount(alice);
    await alice.page.evaluate(() => (window as any).svcm.reportFailed());
    // Alice's publications come back as new tracks; her subscriptions to Bob's on new
    // PeerConnections (the failed ones were released: every subscriber handle is new).
    await waitRemote(
      bob,
      (r) => !!decodingVideo(r, 'alice', 'screen', 5, old) && !!hearing(r, 'alice', old),
      'bob decodes alice’s new tracks',
      20_000,
    );
    // Bob's same tracks (he republished nothing).
    await waitRemote(
      alice,
      (r) =>
        ['camera', 'microphone'].every((source) =>
          old.includes(decodingConnected(r, 'bob', source)?.trackId ?? ''),
        ),
      'alice decodes bob again',
      20_000,
    );
    const now = (await janusPeerHandles(net)).filter((h) => h.type === 'subscriber');
    assert.equal(now.length, subscribers.length, JSON.stringify(now));
    assert.equal(
      subscribers.some((h) => now.some((n) => n.handleId === h.handleId)),
      false,
      'no subscription of before is left',
    );
    await recovered(alice, before);
  });

  test('a PeerConnection that keeps failing is given up with media_failed', async () => {
    const before = await stateCount(bob);
    const mine = (await remote(alice)).filter((t) => t.userId === 'bob').map((t) => t.trackId);
    await bob.page.evaluate(() => (window as any).svcm.failEveryPeer(true));
    try {
      // Two publications and two subscriptions, each given up after 5 failures in a row.
      await bob.page.waitForFunction(
        () => (window as any).svcm.errors.filter((c: string) => c === 'media_failed').length >= 4,
        undefined,
        { timeout: 20_000 },
      );
      await recovered(bob, before);
      // Given up means released: alice sees bob's tracks stop and bob subscribes to nothing.
      await alice.page.waitForFunction(
        (ids) =>
          ids.every((id: string) =>
            (window as any).svcm.events.some((e: any) => e.type === 'stopped' && e.trackId === id),
          ),
        mine,
      );
      const subscribers = (await janusPeerHandles(net)).filter((h) => h.type === 'subscriber');
      assert.equal(subscribers.length, 0, JSON.stringify(subscribers));
    } finally {
      await bob.page.evaluate(() => (window as any).svcm.failEveryPeer(false));
    }
  });

  test('leaving frees every Janus handle', async () => {
    for (const b of [alice, bob]) await b.page.evaluate(() => (window as any).svcm.disconnect());
    const deadline = Date.now() + 10_000;
    let n = await janusHandles(net);
    while (n !== 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      n = await janusHandles(net);
    }
    assert.equal(n, 1, 'only the server’s control handle is left');
    assert.deepEqual(s.app.svc.media!.handleIds(), []);
  });

  test('an AUDIO_CONFERENCE refuses video and a LIVE_STREAMING viewer cannot publish', async () => {
    const audioRoom = uniqueName('audio');
    await connect(alice, audioRoom, 'alice', 'AUDIO_CONFERENCE');
    const cam = await enable(alice, 'camera');
    assert.equal(cam.ok, false);
    assert.equal(cam.code, 'media_not_allowed');
    const mic = await enable(alice, 'microphone');
    assert.equal(mic.ok, true, JSON.stringify(mic));
    await alice.page.evaluate(() => (window as any).svcm.disconnect());

    const live = uniqueName('live');
    await connect(alice, live, 'host', 'LIVE_STREAMING', true);
    await connect(bob, live, 'viewer', 'LIVE_STREAMING', false);
    const viewer = await enable(bob, 'microphone');
    assert.equal(viewer.ok, false);
    assert.equal(viewer.code, 'media_not_allowed');
    const host = await enable(alice, 'camera');
    assert.equal(host.ok, true, JSON.stringify(host));
    await waitRemote(
      bob,
      (r) => !!decodingVideo(r, 'host', 'camera', 10),
      'the viewer watches the host',
    );
    for (const b of [alice, bob]) await b.page.evaluate(() => (window as any).svcm.disconnect());
  });
});
