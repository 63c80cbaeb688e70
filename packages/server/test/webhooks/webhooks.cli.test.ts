import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { runCli } from '../../src/cli.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';
import { Receiver, verifyStandard } from './receiver.ts';

class Collect extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: string, done: () => void) {
    this.text += chunk.toString();
    done();
  }
}

for (const backend of BACKENDS.slice(0, 1)) {
  describe(`svc webhooks … (CLI, ${backend.name})`, () => {
    let s: TestServer;
    let receiver: Receiver;
    let env: NodeJS.ProcessEnv;
    before(async () => {
      s = await startTestServer(backend, { env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
      await s.app.listen({ port: 0, host: '127.0.0.1' });
      receiver = await Receiver.start();
      const port = (s.app.server.address() as AddressInfo).port;
      env = { SVC_URL: `http://127.0.0.1:${port}`, SVC_ADMIN_TOKEN: s.adminToken };
    });
    after(async () => {
      await s.close();
      await receiver.close();
    });
    const cli = async (...argv: string[]) => {
      const out = new Collect();
      const err = new Collect();
      const code = await runCli([...argv, '--json'], env, out as any, err as any);
      assert.equal(code, 0, err.text);
      return out.text.trim() === 'done' ? undefined : JSON.parse(out.text);
    };

    test('create, test, deliveries, rotate, update, delete through the CLI', async () => {
      const project = s.project.id;
      await cli('projects', 'update', '--project', project, '--webhooks');
      const created = await cli(
        'webhooks',
        'create',
        '--project',
        project,
        '--endpoint-url',
        receiver.url,
        '--events',
        'room.started,room.ended',
      );
      assert.match(created.secret, /^whsec_/);
      assert.deepEqual(created.events, ['room.started', 'room.ended']);
      const sent = await cli('webhooks', 'test', '--project', project, '--webhook', created.id);
      await receiver.until(
        () => receiver.requests.some((r) => r.id === sent.eventId),
        'test event',
      );
      verifyStandard(created.secret, receiver.requests[0]);
      const list = await cli(
        'webhooks',
        'deliveries',
        '--project',
        project,
        '--webhook',
        created.id,
      );
      assert.equal(list.items[0].id, sent.deliveryId);
      const rotated = await cli(
        'webhooks',
        'rotate-secret',
        '--project',
        project,
        '--webhook',
        created.id,
        '--overlap',
        '60',
      );
      assert.match(rotated.secret, /^whsec_/);
      const updated = await cli(
        'webhooks',
        'update',
        '--project',
        project,
        '--webhook',
        created.id,
        '--disable',
      );
      assert.equal(updated.enabled, false);
      assert.equal((await cli('webhooks', 'list', '--project', project)).items.length, 1);
      await cli('webhooks', 'delete', '--project', project, '--webhook', created.id);
      assert.equal((await cli('webhooks', 'list', '--project', project)).items.length, 0);
    });

    test('a refused URL is reported with its code', async () => {
      const out = new Collect();
      const err = new Collect();
      const code = await runCli(
        ['webhooks', 'create', '--project', s.project.id, '--endpoint-url', 'ftp://x.example/'],
        env,
        out as any,
        err as any,
      );
      assert.equal(code, 1);
      assert.match(err.text, /invalid_webhook_url/);
    });
  });
}
