import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadMediaConfig } from '../../src/media/config.ts';
import { JanusEngine } from '../../src/media/engine.ts';
import { JanusSocket } from '../../src/media/janus-client.ts';
import { JanusProcess } from '../../src/media/janus-process.ts';

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

/** The variables of an embedded Janus on free ports, with RTP on `rtpPorts`. */
async function janusEnv(rtpPorts: string) {
  return {
    SVC_JANUS_WS_PORT: String(await freePort()),
    SVC_JANUS_ADMIN_PORT: String(await freePort()),
    SVC_MEDIA_RTP_PORTS: rtpPorts,
    PATH: process.env.PATH,
  };
}

async function accepting(url: string) {
  for (let i = 0; ; i++) {
    const s = new JanusSocket(url);
    try {
      await s.open();
      s.close();
      return;
    } catch (err) {
      if (i > 200) throw err;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

test('a Janus left running by a server that was killed is ended by the next start', {
  skip: fs.existsSync('/usr/bin/janus') ? false : 'needs Janus',
}, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcm-orphan-'));
  const env = await janusEnv('40100-40150');
  const cfg = loadMediaConfig(env, dir);
  const first = new JanusProcess(cfg, 'secret');
  first.start();
  await accepting(first.wsUrl);
  const orphan = (first as unknown as { child: import('node:child_process').ChildProcess }).child;
  // The first server "dies": nothing supervises its Janus any more.
  (first as unknown as { stopping: boolean }).stopping = true;
  const exited = new Promise((resolve) => orphan.once('exit', resolve));
  const second = new JanusProcess(cfg, 'secret');
  second.start();
  assert.equal(await exited, null, 'the orphan was killed');
  await accepting(second.wsUrl);
  assert.notEqual(second.pid, orphan.pid);
  await second.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a server that is killed takes its Janus with it', {
  skip: fs.existsSync('/usr/bin/janus') ? false : 'needs Janus',
}, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcm-killed-'));
  const owner = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(import.meta.dirname, '../fixtures/janus-owner.ts')],
    {
      env: { ...process.env, ...(await janusEnv('40220-40270')), JANUS_OWNER_DIR: dir },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const [line] = (await once(owner.stdout!, 'data')) as [Buffer];
  const { pid } = JSON.parse(line.toString()) as { pid: number };
  const alive = () => {
    try {
      // Janus itself (its executable), not the launcher before it execs Janus: the launcher's
      // command line names the same paths, and a server killed before the launcher has set its
      // parent-death signal leaves an orphan that only the next start ends (the test above).
      return (
        path.basename(fs.readlinkSync(`/proc/${pid}/exe`)) === 'janus' &&
        fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(path.join(dir, 'janus'))
      );
    } catch {
      return false;
    }
  };
  for (let i = 0; !alive(); i++) {
    assert.ok(i < 200, 'Janus did not start');
    await new Promise((r) => setTimeout(r, 25));
  }
  owner.kill('SIGKILL');
  await once(owner, 'exit');
  try {
    // Nothing supervises it now; it must not stay behind holding the ports.
    for (let i = 0; alive(); i++) {
      assert.ok(i < 200, `Janus ${pid} outlived the server that was killed`);
      await new Promise((r) => setTimeout(r, 25));
    }
  } finally {
    if (alive()) process.kill(pid, 'SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("an embedded engine does not take another server's Janus on its ports for its own", {
  skip: fs.existsSync('/usr/bin/janus') ? false : 'needs Janus',
}, async () => {
  const dirA = fs.mkdtempSync(path.join(os.tmpdir(), 'svcm-own-a-'));
  const dirB = fs.mkdtempSync(path.join(os.tmpdir(), 'svcm-own-b-'));
  const env = await janusEnv('40160-40210');
  const log = { info() {}, warn() {} };
  const a = JanusEngine.embedded(loadMediaConfig(env, dirA), log);
  await a.ready();
  // A second server with the same ports: its own Janus cannot bind them, and the Janus that
  // answers there is A's, which B must neither use nor keep a connection to.
  const b = JanusEngine.embedded(loadMediaConfig(env, dirB), log);
  await assert.rejects(b.ready(1500), /not this server's embedded Janus/);
  assert.notEqual(b.health().state, 'up');
  await b.close();
  assert.equal(a.health().state, 'up', "A's Janus is untouched");
  await a.close();
  for (const dir of [dirA, dirB]) fs.rmSync(dir, { recursive: true, force: true });
});
