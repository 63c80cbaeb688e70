// Stopping the real command: `npm start` (as the README says to run it) and the node process
// itself, each on a fresh DATA_DIR and PORT, told to stop with SIGTERM or SIGINT.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { WebSocket } from 'ws';
import { UA } from '../links/fixtures.ts';

const ROOT = path.resolve(import.meta.dirname, '../../../..');
const dirs: string[] = [];
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
});

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Every process whose ancestry leads to `pid` (from /proc). */
function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: the fields after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(entry), Number(fields[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = [];
  const walk = (p: number) => {
    for (const [child, parent] of parents) {
      if (parent === p) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface Started {
  child: ChildProcess;
  dataDir: string;
  base: string;
  port: number;
  projectId: string;
  clientKey: string;
  /** Resolves when the server's output (stdout, the log included) matches. */
  printed(pattern: RegExp): Promise<void>;
  exited: Promise<[number | null, NodeJS.Signals | null]>;
}

async function start(command: string, args: string[], env: Record<string, string> = {}) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-stop-'));
  dirs.push(dataDir);
  const port = await freePort();
  const child = spawn(command, args, {
    cwd: ROOT,
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      // Every request logged (at debug): the test waits for the server to have a request.
      LOG_LEVEL: 'debug',
      DATABASE_URL: '',
      REDIS_URL: '',
      SVC_ADMIN_TOKEN: '',
      SVC_SECRET: '',
      SVC_MEDIA: 'off',
      // `npm start` runs the build, as users do: no svc-source condition (that is for the
      // TypeScript sources the other processes here run).
      ...(command !== process.execPath ? { NODE_OPTIONS: '' } : {}),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  let out = '';
  const waiters: { pattern: RegExp; resolve: () => void }[] = [];
  const onData = (d: Buffer) => {
    out += d;
    for (const w of [...waiters]) {
      if (w.pattern.test(out)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const printed = (pattern: RegExp) =>
    new Promise<void>((resolve, reject) => {
      if (pattern.test(out)) return resolve();
      waiters.push({ pattern, resolve });
      void exited.then(([code]) => reject(new Error(`exited ${code} before ${pattern}: ${out}`)));
    });
  await printed(/Svc is running at[\s\S]*\n\n/);
  return {
    child,
    dataDir,
    port,
    base: `http://127.0.0.1:${port}`,
    projectId: /project id:\s+(prj_\S+)/.exec(out)![1],
    clientKey: /client key:\s+(svc_pk_\S+)/.exec(out)![1],
    printed,
    exited,
  } satisfies Started;
}

const tokenBody = (roomName: string) =>
  JSON.stringify({
    roomName,
    participant: { userId: `u-${roomName}`, name: 'U' },
    liveType: 'VIDEO_CALL',
  });

/** A token request whose body is held back: in flight until `finish()` sends the rest. */
function slowTokenRequest(s: Started, roomName: string) {
  const body = tokenBody(roomName);
  const request = http.request(`${s.base}/v1/realtime/token`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${s.clientKey}`,
      'x-project-id': s.projectId,
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
    },
  });
  const response = new Promise<{ status: number; body: any }>((resolve, reject) => {
    request.on('response', (res) => {
      let text = '';
      res.on('data', (d) => {
        text += d;
      });
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    request.on('error', reject);
  });
  request.write(body.slice(0, 10));
  request.flushHeaders();
  return { finish: () => request.end(body.slice(10)), response };
}

/** A participant joined over the realtime socket; `closed` resolves with the close code. */
async function joinedSocket(s: Started, roomName: string) {
  const res = await fetch(`${s.base}/v1/realtime/token`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${s.clientKey}`,
      'x-project-id': s.projectId,
      'content-type': 'application/json',
    },
    body: tokenBody(roomName),
  });
  assert.equal(res.status, 200);
  const { token } = (await res.json()) as { token: string };
  const ws = new WebSocket(`ws://127.0.0.1:${s.port}/v1/realtime/ws?access_token=${token}`);
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  await once(ws, 'open');
  ws.send(JSON.stringify({ id: 'j', type: 'session.join' }));
  await new Promise<void>((resolve) =>
    ws.on('message', (data) => {
      if (JSON.parse(String(data)).id === 'j') resolve();
    }),
  );
  return { ws, closed };
}

/** Clicks a new short link `times` times; the clicks are queued in the server, not yet written. */
async function click(s: Started, times: number): Promise<string> {
  const res = await fetch(`${s.base}/v1/sdk/links`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${s.clientKey}`,
      'x-project-id': s.projectId,
      'content-type': 'application/json',
    },
    body: JSON.stringify({ url: 'https://shop.example.com/stop' }),
  });
  assert.equal(res.status, 201);
  const link = (await res.json()) as { id: string; slug: string };
  for (let i = 0; i < times; i++) {
    const visit = await fetch(`${s.base}/l/${link.slug}`, {
      redirect: 'manual',
      headers: { 'user-agent': UA.iosSafari },
    });
    assert.equal(visit.status, 302);
  }
  return link.id;
}

/** The clicks of `linkId` written to the stopped server's SQLite file. */
function writtenClicks(s: Started, linkId: string): number {
  const db = new SQLite(path.join(s.dataDir, 'svc.sqlite'), { readonly: true });
  try {
    const count = db.prepare('select count(*) as n from link_clicks where link_id = ?');
    return (count.get(linkId) as { n: number }).n;
  } finally {
    db.close();
  }
}

/**
 * Sends `signal` to the started process with a request in flight, a joined socket and queued
 * clicks, and checks the stop: the request completes, the socket gets 1001, nothing new is
 * accepted, the clicks are written, every process of the tree is gone, and the exit status is 0.
 */
async function stopsGracefully(s: Started, signal: NodeJS.Signals) {
  const tree = [s.child.pid!, ...descendants(s.child.pid!)];
  assert.ok(tree.length >= 1);
  const socket = await joinedSocket(s, 'stop-ws');
  const linkId = await click(s, 3);
  const inFlight = slowTokenRequest(s, 'stop-slow');
  await s.printed(
    /"url":"\/v1\/realtime\/token"[^\n]*"msg":"incoming request"[\s\S]*"url":"\/v1\/realtime\/token"[^\n]*"msg":"incoming request"/,
  );
  s.child.kill(signal);
  await s.printed(/"msg":"stopping: no new connections/);
  // A new connection is refused; a request on a connection still open gets 503.
  const late = await fetch(`${s.base}/healthz`).then(
    (res) => res.status,
    () => 'refused',
  );
  assert.ok(late === 'refused' || late === 503, `nothing new is served once stopping (${late})`);
  inFlight.finish();
  const answered = await inFlight.response;
  assert.equal(answered.status, 200, 'the request in flight completed');
  assert.ok(answered.body.token);
  assert.equal(await socket.closed, 1001, 'the socket was told the server is going away');
  const [code] = await s.exited;
  assert.equal(code, 0);
  assert.equal(writtenClicks(s, linkId), 3, 'the queued clicks were written');
  for (const pid of tree) {
    // A process that exited may linger a moment as a zombie of its parent until reaped.
    const deadline = Date.now() + 5000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setImmediate(r));
    assert.equal(alive(pid), false, `process ${pid} of the tree is gone`);
  }
}

describe('stopping', () => {
  test('SIGTERM to `npm start` stops the server gracefully and leaves no process', async () => {
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const s = await start(npm, ['start']);
    await stopsGracefully(s, 'SIGTERM');
  });

  test('SIGINT to the node process stops it gracefully', async () => {
    const s = await start(process.execPath, ['--import', 'tsx', 'packages/server/src/main.ts']);
    await stopsGracefully(s, 'SIGINT');
  });

  test('SIGTERM with a request that never finishes: the process exits anyway after SVC_SHUTDOWN_TIMEOUT_MS', async () => {
    const s = await start(process.execPath, ['--import', 'tsx', 'packages/server/src/main.ts'], {
      SVC_SHUTDOWN_TIMEOUT_MS: '300',
    });
    const stuck = slowTokenRequest(s, 'stuck');
    stuck.response.catch(() => {});
    await s.printed(/"url":"\/v1\/realtime\/token"[^\n]*"msg":"incoming request"/);
    const sent = Date.now();
    s.child.kill('SIGTERM');
    const [code] = await s.exited;
    assert.equal(code, 1, 'a stop that did not finish in time says so');
    assert.ok(Date.now() - sent < 5000, 'within the bound, not the old fixed 10 s');
  });
});
