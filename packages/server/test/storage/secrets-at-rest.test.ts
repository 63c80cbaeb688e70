import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { resolveAdminToken } from '../../src/admin/bootstrap.ts';
import { buildApp } from '../../src/app.ts';
import { AREA_MIGRATIONS, loadConfig } from '../../src/areas.ts';
import { Sealer } from '../../src/sealing.ts';
import { openStore } from '../../src/storage/db.ts';
import { DIALECTS, freshStore, LogCapture } from '../helpers.ts';
import { Receiver, verifyStandard } from '../webhooks/receiver.ts';

const ADMIN = `admin_${randomBytes(8).toString('hex')}`;
const S1 = `first_${randomBytes(16).toString('hex')}`;
const S2 = `second_${randomBytes(16).toString('hex')}`;
const ENV = {
  LOG_LEVEL: 'warn',
  SVC_BOOTSTRAP: 'false',
  SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
  SVC_WEBHOOK_POLL_MS: '20',
};
const mode = (file: string) => fs.statSync(file).mode & 0o777;

describe('sealing', () => {
  test('a value opens only for its purpose and context, and with the secret that sealed it', () => {
    const sealer = new Sealer(S1);
    const sealed = sealer.seal('webhooks:endpoint-secrets', 'whsec_x', 'whe_1');
    assert.match(
      sealed,
      /^v2\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{22}$/,
    );
    assert.ok(!sealed.includes('whsec_x'));
    assert.deepEqual(sealer.open('webhooks:endpoint-secrets', sealed, 'whe_1'), {
      plaintext: 'whsec_x',
      stale: false,
    });
    assert.equal(sealer.open('webhooks:endpoint-secrets', sealed, 'whe_2'), null, 'other row');
    assert.equal(sealer.open('tokens:signing-keys', sealed, 'whe_1'), null, 'other purpose');
    assert.equal(new Sealer(S2).open('webhooks:endpoint-secrets', sealed, 'whe_1'), null);
    const rotated = new Sealer(S2, [S1]);
    assert.deepEqual(rotated.open('webhooks:endpoint-secrets', sealed, 'whe_1'), {
      plaintext: 'whsec_x',
      stale: true,
    });
    const parts = sealed.split('.');
    const truncated = [...parts.slice(0, 4), parts[4].slice(0, 6)].join('.');
    assert.equal(sealer.open('webhooks:endpoint-secrets', truncated, 'whe_1'), null, 'short tag');
  });
});

