import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, type RtClient, startRealtimeServer } from './rt-helpers.ts';

for (const backend of BACKENDS) {
  describe(`realtime bad input (${backend.name})`, () => {
    let s: RealtimeServer;
    const open: RtClient[] = [];
    let n = 0;
    const joined = async (room: string) => {
      const c = await s.connect(room, `user${++n}`);
      open.push(c);
      await c.join();
      return c;
    };

    before(async () => {
      s = await startRealtimeServer(backend, {
        env: {
          SVC_REALTIME_RATE_PER_SEC: '20',
          SVC_REALTIME_RATE_BURST: '40',
          SVC_REALTIME_HANDSHAKE_TIMEOUT_MS: '300',
        },
      });
    });
    after(async () => {
      for (const c of open) c.ws.terminate();
      await s.close();
    });

    test('unreadable frames get an error frame and change nothing', async () => {
      const c = await joined('bad-1');
      c.send('this is not json');
      assert.equal((await c.waitType('error')).code, 'invalid_message');
      c.send('[1,2,3]');
      c.send('{"type":"message.send","data":{"message":"no id"}}');
      c.ws.send(Buffer.from([1, 2, 3]), { binary: true });
      await c.wait(() => c.frames.filter((f) => f.type === 'error').length >= 4);
      const errors = c.frames.filter((f) => f.type === 'error');
      assert.deepEqual(
        errors.map((e) => e.code),
        ['invalid_message', 'invalid_message', 'invalid_message', 'invalid_message'],
      );
      for (const e of errors) assert.equal(e.id, undefined);
      const unknown = await c.request('room.explode', {});
      assert.equal(unknown.code, 'unknown_message_type');
      assert.equal(unknown.id, '2');
      const badData = await c.request('message.send', { message: 42 });
      assert.equal(badData.code, 'invalid_request');
      const extra = await c.request('message.send', { message: 'x', admin: true });
      assert.equal(extra.code, 'invalid_request');
      const tooLong = await c.request('message.send', { message: 'x'.repeat(16_385) });
      assert.equal(tooLong.code, 'invalid_request');
      // Still in the room and working.
      const ok = await c.request('message.send', { message: 'still here' });
      assert.equal(ok.type, 'ack');
      // The echo may follow the ack (on Redis it comes through the room's subscription); a wrongly
      // accepted message would carry a smaller seq and so arrive before it.
      await c.waitType('message.received', (f) => f.data.message === 'still here');
      assert.equal(c.events('message.received').length, 1);
    });

    test('prototype names as frame types are unknown types, before and after joining', async () => {
      const early = await s.connect('bad-proto', `user${++n}`);
      open.push(early);
      for (const type of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
        const refused = await early.request(type);
        assert.equal(refused.code, 'unknown_message_type', type);
      }
      await early.join();
      for (const type of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
        const refused = await early.request(type, {});
        assert.equal(refused.code, 'unknown_message_type', type);
      }
      assert.equal((await early.request('ping')).type, 'pong');
    });

    test('deep, non-finite, NUL and lone-surrogate data is refused with invalid_request and logs no error', async () => {
      const c = await joined('bad-deep');
      const deep = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;
      c.send(`{"id":"deep","type":"app.deep","data":${deep}}`);
      const deepError = await c.wait((f) => f.id === 'deep');
      assert.equal(deepError.code, 'invalid_request', JSON.stringify(deepError));
      c.send(
        '{"id":"inf","type":"session.resume","data":{"sessionId":"s","resumeToken":"t","lastSeq":1e309}}',
      );
      assert.equal((await c.wait((f) => f.id === 'inf')).code, 'invalid_request');
      const nul = await c.request('room.update_metadata', { metadata: 'a\u0000b' });
      assert.equal(nul.code, 'invalid_request');
      const nulApp = await c.request('app.note', { text: 'x\u0000' });
      assert.equal(nulApp.code, 'invalid_request');
      const lone = await c.request('message.send', { message: 'a\ud800' });
      assert.equal(lone.code, 'invalid_request', JSON.stringify(lone));
      assert.match(lone.message, /data\.message .*surrogate/);
      const loneKey = await c.request('app.note', { 'k\udc00': 1 });
      assert.equal(loneKey.code, 'invalid_request', JSON.stringify(loneKey));
      assert.match(loneKey.message, /data\.k\\udc00 /);
      assert.ok(!s.logs.text.includes('"level":50'), 'an error was logged');
      const rooms = await s.api('GET', '/realtime/rooms');
      assert.equal(rooms.status, 200);
    });

    test('a message for another room is refused', async () => {
      const c = await joined('bad-2');
      const res = await c.request('message.send', { message: 'hi', roomName: 'bad-other' });
      assert.equal(res.code, 'token_room_mismatch');
      assert.equal(
        (await c.request('message.send', { message: 'hi', roomName: 'bad-2' })).type,
        'ack',
      );
    });

    test('requests before joining are refused; no join in time closes with 4010', async () => {
      const c = await s.connect('bad-3', 'early');
      open.push(c);
      assert.equal((await c.request('message.send', { message: 'hi' })).code, 'not_joined');
      assert.equal((await c.closed).code, 4010);
    });

    test('a frame over 64 KiB closes the socket with 1009; others are unaffected', async () => {
      const bystander = await joined('bad-4-other');
      const c = await joined('bad-4');
      c.send(
        JSON.stringify({ id: '1', type: 'message.send', data: { message: 'x'.repeat(70_000) } }),
      );
      assert.equal((await c.closed).code, 1009);
      assert.equal((await bystander.request('message.send', { message: 'fine' })).type, 'ack');
    });

    test('WebSocket protocol faults close with 1007 and 1009 and log no error', async () => {
      const utf8 = await joined('bad-utf8');
      // A text frame that is not UTF-8: ws sends a Buffer as is.
      utf8.ws.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
      assert.equal((await utf8.closed).code, 1007);
      const big = await joined('bad-big');
      big.send(JSON.stringify({ id: '1', type: 'ping', data: { pad: 'x'.repeat(70_000) } }));
      assert.equal((await big.closed).code, 1009);
      assert.doesNotMatch(s.logs.text, /"level":50/, 'an error was logged');
      assert.doesNotMatch(s.logs.text, /WS_ERR_/, 'a client fault was logged above debug');
    });

    test('a flood is rate limited, then closed with 4429; other rooms keep working', async () => {
      const bystander = await joined('bad-5-other');
      const c = await joined('bad-5');
      for (let i = 0; i < 400; i++) c.send({ id: `p${i}`, type: 'ping' });
      const closed = await c.closed;
      assert.equal(closed.code, 4429);
      assert.ok(c.frames.some((f) => f.type === 'error' && f.code === 'rate_limited'));
      const end = c.frames.find((f) => f.type === 'session.closed');
      assert.equal(end.data.reason, 'PROTOCOL_VIOLATION');
      assert.equal(end.data.closeCode, 4429);
      assert.equal((await bystander.request('message.send', { message: 'fine' })).type, 'ack');
      // The flooder was removed from its room.
      const parts = await s.api('GET', '/realtime/rooms/bad-5/participants');
      assert.equal(parts.body.items.length, 0);
    });

    test('a request refused rate_limited is answered with its id', async () => {
      const c = await joined('bad-5-ids');
      // 60 pings in a row exceed the burst of 40 but not the 100 refused in a row that close.
      const ids = Array.from({ length: 60 }, (_, i) => `r${i}`);
      for (const id of ids) c.send({ id, type: 'ping' });
      await c.wait(() => ids.every((id) => c.frames.some((f) => f.id === id)));
      for (const id of ids) {
        const answers = c.frames.filter((f) => f.id === id);
        assert.equal(answers.length, 1, `${id}: ${JSON.stringify(answers)}`);
      }
      const refused = c.frames.filter((f) => f.type === 'error');
      assert.ok(refused.length > 0, 'some pings were over the limit');
      for (const f of refused) assert.equal(f.code, 'rate_limited');
    });

    test('a stream of garbage closes with 4400', async () => {
      const c = await joined('bad-6');
      for (let i = 0; i < 25; i++) c.send(`garbage ${i}`);
      assert.equal((await c.closed).code, 4400);
      const end = c.frames.find((f) => f.type === 'session.closed');
      assert.equal(end.data.closeCode, 4400);
    });

    test('requests sent before the token is verified each get an answer, those beyond 16 rate_limited', async () => {
      const t = await s.token('bad-early', 'eager');
      const raw = await RawSocket.open(s.port);
      // The upgrade, session.join and 30 pings in one TCP write: all arrive before verification.
      const frames = [{ id: 'j', type: 'session.join' }];
      for (let i = 0; i < 30; i++) frames.push({ id: `p${i}`, type: 'ping' });
      raw.write(
        Buffer.concat([
          Buffer.from(
            `GET /v1/realtime/ws?access_token=${t.token} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
              'Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n' +
              `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`,
          ),
          ...frames.map((f) => maskedTextFrame(JSON.stringify(f))),
        ]),
      );
      await raw.wait((f) => f.id === 'j');
      // Requests are answered in order after those: this one's pong comes after every answer.
      raw.write(maskedTextFrame(JSON.stringify({ id: 'last', type: 'ping' })));
      await raw.wait((f) => f.id === 'last');
      raw.socket.destroy();
      assert.equal(raw.frames.find((f) => f.id === 'j').type, 'ack');
      for (const f of frames.slice(1)) {
        const answers = raw.frames.filter((a) => a.id === f.id);
        assert.equal(answers.length, 1, `${f.id}: ${JSON.stringify(answers)}`);
        const [answer] = answers;
        assert.ok(
          answer.type === 'pong' || (answer.type === 'error' && answer.code === 'rate_limited'),
          JSON.stringify(answer),
        );
      }
      const refused = raw.frames.filter((f) => f.type === 'error');
      assert.equal(refused.length, 15, 'the first 16 requests are held, the 15 after refused');
    });

    test('the server is still healthy', async () => {
      const res = await s.app.inject({ method: 'GET', url: '/healthz' });
      assert.equal(res.statusCode, 200);
      const c = await joined('bad-7');
      assert.equal((await c.request('ping')).type, 'pong');
    });
  });
}

/** A masked client text frame (a zero mask key leaves the payload as is). */
function maskedTextFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const head =
    payload.length < 126
      ? Buffer.from([0x81, 0x80 | payload.length])
      : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  return Buffer.concat([head, Buffer.alloc(4), payload]);
}

/** A WebSocket client over a bare TCP socket, to control what each write holds. */
class RawSocket {
  frames: any[] = [];
  private buf = Buffer.alloc(0);
  private upgraded = false;
  private waiters: (() => void)[] = [];

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      this.read();
      for (const w of [...this.waiters]) w();
    });
  }

  static async open(port: number) {
    const socket = connect(port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    return new RawSocket(socket);
  }

  write(bytes: Buffer) {
    this.socket.write(bytes);
  }

  /** Parses the 101 response, then unmasked server frames (text frames are kept as JSON). */
  private read() {
    if (!this.upgraded) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      this.upgraded = true;
      this.buf = this.buf.subarray(end + 4);
    }
    while (this.buf.length >= 2) {
      let len = this.buf[1]! & 0x7f;
      let at = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        at = 4;
      }
      if (this.buf.length < at + len) return;
      const opcode = this.buf[0]! & 0x0f;
      if (opcode === 1) this.frames.push(JSON.parse(this.buf.subarray(at, at + len).toString()));
      this.buf = this.buf.subarray(at + len);
    }
  }

  wait(match: (f: any) => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (!this.frames.some(match)) return;
        this.waiters.splice(this.waiters.indexOf(check), 1);
        resolve();
      };
      this.waiters.push(check);
      check();
    });
  }
}
