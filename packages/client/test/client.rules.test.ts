import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import { SvcError } from '../src/index.ts';
import { type ListeningServer, roomOptions, startListeningServer, TestClient } from './helpers.ts';

for (const backend of BACKENDS) {
  describe(`client library, join rules and room lifecycle (${backend.name})`, {
    timeout: 60_000,
  }, () => {
    let s: ListeningServer;
    const clients: TestClient[] = [];
    const newClient = (options?: ConstructorParameters<typeof TestClient>[1]) => {
      const c = new TestClient(s, options);
      clients.push(c);
      return c;
    };
    before(async () => {
      s = await startListeningServer(backend);
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.client.disconnect()));
      await s.close();
    });

    test('duplicate identity: the first connection is replaced and does not reconnect', async () => {
      const roomName = uniqueName('dup');
      const watcher = newClient();
      const first = newClient();
      const second = newClient();
      await watcher.connect(roomOptions(roomName, 'watcher'));
      const firstRoom = await first.connect(roomOptions(roomName, 'same'));
      await watcher.waitFor('joined', (e) => e.participant.userId === 'same');
      const secondRoom = await second.connect(roomOptions(roomName, 'same'));

      const gone = await first.waitFor('disconnected');
      assert.equal(gone.reason, 'DUPLICATE_IDENTITY');
      assert.equal(first.client.connectionState.value, 'DISCONNECTED');
      assert.equal(first.client.room, null);
      assert.equal(first.of('reconnecting').length, 0);
      assert.equal(first.sockets.length, 1);

      const left = await watcher.waitFor(
        'left',
        (e) => e.participant.sid === firstRoom.localParticipant.sid,
      );
      assert.equal(left.reason, 'DUPLICATE_IDENTITY');
      await watcher.waitFor('joined', (e) => e.participant.sid === secondRoom.localParticipant.sid);
      assert.notEqual(secondRoom.localParticipant.sid, firstRoom.localParticipant.sid);
      assert.deepEqual(secondRoom.participants.map((p) => p.userId).sort(), ['same', 'watcher']);
      assert.equal(second.client.connectionState.value, 'CONNECTED');
    });

    test('maxParticipants: the next one is refused with room_full', async () => {
      const roomName = uniqueName('full');
      await newClient().client.createRoom({ roomName, liveType: 'VIDEO_CALL', maxParticipants: 2 });
      await newClient().connect(roomOptions(roomName, 'one'));
      await newClient().connect(roomOptions(roomName, 'two'));
      const third = newClient();
      const err = await third.connect(roomOptions(roomName, 'three')).catch((e: unknown) => e);
      assert.ok(err instanceof SvcError, String(err));
      assert.equal(err.code, 'room_full');
      assert.equal(err.status, 403);
      assert.equal(third.client.connectionState.value, 'FAILED');
      assert.equal(third.client.lastError, err);
      assert.equal(third.client.room, null);
      assert.deepEqual(third.states(), ['DISCONNECTED', 'CONNECTING', 'FAILED']);
      assert.equal(third.of('connected').length, 0);
      assert.equal(third.of('disconnected').length, 0, 'a refused connect is not a disconnection');
    });

    test('waiting for a host: admitted when the host connects', async () => {
      const roomName = uniqueName('host');
      const guest = newClient();
      const host = newClient();
      const pending = guest.connect(roomOptions(roomName, 'guest', { canJoinWithNoHost: false }));
      await guest.waitFor('waiting');
      assert.equal(guest.client.connectionState.value, 'CONNECTING');
      assert.equal(guest.client.room, null);
      assert.deepEqual(await guest.client.getParticipants(roomName), [], 'waiting is not joined');

      const hostRoom = await host.connect(roomOptions(roomName, 'host', { isHost: true }));
      assert.equal(hostRoom.localParticipant.isHost, true);
      const guestRoom = await pending;
      assert.equal(guest.client.connectionState.value, 'CONNECTED');
      assert.deepEqual(guestRoom.participants.map((p) => [p.userId, p.isHost]).sort(), [
        ['guest', false],
        ['host', true],
      ]);
      await host.waitFor('joined', (e) => e.participant.userId === 'guest');
    });

    test('disconnect() while waiting rejects connect() with client_disconnected', async () => {
      const roomName = uniqueName('hostless');
      const guest = newClient();
      const pending = guest.connect(roomOptions(roomName, 'guest', { canJoinWithNoHost: false }));
      await guest.waitFor('waiting');
      await guest.client.disconnect();
      const err = await pending.catch((e: unknown) => e);
      assert.ok(err instanceof SvcError);
      assert.equal(err.code, 'client_disconnected');
      assert.equal(guest.client.connectionState.value, 'DISCONNECTED');
    });

    test('a host changes the room metadata; everyone sees it; a guest may not', async () => {
      const roomName = uniqueName('meta');
      const host = newClient();
      const guest = newClient();
      await host.connect(roomOptions(roomName, 'host', { isHost: true, roomMetadata: 'v1' }));
      const guestRoom = await guest.connect(roomOptions(roomName, 'guest'));
      assert.equal(guestRoom.info.metadata, 'v1');
      const refused = await guestRoom.updateMetadata('nope').catch((e: unknown) => e);
      assert.ok(refused instanceof SvcError);
      assert.equal(refused.code, 'host_required');
      await host.client.room!.updateMetadata('v2');
      for (const c of [host, guest]) {
        await c.waitFor('metadata', (e) => e.metadata === 'v2');
        assert.equal(c.client.room!.info.metadata, 'v2');
      }
      assert.equal(guest.of('metadata').length, 1);
    });

    test('after a refused connect, disconnect() moves FAILED to DISCONNECTED', async () => {
      // The key with its last character changed (a key ending in x stays valid with an x).
      const key = s.project.clientKey;
      const c = newClient({ apiKey: `${key.slice(0, -1)}${key.endsWith('x') ? 'y' : 'x'}` });
      await c.connect(roomOptions(uniqueName('failed'), 'u')).catch(() => {});
      assert.equal(c.client.connectionState.value, 'FAILED');
      await c.client.disconnect();
      assert.equal(c.client.connectionState.value, 'DISCONNECTED');
    });

    test('DELETE disconnects everyone with ROOM_DELETED', async () => {
      const roomName = uniqueName('delete');
      const a = newClient();
      const b = newClient();
      await a.connect(roomOptions(roomName, 'a'));
      await b.connect(roomOptions(roomName, 'b'));
      await newClient({ apiKey: s.project.serverKey }).client.deleteRoom(roomName);
      for (const c of [a, b]) {
        const gone = await c.waitFor('disconnected');
        assert.equal(gone.reason, 'ROOM_DELETED');
        assert.equal(c.client.connectionState.value, 'DISCONNECTED');
        assert.equal(c.client.room, null);
        assert.equal(c.of('reconnecting').length, 0);
      }
      assert.equal((await a.client.getRoom(roomName)).status, 'ENDED');
    });

    test('a client that connects again leaves its previous room first', async () => {
      const first = uniqueName('first');
      const second = uniqueName('second');
      const watcher = newClient();
      const mover = newClient();
      await watcher.connect(roomOptions(first, 'watcher'));
      await mover.connect(roomOptions(first, 'mover'));
      await watcher.waitFor('joined', (e) => e.participant.userId === 'mover');
      const room = await mover.connect(roomOptions(second, 'mover'));
      assert.equal(room.name, second);
      const left = await watcher.waitFor('left', (e) => e.participant.userId === 'mover');
      assert.equal(left.reason, 'LEFT');
      assert.deepEqual(
        mover.of('disconnected').map((e) => e.reason),
        ['CLIENT_DISCONNECT'],
      );
    });
  });
}
