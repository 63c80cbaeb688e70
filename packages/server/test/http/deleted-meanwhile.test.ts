// A project deleted while a node still accepts its keys (another node deleted it, and this
// node's key cache has not heard yet): writes that refer to it answer 404 and store nothing,
// never 500. Without the error handler's foreign-key mapping, rooms and Links answered 500.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

/** Tables with a row per project that the requests below would add to. */
const TABLES = ['realtime_rooms', 'links', 'verifications', 'verify_logs'] as const;

for (const backend of BACKENDS) {
  describe(`a project deleted behind a node's key cache (${backend.name})`, () => {
    let s: TestServer;
    before(async () => {
      s = await startTestServer(backend);
    });
    after(async () => {
      await s?.close();
    });

    const call = (method: 'GET' | 'POST', url: string, key: string, payload?: object) =>
      s.app.inject({
        method,
        url,
        headers: { authorization: `Bearer ${key}`, 'x-project-id': s.project.id },
        ...(payload ? { payload } : {}),
      });

    /**
     * Waits until the key-cache invalidations published while the server was set up have reached
     * it (each empties its cache): a subscriber gets messages in the order they were published.
     */
    async function invalidationsDelivered() {
      let arrived!: () => void;
      const marker = new Promise<void>((resolve) => {
        arrived = resolve;
      });
      const unsubscribe = await s.state.subscribe('test:marker', () => arrived());
      await s.state.publish('test:marker', 'x');
      await marker;
      await unsubscribe();
    }

    test('writes that refer to it answer 404 not_found and store nothing', async () => {
      await invalidationsDelivered();
      // Both keys are in the node's cache after one accepted request each.
      assert.equal((await call('GET', '/v1/realtime/rooms', s.project.serverKey)).statusCode, 200);
      assert.equal((await call('GET', '/v1/sdk/links', s.project.clientKey)).statusCode, 200);

      // As another node deletes it: straight in the store, so this node's cache keeps the keys.
      await s.store.db.deleteFrom('projects').where('id', '=', s.project.id).execute();

      const writes = [
        call('POST', '/v1/realtime/rooms', s.project.serverKey, {
          roomName: 'gone',
          liveType: 'VIDEO_CONFERENCE',
        }),
        call('POST', '/v1/sdk/links', s.project.serverKey, { url: 'https://example.com/x' }),
        call('POST', '/v1/auth/sms/send', s.project.clientKey, { phoneNumber: '+14155550100' }),
      ];
      const answers = await Promise.all(writes);
      assert.deepEqual(
        answers.map((res) => res.statusCode),
        [404, 404, 404],
        answers.map((res) => res.body).join('\n'),
      );
      const codes = answers.map((res) => res.json().code);
      // Verify reads the project's settings first and finds it gone; the others fail on the insert.
      assert.deepEqual(codes, ['not_found', 'not_found', 'project_not_found']);
      for (const table of TABLES) {
        const rows = await s.store.db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('project_id', '=', s.project.id)
          .executeTakeFirstOrThrow();
        assert.equal(Number(rows.n), 0, table);
      }
      assert.doesNotMatch(s.logs.text, /"level":50/, 'nothing logged as an unhandled error');
    });
  });
}
