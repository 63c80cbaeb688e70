import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { type RealtimeServer, withHelpers } from './rt-helpers.ts';

for (const backend of BACKENDS) {
  describe(`realtime REST (${backend.name})`, () => {
    let base: TestServer;
    let s: RealtimeServer;
    before(async () => {
      base = await startTestServer(backend, {
        env: { SVC_PUBLIC_URL: 'https://rt.example.test', SVC_REALTIME_TOKEN_TTL_SECONDS: '3600' },
      });
      s = withHelpers(base, 0);
    });
    after(() => base.close());

    test('create, get, list, delete a room', async () => {
      const created = await s.api(
        'POST',
        '/realtime/rooms',
        {
          roomName: 'Team.Sync:1',
          liveType: 'AUDIO_CONFERENCE',
          maxParticipants: 8,
          metadata: '{"a":1}',
        },
        s.project.clientKey,
      );
      assert.equal(created.status, 201);
      assert.deepEqual(
        { ...created.body, createdAt: undefined },
        {
          roomName: 'Team.Sync:1',
          liveType: 'AUDIO_CONFERENCE',
          status: 'IDLE',
          maxParticipants: 8,
          numParticipants: 0,
          canJoinWithNoHost: true,
          metadata: '{"a":1}',
          createdAt: undefined,
        },
      );
      const again = await s.api('POST', '/realtime/rooms', {
        roomName: 'Team.Sync:1',
        liveType: 'VIDEO_CALL',
      });
      assert.equal(again.status, 409);
      assert.equal(again.body.code, 'room_exists');
      const got = await s.api('GET', '/realtime/rooms/Team.Sync:1');
      assert.deepEqual(got.body, created.body);
      const defaults = await s.api('POST', '/realtime/rooms', {
        roomName: 'plain',
        liveType: 'VIDEO_CALL',
      });
      assert.equal(defaults.body.maxParticipants, 1000);
      assert.equal(defaults.body.metadata, null);
      for (let i = 0; i < 3; i++) {
        await s.api('POST', '/realtime/rooms', { roomName: `page-${i}`, liveType: 'VIDEO_CALL' });
      }
      const page1 = await s.api('GET', '/realtime/rooms?limit=2&page=1');
      assert.equal(page1.status, 200);
      assert.deepEqual(page1.body.meta, { total: 5, page: 1, limit: 2 });
      assert.equal(page1.body.items.length, 2);
      const page3 = await s.api('GET', '/realtime/rooms?limit=2&page=3');
      assert.equal(page3.body.items.length, 1);
      const del = await s.api('DELETE', '/realtime/rooms/plain');
      assert.equal(del.status, 204);
      const ended = await s.api('GET', '/realtime/rooms?status=ENDED');
      assert.deepEqual(
        ended.body.items.map((r: any) => r.roomName),
        ['plain'],
      );
      assert.equal(ended.body.items[0].status, 'ENDED');
      const idle = await s.api('GET', '/realtime/rooms?status=IDLE');
      assert.equal(idle.body.meta.total, 4);
      // An ended name can be used again: a new room.
      const reopened = await s.api('POST', '/realtime/rooms', {
        roomName: 'plain',
        liveType: 'LIVE_STREAMING',
      });
      assert.equal(reopened.status, 201);
      assert.equal(reopened.body.status, 'IDLE');
      assert.equal(reopened.body.liveType, 'LIVE_STREAMING');
      assert.equal(reopened.body.endedAt, undefined);
    });

    test('not found and validation errors', async () => {
      const missing = await s.api('GET', '/realtime/rooms/nope');
      assert.equal(missing.status, 404);
      assert.equal(missing.body.code, 'room_not_found');
      for (const url of ['/realtime/rooms/nope/participants']) {
        assert.equal((await s.api('GET', url)).body.code, 'room_not_found');
      }
      assert.equal((await s.api('DELETE', '/realtime/rooms/nope')).body.code, 'room_not_found');
      const msg = await s.api('POST', '/realtime/rooms/nope/messages', {
        message: 'x',
        sender: { userId: 'u', name: 'U' },
      });
      assert.equal(msg.body.code, 'room_not_found');
      const bad = [
        { roomName: 'has space', liveType: 'VIDEO_CALL' },
        { roomName: 'x'.repeat(129), liveType: 'VIDEO_CALL' },
        { roomName: '', liveType: 'VIDEO_CALL' },
        { roomName: 'ok', liveType: 'PODCAST' },
        { roomName: 'ok', liveType: 'VIDEO_CALL', maxParticipants: 0 },
        { roomName: 'ok', liveType: 'VIDEO_CALL', extra: 1 },
        { roomName: 'ok', liveType: 'VIDEO_CALL', metadata: 'x'.repeat(16_385) },
      ];
      for (const body of bad) {
        const res = await s.api('POST', '/realtime/rooms', body);
        assert.equal(res.status, 400, JSON.stringify(body));
        assert.equal(res.body.code, 'invalid_request');
      }
      const badName = await s.api('GET', '/realtime/rooms/bad%20name');
      assert.equal(badName.body.code, 'invalid_request');
      const badQuery = await s.api('GET', '/realtime/rooms?status=OPEN');
      assert.equal(badQuery.body.code, 'invalid_request');
      const badToken = await s.api('POST', '/realtime/token', {
        roomName: 'ok',
        liveType: 'VIDEO_CALL',
        participant: { name: 'no id' },
      });
      assert.equal(badToken.body.code, 'invalid_request');
      const badMessage = await s.api('POST', '/realtime/rooms/Team.Sync:1/messages', {
        message: '',
        sender: { userId: 'u', name: 'U' },
      });
      assert.equal(badMessage.body.code, 'invalid_request');
      const notJson = await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/rooms',
        headers: {
          authorization: `Bearer ${s.project.serverKey}`,
          'x-project-id': s.project.id,
          'content-type': 'application/json',
        },
        payload: '{nope',
      });
      assert.equal(notJson.json().code, 'malformed_json');
    });

    test('a token is an ES256 JWT with the room claims, verifiable with the JWKS', async () => {
      const res = await s.api(
        'POST',
        '/realtime/token',
        {
          roomName: 'tok-room',
          liveType: 'VIDEO_CALL',
          participant: {
            userId: 'u-1',
            name: 'Ann',
            avatarUrl: 'https://a.test/x.png',
            isHost: true,
          },
          canJoinWithNoHost: false,
          roomMetadata: 'hello',
        },
        s.project.clientKey,
      );
      assert.equal(res.status, 200);
      const { token, roomName, userId, wsUrl, expiresAt } = res.body;
      assert.equal(roomName, 'tok-room');
      assert.equal(userId, 'u-1');
      assert.equal(
        wsUrl,
        `wss://rt.example.test/v1/realtime/ws?room=tok-room&access_token=${token}`,
      );
      const header = decodeProtectedHeader(token);
      assert.equal(header.alg, 'ES256');
      assert.ok(header.kid);
      const jwks = (await s.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
      const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
        audience: 'svc:realtime',
        issuer: 'https://rt.example.test',
      });
      assert.equal(payload.sub, 'u-1');
      assert.equal(payload.pid, s.project.id);
      assert.equal(payload.room, 'tok-room');
      assert.match(String(payload.rid), /^rm_/);
      assert.equal(payload.name, 'Ann');
      assert.equal(payload.avatarUrl, 'https://a.test/x.png');
      assert.equal(payload.host, true);
      assert.equal(payload.canJoinWithNoHost, false);
      assert.ok(payload.jti);
      assert.equal(payload.exp! - payload.iat!, 3600);
      assert.equal(new Date(expiresAt).getTime(), payload.exp! * 1000);
      // The token request created the room with its options.
      const room = await s.api('GET', '/realtime/rooms/tok-room');
      assert.equal(room.body.metadata, 'hello');
      assert.equal(room.body.canJoinWithNoHost, false);
      // A second token for the same room reuses it; each token has its own jti.
      const second = await s.api('POST', '/realtime/token', {
        roomName: 'tok-room',
        liveType: 'VIDEO_CALL',
        participant: { userId: 'u-2', name: 'Bo' },
      });
      const p2 = (await jwtVerify(second.body.token, createLocalJWKSet(jwks))).payload;
      assert.equal(p2.rid, payload.rid);
      assert.notEqual(p2.jti, payload.jti);
      assert.equal(p2.host, false);
      assert.equal(p2.canJoinWithNoHost, true);
    });

    test('messages through the API are accepted for open rooms only', async () => {
      await s.api('POST', '/realtime/rooms', { roomName: 'msg-room', liveType: 'VIDEO_CALL' });
      const ok = await s.api('POST', '/realtime/rooms/msg-room/messages', {
        message: 'hello',
        sender: { userId: 'sys', name: 'System' },
      });
      assert.equal(ok.status, 202);
      assert.equal(typeof ok.body.seq, 'number');
      assert.deepEqual((await s.api('GET', '/realtime/rooms/msg-room/participants')).body, {
        items: [],
      });
      await s.api('DELETE', '/realtime/rooms/msg-room');
      const ended = await s.api('POST', '/realtime/rooms/msg-room/messages', {
        message: 'hello',
        sender: { userId: 'sys', name: 'System' },
      });
      assert.equal(ended.status, 410);
      assert.equal(ended.body.code, 'room_ended');
    });

    test('rooms are per project', async () => {
      await s.api('POST', '/realtime/rooms', { roomName: 'mine-only', liveType: 'VIDEO_CALL' });
      const other = await s.admin('POST', '/projects', { name: 'other' });
      const key = await s.admin('POST', `/projects/${other.id}/keys`, { type: 'server' });
      const res = await s.app.inject({
        method: 'GET',
        url: '/v1/realtime/rooms/mine-only',
        headers: { authorization: `Bearer ${key.key}`, 'x-project-id': other.id },
      });
      assert.equal(res.statusCode, 404);
      const created = await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/rooms',
        headers: { authorization: `Bearer ${key.key}`, 'x-project-id': other.id },
        payload: { roomName: 'mine-only', liveType: 'VIDEO_CALL' },
      });
      assert.equal(created.statusCode, 201, 'the same name in another project is another room');
    });
  });
}
