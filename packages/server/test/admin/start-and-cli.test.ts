import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { after, describe, test } from 'node:test';
import { runCli } from '../../src/cli.ts';

const ROOT = path.resolve(import.meta.dirname, '../../../..');

/** Starts `npm start`'s entry point on a fresh DATA_DIR and collects what it prints. */
async function start(dataDir: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/server/src/main.ts'], {
    cwd: ROOT,
    env: {
      SVC_MEDIA: 'off',
      ...process.env,
      DATA_DIR: dataDir,
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      REDIS_URL: '',
      SVC_ADMIN_TOKEN: '',
      SVC_SECRET: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => {
    out += d;
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', () => {
      if (/Svc is running at[\s\S]*\n\n/.test(out)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  const base = /Svc is running at (http:\/\/\S+)/.exec(out)![1];
  return { child, out, base };
}

async function stop(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const [code] = await exited;
  assert.equal(code, 0, 'graceful shutdown exits 0');
}

class Collect extends Writable {
  text = '';
  override _write(chunk: Buffer, _e: string, done: () => void) {
    this.text += chunk;
    done();
  }
}

describe('npm start on the embedded default, and the svc CLI', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-start-'));
  let child: ChildProcess | undefined;
  after(async () => {
    if (child) await stop(child);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('first start prints project id, keys and admin token; they work; the CLI manages keys', async () => {
    const first = await start(dataDir);
    child = first.child;
    const projectId = /project id:\s+(prj_\S+)/.exec(first.out)![1];
    const clientKey = /client key:\s+(svc_pk_\S+)/.exec(first.out)![1];
    const serverKey = /server key:\s+(svc_sk_\S+)/.exec(first.out)![1];
    const adminToken = /Admin token[^\n]*\n\s+(\S+)/.exec(first.out)![1];
    const tokenFile = path.join(dataDir, 'admin-token');
    assert.equal(fs.readFileSync(tokenFile, 'utf8').trim(), adminToken);
    assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600);
    assert.ok(fs.existsSync(path.join(dataDir, 'svc.sqlite')));

    const ready = await fetch(`${first.base}/readyz`);
    assert.equal(ready.status, 200);
    const keys = await fetch(`${first.base}/v1/admin/projects/${projectId}/keys`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    const listed = await keys.json();
    assert.deepEqual(listed.items.map((k: any) => k.type).sort(), ['client', 'server']);
    assert.ok(
      listed.items.some((k: any) => clientKey.startsWith(k.prefix) && clientKey.endsWith(k.last4)),
    );
    assert.ok(serverKey.length > 40);

    // The CLI finds the admin token in DATA_DIR.
    const out = new Collect();
    const err = new Collect();
    const env = { DATA_DIR: dataDir, SVC_URL: first.base };
    const code = await runCli(
      [
        'keys',
        'create',
        '--project',
        projectId,
        '--type',
        'client',
        '--scopes',
        'realtime,links',
        '--origin',
        'https://*.example.com',
        '--rate-limit',
        '30',
        '--json',
      ],
      env,
      out as any,
      err as any,
    );
    assert.equal(code, 0, err.text);
    const created = JSON.parse(out.text);
    assert.deepEqual(created.scopes, ['realtime', 'links']);
    assert.deepEqual(created.allowedOrigins, ['https://*.example.com']);
    assert.equal(created.rateLimitPerMinute, 30);

    const revokeOut = new Collect();
    assert.equal(
      await runCli(
        ['keys', 'revoke', '--project', projectId, '--key', created.id],
        env,
        revokeOut as any,
        err as any,
      ),
      0,
    );
    const bad = new Collect();
    assert.equal(
      await runCli(
        ['keys', 'create', '--project', projectId, '--type', 'client', '--origin', 'nope'],
        env,
        new Collect() as any,
        bad as any,
      ),
      1,
    );
    assert.match(bad.text, /invalid_request/);
    assert.equal(await runCli(['keys', 'fly'], env, new Collect() as any, new Collect() as any), 2);
    const projectsOut = new Collect();
    assert.equal(
      await runCli(
        ['projects', 'create', '--name', 'cli', '--products', 'links,verify'],
        env,
        projectsOut as any,
        err as any,
      ),
      0,
    );
    assert.deepEqual(JSON.parse(projectsOut.text).products, ['links', 'verify']);

    await stop(child);
    child = undefined;

    // Second start: same store, nothing created, no secrets printed.
    const second = await start(dataDir);
    child = second.child;
    assert.doesNotMatch(second.out, /svc_pk_|svc_sk_|svc_admin_/);
    assert.match(second.out, /Admin token: in /);
  });
});

/** Runs `npm start`'s entry point with `env` until it exits; its exit code and what it printed. */
async function failedStart(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'packages/server/src/main.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      SVC_MEDIA: 'off',
      LOG_LEVEL: 'warn',
      DATABASE_URL: '',
      REDIS_URL: '',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const [code] = await once(child, 'exit');
  return { code, err };
}

test('a start that cannot use its folder or its address says which setting to check', async () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-start-')), 'a-file');
  fs.writeFileSync(file, '');
  const onFile = await failedStart({ DATA_DIR: file, PORT: '0' });
  assert.equal(onFile.code, 1);
  assert.match(
    onFile.err,
    /svc: failed to start: .*a-file cannot be a folder: a file is in its place \(check DATA_DIR\)/,
  );
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-start-'));
  const badHost = await failedStart({ DATA_DIR: dataDir, PORT: '0', HOST: 'no-such-host.invalid' });
  assert.equal(badHost.code, 1);
  assert.match(
    badHost.err,
    /svc: failed to start: cannot listen on no-such-host\.invalid port 0 \(HOST, PORT\): /,
  );
  // The failed start created nothing: the next one makes the default project and shows its keys.
  const next = await start(dataDir);
  await stop(next.child);
  assert.match(next.out, /client key:\s+svc_pk_\S+/);
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
  fs.rmSync(dataDir, { recursive: true, force: true });
});
