import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import {
  logTails,
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from '../../server/test/media/media-harness.ts';
import { type ListeningServer, roomOptions, startListeningServer, TestClient } from './helpers.ts';
import {
  browserTestsPossible,
  bundlePage,
  openBrowser,
  type TestBrowser,
} from './media-browser.ts';

// A host (@svc/client in Node) mutes a participant whose browser keeps sending: the SFU stops
// forwarding the microphone to the other browser while the participant's screen keeps coming.
const skip = mediaTestsPossible() ?? browserTestsPossible();

interface Remote {
  trackId: string;
  userId: string;
  source: string;
  framesDecoded: number;
  packets: number;
}

describe('room controller mute in real browsers', { skip: skip ?? false, timeout: 240_000 }, () => {
  let net: MediaNetwork;
  let s: ListeningServer;
  const browsers: TestBrowser[] = [];
  let host: TestClient | null = null;

  before(async () => {
    net = mediaNetwork('cbr', 24);
    const bundle = await bundlePage();
    s = await startListeningServer(BACKENDS[0]!, { ...mediaEnv(net) });
    await s.app.svc.media!.ready(10_000);
    browsers.push(await openBrowser(s.baseUrl, bundle), await openBrowser(s.baseUrl, bundle));
  });
  after(async () => {
    await host?.client.disconnect();
    for (const b of browsers) await b.close();
    await s?.close();
    net?.down();
  });

  const remote = (b: TestBrowser): Promise<Remote[]> =>
    b.page.evaluate(() => (window as any).svcm.remote());
  async function waitRemote(b: TestBrowser, want: (r: Remote[]) => boolean, what: string) {
    const deadline = Date.now() + 60_000;
    let last: Remote[] = [];
    while (Date.now() < deadline) {
      last = await remote(b);
      if (want(last)) return last;
      await b.page.waitForTimeout(100);
    }
    throw new Error(`${what}: ${JSON.stringify(last)}\n${logTails(net)}`);
  }

  test('muteParticipant silences a browser that ignores the mute', async () => {
    const [alice, bob] = browsers as [TestBrowser, TestBrowser];
    const room = uniqueName('ctlmute');
    const config = { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl };
    for (const [b, userId] of [
      [alice, 'alice'],
      [bob, 'bob'],
    ] as const) {
      const res = await b.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
        config,
        roomOptions(room, userId),
      ] as const);
      assert.equal(res.ok, true, JSON.stringify(res));
    }
    for (const source of ['microphone', 'screen']) {
      const res = await alice.page.evaluate((src) => (window as any).svcm.enable(src), source);
      assert.equal(res.ok, true, JSON.stringify(res));
    }
    const flowing = await waitRemote(
      bob,
      (r) =>
        r.some((t) => t.source === 'microphone' && t.packets > 50) &&
        r.some((t) => t.source === 'screen' && t.framesDecoded > 5),
      'bob receives alice',
    );
    const mic = flowing.find((t) => t.source === 'microphone')!;

    host = new TestClient(s, { apiKey: s.project.serverKey, autoSubscribe: false });
    await host.connect(roomOptions(room, 'h', { isHost: true }));
    await host.client.controller.muteParticipant('alice');

    // Alice's page knows nothing of the controller and keeps sending; Janus drops her audio. The
    // ack comes once Janus moderated the track, but packets it had already relayed may still
    // reach bob's stats (a busy machine delays the browser's receive thread): wait until they end.
    const micPackets = async () =>
      (await remote(bob)).find((t) => t.trackId === mic.trackId)!.packets;
    let at = await micPackets();
    const deadline = Date.now() + 20_000;
    for (let still = 0; still < 3; ) {
      assert.ok(Date.now() < deadline, `the muted microphone kept delivering (${at} packets)`);
      await bob.page.waitForTimeout(100);
      const now = await micPackets();
      still = now === at ? still + 1 : 0;
      at = now;
    }
    const frames = (await remote(bob)).find((t) => t.source === 'screen')!.framesDecoded;
    await waitRemote(
      bob,
      (r) => r.some((t) => t.source === 'screen' && t.framesDecoded > frames + 40),
      'screen keeps coming',
    );
    const later = await micPackets();
    assert.ok(later - at < 10, `muted microphone still delivered ${later - at} packets`);
    assert.equal(host.client.controller.isMicrophoneMuted('alice'), true);
  });
});
