import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, RtClient, startRealtimeServer } from './rt-helpers.ts';

const COUNT = 200;

for (const backend of BACKENDS) {
  describe(`realtime room of ${COUNT} participants (${backend.name})`, () => {
    let s: RealtimeServer;
    const clients: RtClient[] = [];
    before(async () => {
      s = await startRealtimeServer(backend);
    });
    after(async () => {
      for (const c of clients) c.ws.terminate();
      await s.close();
    });

    test(`${COUNT} join, everyone sees everyone, one broadcast reaches all`, async () => {
      const tokens = await Promise.all(
        Array.from({ length: COUNT }, (_, i) => s.token('big-room', `user-${i}`)),
      );
      const opened = await Promise.all(
        tokens.map((t) => RtClient.open(`${s.wsBase}?room=big-room&access_token=${t.token}`)),
      );
      clients.push(...opened);
      await Promise.all(clients.map((c) => c.join()));
      const info = await s.api('GET', '/realtime/rooms/big-room');
      assert.equal(info.body.numParticipants, COUNT);
      // Each client knows all COUNT participants: its snapshot plus the joins after it.
      for (const c of clients) {
        await c.wait(
          () => c.snapshot.participants.length + c.events('participant.joined').length >= COUNT,
        );
      }
      const sent = await clients[0]!.request('message.send', { message: 'hello everyone' });
      assert.equal(sent.type, 'ack');
      const got = await Promise.all(
        clients.map((c) =>
          c.waitType('message.received', (f) => f.data.message === 'hello everyone'),
        ),
      );
      assert.equal(got.length, COUNT);
      for (const f of got) assert.equal(f.seq, sent.data.seq);
    });
  });
}
