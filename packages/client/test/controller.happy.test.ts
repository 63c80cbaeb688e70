import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../server/src/clock.ts';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import { SvcConnectionState } from '../src/index.ts';
import { CONTROLLER_ENV, recordEvents, refused, untilState } from './controller.helpers.ts';
import { type ListeningServer, roomOptions, startListeningServer, TestClient } from './helpers.ts';

for (const backend of BACKENDS) {
  describe(`room controller through @svc/client (${backend.name})`, { timeout: 120_000 }, () => {
    let s: ListeningServer;
    // The server's clock: moved forward to reach timeouts (typing, invitations, waiting room).
    const clock = new ManualClock(Date.now());
    const clients: TestClient[] = [];
    const newClient = () => {
      const c = new TestClient(s, { apiKey: s.project.serverKey });
      clients.push(c);
      return c;
    };
    /** Connects `userId` to `room` and waits until its controller mirrors the room. */
    const join = async (room: string, userId: string, isHost = false) => {
      const c = newClient();
      await c.connect(roomOptions(room, userId, { isHost }));
      return c;
    };

    before(async () => {
      s = await startListeningServer(backend, CONTROLLER_ENV, clock);
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.client.disconnect()));
      await s.close();
    });

    test('roles: one host, co-hosts, transfer, demote; a second host token becomes co-host', async () => {
      const room = uniqueName('roles');
      const host = await join(room, 'h', true);
      const ann = await join(room, 'ann');
      const bob = await join(room, 'bob', true);
      await untilState(ann, (st) => st.coHosts.includes('bob'), 'bob co-host');
      assert.equal(ann.client.controller.isHost('h'), true);
      assert.equal(ann.client.controller.isCoHost('bob'), true);
      assert.equal(bob.client.controller.isHost(), false);
      assert.equal(bob.client.room!.localParticipant.isHost, false);

      await host.client.controller.promoteToCoHost('ann');
      await untilState(bob, (st) => st.coHosts.includes('ann'));
      // Each client mirrors the room on its own socket: wait on the one asserted on.
      await untilState(host, (st) => st.coHosts.includes('ann'));
      assert.deepEqual(host.client.controller.getCoHosts(), ['bob', 'ann']);
      await host.client.controller.demoteFromCoHost('bob');
      await untilState(ann, (st) => !st.coHosts.includes('bob'));

      await host.client.controller.transferHost('ann');
      const st = await untilState(bob, (x) => x.hostUserId === 'ann' && x.coHosts.includes('h'));
      assert.deepEqual(st.coHosts, ['h']);
      await untilState(ann, (x) => x.hostUserId === 'ann');
      assert.equal(ann.client.controller.isHost(), true);
      assert.equal(ann.client.room!.localParticipant.isHost, true);
      assert.equal(ann.client.room!.participants.filter((p) => p.isHost).length, 1);
      // The former host is a co-host now: host-only changes are refused.
      await refused(host.client.controller.promoteToCoHost('bob'), 'host_required');
    });

    test('every restricted operation is refused for a participant with its code', async () => {
      const room = uniqueName('deny');
      const host = await join(room, 'h', true);
      const p = await join(room, 'p');
      const other = await join(room, 'o');
      await untilState(host, (st) => st.seq > 0 && host.client.room!.participants.length === 3);
      const hostPoll = await host.client.controller.createPoll('Q?', ['a', 'b']);
      await other.client.controller.raiseHand();
      await untilState(p, (st) => st.hands.length === 1 && st.polls.length === 1);
      const c = p.client.controller;
      const cohost: [string, Promise<unknown>][] = [
        ['spotlight', c.spotlight('o')],
        ['kick', c.kick('o')],
        ['muteParticipant', c.muteParticipant('o')],
        ['unmuteParticipant', c.unmuteParticipant('o')],
        ['lowerHand(other)', c.lowerHand('o')],
        ['createPoll', c.createPoll('Q', ['a', 'b'])],
        ['endPoll', c.endPoll(hostPoll)],
        ['createBreakoutRoom', c.createBreakoutRoom('x', ['o'])],
        ['moveToBreakoutRoom', c.moveToBreakoutRoom('o', null)],
        ['closeBreakoutRooms', c.closeBreakoutRooms()],
        ['broadcastToBreakoutRooms', c.broadcastToBreakoutRooms('hi')],
        ['approve', c.approve('o')],
        ['reject', c.reject('o')],
      ];
      const host_: [string, Promise<unknown>][] = [
        ['transferHost', c.transferHost('o')],
        ['promoteToCoHost', c.promoteToCoHost('o')],
        ['demoteFromCoHost', c.demoteFromCoHost('o')],
        ['muteAll', c.muteAll()],
        ['unmuteAll', c.unmuteAll()],
        ['updateRoomSettings', c.updateRoomSettings({ waitingRoom: true })],
      ];
      for (const [name, op] of cohost)
        await refused(op, 'cohost_required').catch((e) => assert.fail(`${name}: ${e}`));
      for (const [name, op] of host_)
        await refused(op, 'host_required').catch((e) => assert.fail(`${name}: ${e}`));
      // A co-host may do the first group but not the second, nor kick another co-host.
      await host.client.controller.promoteToCoHost('p');
      await host.client.controller.promoteToCoHost('o');
      await untilState(p, (st) => st.coHosts.includes('p') && st.coHosts.includes('o'));
      await c.spotlight('o');
      await refused(c.kick('o'), 'host_required');
      await refused(c.kick('h'), 'invalid_target');
      await refused(c.muteAll(), 'host_required');
      // Nothing refused changed the room.
      const st = await untilState(host, (x) => x.spotlight.includes('o'));
      assert.deepEqual(
        st.hands.map((h) => h.userId),
        ['o'],
      );
      assert.equal(st.polls.length, 1);
      assert.equal(host.client.room!.participants.length, 3);
    });

    test('host succession: the longest-present co-host, else the earliest participant', async () => {
      const room = uniqueName('succ');
      const host = await join(room, 'h', true);
      const early = await join(room, 'early');
      const c1 = await join(room, 'c1');
      const c2 = await join(room, 'c2');
      await host.client.controller.promoteToCoHost('c2');
      await host.client.controller.promoteToCoHost('c1');
      await untilState(early, (st) => st.coHosts.length === 2);
      const events = recordEvents(early);
      await host.client.disconnect();
      // c1 was promoted last but has been in the room longer than c2.
      await untilState(early, (st) => st.hostUserId === 'c1', 'c1 host');
      assert.deepEqual(early.client.controller.getCoHosts(), ['c2']);
      const change = events.of('role.changed')[0];
      assert.deepEqual(change?.data, {
        userId: 'c1',
        role: 'host',
        previousRole: 'cohost',
        by: null,
        reason: 'SUCCESSION',
      });
      await c1.client.controller.demoteFromCoHost('c2');
      await untilState(early, (st) => st.coHosts.length === 0);
      await c1.client.disconnect();
      await untilState(early, (st) => st.hostUserId === 'early', 'earliest participant host');
      assert.equal(early.client.room!.localParticipant.isHost, true);
      // Succession off: the room stays without a host.
      await early.client.controller.updateRoomSettings({ hostSuccession: false });
      await untilState(c2, (st) => st.settings.hostSuccession === false);
      await early.client.disconnect();
      await c2.waitFor('left', (e) => e.participant.userId === 'early');
      assert.equal(c2.client.controller.state.value.hostUserId, null);
    });

    test('kick: the user is removed with the reason and cannot rejoin', async () => {
      const room = uniqueName('kick');
      const host = await join(room, 'h', true);
      const bad = await join(room, 'bad');
      const token = (await bad.client.getToken(roomOptions(room, 'bad'))).wsUrl;
      await host.client.controller.kick('bad', 'spam');
      const gone = await bad.waitFor('disconnected');
      assert.equal(gone.reason, 'KICKED');
      assert.equal(bad.events.length > 0, true);
      const left = await host.waitFor('left', (e) => e.participant.userId === 'bad');
      assert.equal(left.reason, 'KICKED');
      // A new connect (new token) and the old token are both refused.
      await refused(bad.client.connect(roomOptions(room, 'bad')), 'banned');
      const ws = await import('ws');
      const raw = new ws.default(token);
      const frames: { type: string; code?: string }[] = [];
      raw.on('message', (d) => frames.push(JSON.parse(String(d))));
      await new Promise((r) => raw.once('open', r));
      raw.send(JSON.stringify({ id: '1', type: 'session.join' }));
      const code = await new Promise<number>((r) => raw.once('close', (c) => r(c)));
      assert.equal(code, 4008);
      assert.equal(frames.find((f) => f.type === 'error')?.code, 'banned');
    });

    test('kicked client receives the reason in onDisconnected', async () => {
      const room = uniqueName('kick2');
      const host = await join(room, 'h', true);
      const bad = await join(room, 'bad');
      let detail: { message?: string } | undefined;
      const prev = bad.client.onDisconnected!;
      bad.client.onDisconnected = (reason, d) => {
        detail = d;
        prev(reason, d);
      };
      await host.client.controller.kick('bad', 'be nice');
      await bad.waitFor('disconnected');
      assert.deepEqual(detail, { message: 'be nice' });
    });

    test('chat: ordered, bounded history to a late joiner, replayed after a resume', async () => {
      const room = uniqueName('chat');
      const a = await join(room, 'a');
      for (let i = 1; i <= 7; i++) await a.client.controller.sendChatMessage(`m${i}`);
      const late = await join(room, 'late');
      const history = late.client.controller.getChatHistory();
      // SVC_REALTIME_CHAT_HISTORY=5: the last five, in order.
      assert.deepEqual(
        history.map((m) => m.text),
        ['m3', 'm4', 'm5', 'm6', 'm7'],
      );
      assert.ok(history.every((m, i) => i === 0 || m.seq > history[i - 1]!.seq));
      assert.equal(history[0]!.from.userId, 'a');
      // Resume: the late joiner's socket drops; messages sent meanwhile arrive on resume.
      late.socket.terminate();
      await late.waitFor('reconnecting');
      await a.client.controller.sendChatMessage('while away');
      await late.waitFor('reconnected');
      const st = await untilState(late, (x) => x.chat.some((m) => m.text === 'while away'));
      assert.deepEqual(
        st.chat.slice(-2).map((m) => m.text),
        ['m7', 'while away'],
      );
      late.client.controller.clearChatHistory();
      assert.deepEqual(late.client.controller.getChatHistory(), []);
      await refused(a.client.controller.sendChatMessage(''), 'invalid_request');
    });

    test('chat is rate limited per user', async () => {
      const room = uniqueName('chatrate');
      const a = await join(room, 'a');
      const results = await Promise.allSettled(
        Array.from({ length: 25 }, (_, i) => a.client.controller.sendChatMessage(`x${i}`)),
      );
      const ok = results.filter((r) => r.status === 'fulfilled').length;
      assert.equal(ok, 20);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      assert.equal(rejected.reason.code, 'rate_limited');
    });

    test('typing starts, stops, and expires on the server after 3 s', async () => {
      const room = uniqueName('typing');
      const a = await join(room, 'a');
      const b = await join(room, 'b');
      const events = recordEvents(b);
      await a.client.controller.startTyping();
      await untilState(b, (st) => st.typing.some((t) => t.userId === 'a'));
      await a.client.controller.stopTyping();
      await untilState(b, (st) => st.typing.length === 0);
      assert.equal(events.of('typing.stopped')[0]?.data.reason, 'STOPPED');
      // Started again and never stopped: the server ends it once 3 s have passed.
      const c = await join(room, 'c');
      await c.client.controller.startTyping();
      await untilState(b, (st) => st.typing.some((t) => t.userId === 'c'));
      clock.advance(3001);
      await untilState(b, (st) => st.typing.length === 0, 'typing expiry');
      const last = events.of('typing.stopped').at(-1);
      assert.deepEqual(last?.data, { userId: 'c', reason: 'EXPIRED' });
    });

    test('hands: server timestamps and order; lowering another needs a host or co-host', async () => {
      const room = uniqueName('hands');
      const host = await join(room, 'h', true);
      const a = await join(room, 'a');
      const b = await join(room, 'b');
      await b.client.controller.raiseHand();
      clock.advance(5);
      await a.client.controller.raiseHand();
      const st = await untilState(host, (x) => x.hands.length === 2);
      assert.deepEqual(
        st.hands.map((h) => h.userId),
        ['b', 'a'],
      );
      assert.equal(st.hands[1]!.raisedAt - st.hands[0]!.raisedAt, 5);
      await refused(a.client.controller.lowerHand('b'), 'cohost_required');
      await host.client.controller.lowerHand('b');
      await a.client.controller.lowerHand();
      await untilState(b, (x) => x.hands.length === 0);
      assert.deepEqual(b.client.controller.getRaisedHands(), []);
    });

    test('polls: concurrent answers count each user once; anonymity; visibility', async () => {
      const room = uniqueName('polls');
      const host = await join(room, 'h', true);
      const voters = await Promise.all(Array.from({ length: 8 }, (_, i) => join(room, `v${i}`)));
      const pollId = await host.client.controller.createPoll('Best?', ['x', 'y', 'z']);
      await Promise.all(voters.map((v) => untilState(v, (st) => st.polls.length === 1)));
      // Every voter answers twice at once: exactly one answer per user counts.
      const answers = await Promise.allSettled(
        voters.flatMap((v, i) => [
          v.client.controller.respondToPoll(pollId, i % 3),
          v.client.controller.respondToPoll(pollId, (i + 1) % 3),
        ]),
      );
      const failed = answers.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
      assert.equal(failed.length, 8);
      assert.ok(failed.every((r) => r.reason.code === 'already_voted'));
      const st = await untilState(host, (x) => x.polls[0]?.totalVotes === 8);
      assert.equal(
        st.polls[0]!.results!.counts.reduce((n, c) => n + c, 0),
        8,
      );
      assert.equal(st.polls[0]!.results!.votes!.length, 8);
      assert.equal(host.client.controller.getActivePolls().length, 1);
      await host.client.controller.endPoll(pollId);
      await untilState(voters[0]!, (x) => x.polls[0]?.endedAt !== null);
      await refused(voters[0]!.client.controller.respondToPoll(pollId, 0), 'poll_ended');
      await refused(voters[0]!.client.controller.respondToPoll('poll_nope', 0), 'poll_not_found');

      // Anonymous, results after the vote: others see only counts of votes; no voter ids at all.
      const anon = await host.client.controller.createPoll('Anon?', ['a', 'b'], {
        anonymous: true,
        visibility: 'after_vote',
      });
      const v0 = voters[0]!.client.controller;
      await untilState(voters[1]!, (x) => x.polls.length === 2);
      const mine = await v0.respondToPoll(anon, 1);
      assert.deepEqual(mine.results, { counts: [0, 1], totalVotes: 1 });
      assert.equal(mine.myVote, 1);
      await refused(v0.respondToPoll(anon, 9), 'poll_option_invalid');
      const seen = await untilState(voters[1]!, (x) => x.polls[1]?.totalVotes === 1);
      assert.equal(seen.polls[1]!.results, undefined);
      const late = await join(room, 'late');
      const lateView = late.client.controller.state.value.polls.find((p) => p.id === anon)!;
      assert.equal(lateView.results, undefined);
      assert.equal(lateView.myVote, null);
      assert.equal((await v0.getPoll(anon, true))?.myVote, 1);
    });

    test('reactions: validated, batched, listed as recent', async () => {
      const room = uniqueName('react');
      const a = await join(room, 'a');
      const b = await join(room, 'b');
      await a.client.controller.sendEmojiReaction('👍');
      await a.client.controller.sendEmojiReaction('clap');
      await a.client.controller.sendEmojiReaction('🇫🇷');
      await refused(a.client.controller.sendEmojiReaction('hello'), 'invalid_reaction');
      await refused(a.client.controller.sendEmojiReaction('👍👍'), 'invalid_reaction');
      const st = await untilState(b, (x) => x.reactions.length === 3);
      assert.deepEqual(
        st.reactions.map((r) => r.emoji),
        ['👍', 'clap', '🇫🇷'],
      );
      assert.equal(b.client.controller.getRecentEmojiReactions().length, 3);
    });

    test('invitations: answered before joining, accepted, and timed out by the server', async () => {
      const room = uniqueName('invite');
      const caller = await join(room, 'caller');
      const events = recordEvents(caller);
      const id = await caller.client.controller.sendCallInvitation({
        userIds: ['callee', 'other'],
      });
      await untilState(caller, (st) => st.invitations.length === 1);
      // "other" declines without joining; "callee" accepts and joins.
      const other = newClient();
      await other.client.controller.declineInvitation(id, roomOptions(room, 'other'), true);
      const callee = newClient();
      await callee.client.controller.acceptInvitation(id, roomOptions(room, 'callee'));
      assert.equal(callee.client.room?.name, room);
      const outcomes = events.of('invitation.updated').map((e) => [e.data.userId, e.data.outcome]);
      assert.deepEqual(outcomes, [
        ['other', 'busy'],
        ['callee', 'accepted'],
      ]);
      await untilState(caller, (st) => st.invitations.length === 0);
      await refused(
        other.client.controller.declineInvitation(id, roomOptions(room, 'other')),
        'invitation_not_found',
      );
      // A second invitation is never answered: the server times it out.
      const id2 = await caller.client.controller.sendCallInvitation({
        userIds: ['late'],
        timeoutMs: 10_000,
      });
      const stranger = newClient();
      await refused(
        stranger.client.controller.acceptInvitation(id2, roomOptions(room, 'stranger')),
        'not_invited',
      );
      clock.advance(10_001);
      await untilState(caller, (st) => st.invitations.length === 0, 'invitation timeout');
      const timedOut = events.of('invitation.updated').at(-1)!;
      assert.equal(timedOut.data.outcome, 'timed_out');
      assert.deepEqual(timedOut.data.invitation.invitees, [
        { userId: 'late', outcome: 'timed_out' },
      ]);
      await refused(
        newClient().client.controller.acceptInvitation(id2, roomOptions(room, 'late')),
        'invitation_not_found',
      );
      // The inviter cancels a third.
      const id3 = await caller.client.controller.sendCallInvitation({ userIds: ['x'] });
      await caller.client.controller.cancelInvitation(id3);
      await events.until(
        (e) =>
          e.type === 'invitation.updated' &&
          (e.data as { outcome: string }).outcome === 'cancelled',
      );
      const cancelled = events.of('invitation.updated').at(-1)!;
      assert.equal(cancelled.data.outcome, 'cancelled');
    });

    test('waiting room: approve, reject, timeout', async () => {
      const room = uniqueName('wait');
      const host = await join(room, 'h', true);
      const cohost = await join(room, 'co');
      await host.client.controller.promoteToCoHost('co');
      await host.client.controller.updateRoomSettings({ waitingRoom: true });
      await untilState(cohost, (st) => st.settings.waitingRoom);

      const guest = newClient();
      const joining = guest.connect(roomOptions(room, 'guest'));
      await guest.waitFor('waiting');
      await untilState(cohost, (st) => st.waiting.some((w) => w.userId === 'guest'));
      assert.deepEqual(
        host.client.controller.getWaitingRoomParticipants().map((w) => w.userId),
        ['guest'],
      );
      await cohost.client.controller.approve('guest');
      await joining;
      assert.equal(guest.client.room?.name, room);
      await untilState(host, (st) => st.waiting.length === 0);

      const nope = newClient();
      const refusedJoin = nope.connect(roomOptions(room, 'nope'));
      await untilState(host, (st) => st.waiting.some((w) => w.userId === 'nope'));
      await host.client.controller.reject('nope', 'not today');
      await refused(refusedJoin, 'waiting_rejected');
      await refused(host.client.controller.approve('nope'), 'waiting_not_found');

      const slow = newClient();
      const slowJoin = slow.connect(roomOptions(room, 'slow'));
      await untilState(host, (st) => st.waiting.some((w) => w.userId === 'slow'));
      clock.advance(60_001);
      await refused(slowJoin, 'waiting_timeout');
      await untilState(cohost, (st) => st.waiting.length === 0);
    });

    test('breakout rooms: create, move (auto join), not assigned, broadcast, close back to main', async () => {
      const room = uniqueName('main');
      const host = await join(room, 'h', true);
      const a = await join(room, 'a');
      const b = await join(room, 'b');
      const id = await host.client.controller.createBreakoutRoom('Team A', ['a']);
      await untilState(b, (st) => st.breakouts.length === 1);
      await refused(b.client.controller.joinBreakoutRoom(id), 'breakout_not_assigned');
      // The assigned user joins; the breakout room knows its main room.
      await a.client.controller.joinBreakoutRoom(id);
      const breakoutName = host.client.controller.getBreakoutRooms()[0]!.roomName;
      assert.equal(a.client.room?.name, breakoutName);
      assert.deepEqual(a.client.controller.state.value.breakoutOf, {
        roomName: room,
        breakoutId: id,
      });
      // A move makes b's client switch rooms by itself.
      await host.client.controller.moveToBreakoutRoom('b', id);
      await b.waitFor('connected', () => b.client.room?.name === breakoutName);
      // A user who was never assigned cannot get in even with a token of their own.
      const intruder = newClient();
      await refused(
        intruder.connect(roomOptions(breakoutName, 'intruder')),
        'breakout_not_assigned',
      );
      // The host may join any breakout room, as a co-host there.
      const hostInBreakout = newClient();
      await hostInBreakout.connect(roomOptions(breakoutName, 'h', { isHost: true }));
      const aEvents = recordEvents(a);
      await host.client.controller.broadcastToBreakoutRooms('5 minutes left');
      await aEvents.until((e) => e.type === 'breakout.broadcast');
      await host.client.controller.closeBreakoutRooms({ countdownMs: 30_000 });
      await aEvents.until((e) => e.type === 'breakout.closing');
      clock.advance(30_001);
      // Closed: everyone in it returns to the main room.
      await a.waitFor('connected', () => a.client.room?.name === room, 15_000);
      await b.waitFor('connected', () => b.client.room?.name === room, 15_000);
      await untilState(host, (st) => st.breakouts.length === 0);
    });

    test('a way back from a closed breakout room that fails on the network is retried', async () => {
      const room = uniqueName('back');
      const host = await join(room, 'h', true);
      const a = await join(room, 'a');
      const id = await host.client.controller.createBreakoutRoom('Team A', ['a']);
      await a.client.controller.joinBreakoutRoom(id);
      const aEvents = recordEvents(a);
      await host.client.controller.closeBreakoutRooms({ countdownMs: 1_000 });
      await aEvents.until((e) => e.type === 'breakout.closing');
      // The breakout room's socket stays up; the way back to the main room finds no network.
      a.offline = true;
      clock.advance(1_001);
      await a.waitFor('state', (e) => e.state === SvcConnectionState.RECONNECTING);
      a.offline = false;
      await a.waitFor('connected', () => a.client.room?.name === room, 15_000);
      assert.deepEqual(a.states().slice(-4), [
        SvcConnectionState.DISCONNECTED,
        SvcConnectionState.CONNECTING,
        SvcConnectionState.RECONNECTING,
        SvcConnectionState.CONNECTED,
      ]);
      // Leaving main for the breakout room, then the breakout room's end: no RECONNECT_FAILED.
      assert.deepEqual(
        a.of('disconnected').map((e) => e.reason),
        ['CLIENT_DISCONNECT', 'ROOM_DELETED'],
      );
      await untilState(host, (st) => st.breakouts.length === 0);
    });

    test('a way back refused with 503 and Retry-After waits that long before trying again', async () => {
      const room = uniqueName('back503');
      const host = await join(room, 'h', true);
      // The main room's token requests after the breakout room closed: the first is answered 503.
      const tokenAt: number[] = [];
      let closing = false;
      const a = new TestClient(s, {
        apiKey: s.project.serverKey,
        fetch: async (input, init) => {
          if (closing && String(input).endsWith('/v1/realtime/token')) {
            tokenAt.push(Date.now());
            if (tokenAt.length === 1) {
              return new Response(
                JSON.stringify({
                  type: 'about:blank',
                  title: 'x',
                  status: 503,
                  code: 'service_unavailable',
                }),
                {
                  status: 503,
                  headers: { 'content-type': 'application/problem+json', 'retry-after': '2' },
                },
              );
            }
          }
          return fetch(input, init);
        },
      });
      clients.push(a);
      await a.connect(roomOptions(room, 'a'));
      const id = await host.client.controller.createBreakoutRoom('Team A', ['a']);
      await a.client.controller.joinBreakoutRoom(id);
      const aEvents = recordEvents(a);
      await host.client.controller.closeBreakoutRooms({ countdownMs: 1_000 });
      await aEvents.until((e) => e.type === 'breakout.closing');
      closing = true;
      clock.advance(1_001);
      await a.waitFor('connected', () => a.client.room?.name === room, 15_000);
      assert.equal(tokenAt.length, 2);
      assert.ok(
        tokenAt[1]! - tokenAt[0]! >= 2_000,
        `retried after ${tokenAt[1]! - tokenAt[0]!} ms`,
      );
    });

    test('network quality is measured from the signaling round trip and sent to everyone', async () => {
      const room = uniqueName('quality');
      const a = await join(room, 'a');
      const b = await join(room, 'b');
      const st = await untilState(a, (x) => x.quality.some((q) => q.userId === 'b'));
      const q = st.quality.find((x) => x.userId === 'b')!;
      assert.ok(q.quality >= 1 && q.quality <= 5, String(q.quality));
      assert.equal(typeof q.rttMs, 'number');
      await untilState(b, (x) => x.quality.some((q2) => q2.userId === 'b'));
      assert.ok(b.client.controller.getNetworkQuality());
    });

    test('media state, mute all without self-unmute, unmute requests, background, accessibility', async () => {
      const room = uniqueName('media');
      const host = await join(room, 'h', true);
      const a = await join(room, 'a');
      await a.client.controller.enableCamera();
      await a.client.controller.enableScreenShare();
      await untilState(host, (st) =>
        st.media.some((m) => m.userId === 'a' && m.screenShareEnabled),
      );
      assert.equal(host.client.controller.isCameraEnabled('a'), true);
      await host.client.controller.muteAll(false);
      await untilState(a, (st) => st.media.some((m) => m.userId === 'a' && m.microphoneMuted));
      assert.equal(a.client.controller.isMicrophoneMuted(), true);
      await refused(a.client.controller.unmuteMicrophone(), 'self_unmute_not_allowed');
      // Leaving and rejoining keeps the mute, in the rejoiner's snapshot and in the room's mirror.
      await a.client.disconnect();
      await untilState(host, (st) => !st.media.some((m) => m.userId === 'a'));
      await a.client.connect(roomOptions(room, 'a'));
      assert.equal(a.client.controller.isMicrophoneMuted(), true);
      await refused(a.client.controller.unmuteMicrophone(), 'self_unmute_not_allowed');
      await untilState(host, (st) =>
        st.media.some((m) => m.userId === 'a' && m.microphoneMuted && !m.selfUnmuteAllowed),
      );
      await host.client.controller.unmuteParticipant('a');
      await untilState(a, (st) => st.media.some((m) => m.userId === 'a' && m.selfUnmuteAllowed));
      await a.client.controller.unmuteMicrophone();
      await untilState(host, (st) => st.media.some((m) => m.userId === 'a' && !m.microphoneMuted));
      await host.client.controller.muteParticipant('a');
      await untilState(a, () => a.client.controller.isMicrophoneMuted());

      await a.client.controller.applyBackgroundEffect({ type: 'blur', strength: 0.5 });
      await a.client.controller.updateAccessibilitySettings({ captions: true });
      await untilState(
        host,
        () => host.client.controller.getAccessibilitySettings('a').captions === true,
      );
      assert.deepEqual(host.client.controller.getCurrentBackgroundEffect('a'), {
        type: 'blur',
        strength: 0.5,
      });
      await a.client.controller.removeBackgroundEffect();
      await untilState(
        host,
        () => host.client.controller.getCurrentBackgroundEffect('a').type === 'none',
      );
      // Spotlight and local pins.
      await host.client.controller.spotlight('a');
      await untilState(a, (st) => st.spotlight.includes('a'));
      assert.deepEqual(
        a.client.controller.getSpotlightedParticipants().map((p) => p.userId),
        ['a'],
      );
      a.client.controller.pin('h');
      assert.deepEqual(
        a.client.controller.getPinnedParticipants().map((p) => p.userId),
        ['h'],
      );
      assert.deepEqual(host.client.controller.state.value.pinned, []);
      await host.client.controller.unspotlight('a');
      await untilState(a, (st) => st.spotlight.length === 0);
      // A late joiner gets all of it in its snapshot.
      const late = await join(room, 'late');
      const st = late.client.controller.state.value;
      assert.equal(st.media.find((m) => m.userId === 'a')?.microphoneMuted, true);
      assert.equal(st.hostUserId, 'h');
      assert.equal(late.client.controller.getAccessibilitySettings('a').captions, true);
    });
  });
}
