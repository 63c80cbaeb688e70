import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import {
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
} from '../../server/test/media/media-harness.ts';
import { freePort } from './helpers.ts';
import { bundlePage, openBrowser, type TestBrowser } from './media-browser.ts';
import { recordingTestsSkip } from './recordings-harness.ts';

// A server process killed (SIGKILL) while recording: on its restart the recording, still
// STARTED in SQL, is converted from the .mjr files written until the media stopped, and ends
// COMPLETED with `recovered: true`. The server runs as its own process (SQLite in DATA_DIR, the
// embedded Janus in the network namespace `svcrrst`, 10.78.4.0/24); a real Chromium publishes.
const skip = recordingTestsSkip();

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const REPO_ROOT = path.resolve(import.meta.dirname, '../../..');
const MAIN = path.join(REPO_ROOT, 'packages/server/src/main.ts');

interface Node {
  url: string;
  child: ChildProcess;
  kill(signal: NodeJS.Signals): Promise<void>;
}

/** Starts `svc` (packages/server/src/main.ts) on `port`; resolves once it listens. */
function startNode(port: number, env: Record<string, string>): Promise<Node> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('Svc is running')) {
        child.stdout!.off('data', onData);
        child.off('exit', onExit);
        resolve({
          url: `http://127.0.0.1:${port}`,
          child,
          async kill(signal) {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal);
            await exited;
          },
        });
      }
    };
    const onExit = (code: number | null) =>
      reject(new Error(`svc exited (${code}) before listening: ${out}`));
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.once('exit', onExit);
  });
}

describe('a server killed while recording', { skip: skip ?? false, timeout: 120_000 }, () => {
  let net: MediaNetwork;
  let node: Node | null = null;
  let browser: TestBrowser | null = null;

  after(async () => {
    await browser?.close();
    await node?.kill('SIGTERM');
    net?.down();
  });

  test('finishes the recording from its .mjr files on restart: COMPLETED, recovered', async () => {
    net = mediaNetwork('rst', 4, { prefix: 'svcr', octet: 78 });
    const adminToken = `adm_${randomBytes(16).toString('hex')}`;
    const port = await freePort();
    const env = {
      ...mediaEnv(net),
      SVC_PUBLIC_URL: `http://127.0.0.1:${port}`,
      SVC_BOOTSTRAP: 'false',
      LOG_LEVEL: 'warn',
      SVC_ADMIN_TOKEN: adminToken,
      SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
      SVC_RECORDING_STOP_WAIT_MS: '30000',
      // Its own SQLite store under DATA_DIR, not a PostgreSQL database CI's environment names.
      DATABASE_URL: '',
      REDIS_URL: '',
    };
    node = await startNode(port, env);
    const call = async (method: string, url: string, key: string, body?: unknown) => {
      const res = await fetch(`${node!.url}/v1${url}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(project ? { 'x-project-id': project.id } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as any };
    };
    let project: { id: string } | null = null;
    const created = await call('POST', '/admin/projects', adminToken, { name: 'restart' });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    project = created.body;
    const server = (
      await call('POST', `/admin/projects/${project!.id}/keys`, adminToken, {
        type: 'server',
      })
    ).body.key as string;
    const client = (
      await call('POST', `/admin/projects/${project!.id}/keys`, adminToken, {
        type: 'client',
      })
    ).body.key as string;

    browser = await openBrowser(node.url, await bundlePage());
    const connected = await browser.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
      { projectId: project!.id, apiKey: client, baseUrl: node.url },
      {
        roomName: 'restart-room',
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId: 'alice', name: 'Alice', isHost: true },
      },
    ] as const);
    assert.equal(connected.ok, true, JSON.stringify(connected));
    for (const src of ['camera', 'microphone']) {
      const r: { ok: boolean } = await browser.page.evaluate(
        (x) => (window as any).svcm.enable(x),
        src,
      );
      assert.equal(r.ok, true, JSON.stringify(r));
    }
    const started = await call('POST', '/realtime/recordings', server, {
      roomName: 'restart-room',
      fileType: 'WEBM',
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const id = started.body.egressId as string;
    const mjrDir = path.join(env.DATA_DIR, 'recordings', 'mjr', id);
    const deadline = Date.now() + 10_000;
    const count = () =>
      fs.existsSync(mjrDir) ? fs.readdirSync(mjrDir).filter((f) => f.endsWith('.mjr')).length : 0;
    while (count() < 2) {
      assert.ok(Date.now() < deadline, 'no .mjr files');
      await sleep(50);
    }
    const t0 = Date.now();
    await sleep(3000);
    // The server dies at once, and its Janus with it (docs/media.md).
    await node.kill('SIGKILL');
    const writtenMs = Date.now() - t0;
    await browser.close();
    browser = null;
    node = await startNode(port, env);
    let info = (await call('GET', `/realtime/recordings/${id}`, server)).body;
    const until = Date.now() + 30_000;
    while (info.status === 'STARTED' || info.status === 'PROCESSING') {
      assert.ok(Date.now() < until, JSON.stringify(info));
      await sleep(100);
      info = (await call('GET', `/realtime/recordings/${id}`, server)).body;
    }
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    assert.equal(info.recovered, true);
    assert.ok(info.endedAt);
    console.log(
      `restart: written ${writtenMs} ms before the media stopped, file ${info.duration} s`,
    );
    assert.ok(
      info.duration > 3 - 0.5 && info.duration < writtenMs / 1000 + 0.7,
      `${info.duration} s vs ${writtenMs} ms`,
    );
    // The file downloads from the restarted server.
    const url = await call('GET', `/realtime/recordings/${id}/download-url`, server);
    assert.equal(url.status, 200, JSON.stringify(url.body));
    const u = new URL(url.body.downloadUrl);
    const res = await fetch(`${node.url}${u.pathname}${u.search}`);
    assert.equal(res.status, 200);
    assert.equal(Number(res.headers.get('content-length')), info.size);
  });
});
