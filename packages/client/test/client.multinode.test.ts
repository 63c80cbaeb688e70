import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { uniqueName } from '../../server/test/helpers.ts';
import { FLEET_ENABLED, type Fleet, startFleet } from './fleet.ts';
import { roomOptions } from './helpers.ts';

describe('client library across two server processes (postgres+redis)', {
  skip: !FLEET_ENABLED,
}, () => {
  let fleet: Fleet;
  const clientOn: Fleet['clientOn'] = (i, options) => fleet.clientOn(i, options);

  before(async () => {
    fleet = await startFleet({
      SVC_REALTIME_DEPARTURE_GRACE_MS: '5000',
      SVC_REALTIME_SWEEP_INTERVAL_MS: '50',
    });
  });

  after(() => fleet.close());

  test('users on two nodes see each other and get messages in one order', async () => {
    const roomName = uniqueName('mn');
    const a = clientOn(0);
    const b = clientOn(1);
    const c = clientOn(1);
    await a.connect(roomOptions(roomName, 'a'));
    const bRoom = await b.connect(roomOptions(roomName, 'b'));
    assert.deepEqual(bRoom.participants.map((p) => p.userId).sort(), ['a', 'b']);
    await a.waitFor('joined', (e) => e.participant.userId === 'b');
    await c.connect(roomOptions(roomName, 'c'));
    await a.waitFor('joined', (e) => e.participant.userId === 'c');
    await b.waitFor('joined', (e) => e.participant.userId === 'c');

    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < 5; i++) {
      for (const [id, client] of [
        ['a', a],
        ['b', b],
        ['c', c],
      ] as const) {
        sends.push(client.client.room!.sendMessage(`${id}#${i}`));
      }
    }
    sends.push(
      a.client.sendRealtimeMessage({
        roomName,
        message: 'rest',
        sender: { userId: 'sys', name: 'S' },
      }),
    );
    await Promise.all(sends);
    const lists = await Promise.all([a, b, c].map((x) => x.waitForMessages(16)));
    const order = lists[0]!.map((m) => `${m.seq}:${m.message}`);
    for (const list of lists)
      assert.deepEqual(
        list.map((m) => `${m.seq}:${m.message}`),
        order,
      );
  });

  test('a socket killed on one node resumes on the other; nobody sees left/joined', async () => {
    const roomName = uniqueName('mn_resume');
    const a = clientOn(0);
    const b = clientOn(1, { reconnect: { initialDelayMs: 20 } });
    await a.connect(roomOptions(roomName, 'a'));
    const room = await b.connect(roomOptions(roomName, 'b'));
    await a.waitFor('joined', (e) => e.participant.userId === 'b');
    const sid = room.localParticipant.sid;

    // The balancer now sends b to node 0.
    fleet.route(b, 0);
    b.offline = true;
    b.socket.terminate();
    await b.waitFor('reconnecting');
    // Sent on node 0 while b has no socket: it reaches b only through the resume's replay.
    await a.client.room!.sendMessage('while away');
    b.offline = false;
    await b.waitFor('reconnected');
    assert.equal(b.client.room!.localParticipant.sid, sid);
    await b.client.room!.sendMessage('marker');
    await a.waitFor('message', (e) => e.message.message === 'marker');
    await b.waitFor('message', (e) => e.message.message === 'marker');
    assert.deepEqual(
      b.messages().map((m) => m.message),
      ['while away', 'marker'],
    );
    assert.equal(
      a.events.filter(
        (e) => (e.kind === 'left' || e.kind === 'joined') && e.participant.userId === 'b',
      ).length,
      1,
      a.describe(),
    );
  });

  test('DELETE on one node disconnects participants on both with ROOM_DELETED', async () => {
    const roomName = uniqueName('mn_delete');
    const a = clientOn(0);
    const b = clientOn(1);
    await a.connect(roomOptions(roomName, 'a'));
    await b.connect(roomOptions(roomName, 'b'));
    await clientOn(1, { apiKey: fleet.project.serverKey }).client.deleteRoom(roomName);
    for (const x of [a, b]) {
      const gone = await x.waitFor('disconnected');
      assert.equal(gone.reason, 'ROOM_DELETED');
    }
  });

  test('a node shuts down: its clients resume on the other node, nobody sees left/joined', async () => {
    const roomName = uniqueName('mn_failover');
    const stay = clientOn(0);
    const moving = clientOn(1, { reconnect: { initialDelayMs: 20 } });
    await stay.connect(roomOptions(roomName, 'stay'));
    const room = await moving.connect(roomOptions(roomName, 'moving'));
    await stay.waitFor('joined', (e) => e.participant.userId === 'moving');
    const sid = room.localParticipant.sid;
    // The balancer sends new connections to the surviving node.
    fleet.route(moving, 0);
    await fleet.stopNode(fleet.nodes[1]!);
    await moving.waitFor('reconnected');
    assert.equal(moving.client.room!.localParticipant.sid, sid);
    await moving.client.room!.sendMessage('after failover');
    await stay.waitFor('message', (e) => e.message.message === 'after failover');
    assert.equal(
      stay.events.filter(
        (e) => (e.kind === 'left' || e.kind === 'joined') && e.participant.userId === 'moving',
      ).length,
      1,
      stay.describe(),
    );
  });
});