for (const dialect of DIALECTS) {
  describe(`secrets at rest (${dialect})`, () => {
    let fresh: Awaited<ReturnType<typeof freshStore>>;
    let receiver: Receiver;
    let app: FastifyInstance | undefined;
    before(async () => {
      fresh = await freshStore(dialect);
      receiver = await Receiver.start();
    });
    after(async () => {
      await app?.close();
      await receiver.close();
      await fresh.drop();
    });

    const start = async (env: Record<string, string>) => {
      await app?.close();
      app = undefined;
      app = await buildApp({
        config: loadConfig({ ...ENV, ...env }),
        adminToken: ADMIN,
        store: fresh.store,
        logStream: new LogCapture(),
      });
      await app.ready();
      return app;
    };
    const admin = async (
      a: FastifyInstance,
      method: 'GET' | 'POST' | 'PATCH',
      url: string,
      body?: object,
    ) => {
      const res = await a.inject({
        method,
        url: `/v1/admin${url}`,
        headers: { authorization: `Bearer ${ADMIN}` },
        ...(body ? { payload: body } : {}),
      });
      assert.ok(res.statusCode < 300, `${method} ${url} → ${res.statusCode} ${res.body}`);
      return res.json();
    };
    const stored = async () => ({
      keys: await fresh.store.db
        .selectFrom('signing_keys')
        .select(['kid', 'private_jwk'])
        .execute(),
      endpoints: await fresh.store.db
        .selectFrom('webhook_endpoints')
        .select(['id', 'secret', 'previous_secret'])
        .execute(),
      projects: await fresh.store.db.selectFrom('projects').select(['settings']).execute(),
    });
    /** Sends a test event to `endpoint` and checks it is signed with `secret`. */
    const deliversSignedWith = async (
      a: FastifyInstance,
      projectId: string,
      endpointId: string,
      secret: string,
    ) => {
      const { eventId } = await admin(
        a,
        'POST',
        `/projects/${projectId}/webhooks/${endpointId}/test`,
      );
      await receiver.until(() => receiver.requests.some((r) => r.id === eventId), 'test event');
      const received = receiver.requests.find((r) => r.id === eventId)!;
      assert.equal((verifyStandard(secret, received) as { type: string }).type, 'webhook.test');
    };

    let projectId: string;
    let endpoint: { id: string; secret: string };
    let token: string;
    let twilioToken: string;

    test('private signing keys, webhook secrets and SMS credentials are stored sealed, never in clear', async () => {
      const a = await start({ SVC_SECRET: S1 });
      projectId = (await admin(a, 'POST', '/projects', { name: 'sealed' })).id;
      await admin(a, 'PATCH', `/projects/${projectId}`, { webhooksEnabled: true });
      endpoint = await admin(a, 'POST', `/projects/${projectId}/webhooks`, { url: receiver.url });
      await admin(a, 'POST', `/projects/${projectId}/webhooks/${endpoint.id}/rotate-secret`, {
        overlapSeconds: 3600,
      }).then((r) => {
        endpoint = { id: endpoint.id, secret: r.secret };
      });
      twilioToken = `tw_${randomBytes(12).toString('hex')}`;
      await admin(a, 'PATCH', `/projects/${projectId}`, {
        settings: {
          verify: {
            sender: {
              type: 'twilio',
              accountSid: 'AC123',
              authToken: twilioToken,
              from: '+15005550006',
            },
          },
        },
      });
      token = (
        await a.svc.signingKeys.sign(
          {},
          { audience: 'svc:test', subject: 's', expiresInSeconds: 3600 },
        )
      ).token;

      const rows = await stored();
      assert.ok(rows.keys.length >= 1);
      for (const key of rows.keys) {
        assert.match(key.private_jwk, /^v2\./);
        assert.ok(!key.private_jwk.includes('"d"'));
      }
      for (const e of rows.endpoints) {
        assert.match(e.secret, /^v2\./);
        assert.match(e.previous_secret ?? '', /^v2\./);
        assert.ok(!e.secret.includes('whsec_'));
      }
      assert.ok(!JSON.stringify(rows.projects).includes(twilioToken));
      if (dialect === 'sqlite') {
        // The bytes on disk (database and WAL) hold none of them either.
        const file = fresh.file!;
        const bytes = Buffer.concat(
          [file, `${file}-wal`].filter(fs.existsSync).map((f) => fs.readFileSync(f)),
        );
        assert.equal(bytes.indexOf(endpoint.secret), -1, 'webhook secret on disk');
        assert.equal(bytes.indexOf(endpoint.secret.slice('whsec_'.length)), -1);
        assert.equal(bytes.indexOf(twilioToken), -1, 'SMS credential on disk');
        assert.equal(bytes.indexOf('"d":"'), -1, 'a private JWK on disk');
      }
      await deliversSignedWith(a, projectId, endpoint.id, endpoint.secret);
    });

    test('after a restart, earlier tokens verify and webhooks still sign with the same secret', async () => {
      const b = await start({ SVC_SECRET: S1 });
      assert.equal((await b.svc.signingKeys.verify(token, 'svc:test')).ok, true);
      await deliversSignedWith(b, projectId, endpoint.id, endpoint.secret);
    });

    test('rows stored in clear are sealed on start', async () => {
      const a = app!;
      // As a server before sealing left them: the private JWK and the secrets in clear.
      const [key] = (await stored()).keys;
      const opened = a.svc.sealer.open('tokens:signing-keys', key.private_jwk, key.kid)!.plaintext;
      await fresh.store.db
        .updateTable('signing_keys')
        .set({ private_jwk: opened })
        .where('kid', '=', key.kid)
        .execute();
      const clearEndpoint = await admin(a, 'POST', `/projects/${projectId}/webhooks`, {
        url: receiver.url,
      });
      await fresh.store.db
        .updateTable('webhook_endpoints')
        .set({ secret: clearEndpoint.secret, previous_secret: 'whsec_previousInClear' })
        .where('id', '=', clearEndpoint.id)
        .execute();
      assert.ok(opened.includes('"d"'));

      const b = await start({ SVC_SECRET: S1 });
      const rows = await stored();
      for (const k of rows.keys) assert.match(k.private_jwk, /^v2\./);
      const e = rows.endpoints.find((x) => x.id === clearEndpoint.id)!;
      assert.match(e.secret, /^v2\./);
      assert.match(e.previous_secret!, /^v2\./);
      assert.equal((await b.svc.signingKeys.verify(token, 'svc:test')).ok, true);
      await deliversSignedWith(b, projectId, clearEndpoint.id, clearEndpoint.secret);
    });

    test('rotation: SVC_SECRET_PREVIOUS opens, everything is sealed again under the new secret', async () => {
      const kidOf = (sealed: string) => sealed.split('.')[1];
      const before = await stored();
      const oldKid = kidOf(before.keys[0].private_jwk);

      // A new secret without the previous one cannot open the store: the server refuses to start.
      await app?.close();
      app = undefined;
      await assert.rejects(
        buildApp({
          config: loadConfig({ ...ENV, SVC_SECRET: S2 }),
          adminToken: ADMIN,
          store: fresh.store,
          logStream: new LogCapture(),
        }),
        /SVC_SECRET_PREVIOUS/,
      );

      await start({ SVC_SECRET: S2, SVC_SECRET_PREVIOUS: S1 });
      const after = await stored();
      for (const k of after.keys) assert.notEqual(kidOf(k.private_jwk), oldKid);
      for (const e of after.endpoints) {
        assert.notEqual(kidOf(e.secret), oldKid);
        if (e.previous_secret) assert.notEqual(kidOf(e.previous_secret), oldKid);
      }
      const settings = JSON.stringify(after.projects);
      assert.ok(!settings.includes(`"v2.${oldKid}.`), 'the SMS credential is sealed again');

      // The previous secret is no longer needed.
      const c = await start({ SVC_SECRET: S2 });
      assert.equal((await c.svc.signingKeys.verify(token, 'svc:test')).ok, true);
      await deliversSignedWith(c, projectId, endpoint.id, endpoint.secret);
      const sealer = new Sealer(S2);
      const sender = JSON.parse(after.projects.find((p) => p.settings.includes('twilio'))!.settings)
        .verify.sender;
      assert.equal(
        sealer.open('verify:sender-secrets', sender.authTokenEncrypted)?.plaintext,
        twilioToken,
      );
    });
  });
}

