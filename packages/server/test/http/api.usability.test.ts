// What a new user trips over: answers that say what to do, optional bodies that are optional.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { runCli } from '../../src/cli.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

class Sink extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    this.text += chunk.toString();
    done();
  }
}

test('the CLI names the URL and the reason when the server cannot be reached', async () => {
  const out = new Sink();
  const err = new Sink();
  const code = await runCli(
    ['projects', 'list'],
    { SVC_URL: 'http://127.0.0.1:9', SVC_ADMIN_TOKEN: 'x'.repeat(32) },
    out as never,
    err as never,
  );
  assert.equal(code, 1);
  assert.match(err.text, /cannot reach the server at http:\/\/127\.0\.0\.1:9 \(/);
});

for (const backend of BACKENDS) {
  describe(`API usability (${backend.name})`, () => {
    let s: TestServer;
    const key = () => ({
      authorization: `Bearer ${s.project.serverKey}`,
      'x-project-id': s.project.id,
    });
    const admin = () => ({ authorization: `Bearer ${s.adminToken}` });

    before(async () => {
      s = await startTestServer(backend);
    });
    after(() => s.close());

    test('rotations without a body take their defaults', async () => {
      const rotated = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/projects/${s.project.id}/keys/${s.project.clientKeyId}/rotate`,
        headers: admin(),
      });
      assert.equal(rotated.statusCode, 201, rotated.body);
      const hook = await s.admin('POST', `/projects/${s.project.id}/webhooks`, {
        url: 'https://93.184.215.14/hook',
      });
      const secret = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/projects/${s.project.id}/webhooks/${hook.id}/rotate-secret`,
        headers: admin(),
      });
      assert.equal(secret.statusCode, 201, secret.body);
    });

    test('a bad enum value is answered with the allowed values', async () => {
      const res = await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/rooms',
        headers: key(),
        payload: { roomName: 'enum-room', liveType: 'PODCAST' },
      });
      assert.equal(res.statusCode, 400);
      assert.deepEqual(res.json().errors, [
        {
          path: 'body.liveType',
          message:
            'must be one of "VIDEO_CALL", "VIDEO_CONFERENCE", "LIVE_STREAMING", "AUDIO_CONFERENCE"',
        },
      ]);
    });

    test('a token for an open room needs no liveType; a new room does', async () => {
      const participant = { userId: 'u1', name: 'U' };
      const missing = await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/token',
        headers: key(),
        payload: { roomName: 'lt-room', participant },
      });
      assert.equal(missing.statusCode, 400);
      assert.equal(missing.json().errors[0].path, 'body.liveType');
      await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/rooms',
        headers: key(),
        payload: { roomName: 'lt-room', liveType: 'AUDIO_CONFERENCE' },
      });
      const ok = await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/token',
        headers: key(),
        payload: { roomName: 'lt-room', participant },
      });
      assert.equal(ok.statusCode, 200, ok.body);
    });

    test('webhook refusals say how to proceed', async () => {
      const privateUrl = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/projects/${s.project.id}/webhooks`,
        headers: admin(),
        payload: { url: 'http://127.0.0.1:8080/hook' },
      });
      assert.equal(privateUrl.json().code, 'webhook_url_forbidden');
      assert.match(privateUrl.json().detail, /SVC_WEBHOOK_ALLOW_PRIVATE=true/);
      const hook = await s.admin('POST', `/projects/${s.project.id}/webhooks`, {
        url: 'https://93.184.215.14/hook2',
      });
      await s.admin('PATCH', `/projects/${s.project.id}`, { webhooksEnabled: false });
      const off = await s.app.inject({
        method: 'POST',
        url: `/v1/admin/projects/${s.project.id}/webhooks/${hook.id}/test`,
        headers: admin(),
      });
      assert.equal(off.statusCode, 409);
      assert.match(off.json().detail, /"webhooksEnabled": true/);
    });
  });
}
