import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, RtClient, startRealtimeServer } from './rt-helpers.ts';

let roomCounter = 0;
const room = (name: string) => `${name}-${++roomCounter}`;

for (const backend of BACKENDS) {
  describe(`realtime session resume (${backend.name})`, () => {
    let s: RealtimeServer;
    const open: RtClient[] = [];
    const connect = async (r: string, user: string) => {
      const c = await s.connect(r, user);
      open.push(c);
      return c;
    };
    /** A second socket with the same token as `c`. */
    const reopen = async (c: RtClient) => {
      const c2 = await RtClient.open(c.url);
      open.push(c2);
      return c2;
    };

    before(async () => {
      s = await startRealtimeServer(backend, { env: { SVC_REALTIME_DEPARTURE_GRACE_MS: '5000' } });
    });
    after(async () => {
      for (const c of open) c.ws.terminate();
      await s.close();
    });

    test('a resume never replays events from before the session joined', async () => {
      const r = room('before-join');
      const alice = await connect(r, 'alice');
      await alice.join();
      const secret = await alice.request('message.send', { message: 'SECRET before bob' });
      assert.equal(secret.type, 'ack');
      const priv = await alice.request('app.private', { note: 'before bob' });
      assert.equal(priv.type, 'ack');
      await alice.close(1000);
      const bob = await connect(r, 'bob');
      await bob.join();
      const joinSeq = bob.lastSeq;
      assert.ok(joinSeq > priv.data.seq);
      const { sessionId, resumeToken } = bob.snapshot;
      await bob.drop();

      const again = await reopen(bob);
      for (const lastSeq of [0, secret.data.seq - 1, joinSeq - 1]) {
        const refused = await again.request('session.resume', { sessionId, resumeToken, lastSeq });
        assert.equal(
          refused.code,
          'resume_failed',
          `lastSeq ${lastSeq}: ${JSON.stringify(refused)}`,
        );
      }
      // The socket stays open, and the session's real position still resumes.
      const ack = await again.request('session.resume', {
        sessionId,
        resumeToken,
        lastSeq: joinSeq,
      });
      assert.equal(ack.type, 'ack', JSON.stringify(ack));
      assert.equal(ack.data.replayed, 0);
      await again.request('message.send', { message: 'after' });
      await again.waitType('message.received', (f) => f.data.message === 'after');
      const leaked = again.frames.filter((f) => typeof f.seq === 'number' && f.seq <= joinSeq);
      assert.deepEqual(
        leaked.filter((f) => !f.type.startsWith('session.')),
        [],
        'no event at or before the join seq',
      );
    });
  });
}
