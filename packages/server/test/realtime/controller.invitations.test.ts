import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { BACKENDS, uniqueName } from '../helpers.ts';
import { Receiver, verifyStandard } from '../webhooks/receiver.ts';
import { type RealtimeServer, startRealtimeServer } from './rt-helpers.ts';

for (const backend of BACKENDS) {
  describe(`room controller: invitations reach an invitee outside the room (${backend.name})`, () => {
    let s: RealtimeServer;
    let receiver: Receiver;
    before(async () => {
      s = await startRealtimeServer(backend, {
        env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true', SVC_WEBHOOK_RETRY_SCHEDULE: '0,50ms,50ms' },
      });
      receiver = await Receiver.start();
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });

    test('invitation.created and invitation.updated webhooks; the invitee answers before joining', async () => {
      const ep = await s.admin('POST', `/projects/${s.project.id}/webhooks`, { url: receiver.url });
      const room = uniqueName('ring');
      const caller = await s.connect(room, 'caller');
      await caller.join();
      const sent = await caller.request('invitation.send', {
        userIds: ['callee'],
        metadata: '{"video":true}',
      });
      assert.equal(sent.type, 'ack');
      const ofType = (type: string) => receiver.successes.find((r) => r.json.type === type);
      await receiver.until(() => ofType('invitation.created') !== undefined, 'invitation.created');
      const created = ofType('invitation.created')!;
      verifyStandard(ep.secret, created);
      assert.equal(created.json.data.roomName, room);
      assert.equal(created.json.data.invitation.id, sent.data.invitationId);
      assert.deepEqual(created.json.data.invitation.invitees, [
        { userId: 'callee', outcome: 'pending' },
      ]);
      // The invitee's app (rung by its backend) answers on the room's channel, then joins.
      const callee = await s.connect(room, 'callee');
      const accepted = await callee.request('invitation.accept', {
        invitationId: sent.data.invitationId,
      });
      assert.equal(accepted.type, 'ack');
      const again = await callee.request('invitation.decline', {
        invitationId: sent.data.invitationId,
      });
      assert.equal(again.code, 'invitation_not_found');
      await callee.join();
      await receiver.until(() => ofType('invitation.updated') !== undefined, 'invitation.updated');
      const updated = ofType('invitation.updated')!;
      assert.equal(updated.json.data.userId, 'callee');
      assert.equal(updated.json.data.outcome, 'accepted');
      const ev = await caller.waitType('invitation.updated');
      assert.equal(ev.data.outcome, 'accepted');
    });

    test('a webhook the database refuses after the commit: the command stands, the failure is logged', async () => {
      const room = uniqueName('ring');
      const caller = await s.connect(room, 'caller');
      await caller.join();
      // The outbox's table goes away under the running server: storing the webhook fails.
      await sql`ALTER TABLE webhook_events RENAME TO webhook_events_away`.execute(s.store.db);
      try {
        const sent = await caller.request('invitation.send', { userIds: ['callee'] });
        assert.equal(sent.type, 'ack');
        const ev = await caller.waitType('invitation.created');
        assert.equal(ev.data.invitation.id, sent.data.invitationId);
      } finally {
        await sql`ALTER TABLE webhook_events_away RENAME TO webhook_events`.execute(s.store.db);
      }
      const line = s.logs.lines
        .map((l) => JSON.parse(l))
        .find((l) => l.msg === 'realtime: a step after a room commit failed');
      assert.ok(line, 'the failure is logged');
      assert.equal(line.level, 40);
      assert.match(line.roomId, /^rm_/);
      assert.ok(line.err, 'with its error');
    });
  });
}
