import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MemoryRoomStore, type StoredRoomEvent } from '../../src/realtime/room-store.ts';
import { RedisRoomStore } from '../../src/realtime/room-store-redis.ts';
import { SignalingHub } from '../../src/realtime/signaling.ts';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, type RtClient, startRealtimeServer } from './rt-helpers.ts';

type Follow = (rid: string, h: (e: StoredRoomEvent) => void) => Promise<() => Promise<void>>;

for (const backend of BACKENDS) {
  describe(`realtime socket closed during setup (${backend.name})`, () => {
    let s: RealtimeServer;
    const open: RtClient[] = [];
    const protos = [MemoryRoomStore.prototype, RedisRoomStore.prototype] as { follow: Follow }[];
    const originals = protos.map((p) => p.follow);
    const hub = SignalingHub.prototype as unknown as { onClose: (...a: unknown[]) => unknown };
    const originalOnClose = hub.onClose;
    before(async () => {
      s = await startRealtimeServer(backend);
    });
    after(async () => {
      protos.forEach((p, i) => {
        p.follow = originals[i]!;
      });
      hub.onClose = originalOnClose;
      for (const c of open) c.ws.terminate();
      await s.close();
    });

    test('a socket that closes while its room subscription is being made leaves it', async () => {
      // The room subscription of the first socket waits for the test; each follow is counted.
      let follows = 0;
      let release!: () => void;
      const gate = new Promise<void>((r) => {
        release = r;
      });
      let following!: () => void;
      const followStarted = new Promise<void>((r) => {
        following = r;
      });
      protos.forEach((p, i) => {
        p.follow = async function (this: unknown, rid, h) {
          follows += 1;
          if (follows === 1) {
            following();
            await gate;
          }
          return originals[i]!.call(this, rid, h);
        };
      });
      let closedOnServer!: () => void;
      const serverClosed = new Promise<void>((r) => {
        closedOnServer = r;
      });
      hub.onClose = function (this: unknown, ...args: unknown[]) {
        closedOnServer();
        return originalOnClose.apply(this, args);
      };

      const first = await s.connect('setup-close', 'first');
      open.push(first);
      await followStarted;
      first.ws.terminate();
      await serverClosed;
      release();
      // The next socket for the room finds no follower left over: it subscribes afresh.
      const second = await s.connect('setup-close', 'second');
      open.push(second);
      await second.join();
      assert.equal(follows, 2, 'the closed socket kept its room followed');
      assert.equal((await second.request('message.send', { message: 'hi' })).type, 'ack');
      await second.waitType('message.received');
    });
  });
}
