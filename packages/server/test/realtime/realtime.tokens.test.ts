import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/clock.ts';
import { BACKENDS } from '../helpers.ts';
import { type RealtimeServer, RtClient, startRealtimeServer } from './rt-helpers.ts';

for (const backend of BACKENDS) {
  describe(`realtime token expiry (${backend.name})`, () => {
    let s: RealtimeServer;
    // Token times are whole seconds: start on a second boundary so the lifetime is exact.
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:00.000Z'));
    const open: RtClient[] = [];
    before(async () => {
      s = await startRealtimeServer(backend, {
        clock,
        env: { SVC_REALTIME_TOKEN_TTL_SECONDS: '1' },
      });
    });
    after(async () => {
      for (const c of open) c.ws.terminate();
      await s.close();
    });

    test('an expired token is refused at connect with token_expired (4002)', async () => {
      const t = await s.token('exp-room', 'late');
      assert.equal(t.expiresAt, '2026-06-01T12:00:01.000Z');
      clock.advance(1000);
      const c = await RtClient.open(`${s.wsBase}?room=exp-room&access_token=${t.token}`);
      open.push(c);
      const err = await c.waitType('error');
      assert.equal(err.code, 'token_expired');
      assert.equal((await c.closed).code, 4002);
      clock.advance(-1000);
    });

    test('a guest still waiting for a host when its token expires is refused', async () => {
      const start = clock.now();
      const c = await s.connect('exp-wait', 'guest', { canJoinWithNoHost: false });
      open.push(c);
      assert.equal((await c.request('session.join')).data.status, 'waiting');
      // The server's timer runs for the token's remaining lifetime (1 s of real time here).
      const closed = await c.waitType('session.closed');
      assert.equal(closed.data.reason, 'TOKEN_EXPIRED');
      assert.equal(closed.data.code, 'token_expired');
      assert.equal((await c.closed).code, 4002);
      assert.equal(clock.now(), start);
    });

    test('a token stops working when its project disables Realtime or is deleted', async () => {
      const t = await s.token('gone-room', 'u');
      await s.admin('PATCH', `/projects/${s.project.id}`, { products: ['links'] });
      const off = await RtClient.open(`${s.wsBase}?access_token=${t.token}`);
      open.push(off);
      assert.equal((await off.waitType('error')).code, 'product_not_enabled');
      assert.equal((await off.closed).code, 4001);
      await s.admin('DELETE', `/projects/${s.project.id}`);
      const gone = await RtClient.open(`${s.wsBase}?access_token=${t.token}`);
      open.push(gone);
      assert.equal((await gone.waitType('error')).code, 'token_invalid');
      assert.equal((await gone.closed).code, 4001);
    });
  });
}
