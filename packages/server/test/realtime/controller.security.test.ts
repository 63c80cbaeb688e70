import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../helpers.ts';
import {
  type RealtimeServer,
  type RtClient,
  startRealtimeServer,
  trackedConnect,
} from './rt-helpers.ts';

/**
 * Permissions a modified client must not keep or gain through the room controller: breakout
 * admission and roles follow the main room's assignments and roles, a forced mute outlives a
 * leave and rejoin, and only the server's own pings measure a client's round trip.
 */
for (const backend of BACKENDS) {
  describe(`room controller: revoked permissions (${backend.name})`, { timeout: 60_000 }, () => {
    let s: RealtimeServer;
    const { connect, terminateAll } = trackedConnect(() => s);
    const asHost = { participant: { isHost: true } };
    /** A main room with its host and the given participants joined. */
    const mainRoom = async (prefix: string, users: string[]) => {
      const room = uniqueName(prefix);
      const host = await connect(room, 'h', asHost);
      await host.join();
      const others: Record<string, RtClient> = {};
      for (const u of users) {
        others[u] = await connect(room, u);
        await others[u].join();
      }
      const request = async (type: string, data: unknown) => {
        const answer = await host.request(type, data);
        assert.equal(answer.type, 'ack', `${type} ${JSON.stringify(answer)}`);
        return answer.data;
      };
      return { room, host, others, request };
    };
    /** `session.join` of `userId` in a breakout room, with a token the app would issue. */
    const joinBreakout = async (roomName: string, userId: string) => {
      const c = await connect(roomName, userId);
      return { c, answer: await c.request('session.join') };
    };
    before(async () => {
      s = await startRealtimeServer(backend, { env: { SVC_REALTIME_QUALITY_INTERVAL_MS: '100' } });
    });
    after(async () => {
      terminateAll();
      await s.close();
    });

    test('a user moved out of breakout rooms is no longer admitted to them', async () => {
      const main = await mainRoom('moved', ['p1', 'p2']);
      const a = await main.request('breakout.create', { name: 'A', userIds: ['p1'] });
      const b = await main.request('breakout.create', { name: 'B', userIds: ['p2'] });
      await main.request('breakout.move', { userId: 'p1', breakoutId: b.breakoutId });
      await main.request('breakout.move', { userId: 'p1', breakoutId: null });
      for (const roomName of [a.roomName, b.roomName]) {
        const { answer } = await joinBreakout(roomName, 'p1');
        assert.equal(
          answer.code,
          'breakout_not_assigned',
          `${roomName}: ${JSON.stringify(answer)}`,
        );
      }
      // Assigning p2 to a new breakout room takes it out of B, which stops admitting it.
      const c = await main.request('breakout.create', { name: 'C', userIds: ['p2'] });
      assert.equal((await joinBreakout(b.roomName, 'p2')).answer.code, 'breakout_not_assigned');
      assert.equal((await joinBreakout(c.roomName, 'p2')).answer.data.status, 'joined');
    });

    test('a demoted co-host is no longer admitted to breakout rooms nor host there', async () => {
      const main = await mainRoom('demoted', ['co', 'co2', 'p1']);
      await main.request('role.promote', { userId: 'co' });
      await main.request('role.promote', { userId: 'co2' });
      const a = await main.request('breakout.create', { name: 'A', userIds: ['p1'] });
      // co2 is inside A (its host: the first of the main room's admins there) when demoted.
      const inside = await joinBreakout(a.roomName, 'co2');
      assert.equal(inside.answer.data.status, 'joined');
      await inside.c.waitType('session.joined');
      assert.equal(inside.c.snapshot.self.isHost, true);
      await main.request('role.demote', { userId: 'co' });
      await main.request('role.demote', { userId: 'co2' });
      assert.equal((await joinBreakout(a.roomName, 'co')).answer.code, 'breakout_not_assigned');
      const demoted = await inside.c.waitType('role.changed', (f) => f.data.reason === 'DEMOTED');
      assert.deepEqual(
        [demoted.data.userId, demoted.data.role, demoted.data.reason],
        ['co2', 'participant', 'DEMOTED'],
      );
      const settings = await inside.c.request('room.update_settings', { waitingRoom: true });
      assert.equal(settings.code, 'host_required');
    });

    test('a user promoted in the main room holds the role in its breakout room at once', async () => {
      const main = await mainRoom('promoted', ['p1']);
      const a = await main.request('breakout.create', { name: 'A', userIds: ['p1'] });
      const inside = await joinBreakout(a.roomName, 'p1');
      assert.equal(inside.answer.data.status, 'joined');
      await inside.c.waitType('session.joined');
      await main.request('role.promote', { userId: 'p1' });
      const promoted = await inside.c.waitType('role.changed', (f) => f.data.userId === 'p1');
      assert.deepEqual([promoted.data.role, promoted.data.reason], ['host', 'PROMOTED']);
      assert.equal(
        (await inside.c.request('room.update_settings', { waitingRoom: false })).type,
        'ack',
      );
    });

    test('a co-host visiting a breakout room keeps its role there', async () => {
      const main = await mainRoom('visit', ['co', 'p1']);
      await main.request('role.promote', { userId: 'co' });
      const a = await main.request('breakout.create', { name: 'A', userIds: ['p1'] });
      // A visit is a leave of the main room, which ends the co-host role there.
      const left = await main.others.co!.request('session.leave');
      assert.equal(left.type, 'ack');
      await main.host.waitType('participant.left', (f) => f.data.participant.userId === 'co');
      const visit = await joinBreakout(a.roomName, 'co');
      assert.equal(visit.answer.data.status, 'joined');
      await visit.c.waitType('session.joined');
      assert.equal(visit.c.snapshot.controller.hostUserId, 'co');
    });

    test('a kicked user is not admitted to its breakout room', async () => {
      const main = await mainRoom('kicked', ['p1']);
      const a = await main.request('breakout.create', { name: 'A', userIds: ['p1'] });
      await main.request('participant.kick', { userId: 'p1' });
      assert.equal((await joinBreakout(a.roomName, 'p1')).answer.code, 'breakout_not_assigned');
    });

    test('a forced mute without self-unmute outlives a leave and rejoin', async () => {
      const main = await mainRoom('mute', ['p1']);
      await main.request('media.mute_all', { allowSelfUnmute: false });
      const unmute = { microphoneMuted: false };
      const p1 = main.others.p1!;
      assert.equal((await p1.request('media.update_self', unmute)).code, 'self_unmute_not_allowed');
      assert.equal((await p1.request('session.leave')).type, 'ack');
      await main.host.waitType('participant.left', (f) => f.data.participant.userId === 'p1');
      const seen = main.host.frames.length;
      const again = await connect(main.room, 'p1');
      await again.join();
      const mine = again.snapshot.controller.media.find(
        (m: { userId: string }) => m.userId === 'p1',
      );
      assert.deepEqual([mine?.microphoneMuted, mine?.selfUnmuteAllowed], [true, false]);
      const told = await main.host.waitType(
        'media.state_changed',
        (f) => f.data.userId === 'p1',
        seen,
      );
      assert.deepEqual([told.data.microphoneMuted, told.data.selfUnmuteAllowed], [true, false]);
      assert.equal(
        (await again.request('media.update_self', unmute)).code,
        'self_unmute_not_allowed',
      );
      // The host lifts it for everyone, including those who are away.
      assert.equal((await again.request('session.leave')).type, 'ack');
      await main.request('media.unmute_all', {});
      const third = await connect(main.room, 'p1');
      await third.join();
      assert.equal(
        third.snapshot.controller.media.some((m: { userId: string }) => m.userId === 'p1'),
        false,
      );
      assert.equal((await third.request('media.update_self', unmute)).type, 'ack');
    });

    test('a pong the server did not ask for does not set the measured round trip', async () => {
      const c = await connect(uniqueName('pong'), 'u');
      await c.join();
      // It claims to answer a ping sent at the epoch: a round trip of decades, score 1.
      c.ws.pong('1');
      const report = await c.waitType('network.quality', (f) =>
        f.data.scores.some((q: { userId: string }) => q.userId === 'u'),
      );
      const mine = report.data.scores.find((q: { userId: string }) => q.userId === 'u');
      assert.ok(mine.rttMs !== null && mine.rttMs < 1_000, JSON.stringify(mine));
    });

    test('breakout assignments name users in the room', async () => {
      const main = await mainRoom('ghost', ['p1']);
      const ghost = await main.host.request('breakout.create', {
        name: 'A',
        userIds: ['p1', 'ghost-not-in-room'],
      });
      assert.equal(ghost.code, 'participant_not_found');
      const a = await main.request('breakout.create', { name: 'A', userIds: ['p1'] });
      const moved = await main.host.request('breakout.move', {
        userId: 'ghost-not-in-room',
        breakoutId: a.breakoutId,
      });
      assert.equal(moved.code, 'participant_not_found');
      // A user assigned to a breakout room (and so not in the main room) may still be moved.
      await main.others.p1!.request('session.leave');
      await main.host.waitType('participant.left', (f) => f.data.participant.userId === 'p1');
      await main.request('breakout.move', { userId: 'p1', breakoutId: null });
    });
  });
}
