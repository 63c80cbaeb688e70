import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { uniqueName } from '../../server/test/helpers.ts';
import { CONTROLLER_ENV, recordEvents, refused, untilState } from './controller.helpers.ts';
import { FLEET_ENABLED, type Fleet, startFleet } from './fleet.ts';
import { roomOptions } from './helpers.ts';

describe('room controller across two server processes (postgres+redis)', {
  skip: !FLEET_ENABLED,
}, () => {
  let fleet: Fleet;
  const clientOn: Fleet['clientOn'] = (i, options) => fleet.clientOn(i, options);

  before(async () => {
    fleet = await startFleet({
      SVC_REALTIME_DEPARTURE_GRACE_MS: '5000',
      SVC_REALTIME_SWEEP_INTERVAL_MS: '50',
      ...CONTROLLER_ENV,
      SVC_REALTIME_WAITING_TIMEOUT_MS: '5000',
    });
  });

  after(() => fleet.close());

  /** A client of node `i` (server key: no client-key rate limit in the way). */
  const on = (i: number) => clientOn(i, { apiKey: fleet.project.serverKey });

  test('roles, kick and ban decided once for both nodes', async () => {
    const room = uniqueName('mnroles');
    const host = on(0);
    const p = on(1);
    const q = on(1);
    await host.connect(roomOptions(room, 'h', { isHost: true }));
    await p.connect(roomOptions(room, 'p'));
    await q.connect(roomOptions(room, 'q'));
    await host.client.controller.promoteToCoHost('p');
    await untilState(q, (st) => st.coHosts.includes('p'));
    // A co-host on node 1 kicks a participant on node 1; the host on node 0 sees it.
    await p.client.controller.kick('q', 'bye');
    assert.equal((await q.waitFor('disconnected')).reason, 'KICKED');
    assert.equal(
      (await host.waitFor('left', (e) => e.participant.userId === 'q')).reason,
      'KICKED',
    );
    // The ban holds on the other node too.
    await refused(on(0).connect(roomOptions(room, 'q')), 'banned');
    // The host leaves from node 0: node 1's co-host becomes host.
    await host.client.disconnect();
    await untilState(p, (st) => st.hostUserId === 'p');
    assert.equal(p.client.room!.localParticipant.isHost, true);
  });

  test('a poll answered concurrently from both nodes counts each user once', async () => {
    const room = uniqueName('mnpoll');
    const host = on(0);
    await host.connect(roomOptions(room, 'h', { isHost: true }));
    const voters = [on(0), on(1), on(0), on(1), on(1), on(0)];
    await Promise.all(voters.map((v, i) => v.connect(roomOptions(room, `v${i}`))));
    const pollId = await host.client.controller.createPoll('Lunch?', ['pizza', 'salad']);
    await Promise.all(voters.map((v) => untilState(v, (st) => st.polls.length === 1)));
    const answers = await Promise.allSettled(
      voters.flatMap((v, i) => [
        v.client.controller.respondToPoll(pollId, i % 2),
        v.client.controller.respondToPoll(pollId, 0),
      ]),
    );
    assert.equal(answers.filter((a) => a.status === 'fulfilled').length, 6);
    const st = await untilState(voters[1]!, (x) => x.polls[0]?.totalVotes === 6);
    assert.deepEqual(
      st.polls[0]!.results!.counts.reduce((a, b) => a + b, 0),
      6,
    );
  });

  test('chat history reaches a late joiner on the other node; hands keep server order', async () => {
    const room = uniqueName('mnchat');
    const a = on(0);
    const b = on(1);
    await a.connect(roomOptions(room, 'a'));
    await b.connect(roomOptions(room, 'b'));
    await a.client.controller.sendChatMessage('one');
    await b.client.controller.sendChatMessage('two');
    await b.client.controller.raiseHand();
    await a.client.controller.raiseHand();
    const late = on(1);
    await late.connect(roomOptions(room, 'late'));
    const st = late.client.controller.state.value;
    assert.deepEqual(
      st.chat.map((m) => m.text),
      ['one', 'two'],
    );
    assert.deepEqual(
      st.hands.map((h) => h.userId),
      ['b', 'a'],
    );
  });

  test('waiting room across nodes: approved on node 0, admitted on node 1; timeout', async () => {
    const room = uniqueName('mnwait');
    const host = on(0);
    await host.connect(roomOptions(room, 'h', { isHost: true }));
    await host.client.controller.updateRoomSettings({ waitingRoom: true });
    const guest = on(1);
    const joining = guest.connect(roomOptions(room, 'guest'));
    await untilState(host, (st) => st.waiting.some((w) => w.userId === 'guest'));
    await host.client.controller.approve('guest');
    await joining;
    assert.equal(guest.client.room?.name, room);
    // SVC_REALTIME_WAITING_TIMEOUT_MS=5000 on these nodes: nobody answers, the server gives up.
    const slow = on(1);
    await refused(slow.connect(roomOptions(room, 'slow')), 'waiting_timeout');
    await untilState(host, (st) => st.waiting.length === 0);
  });

  test('an invitation times out on the server; breakout move across nodes', async () => {
    const room = uniqueName('mninv');
    const host = on(0);
    const events = recordEvents(host);
    await host.connect(roomOptions(room, 'h', { isHost: true }));
    const member = on(1);
    await member.connect(roomOptions(room, 'm'));
    await host.client.controller.sendCallInvitation({ userIds: ['nobody'], timeoutMs: 5000 });
    const ended = await events.until(
      (e) =>
        e.type === 'invitation.updated' && (e.data as { outcome: string }).outcome === 'timed_out',
    );
    assert.ok(ended.seq > 0);
    const id = await host.client.controller.createBreakoutRoom('B', []);
    await host.client.controller.moveToBreakoutRoom('m', id);
    const breakoutName = host.client.controller.getBreakoutRooms()[0]!.roomName;
    await member.waitFor('connected', () => member.client.room?.name === breakoutName);
    await host.client.controller.closeBreakoutRooms({ countdownMs: 0 });
    await member.waitFor('connected', () => member.client.room?.name === room);
  });
});
