import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../server/src/clock.ts';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import { SvcError } from '../src/index.ts';
import { type ListeningServer, roomOptions, startListeningServer, TestClient } from './helpers.ts';

const TOKEN_TTL_SECONDS = 600;

/** Replaces the `access_token` query parameter of a wsUrl. */
function withToken(url: string, token: string) {
  const u = new URL(url);
  u.searchParams.set('access_token', token);
  return u.toString();
}

for (const backend of BACKENDS) {
  describe(`client library, refusals (${backend.name})`, { timeout: 60_000 }, () => {
    let s: ListeningServer;
    // The server's clock: moved forward to expire tokens without waiting.
    const clock = new ManualClock(Date.now());
    const clients: TestClient[] = [];
    const newClient = (options?: ConstructorParameters<typeof TestClient>[1]) => {
      const c = new TestClient(s, options);
      clients.push(c);
      return c;
    };
    before(async () => {
      s = await startListeningServer(
        backend,
        {
          SVC_REALTIME_TOKEN_TTL_SECONDS: String(TOKEN_TTL_SECONDS),
          // Longer than every clock jump below, so that no room ends because of them.
          SVC_REALTIME_EMPTY_TIMEOUT_MS: String(24 * 3600 * 1000),
        },
        clock,
      );
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.client.disconnect()));
      await s.close();
    });

    async function refused(c: TestClient, promise: Promise<unknown>) {
      const err = await promise.then(
        () => assert.fail('connect() must be refused'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SvcError, String(err));
      assert.equal(c.client.connectionState.value, 'FAILED');
      assert.equal(c.client.lastError, err);
      assert.equal(c.client.room, null);
      return err;
    }

    test('an expired token is refused with token_expired (close 4002)', async () => {
      const c = newClient();
      c.rewriteUrl = (url) => {
        // The token was issued a moment ago; by the time the socket opens it has expired.
        clock.advance((TOKEN_TTL_SECONDS + 1) * 1000);
        return url;
      };
      const err = await refused(c, c.connect(roomOptions(uniqueName('expired'), 'late')));
      assert.equal(err.code, 'token_expired');
      assert.equal(err.closeCode, 4002);
      assert.equal(err.status, 401);
    });

    test("another room's token is refused with token_room_mismatch (close 4003)", async () => {
      const c = newClient();
      const other = await c.client.getToken(roomOptions(uniqueName('other'), 'u'));
      c.rewriteUrl = (url) => withToken(url, other.token);
      const err = await refused(c, c.connect(roomOptions(uniqueName('mine'), 'u')));
      assert.equal(err.code, 'token_room_mismatch');
      assert.equal(err.closeCode, 4003);
    });

    test('a forged token is refused with token_invalid (close 4001)', async () => {
      const c = newClient();
      c.rewriteUrl = (url) => {
        const token = new URL(url).searchParams.get('access_token')!;
        const [h, p, sig] = token.split('.');
        return withToken(url, `${h}.${p}.${sig!.slice(0, -4)}AAAA`);
      };
      const err = await refused(c, c.connect(roomOptions(uniqueName('forged'), 'u')));
      assert.equal(err.code, 'token_invalid');
      assert.equal(err.closeCode, 4001);
    });

    test('API key refusals reject connect() with the problem code and request id', async () => {
      const bad = newClient({ apiKey: `svc_pk_${'A'.repeat(43)}000000` });
      const err = await refused(bad, bad.connect(roomOptions(uniqueName('key'), 'u')));
      assert.equal(err.code, 'invalid_api_key');
      assert.equal(err.status, 401);
      assert.ok(err.requestId);
      assert.equal(err.problem?.code, 'invalid_api_key');

      const linksOnly = await s.admin('POST', `/projects/${s.project.id}/keys`, {
        type: 'client',
        scopes: ['links'],
      });
      const scoped = newClient({ apiKey: linksOnly.key });
      const scopeErr = await refused(scoped, scoped.connect(roomOptions(uniqueName('key'), 'u')));
      assert.equal(scopeErr.code, 'insufficient_scope');
      assert.equal(scopeErr.status, 403);
    });

    test('invalid options are refused with invalid_request and the field errors', async () => {
      const c = newClient();
      const err = await refused(c, c.connect(roomOptions('bad room name!', 'u')));
      assert.equal(err.code, 'invalid_request');
      assert.equal(err.status, 400);
      assert.ok(err.problem?.errors?.some((e) => e.path.includes('roomName')));
    });

    test('reconnection after the token expired gets a fresh token and resumes', async () => {
      const roomName = uniqueName('renew');
      const watcher = newClient();
      const c = newClient({ reconnect: { initialDelayMs: 20 } });
      await watcher.connect(roomOptions(roomName, 'watcher'));
      const room = await c.connect(roomOptions(roomName, 'traveller'));
      await watcher.waitFor('joined', (e) => e.participant.userId === 'traveller');
      const sid = room.localParticipant.sid;
      const firstToken = new URL(c.socket.url).searchParams.get('access_token');
      clock.advance((TOKEN_TTL_SECONDS + 1) * 1000);
      c.socket.terminate();
      await c.waitFor('reconnected');
      assert.equal(c.client.room!.localParticipant.sid, sid);
      assert.notEqual(new URL(c.socket.url).searchParams.get('access_token'), firstToken);
      assert.equal(
        watcher.events.filter(
          (e) => e.kind === 'left' || (e.kind === 'joined' && e.participant.userId !== 'traveller'),
        ).length,
        0,
      );
    });
  });

  describe(`client library, token expiry while waiting (${backend.name})`, {
    timeout: 30_000,
  }, () => {
    let short: ListeningServer;
    before(async () => {
      // Real time here: the server times a waiting connection out when its token expires. Two
      // seconds, not one: `exp` is whole seconds, so a 1 s token can have only 1 ms left.
      short = await startListeningServer(backend, { SVC_REALTIME_TOKEN_TTL_SECONDS: '2' });
    });
    after(() => short.close());

    test('a host never came and the token expired: token_expired while waiting', async () => {
      const guest = new TestClient(short);
      // The outcome is handled from the start: it must not count as an unhandled rejection
      // while the test waits for the waiting state.
      const outcome = guest
        .connect(roomOptions(uniqueName('nohost'), 'guest', { canJoinWithNoHost: false }))
        .then(
          () => assert.fail('connect() must be refused'),
          (e: unknown) => e,
        );
      await guest.waitFor('waiting');
      const err = await outcome;
      assert.ok(err instanceof SvcError, String(err));
      assert.equal(err.code, 'token_expired');
      assert.equal(err.closeCode, 4002);
      assert.equal(guest.client.connectionState.value, 'FAILED');
      assert.equal(guest.of('connected').length, 0);
    });
  });
}
