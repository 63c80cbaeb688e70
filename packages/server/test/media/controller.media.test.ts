import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../helpers.ts';
import { type RealtimeServer, startRealtimeServer } from '../realtime/rt-helpers.ts';
import {
  fakeOffer,
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from './media-harness.ts';

const skip = mediaTestsPossible();

describe('room controller mutes in the SFU (Janus)', { skip: skip ?? false }, () => {
  let net: MediaNetwork;
  let s: RealtimeServer;
  before(async () => {
    net = mediaNetwork('ctl', 31);
    s = await startRealtimeServer(BACKENDS[0]!, { env: mediaEnv(net) });
    await s.app.svc.media!.ready(10_000);
  });
  after(async () => {
    await s?.close();
    net?.down();
  });

  test('muteParticipant and muteAll moderate the audio track in Janus; an allowed self-unmute lifts it', async () => {
    const room = uniqueName('ctlmedia');
    const host = await s.connect(room, 'h', { participant: { isHost: true } });
    await host.join();
    const p = await s.connect(room, 'p');
    await p.join();
    const pub = await p.request('media.publish', { source: 'microphone', sdp: fakeOffer('audio') });
    assert.equal(pub.type, 'ack', JSON.stringify(pub));
    await host.waitType('media.started');

    // A participant may not moderate; the host may, and the SFU applies it before the event.
    const denied = await p.request('media.mute_participant', { userId: 'h' });
    assert.equal(denied.code, 'cohost_required');
    const mute = await host.request('media.mute_participant', { userId: 'p' });
    assert.equal(mute.type, 'ack');
    const muted = await host.waitType('media.muted', (f) => f.data.by === host.snapshot.self.sid);
    assert.equal(muted.data.track.trackId, pub.data.trackId);
    assert.equal(muted.data.track.muted, true);

    // The participant unmutes itself (allowed: mute_participant leaves self-unmute open).
    const unmute = await p.request('media.update_self', { microphoneMuted: false });
    assert.equal(unmute.type, 'ack');
    const lifted = await host.waitType(
      'media.muted',
      (f) => f.data.by === p.snapshot.self.sid && f.data.track.muted === false,
    );
    assert.equal(lifted.data.track.trackId, pub.data.trackId);

    // Mute all without self-unmute: moderated again, and the participant's unmute is refused.
    const after = host.frames.length;
    const all = await host.request('media.mute_all', { allowSelfUnmute: false });
    assert.equal(all.type, 'ack');
    await host.waitType(
      'media.muted',
      (f) => f.data.by === host.snapshot.self.sid && f.data.track.muted === true,
      after,
    );
    const refused = await p.request('media.update_self', { microphoneMuted: false });
    assert.equal(refused.code, 'self_unmute_not_allowed');

    // Publishing the microphone again does not get around the mute: the new track starts muted.
    const unpub = await p.request('media.unpublish', { trackId: pub.data.trackId });
    assert.equal(unpub.type, 'ack');
    const mark = host.frames.length;
    const again = await p.request('media.publish', {
      source: 'microphone',
      sdp: fakeOffer('audio'),
    });
    assert.equal(again.type, 'ack', JSON.stringify(again));
    const started = await host.waitType(
      'media.started',
      (f) => f.data.track.trackId === again.data.trackId,
      mark,
    );
    assert.equal(started.data.track.muted, true);
  });
});
