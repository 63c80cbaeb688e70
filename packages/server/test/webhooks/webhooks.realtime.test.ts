import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, startRealtimeServer } from '../realtime/rt-helpers.ts';
import { Receiver, verifyStandard } from './receiver.ts';

for (const backend of BACKENDS) {
  describe(`webhooks from realtime rooms (${backend.name})`, () => {
    let s: RealtimeServer;
    let receiver: Receiver;
    let failedOnce = false;
    before(async () => {
      s = await startRealtimeServer(backend, {
        env: {
          SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
          SVC_WEBHOOK_RETRY_SCHEDULE: '0,50ms,50ms',
          // Short, so room.ended comes soon after the last leave; long enough that the room the
          // token created is still there when the first join arrives on a loaded machine.
          SVC_REALTIME_EMPTY_TIMEOUT_MS: '1000',
        },
      });
      // The first participant.joined fails once: the rest of the room must wait for it.
      receiver = await Receiver.start((r) => {
        if (r.json.type === 'participant.joined' && !failedOnce) {
          failedOnce = true;
          return { status: 500 };
        }
        return { status: 200 };
      });
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: true });
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });

    test('a room joined and left sends room.started, participant.joined, participant.left, room.ended in order', async () => {
      const ep = await s.admin('POST', `/projects/${s.project.id}/webhooks`, { url: receiver.url });
      const alice = await s.connect('standup', 'alice');
      await alice.join();
      const bob = await s.connect('standup', 'bob');
      await bob.join();
      assert.equal((await bob.request('session.leave')).type, 'ack');
      assert.equal((await alice.request('session.leave')).type, 'ack');
      await alice.close();
      await bob.close();
      await receiver.until(
        () => receiver.successes.some((r) => r.json.type === 'room.ended'),
        'room.ended',
      );
      assert.deepEqual(
        receiver.successes.map((r) => r.json.type),
        [
          'room.started',
          'participant.joined',
          'participant.joined',
          'participant.left',
          'participant.left',
          'room.ended',
        ],
      );
      for (const r of receiver.requests) {
        verifyStandard(ep.secret, r);
        assert.equal(r.json.data.roomName, 'standup');
      }
      // Nothing after the failed participant.joined was sent before it succeeded.
      const failed = receiver.requests.findIndex((r) => r.status === 500);
      assert.equal(receiver.requests[failed + 1].id, receiver.requests[failed].id);
    });
  });
}
