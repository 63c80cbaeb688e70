import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import { SvcClient, SvcConnectionState, SvcError } from '../src/index.ts';
import { type ListeningServer, roomOptions, startListeningServer, TestClient } from './helpers.ts';

for (const backend of BACKENDS) {
  describe(`client library, happy paths (${backend.name})`, { timeout: 60_000 }, () => {
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

    test('REST: create, get, list (server key), participants, token, delete', async () => {
      const roomName = uniqueName('rest');
      const app = newClient().client;
      const backendClient = newClient({ apiKey: s.project.serverKey }).client;

      const created = await app.createRoom({
        roomName,
        liveType: 'AUDIO_CONFERENCE',
        maxParticipants: 7,
        metadata: '{"topic":"x"}',
      });
      assert.equal(created.roomName, roomName);
      assert.equal(created.status, 'IDLE');
      assert.equal(created.maxParticipants, 7);
      assert.equal(created.metadata, '{"topic":"x"}');

      const again = await app.createRoom({ roomName, liveType: 'AUDIO_CONFERENCE' }).then(
        () => assert.fail('a second create must be refused'),
        (err: unknown) => err,
      );
      assert.ok(again instanceof SvcError);
      assert.equal(again.code, 'room_exists');
      assert.equal(again.status, 409);
      assert.match(again.requestId ?? '', /.+/);

      assert.deepEqual(await app.getRoom(roomName), created);
      assert.deepEqual(await app.getParticipants(roomName), []);

      const listed = await backendClient.listRooms({ status: 'IDLE', limit: 100 });
      assert.ok(listed.items.some((r) => r.roomName === roomName));
      assert.ok(listed.meta.total >= 1);
      const refused = await app.listRooms().catch((err: SvcError) => err);
      assert.ok(refused instanceof SvcError);
      assert.equal(refused.code, 'server_key_required');
      assert.equal(refused.status, 403);

      const token = await app.getToken(roomOptions(roomName, 'alice'));
      assert.equal(token.roomName, roomName);
      assert.equal(token.userId, 'alice');
      assert.ok(token.wsUrl.startsWith(`ws://127.0.0.1:${new URL(s.baseUrl).port}/`));
      assert.ok(Date.parse(token.expiresAt) > Date.now());

      await app.deleteRoom(roomName);
      const gone = await app.getRoom(roomName);
      assert.equal(gone.status, 'ENDED');
      const missing = await app.getRoom(uniqueName('none')).catch((err: SvcError) => err);
      assert.ok(missing instanceof SvcError);
      assert.equal(missing.code, 'room_not_found');
      assert.equal(missing.status, 404);
    });

    test('X-Bundle-Id is sent when configured', async () => {
      const key = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        scopes: ['realtime'],
        allowedBundleIds: ['com.example.app'],
      });
      const withBundle = newClient({ apiKey: key.key, bundleId: 'com.example.app' }).client;
      const roomName = uniqueName('bundle');
      const room = await withBundle.createRoom({ roomName, liveType: 'VIDEO_CALL' });
      assert.equal(room.roomName, roomName);
      const without = newClient({ apiKey: key.key }).client;
      const err = await without.getRoom(roomName).catch((e: SvcError) => e);
      assert.ok(err instanceof SvcError);
      assert.equal(err.code, 'bundle_id_not_allowed');
    });

    test('baseUrl may name /v1 or not; a bad baseUrl is refused at construction', async () => {
      const config = { projectId: s.project.id, apiKey: s.project.clientKey };
      const roomName = uniqueName('base');
      await new SvcClient({ ...config, baseUrl: `${s.baseUrl}/v1/` }).createRoom({
        roomName,
        liveType: 'VIDEO_CALL',
      });
      assert.equal(
        (await new SvcClient({ ...config, baseUrl: s.baseUrl }).getRoom(roomName)).roomName,
        roomName,
      );
      assert.throws(() => new SvcClient({ ...config, baseUrl: 'not a url' }), TypeError);
    });

    test('two users join and see each other; leaving is seen with reason LEFT', async () => {
      const roomName = uniqueName('pair');
      const alice = newClient();
      const bob = newClient();
      const aliceRoom = await alice.connect(roomOptions(roomName, 'alice'));
      assert.equal(alice.client.connectionState.value, SvcConnectionState.CONNECTED);
      assert.deepEqual(alice.states(), ['DISCONNECTED', 'CONNECTING', 'CONNECTED']);
      assert.equal(alice.of('connected').length, 1);
      assert.equal(aliceRoom.localParticipant.userId, 'alice');
      assert.equal(aliceRoom.info.status, 'ACTIVE');

      const bobRoom = await bob.connect(roomOptions(roomName, 'bob'));
      assert.deepEqual(
        bobRoom.participants.map((p) => p.userId),
        ['alice', 'bob'],
      );
      assert.deepEqual(
        bobRoom.remoteParticipants.map((p) => p.userId),
        ['alice'],
      );
      const seen = await alice.waitFor('joined', (e) => e.participant.userId === 'bob');
      assert.equal(seen.participant.sid, bobRoom.localParticipant.sid);
      assert.equal(seen.participant.name, 'User bob');
      assert.deepEqual(
        aliceRoom.participants.map((p) => p.userId),
        ['alice', 'bob'],
      );
      assert.equal(alice.client.room, aliceRoom);
      assert.equal(bob.of('joined').length, 0, 'nobody joined after bob');

      await bob.client.disconnect();
      assert.equal(bob.client.room, null);
      assert.equal(bob.client.connectionState.value, 'DISCONNECTED');
      assert.deepEqual(bob.of('disconnected'), [
        { kind: 'disconnected', reason: 'CLIENT_DISCONNECT' },
      ]);
      const left = await alice.waitFor('left', (e) => e.participant.userId === 'bob');
      assert.equal(left.reason, 'LEFT');
      assert.deepEqual(
        aliceRoom.participants.map((p) => p.userId),
        ['alice'],
      );
      await alice.client.disconnect();
    });

    test('messages arrive in the same order for everyone, REST messages included', async () => {
      const roomName = uniqueName('order');
      const users = ['u1', 'u2', 'u3'].map((u) => ({ id: u, c: newClient() }));
      for (const u of users) await u.c.connect(roomOptions(roomName, u.id));
      const perUser = 5;
      const sends: Promise<unknown>[] = [];
      for (let i = 0; i < perUser; i++) {
        for (const u of users) sends.push(u.c.client.room!.sendMessage(`${u.id}#${i}`));
      }
      sends.push(
        users[0]!.c.client.sendRealtimeMessage({
          roomName,
          message: 'from the backend',
          sender: { userId: 'system', name: 'System' },
        }),
      );
      const acks = await Promise.all(sends);
      const total = users.length * perUser + 1;
      const received = await Promise.all(users.map((u) => u.c.waitForMessages(total)));
      const first = received[0]!;
      for (const list of received) {
        assert.deepEqual(
          list.map((m) => [m.seq, m.message]),
          first.map((m) => [m.seq, m.message]),
        );
      }
      const seqs = first.map((m) => m.seq);
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
      );
      assert.equal(new Set(seqs).size, total);
      assert.deepEqual(
        new Set(acks.map((a) => (a as { seq: number }).seq)),
        new Set(seqs),
        'every ack names the seq its message was delivered with',
      );
      // Each user's own messages keep the order in which they were sent.
      for (const u of users) {
        const own = first.filter((m) => m.sender.userId === u.id).map((m) => m.message);
        assert.deepEqual(
          own,
          [0, 1, 2, 3, 4].map((i) => `${u.id}#${i}`),
        );
      }
      // The sender's participant comes with a socket message; none with a REST one.
      const events = users[1]!.c.of('message');
      const viaApi = events.find((e) => e.message.viaApi)!;
      assert.equal(viaApi.participant, null);
      assert.equal(viaApi.message.sender.userId, 'system');
      assert.equal(viaApi.message.roomName, roomName);
      const fromU3 = events.find((e) => e.message.sender.userId === 'u3')!;
      assert.equal(fromU3.participant?.userId, 'u3');
      assert.equal(fromU3.participant?.sid, users[2]!.c.client.room!.localParticipant.sid);
      for (const u of users) await u.c.client.disconnect();
    });

    test('connectionState: subscribe gets the current value, then each change; unsubscribe stops it', async () => {
      const c = newClient();
      const seen: string[] = [];
      const stop = c.client.connectionState.subscribe((v) => seen.push(v));
      assert.deepEqual(seen, ['DISCONNECTED']);
      await c.connect(roomOptions(uniqueName('state'), 'solo'));
      stop();
      await c.client.disconnect();
      assert.deepEqual(seen, ['DISCONNECTED', 'CONNECTING', 'CONNECTED']);
      assert.equal(c.client.connectionState.value, 'DISCONNECTED');
    });

    test("without a factory it uses the runtime's WebSocket: `ws` on Node 20, else the global one", async () => {
      const config = { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl };
      const roomName = uniqueName('runtime');
      assert.equal((globalThis as any).WebSocket, undefined, 'Node 20 has no global WebSocket');
      const plain = new SvcClient(config);
      const room = await plain.connect(roomOptions(roomName, 'node'));
      assert.equal(room.localParticipant.userId, 'node');

      // A runtime with a global WebSocket (browsers): the client must use it.
      const opened: string[] = [];
      class BrowserLikeWebSocket extends WebSocket {
        constructor(url: string) {
          super(url);
          opened.push(url);
        }
      }
      (globalThis as any).WebSocket = BrowserLikeWebSocket;
      try {
        const browser = new SvcClient(config);
        await browser.connect(roomOptions(roomName, 'browser'));
        assert.equal(opened.length, 1);
        assert.match(opened[0]!, /[?&]access_token=/);
        await browser.disconnect();
      } finally {
        delete (globalThis as any).WebSocket;
      }
      await plain.disconnect();
    });

    test('a room message over the socket is refused while disconnected', async () => {
      const c = newClient();
      const room = await c.connect(roomOptions(uniqueName('closed'), 'solo'));
      await c.client.disconnect();
      const err = await room.sendMessage('late').catch((e: SvcError) => e);
      assert.ok(err instanceof SvcError);
      assert.equal(err.code, 'not_connected');
    });
  });
}
