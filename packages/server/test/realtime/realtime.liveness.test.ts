import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, RtClient, startRealtimeServer } from './rt-helpers.ts';

for (const backend of BACKENDS) {
  describe(`realtime liveness (${backend.name})`, () => {
    let s: RealtimeServer;
    const open: RtClient[] = [];
    before(async () => {
      s = await startRealtimeServer(backend, {
        env: { SVC_REALTIME_PING_INTERVAL_MS: '200', SVC_REALTIME_DEPARTURE_GRACE_MS: '300' },
      });
    });
    after(async () => {
      for (const c of open) c.ws.terminate();
      await s.close();
    });

    test('a socket that stops answering pings is dropped, then leaves after the grace period', async () => {
      const a = await s.connect('live', 'alice');
      open.push(a);
      await a.join();
      const t = await s.token('live', 'mute');
      // A client whose network went silent: it never answers the server's pings.
      const ws = new WebSocket(`${s.wsBase}?access_token=${t.token}`, { autoPong: false });
      const silent = new RtClient(ws, ws.url);
      open.push(silent);
      await new Promise((r) => ws.once('open', r));
      await silent.join();
      await a.waitType('participant.joined', (f) => f.data.participant.userId === 'mute');
      const closed = await silent.closed;
      assert.equal(closed.code, 1006, 'terminated by the server without a close frame');
      const left = await a.waitType('participant.left');
      assert.equal(left.data.participant.userId, 'mute');
      assert.equal(left.data.reason, 'DISCONNECTED');
      // Alice answers pings (ws does it by itself) and is still here.
      assert.equal((await a.request('ping')).type, 'pong');
      const parts = await s.api('GET', '/realtime/rooms/live/participants');
      assert.deepEqual(
        parts.body.items.map((p: any) => p.userId),
        ['alice'],
      );
    });
  });
}

// With the room state in Redis, a departure the node did not record outlives it (in process,
// the room state ends with the node).
for (const backend of BACKENDS.filter((b) => b.state === 'redis')) {
  describe(`realtime departures at shutdown (${backend.name})`, () => {
    test('a node stopped while its clients are leaving records every departure before its stores close', async () => {
      const s = await startRealtimeServer(backend);
      const clients: RtClient[] = [];
      for (let i = 0; i < 30; i++) {
        const c = await s.connect('closing-time', `u${i}`);
        await c.join();
        clients.push(c);
      }
      // Every client leaves at once (a normal close: LEFT); the node stops while their
      // departures, one room lock after another, are still being recorded.
      await Promise.all(clients.map((c) => c.close()));
      await s.close();
      assert.doesNotMatch(s.logs.text, /recording a departure failed/);
    });
  });
}