describe('data files (embedded default)', () => {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-modes-'));
  after(() => fs.rmSync(parent, { recursive: true, force: true }));

  test('DATA_DIR is 0700; the database, its -wal and -shm, admin-token and server-secret are 0600', async () => {
    const dataDir = path.join(parent, 'data');
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', SVC_BOOTSTRAP: 'false' });
    const admin = resolveAdminToken(config);
    const app = await buildApp({ config, adminToken: admin.token, logStream: new LogCapture() });
    await app.ready();
    try {
      assert.equal(mode(dataDir), 0o700);
      for (const name of [
        'svc.sqlite',
        'svc.sqlite-wal',
        'svc.sqlite-shm',
        'admin-token',
        'server-secret',
      ]) {
        assert.equal(mode(path.join(dataDir, name)).toString(8), '600', name);
      }
    } finally {
      await app.close();
    }
  });

  test('files and the folder left readable by an earlier version are tightened on start', async () => {
    const dataDir = path.join(parent, 'old');
    fs.mkdirSync(dataDir, { mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    const file = path.join(dataDir, 'svc.sqlite');
    const earlier = await openStore({ sqliteFile: file, migrations: AREA_MIGRATIONS });
    await earlier.close();
    fs.chmodSync(dataDir, 0o755);
    for (const name of ['svc.sqlite', 'admin-token', 'server-secret']) {
      const f = path.join(dataDir, name);
      if (!fs.existsSync(f)) fs.writeFileSync(f, `${randomBytes(8).toString('hex')}\n`);
      fs.chmodSync(f, 0o644);
    }
    const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', SVC_BOOTSTRAP: 'false' });
    const admin = resolveAdminToken(config);
    const app = await buildApp({ config, adminToken: admin.token, logStream: new LogCapture() });
    await app.ready();
    try {
      assert.equal(mode(dataDir), 0o700);
      for (const name of [
        'svc.sqlite',
        'svc.sqlite-wal',
        'svc.sqlite-shm',
        'admin-token',
        'server-secret',
      ]) {
        assert.equal(mode(path.join(dataDir, name)).toString(8), '600', name);
      }
    } finally {
      await app.close();
    }
  });
});
