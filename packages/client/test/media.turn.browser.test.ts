import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import {
  logTails,
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
  mediaTestsPossible,
} from '../../server/test/media/media-harness.ts';
import { type ListeningServer, startListeningServer } from './helpers.ts';
import {
  browserTestsPossible,
  bundlePage,
  openBrowser,
  type TestBrowser,
} from './media-browser.ts';

// Relay-only media: both browsers force iceTransportPolicy "relay", so every packet goes through
// coturn (Debian `coturn`) with the short-lived TURN REST credentials from the join snapshot.
const skip =
  mediaTestsPossible() ??
  browserTestsPossible() ??
  (fs.existsSync('/usr/bin/turnserver') ? null : 'needs coturn (apt-get install coturn)');

const TURN_SECRET = 'svcm-turn-secret';

/**
 * Resolves once a STUN Binding request to host:port is answered (coturn is listening); rejects
 * after `timeoutMs`, or at once when `proc` has exited (e.g. the port was taken).
 */
async function stunAnswers(host: string, port: number, proc: ChildProcess, timeoutMs: number) {
  const socket = dgram.createSocket('udp4');
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`turnserver exited (${proc.exitCode})`);
      const txid = randomBytes(12);
      // Binding request: type 0x0001, length 0, the magic cookie, a transaction id.
      const req = Buffer.concat([Buffer.from([0, 1, 0, 0, 0x21, 0x12, 0xa4, 0x42]), txid]);
      const answered = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => done(false), 200);
        const onMessage = (msg: Buffer) => {
          if (
            msg.length >= 20 &&
            msg.readUInt16BE(0) === 0x0101 &&
            msg.subarray(8, 20).equals(txid)
          )
            done(true);
        };
        const done = (ok: boolean) => {
          clearTimeout(timer);
          socket.off('message', onMessage);
          resolve(ok);
        };
        socket.on('message', onMessage);
        socket.send(req, port, host);
      });
      if (answered) return;
      if (Date.now() > deadline) throw new Error(`no STUN answer from ${host}:${port}`);
    }
  } finally {
    socket.close();
  }
}

describe('relay-only media through coturn', { skip: skip ?? false, timeout: 180_000 }, () => {
  let net: MediaNetwork;
  let s: ListeningServer;
  let turn: ChildProcess;
  const browsers: TestBrowser[] = [];

  before(async () => {
    net = mediaNetwork('tn', 22);
    // A port of its own: a coturn the system started (or a crashed run left) may hold 3478.
    const turnPort = 30_000 + Math.floor(Math.random() * 15_000);
    const log = fs.openSync(path.join(net.dir, 'turnserver.log'), 'a');
    turn = spawn(
      '/usr/bin/turnserver',
      [
        '-n',
        `--listening-ip=${net.hostIp}`,
        `--relay-ip=${net.hostIp}`,
        `--listening-port=${turnPort}`,
        '--min-port=49160',
        '--max-port=49260',
        '--use-auth-secret',
        `--static-auth-secret=${TURN_SECRET}`,
        '--realm=svc.test',
        '--no-cli',
        '--no-tls',
        '--no-dtls',
        '--fingerprint',
        '--log-file=stdout',
        '--simple-log',
        '--verbose',
      ],
      { stdio: ['ignore', log, log] },
    );
    fs.closeSync(log);
    await stunAnswers(net.hostIp, turnPort, turn, 10_000);
    s = await startListeningServer(BACKENDS[0]!, {
      ...mediaEnv(net),
      SVC_TURN_URLS: `turn:${net.hostIp}:${turnPort}?transport=udp`,
      SVC_TURN_SECRET: TURN_SECRET,
    });
    await s.app.svc.media!.ready(10_000);
    const bundle = await bundlePage();
    for (let i = 0; i < 2; i++) browsers.push(await openBrowser(s.baseUrl, bundle));
  });

  after(async () => {
    for (const b of browsers) await b.close();
    await s?.close();
    if (turn && turn.exitCode === null) {
      const exited = new Promise((r) => turn.once('exit', r));
      turn.kill('SIGTERM');
      await exited;
    }
    net?.down();
  });

  test('two browsers decode each other with relay candidates only', async () => {
    const room = uniqueName('relay');
    const config = { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl };
    const users = ['ann', 'ben'];
    for (const [i, b] of browsers.entries()) {
      const opts = {
        roomName: room,
        liveType: 'VIDEO_CALL',
        participant: { userId: users[i], name: users[i] },
      };
      const res = await b.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o, true), [
        config,
        opts,
      ] as const);
      assert.equal(res.ok, true, JSON.stringify(res));
      const cam = await b.page.evaluate(() => (window as any).svcm.enable('camera'));
      assert.equal(cam.ok, true, JSON.stringify(cam));
    }
    for (const [i, b] of browsers.entries()) {
      const other = users[1 - i];
      const deadline = Date.now() + 40_000;
      let last: any[] = [];
      for (;;) {
        last = await b.page.evaluate(() => (window as any).svcm.remote());
        // Decoding, and the stats name the candidate pair in use (they can lag the first frames).
        const t = last.find(
          (x) => x.userId === other && x.framesDecoded >= 20 && x.candidateType !== '',
        );
        if (t) {
          assert.equal(t.candidateType, 'relay', JSON.stringify(t));
          break;
        }
        if (Date.now() > deadline) {
          const logs = logTails(net, ['turnserver.log']);
          const sender = await browsers[1 - i]!.page.evaluate(() => (window as any).svcm.local());
          throw new Error(
            `no relayed video: ${JSON.stringify(last)}\n${users[1 - i]} sends: ${JSON.stringify(sender)}\n${logs}`,
          );
        }
        await b.page.waitForTimeout(100);
      }
    }
    const turnLog = fs.readFileSync(path.join(net.dir, 'turnserver.log'), 'utf8');
    assert.match(turnLog, /ALLOCATE/i);
    for (const b of browsers) await b.page.evaluate(() => (window as any).svcm.disconnect());
  });
});
