import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CONTROLLER_REQUEST_TYPES } from '@svc/protocol';
import { BACKENDS, uniqueName } from '../helpers.ts';
import { type RealtimeServer, startRealtimeServer, trackedConnect } from './rt-helpers.ts';

for (const backend of BACKENDS) {
  describe(`room controller: bad input and wire rules (${backend.name})`, {
    timeout: 60_000,
  }, () => {
    let s: RealtimeServer;
    const { connect, terminateAll } = trackedConnect(() => s);
    before(async () => {
      s = await startRealtimeServer(backend);
    });
    after(async () => {
      terminateAll();
      await s.close();
    });

    test('malformed data gets invalid_request and changes nothing; the node keeps serving', async () => {
      const room = uniqueName('bad');
      const host = await connect(room, 'h', { participant: { isHost: true } });
      await host.join();
      const cases: [string, unknown][] = [
        ['poll.create', { question: 'q', options: ['only one'] }],
        ['poll.create', { question: 'q', options: ['a', 'b'], visibility: 'never' }],
        ['poll.respond', { pollId: 1, option: 0 }],
        ['poll.respond', { pollId: 'p', option: -1 }],
        ['chat.send', { text: '' }],
        ['chat.send', { text: 'x'.repeat(5000) }],
        ['hand.lower', { userId: 'a', extra: true }],
        ['participant.kick', {}],
        ['participant.update_state', { background: { type: 'image' } }],
        ['invitation.send', { userIds: [] }],
        ['breakout.move', { userId: 'a' }],
        ['reaction.send', { emoji: 'x'.repeat(33) }],
        ['role.transfer_host', { userId: '' }],
        ['hand.raise', 'not an object'],
      ];
      for (const [type, data] of cases) {
        const answer = await host.request(type, data);
        assert.equal(answer.type, 'error', `${type} ${JSON.stringify(data)}`);
        assert.equal(answer.code, 'invalid_request', `${type} ${JSON.stringify(data)}`);
      }
      const ok = await host.request('hand.raise', {});
      assert.equal(ok.type, 'ack');
      // On Redis the event comes through the room's subscription, which may be after the ack. Any
      // poll event would carry a smaller seq, and events arrive in seq order, so once hand.raised is
      // here a wrongly committed poll would be too.
      await host.waitType('hand.raised');
      assert.equal(host.events('hand.raised').length, 1);
      assert.equal(host.events().filter((e) => e.type.startsWith('poll.')).length, 0);
    });

    test('targets that do not exist or may not be targeted get their code', async () => {
      const room = uniqueName('targets');
      const host = await connect(room, 'h', { participant: { isHost: true } });
      await host.join();
      const expect = async (type: string, data: unknown, code: string) => {
        const answer = await host.request(type, data);
        assert.equal(answer.code, code, `${type} → ${JSON.stringify(answer)}`);
      };
      await expect('participant.kick', { userId: 'ghost' }, 'participant_not_found');
      await expect('participant.kick', { userId: 'h' }, 'invalid_target');
      await expect('role.transfer_host', { userId: 'h' }, 'invalid_target');
      await expect('role.promote', { userId: 'ghost' }, 'participant_not_found');
      await expect('poll.end', { pollId: 'poll_x' }, 'poll_not_found');
      await expect('poll.get', { pollId: 'poll_x' }, 'poll_not_found');
      await expect('invitation.cancel', { invitationId: 'inv_x' }, 'invitation_not_found');
      await expect('invitation.send', { userIds: ['h'] }, 'invalid_target');
      await expect('waiting.approve', { userId: 'ghost' }, 'waiting_not_found');
      await expect('breakout.join', { breakoutId: 'br_x' }, 'breakout_not_found');
      await expect('breakout.move', { userId: 'h', breakoutId: 'br_x' }, 'breakout_not_found');
      await expect('reaction.send', { emoji: 'a' }, 'invalid_reaction');
    });

    test('before session.join only invitation answers are accepted', async () => {
      const room = uniqueName('prejoin');
      const c = await connect(room, 'u');
      for (const type of CONTROLLER_REQUEST_TYPES) {
        if (type === 'invitation.accept' || type === 'invitation.decline') continue;
        const answer = await c.request(type, {});
        assert.equal(answer.type, 'error', type);
        assert.ok(
          ['not_joined', 'invalid_request'].includes(answer.code),
          `${type}: ${answer.code}`,
        );
      }
      const answer = await c.request('invitation.accept', { invitationId: 'inv_x' });
      assert.equal(answer.code, 'invitation_not_found');
      // The connection still joins normally afterwards.
      await c.join();
    });

    test('events carry the room seq and appear in the snapshot of a late joiner', async () => {
      const room = uniqueName('seq');
      const host = await connect(room, 'h', { participant: { isHost: true } });
      await host.join();
      await host.request('hand.raise', {});
      const poll = await host.request('poll.create', { question: 'q', options: ['a', 'b'] });
      assert.equal(poll.type, 'ack');
      const chat = await host.request('chat.send', { text: 'hi' });
      assert.equal(typeof chat.data.seq, 'number');
      const seqs = host.events().map((e) => e.seq);
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
      );
      const late = await connect(room, 'late');
      await late.join();
      const ctl = late.snapshot.controller;
      assert.equal(ctl.hostUserId, 'h');
      assert.deepEqual(
        ctl.hands.map((h: { userId: string }) => h.userId),
        ['h'],
      );
      assert.equal(ctl.polls[0].id, poll.data.pollId);
      assert.deepEqual(
        ctl.chat.map((m: { text: string; seq: number }) => [m.text, m.seq]),
        [['hi', chat.data.seq]],
      );
      assert.equal(late.snapshot.self.isHost, false);
    });
  });
}
