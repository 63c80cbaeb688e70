import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import { SvcClient, SvcError } from '../src/index.ts';
import { type ListeningServer, startListeningServer } from './helpers.ts';

// @svc/client's media calls where there is no WebRTC (Node) and on a server without media.
describe('client media without WebRTC or a media engine', () => {
  let s: ListeningServer;
  before(async () => {
    s = await startListeningServer(BACKENDS[0]!);
  });
  after(() => s.close());

  test('media calls reject with typed errors and the room shows no tracks', async () => {
    const client = new SvcClient({
      projectId: s.project.id,
      apiKey: s.project.clientKey,
      baseUrl: s.baseUrl,
    });
    await assert.rejects(client.enableCamera(), (e: SvcError) => e.code === 'not_connected');
    const room = await client.connect({
      roomName: uniqueName('nomedia'),
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId: 'u', name: 'u' },
    });
    assert.deepEqual(room.tracks, []);
    assert.deepEqual(room.localTracks, []);
    assert.deepEqual(room.remoteTracks, []);
    for (const call of [
      () => client.enableCamera(),
      () => client.enableMicrophone(),
      () => client.enableScreenShare(),
    ]) {
      await assert.rejects(
        call(),
        (e: unknown) => e instanceof SvcError && e.code === 'media_not_supported',
      );
    }
    // Turning off what is not on is a no-op.
    await client.disableCamera();
    await client.disableMicrophone();
    await client.disableScreenShare();
    await assert.rejects(client.subscribe('TR_x'), (e: SvcError) => e.code === 'track_not_found');
    await client.disconnect();
  });
});
