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

    test('a socket that keeps sending but never answers pings is dropped', async () => {
      const t = await s.token('live-chatty', 'chatty');
      const ws = new WebSocket(`${s.wsBase}?access_token=${t.token}`, { autoPong: false });
      const chatty = new RtClient(ws, ws.url);
      open.push(chatty);
      await new Promise((r) => ws.once('open', r));
      await chatty.join();
      // It answers each server ping with a request instead of a pong: writing is not liveness.
      let pings = 0;
      ws.on('ping', () => {
        pings += 1;
        if (ws.readyState === ws.OPEN) chatty.send({ id: `p${pings}`, type: 'ping' });
        if (pings >= 6) ws.terminate();
      });
      const closed = await chatty.closed;
      assert.ok(pings < 6, `still open after ${pings} pings`);
      assert.equal(closed.code, 1006, 'terminated by the server without a close frame');
    });
  });
}

for (const backend of BACKENDS) {
  describe(`realtime slow readers (${backend.name})`, () => {
    let s: RealtimeServer;
    const open: RtClient[] = [];
    before(async () => {
      s = await startRealtimeServer(backend, {
        env: { SVC_REALTIME_RATE_PER_SEC: '100000', SVC_REALTIME_RATE_BURST: '100000' },
      });
    });
    after(async () => {
      for (const c of open) c.ws.terminate();
      await s.close();
    });

    test('a socket that stops reading is closed with 4010 and dropped; the room goes on', async () => {
      const sender = await s.connect('slow', 'sender');
      const reader = await s.connect('slow', 'reader');
      const stalled = await s.connect('slow', 'stalled');
      open.push(sender, reader, stalled);
      for (const c of [sender, reader, stalled]) await c.join();
      (stalled.ws as any)._socket.pause();
      const connected = async () => {
        const parts = await s.api('GET', '/realtime/rooms/slow/participants');
        return parts.body.items.find((p: any) => p.userId === 'stalled').connected;
      };
      // 48 KB frames until the stalled socket is dropped (its participant shows connected: false).
      const payload = { blob: 'x'.repeat(48_000) };
      let sent = 0;
      while ((await connected()) && sent < 2000) {
        const acks = [];
        for (let i = 0; i < 20; i++) acks.push(sender.request('app.blob', payload));
        for (const ack of await Promise.all(acks)) assert.equal(ack.type, 'ack');
        sent += 20;
      }
      assert.equal(await connected(), false, `still connected after ${sent} frames`);
      // The room goes on: the reader gets every frame, and a new one.
      const last = await sender.request('message.send', { message: 'still here' });
      await reader.wait((f) => f.seq === last.data.seq);
      assert.equal(reader.events('app.blob').length, sent);
      (stalled.ws as any)._socket.resume();
      assert.equal((await stalled.closed).code, 4010);
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
