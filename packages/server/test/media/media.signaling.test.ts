import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../helpers.ts';
import { type RealtimeServer, startRealtimeServer } from '../realtime/rt-helpers.ts';
import {
  fakeOffer,
  janusHandles,
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from './media-harness.ts';

const skip = mediaTestsPossible();

/** Waits until `read()` gives `want` (an external process's state: Janus's handle count). */
async function until<T>(read: () => Promise<T>, want: T, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = await read();
  while (last !== want) {
    if (Date.now() > deadline) throw new Error(`still ${String(last)}, wanted ${String(want)}`);
    await new Promise((r) => setTimeout(r, 50));
    last = await read();
  }
  return last;
}

describe('media without a media engine', () => {
  let s: RealtimeServer;
  before(async () => {
    s = await startRealtimeServer(BACKENDS[0]!, {
      env: { SVC_MEDIA: 'auto', PATH: '/nonexistent' },
    });
  });
  after(() => s.close());

  test('the server starts, says media is off once, and media requests get media_unavailable', async () => {
    const ready = await s.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.equal(ready.json().media.state, 'off');
    assert.match(ready.json().media.detail, /apt-get install janus/);
    assert.equal(s.logs.text.match(/media: off/g)?.length, 1);
    const room = uniqueName('off');
    const a = await s.connect(room, 'alice');
    await a.join();
    assert.equal(a.snapshot.media.available, false);
    const res = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
    assert.equal(res.code, 'media_unavailable');
    a.close();
  });
});

for (const backend of BACKENDS) {
  describe(`media signaling on Janus (${backend.name})`, { skip: skip ?? false }, () => {
    let net: MediaNetwork;
    let s: RealtimeServer;
    before(async () => {
      net = mediaNetwork(
        `sg${backend.db === 'sqlite' ? 's' : 'p'}`,
        backend.db === 'sqlite' ? 11 : 12,
      );
      s = await startRealtimeServer(backend, {
        env: mediaEnv(net, {
          SVC_TURN_URLS: 'turn:10.77.11.1:3478',
          SVC_TURN_SECRET: 'turnsecret',
        }),
      });
      await s.app.svc.media!.ready(10_000);
    });
    after(async () => {
      await s?.close();
      net?.down();
    });

    async function pair(liveType = 'VIDEO_CONFERENCE', aExtra = {}, bExtra = {}) {
      const room = uniqueName('md');
      const a = await s.connect(room, 'alice', { liveType, ...aExtra });
      await a.join();
      const b = await s.connect(room, 'bob', { liveType, ...bExtra });
      await b.join();
      return { room, a, b };
    }

    test('publish, subscribe, mute, late joiner snapshot, unpublish; handles back to the control one', async () => {
      const { room, a, b } = await pair();
      assert.equal(a.snapshot.media.available, true);
      assert.deepEqual(a.snapshot.media.permissions.canPublishSources, [
        'camera',
        'microphone',
        'screen',
      ]);
      const turn = a.snapshot.media.iceServers.find((x: any) => x.username);
      assert.match(turn.username, /^\d+:alice$/);
      assert.ok(turn.credential.length > 20);

      const pub = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
      assert.equal(pub.type, 'ack', JSON.stringify(pub));
      assert.match(pub.data.trackId, /^TR_/);
      assert.match(pub.data.sdp, /^v=0/);
      assert.match(pub.data.sdp, /m=video/);
      const started = await b.waitType('media.started');
      assert.deepEqual(
        { ...started.data.track },
        {
          trackId: pub.data.trackId,
          sid: a.snapshot.self.sid,
          userId: 'alice',
          kind: 'video',
          source: 'camera',
          muted: false,
        },
      );

      // A fake offer never brings media up, so Janus never offers its feed: the subscription
      // waits SVC_MEDIA_SUBSCRIBE_WAIT_MS and fails with media_failed, leaving no handle behind.
      // (Real subscriptions: the browser tests.)
      const sub = await b.request('media.subscribe', { trackId: pub.data.trackId });
      assert.equal(sub.code, 'media_failed', JSON.stringify(sub));
      // control handle + publisher
      assert.equal(await janusHandles(net), 2);
      assert.equal(s.app.svc.media!.handleIds().length, 1);

      const mute = await a.request('media.mute', { trackId: pub.data.trackId, muted: true });
      assert.equal(mute.type, 'ack');
      const muted = await b.waitType('media.muted');
      assert.equal(muted.data.track.muted, true);
      assert.equal(muted.data.by, a.snapshot.self.sid);

      const c = await s.connect(room, 'carol');
      await c.join();
      assert.equal(c.snapshot.media.tracks.length, 1);
      assert.equal(c.snapshot.media.tracks[0].trackId, pub.data.trackId);
      assert.equal(c.snapshot.media.tracks[0].muted, true);

      const un = await a.request('media.unpublish', { trackId: pub.data.trackId });
      assert.equal(un.type, 'ack');
      const stopped = await c.waitType('media.stopped');
      assert.equal(stopped.data.reason, 'UNPUBLISHED');
      await until(() => janusHandles(net), 1);
      assert.equal(s.app.svc.media!.handleIds().length, 0);
      for (const x of [a, b, c]) await x.close();
    });

    test('what may be published follows liveType and the token', async () => {
      const audio = await pair('AUDIO_CONFERENCE');
      assert.deepEqual(audio.a.snapshot.media.permissions.canPublishSources, ['microphone']);
      const cam = await audio.a.request('media.publish', {
        source: 'camera',
        sdp: fakeOffer('video'),
      });
      assert.equal(cam.code, 'media_not_allowed');
      const scr = await audio.a.request('media.publish', {
        source: 'screen',
        sdp: fakeOffer('video'),
      });
      assert.equal(scr.code, 'media_not_allowed');
      const mic = await audio.a.request('media.publish', {
        source: 'microphone',
        sdp: fakeOffer('audio'),
      });
      assert.equal(mic.type, 'ack', JSON.stringify(mic));

      const live = await pair('LIVE_STREAMING', { participant: { isHost: true } });
      const viewer = await live.b.request('media.publish', {
        source: 'microphone',
        sdp: fakeOffer('audio'),
      });
      assert.equal(viewer.code, 'media_not_allowed');
      assert.deepEqual(live.b.snapshot.media.permissions.canPublishSources, []);
      const host = await live.a.request('media.publish', {
        source: 'camera',
        sdp: fakeOffer('video'),
      });
      assert.equal(host.type, 'ack', JSON.stringify(host));

      const narrowed = await pair(
        'VIDEO_CONFERENCE',
        { canPublish: false },
        { canSubscribe: false },
      );
      const np = await narrowed.a.request('media.publish', {
        source: 'microphone',
        sdp: fakeOffer('audio'),
      });
      assert.equal(np.code, 'media_not_allowed');
      const bp = await narrowed.b.request('media.publish', {
        source: 'microphone',
        sdp: fakeOffer('audio'),
      });
      assert.equal(bp.type, 'ack');
      const as = await narrowed.a.request('media.subscribe', { trackId: bp.data.trackId });
      assert.equal(
        as.code,
        'media_failed',
        'canPublish false still may subscribe (the fake feed fails in Janus)',
      );
      const cSub = await s.connect(narrowed.room, 'carol', { canSubscribe: false });
      await cSub.join();
      const refused = await cSub.request('media.subscribe', { trackId: bp.data.trackId });
      assert.equal(refused.code, 'media_not_allowed');
      for (const x of [audio.a, audio.b, live.a, live.b, narrowed.a, narrowed.b, cSub])
        await x.close();
    });

    test('bad input gets its code and changes nothing', async () => {
      const { room, a, b } = await pair();
      const pub = await a.request('media.publish', {
        source: 'microphone',
        sdp: fakeOffer('audio'),
      });
      assert.equal(pub.type, 'ack');
      await b.waitType('media.started');
      const handlesBefore = await janusHandles(net);
      const seqBefore = b.lastSeq;
      const cases: [string, unknown, string][] = [
        ['media.publish', { source: 'camera', sdp: fakeOffer('video', 1) }, 'media_invalid_sdp'],
        ['media.publish', { source: 'camera', sdp: fakeOffer('audio') }, 'media_invalid_sdp'],
        [
          'media.publish',
          { source: 'microphone', sdp: 'hello world, not an SDP' },
          'media_invalid_sdp',
        ],
        [
          'media.publish',
          { source: 'microphone', sdp: fakeOffer('audio').replace('s=-', 's=\u0001') },
          'media_invalid_sdp',
        ],
        [
          'media.publish',
          { source: 'microphone', sdp: fakeOffer('audio').replace(/a=fingerprint:.*\r\n/, '') },
          'media_invalid_sdp',
        ],
        [
          'media.publish',
          { source: 'microphone', sdp: `v=0\r\n${'a=x\r\n'.repeat(9000)}` },
          'invalid_request',
        ],
        ['media.publish', { source: 'webcam', sdp: fakeOffer('video') }, 'invalid_request'],
        ['media.publish', { source: 'camera' }, 'invalid_request'],
        ['media.subscribe', { trackId: 'TR_unknown' }, 'track_not_found'],
        ['media.subscribe', { trackId: 42 }, 'invalid_request'],
        ['media.unpublish', { trackId: pub.data.trackId }, 'track_not_found'],
        ['media.mute', { trackId: pub.data.trackId, muted: true }, 'track_not_found'],
        ['media.trickle', { id: pub.data.trackId, candidate: null }, 'subscription_not_found'],
        [
          'media.answer',
          { subscriptionId: 'SU_nope', sdp: fakeOffer('audio') },
          'subscription_not_found',
        ],
        ['media.unsubscribe', { subscriptionId: 'SU_nope' }, 'subscription_not_found'],
        [
          'media.trickle',
          { id: 'x', candidate: { candidate: 'x'.repeat(2000) } },
          'invalid_request',
        ],
      ];
      for (const [type, data, code] of cases) {
        const res = await b.request(type, data);
        assert.equal(res.type, 'error', `${type} ${JSON.stringify(data).slice(0, 80)}`);
        assert.equal(
          res.code,
          code,
          `${type} ${JSON.stringify(data).slice(0, 80)}: ${res.message}`,
        );
      }
      // Subscribing to one's own track.
      const own = await a.request('media.subscribe', { trackId: pub.data.trackId });
      assert.equal(own.code, 'media_not_allowed');
      // Nothing changed: no room event, same handles, the track as it was.
      const ping = await b.request('ping');
      assert.equal(ping.type, 'pong');
      assert.equal(b.lastSeq, seqBefore);
      assert.equal(await janusHandles(net), handlesBefore);
      const c = await s.connect(room, 'carol');
      await c.join();
      assert.deepEqual(
        c.snapshot.media.tracks.map((t: any) => [t.trackId, t.muted]),
        [[pub.data.trackId, false]],
      );
      for (const x of [a, b, c]) await x.close();
    });

    test('leaving stops the tracks before participant.left; DELETE frees every handle', async () => {
      const { room, a, b } = await pair();
      const p1 = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
      const p2 = await b.request('media.publish', {
        source: 'microphone',
        sdp: fakeOffer('audio'),
      });
      await b.waitType('media.started', (f) => f.data.track.trackId === p1.data.trackId);
      assert.equal(await janusHandles(net), 3);
      await a.request('session.leave');
      const stopped = await b.waitType('media.stopped');
      const left = await b.waitType('participant.left');
      assert.equal(stopped.data.reason, 'LEFT');
      assert.ok(stopped.seq < left.seq);
      await until(() => janusHandles(net), 2);
      const del = await s.api('DELETE', `/realtime/rooms/${room}`);
      assert.equal(del.status, 204);
      await until(() => janusHandles(net), 1);
      assert.equal(s.app.svc.media!.handleIds().length, 0);
      assert.ok(p2.data.trackId);
      await b.closed;
    });

    test('a session replaced by the same user stops its tracks and frees their handles', async () => {
      const { a, b } = await pair();
      const p = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
      assert.equal(p.type, 'ack');
      await b.waitType('media.started');
      const a2 = await s.connect(a.snapshot.room.roomName, 'alice');
      await a2.join();
      const stopped = await b.waitType('media.stopped');
      const left = await b.waitType('participant.left');
      assert.equal(stopped.data.track.trackId, p.data.trackId);
      assert.equal(stopped.data.reason, 'LEFT');
      assert.equal(left.data.reason, 'DUPLICATE_IDENTITY');
      assert.ok(stopped.seq < left.seq);
      assert.deepEqual(a2.snapshot.media.tracks, []);
      await until(() => janusHandles(net), 1);
      for (const x of [a2, b]) await x.close();
    });

    test('a dropped socket keeps its media through the departure grace', async () => {
      const { a, b } = await pair();
      const p = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
      await b.waitType('media.started');
      const handles = await janusHandles(net);
      await a.drop();
      // Resume within the grace period: the track is still there, nobody saw media.stopped.
      const again = await s.connect(a.snapshot.room.roomName, 'alice');
      const res = await again.request('session.resume', {
        sessionId: a.snapshot.sessionId,
        resumeToken: a.snapshot.resumeToken,
        lastSeq: a.lastSeq,
      });
      assert.equal(res.type, 'ack', JSON.stringify(res));
      assert.equal(await janusHandles(net), handles);
      assert.equal(b.events('media.stopped').length, 0);
      const mute = await again.request('media.mute', { trackId: p.data.trackId, muted: true });
      assert.equal(mute.type, 'ack', 'the resumed session still owns its track');
      for (const x of [again, b]) await x.close();
    });

    test('Janus killed mid-call is restarted; tracks stop with ENGINE_RESTARTED and publishing works again', async () => {
      const { a, b } = await pair();
      const p = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
      assert.equal(p.type, 'ack');
      await b.waitType('media.started');
      const engine = s.app.svc.media!.engineForTests as any;
      const pid = engine.pid as number;
      const t0 = performance.now();
      process.kill(pid, 'SIGKILL');
      const stopped = await b.waitType('media.stopped');
      assert.equal(stopped.data.reason, 'ENGINE_RESTARTED');
      await s.app.svc.media!.ready(10_000);
      const restartMs = performance.now() - t0;
      assert.notEqual(engine.pid, pid);
      const again = await a.request('media.publish', { source: 'camera', sdp: fakeOffer('video') });
      assert.equal(again.type, 'ack', JSON.stringify(again));
      const ready = await s.app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(ready.json().media.state, 'up');
      assert.equal(ready.json().media.restarts, 1);
      console.log(`# janus restart: engine up again ${restartMs.toFixed(0)} ms after SIGKILL`);
      for (const x of [a, b]) await x.close();
    });
  });
}
