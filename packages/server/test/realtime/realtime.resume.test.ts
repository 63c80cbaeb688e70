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

    test('a resume while the old socket is open ends that socket (4006) and keeps the session', async () => {
      const r = room('takeover');
      const alice = await connect(r, 'alice');
      await alice.join();
      const carol = await connect(r, 'carol');
      await carol.join();
      await alice.waitType('participant.joined', (f) => f.data.participant.userId === 'carol');
      const mark = alice.frames.length;
      const { sessionId, resumeToken } = carol.snapshot;
      const carol2 = await reopen(carol);
      const ack = await carol2.request('session.resume', {
        sessionId,
        resumeToken,
        lastSeq: carol.lastSeq,
      });
      assert.equal(ack.type, 'ack', JSON.stringify(ack));
      const closed = await carol.waitType('session.closed');
      assert.equal(closed.data.reason, 'DUPLICATE_IDENTITY');
      assert.equal(closed.data.code, 'duplicate_identity');
      assert.equal((await carol.closed).code, 4006);
      // The new socket holds the session: it sends and receives; the room saw nothing.
      await carol2.request('message.send', { message: 'from the new socket' });
      await alice.waitType('message.received', (f) => f.data.message === 'from the new socket');
      await alice.request('message.send', { message: 'to carol' });
      await carol2.waitType('message.received', (f) => f.data.message === 'to carol');
      assert.equal(carol.events('message.received').length, 0);
      const parts = await s.api('GET', `/realtime/rooms/${r}/participants`);
      const entry = parts.body.items.find((p: any) => p.userId === 'carol');
      assert.equal(entry.sid, sessionId);
      assert.equal(entry.connected, true);
      assert.deepEqual(
        alice.frames.slice(mark).filter((f) => f.type.startsWith('participant.')),
        [],
      );
    });

    test("a lastSeq beyond the room's last seq is refused with resume_failed", async () => {
      const r = room('beyond');
      const dave = await connect(r, 'dave');
      await dave.join();
      const { sessionId, resumeToken } = dave.snapshot;
      const lastSeq = dave.lastSeq;
      await dave.drop();
      const again = await reopen(dave);
      for (const beyond of [lastSeq + 1, 2 ** 53 + 2, 1e21]) {
        const refused = await again.request('session.resume', {
          sessionId,
          resumeToken,
          lastSeq: beyond,
        });
        assert.equal(
          refused.code,
          'resume_failed',
          `lastSeq ${beyond}: ${JSON.stringify(refused)}`,
        );
      }
      const ack = await again.request('session.resume', { sessionId, resumeToken, lastSeq });
      assert.equal(ack.type, 'ack', JSON.stringify(ack));
      assert.ok(!s.logs.text.includes('"level":50'), 'an error was logged');
    });
  });
}
