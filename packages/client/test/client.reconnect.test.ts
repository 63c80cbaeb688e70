import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import { type ListeningServer, roomOptions, startListeningServer, TestClient } from './helpers.ts';

/** The departure grace period of this file's server: long enough for a quick resume. */
const GRACE_MS = 1500;

for (const backend of BACKENDS) {
  describe(`client library, reconnection (${backend.name})`, { timeout: 60_000 }, () => {
    let s: ListeningServer;
    const clients: TestClient[] = [];
    const newClient = (options?: ConstructorParameters<typeof TestClient>[1]) => {
      const c = new TestClient(s, options);
      clients.push(c);
      return c;
    };
    before(async () => {
      s = await startListeningServer(backend, {
        SVC_REALTIME_DEPARTURE_GRACE_MS: String(GRACE_MS),
      });
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.client.disconnect()));
      await s.close();
    });

    const joinsAndLeavesOf = (c: TestClient, userId: string) =>
      c.events.flatMap((e) =>
        (e.kind === 'joined' || e.kind === 'left') && e.participant.userId === userId ? [e] : [],
      );

    test('a socket killed mid-session resumes: RECONNECTING → CONNECTED, others see nothing', async () => {
      const roomName = uniqueName('resume');
      const alice = newClient();
      const bob = newClient({ reconnect: { initialDelayMs: 50 } });
      await alice.connect(roomOptions(roomName, 'alice'));
      const bobRoom = await bob.connect(roomOptions(roomName, 'bob'));
      await alice.waitFor('joined', (e) => e.participant.userId === 'bob');
      const bobSid = bobRoom.localParticipant.sid;
      const aliceBefore = joinsAndLeavesOf(alice, 'bob').length;

      bob.offline = true;
      bob.socket.terminate();
      await bob.waitFor('reconnecting');
      // Sent while bob has no socket: it can only reach him through the resume's replay.
      await alice.client.room!.sendMessage('while away');
      bob.offline = false;
      await bob.waitFor('reconnected');

      assert.deepEqual(bob.states().slice(-3), ['CONNECTED', 'RECONNECTING', 'CONNECTED']);
      assert.equal(bob.client.room, bobRoom, 'the same room handle survives');
      assert.equal(bob.client.room!.localParticipant.sid, bobSid, 'resumed, not rejoined');
      assert.equal(bob.sockets.length, 2, 'no socket opened while offline');

      await bob.client.room!.sendMessage('marker');
      await alice.waitFor('message', (e) => e.message.message === 'marker');
      await bob.waitFor('message', (e) => e.message.message === 'marker');
      assert.equal(bob.messages().filter((m) => m.message === 'while away').length, 1);
      assert.deepEqual(
        bob.messages().map((m) => m.message),
        ['while away', 'marker'],
      );
      assert.equal(joinsAndLeavesOf(alice, 'bob').length, aliceBefore, alice.describe());
      assert.deepEqual(joinsAndLeavesOf(bob, 'alice'), []);
      assert.equal(bob.of('disconnected').length, 0);
      const participants = await alice.client.getParticipants(roomName);
      assert.deepEqual(
        participants.map((p) => [p.userId, p.sid, p.connected]).sort(),
        [
          ['alice', alice.client.room!.localParticipant.sid, true],
          ['bob', bobSid, true],
        ].sort(),
      );
    });

    test('a drop longer than the grace period: exactly one left and one joined', async () => {
      const roomName = uniqueName('grace');
      const carol = newClient();
      const dave = newClient({
        reconnect: { initialDelayMs: 20, maxDelayMs: 100, maxAttempts: 10_000 },
      });
      await carol.connect(roomOptions(roomName, 'carol'));
      const daveRoom = await dave.connect(roomOptions(roomName, 'dave'));
      await carol.waitFor('joined', (e) => e.participant.userId === 'dave');
      const oldSid = daveRoom.localParticipant.sid;

      dave.offline = true;
      dave.socket.terminate();
      await dave.waitFor('reconnecting');
      const left = await carol.waitFor('left', (e) => e.participant.userId === 'dave');
      assert.equal(left.reason, 'DISCONNECTED');
      assert.equal(left.participant.sid, oldSid);

      dave.offline = false;
      await dave.waitFor('reconnected');
      const joined = await carol.waitFor(
        'joined',
        (e) => e.participant.userId === 'dave' && e.participant.sid !== oldSid,
      );
      assert.equal(dave.client.room!.localParticipant.sid, joined.participant.sid);
      assert.equal(dave.client.connectionState.value, 'CONNECTED');

      await dave.client.room!.sendMessage('back');
      const got = await carol.waitFor('message', (e) => e.message.message === 'back');
      assert.equal(got.participant?.sid, joined.participant.sid);
      assert.deepEqual(
        joinsAndLeavesOf(carol, 'dave').map((e) => [e.kind, e.participant.sid]),
        [
          ['joined', oldSid],
          ['left', oldSid],
          ['joined', joined.participant.sid],
        ],
      );
      // Carol did not change while dave was away: dave is told nothing about her.
      assert.deepEqual(joinsAndLeavesOf(dave, 'carol'), []);
      assert.deepEqual(dave.client.room!.participants.map((p) => p.userId).sort(), [
        'carol',
        'dave',
      ]);
    });

    test('a full rejoin reports who came and went while the client was away', async () => {
      const roomName = uniqueName('away');
      const stays = newClient();
      const goes = newClient();
      const comes = newClient();
      const away = newClient({
        reconnect: { initialDelayMs: 20, maxDelayMs: 100, maxAttempts: 10_000 },
      });
      await stays.connect(roomOptions(roomName, 'stays'));
      await goes.connect(roomOptions(roomName, 'goes'));
      const awayRoom = await away.connect(roomOptions(roomName, 'away'));
      assert.equal(awayRoom.participants.length, 3);

      away.offline = true;
      away.socket.terminate();
      await away.waitFor('reconnecting');
      await goes.client.disconnect();
      await comes.connect(roomOptions(roomName, 'comes'));
      await stays.waitFor('left', (e) => e.participant.userId === 'away');
      away.offline = false;
      await away.waitFor('reconnected');

      const seen = away.events.flatMap((e) =>
        e.kind === 'joined' || e.kind === 'left' ? [[e.kind, e.participant.userId]] : [],
      );
      assert.deepEqual(seen.slice(-2).sort(), [
        ['joined', 'comes'],
        ['left', 'goes'],
      ]);
      const left = away.of('left').find((e) => e.participant.userId === 'goes')!;
      assert.equal(left.reason, undefined, 'the reason is unknown after a rejoin');
      assert.deepEqual(away.client.room!.participants.map((p) => p.userId).sort(), [
        'away',
        'comes',
        'stays',
      ]);
    });

    test('reconnection gives up after its limit: FAILED with reconnect_failed', async () => {
      const roomName = uniqueName('giveup');
      const erin = newClient({ reconnect: { maxAttempts: 3, initialDelayMs: 10, maxDelayMs: 20 } });
      await erin.connect(roomOptions(roomName, 'erin'));
      erin.offline = true;
      erin.socket.terminate();
      const gone = await erin.waitFor('disconnected');
      assert.equal(gone.reason, 'RECONNECT_FAILED');
      assert.equal(erin.client.connectionState.value, 'FAILED');
      assert.deepEqual(erin.states().slice(-3), ['CONNECTED', 'RECONNECTING', 'FAILED']);
      assert.equal(erin.client.lastError?.code, 'reconnect_failed');
      assert.equal(erin.client.room, null);
      assert.equal(erin.sockets.length, 1, 'no socket opened while offline');
    });

    test('a close for a frame too big (1009) or not UTF-8 (1007) reconnects and resumes', async () => {
      const roomName = uniqueName('fault');
      const gina = newClient({ reconnect: { initialDelayMs: 20 } });
      const ginaRoom = await gina.connect(roomOptions(roomName, 'gina'));
      const sid = ginaRoom.localParticipant.sid;
      const faults: [number, () => void][] = [
        [
          1009,
          () =>
            gina.socket.send(
              JSON.stringify({ id: 'big', type: 'ping', data: { pad: 'x'.repeat(70_000) } }),
            ),
        ],
        // ws sends a Buffer as is: a text frame that is not UTF-8.
        [1007, () => gina.socket.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false })],
      ];
      for (const [code, fault] of faults) {
        const socket = gina.socket;
        const closed = new Promise<number>((resolve) => socket.once('close', resolve));
        const reconnected = gina.of('reconnected').length;
        fault();
        assert.equal(await closed, code);
        await gina.waitFor('reconnected', () => gina.of('reconnected').length > reconnected);
        assert.notEqual(gina.socket, socket);
        assert.deepEqual(gina.states().slice(-3), ['CONNECTED', 'RECONNECTING', 'CONNECTED']);
        assert.equal(gina.client.room, ginaRoom);
        assert.equal(ginaRoom.localParticipant.sid, sid, `resumed after ${code}, not rejoined`);
      }
      assert.equal(gina.of('disconnected').length, 0);
    });

    test('the client heartbeat notices a silent server and reconnects', async () => {
      const roomName = uniqueName('heartbeat');
      const frank = newClient({
        heartbeatIntervalMs: 100,
        requestTimeoutMs: 300,
        reconnect: { initialDelayMs: 20 },
      });
      await frank.connect(roomOptions(roomName, 'frank'));
      const first = frank.socket;
      // Stop reading from the server: pongs are never seen, as on a half-open connection.
      (first as any)._socket.pause();
      await frank.waitFor('reconnected');
      assert.notEqual(frank.socket, first);
      assert.deepEqual(frank.states().slice(-3), ['CONNECTED', 'RECONNECTING', 'CONNECTED']);
    });
  });
}
