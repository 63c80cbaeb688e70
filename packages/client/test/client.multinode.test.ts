import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  DATABASE_URL,
  deleteRedisPrefix,
  REDIS_URL,
  uniqueName,
} from '../../server/test/helpers.ts';
import { freePort, roomOptions, TestClient } from './helpers.ts';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const MAIN = fileURLToPath(new URL('../../server/src/main.ts', import.meta.url));
/**
 * Both nodes name one public address, as behind a load balancer; each test client plays the
 * balancer by sending its sockets to the node it was given (port 1 itself is never used).
 */
const PUBLIC_URL = 'http://127.0.0.1:1';

interface Node {
  port: number;
  baseUrl: string;
  child: ChildProcess;
}

/** Starts `svc` (packages/server/src/main.ts) and resolves once it listens. */
function startNode(env: Record<string, string>): Promise<Node> {
  return freePort().then(
    (port) =>
      new Promise<Node>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
          cwd: REPO_ROOT,
          env: { SVC_MEDIA: 'off', ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        const onData = (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('Svc is running')) {
            child.stdout!.off('data', onData);
            child.off('exit', onExit);
            resolve({ port, baseUrl: `http://127.0.0.1:${port}`, child });
          }
        };
        const onExit = (code: number | null) =>
          reject(new Error(`node exited (${code}) before listening: ${out}`));
        child.stdout!.on('data', onData);
        child.stderr!.on('data', (chunk: Buffer) => {
          out += chunk.toString();
        });
        child.once('exit', onExit);
      }),
  );
}

function stopNode(node: Node): Promise<void> {
  return new Promise((resolve) => {
    if (node.child.exitCode !== null) return resolve();
    node.child.once('exit', () => resolve());
    node.child.kill('SIGTERM');
  });
}

const enabled = Boolean(DATABASE_URL && REDIS_URL);

describe('client library across two server processes (postgres+redis)', { skip: !enabled }, () => {
  const database = uniqueName('svc_mn');
  const redisPrefix = `${uniqueName('mn')}:`;
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  const nodes: Node[] = [];
  const clients: TestClient[] = [];
  let project: {
    id: string;
    clientKey: string;
    serverKey: string;
    clientKeyId: string;
    serverKeyId: string;
  };

  async function admin(method: string, path: string, body?: unknown) {
    const res = await fetch(`${nodes[0]!.baseUrl}/v1/admin${path}`, {
      method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    assert.ok(res.ok, `${method} ${path} → ${res.status}`);
    return res.json() as Promise<any>;
  }

  /** A client of node `i`: REST and sockets go to that node. */
  function clientOn(i: number, options?: ConstructorParameters<typeof TestClient>[1]) {
    const node = nodes[i]!;
    const c = new TestClient({ baseUrl: node.baseUrl, project }, options);
    c.rewriteUrl = (url) => {
      const u = new URL(url);
      u.port = String(node.port);
      return u.toString();
    };
    clients.push(c);
    return c;
  }

  before(async () => {
    const root = new pg.Client({ connectionString: DATABASE_URL });
    await root.connect();
    await root.query(`create database ${database}`);
    await root.end();
    const url = new URL(DATABASE_URL!);
    url.pathname = `/${database}`;
    const env = {
      DATABASE_URL: url.toString(),
      REDIS_URL: REDIS_URL!,
      SVC_REDIS_PREFIX: redisPrefix,
      SVC_ADMIN_TOKEN: adminToken,
      SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
      SVC_BOOTSTRAP: 'false',
      SVC_PUBLIC_URL: PUBLIC_URL,
      LOG_LEVEL: 'warn',
      SVC_REALTIME_DEPARTURE_GRACE_MS: '5000',
      SVC_REALTIME_SWEEP_INTERVAL_MS: '50',
    };
    // One after the other: the first runs the migrations.
    nodes.push(await startNode(env));
    nodes.push(await startNode(env));
    const created = await admin('POST', '/projects', { name: 'multinode' });
    const clientKey = await admin('POST', `/projects/${created.id}/keys`, { type: 'client' });
    const serverKey = await admin('POST', `/projects/${created.id}/keys`, { type: 'server' });
    project = {
      id: created.id,
      clientKey: clientKey.key,
      serverKey: serverKey.key,
      clientKeyId: clientKey.id,
      serverKeyId: serverKey.id,
    };
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.client.disconnect()));
    await Promise.all(nodes.map(stopNode));
    const root = new pg.Client({ connectionString: DATABASE_URL });
    await root.connect();
    await root.query(`drop database if exists ${database} with (force)`);
    await root.end();
    await deleteRedisPrefix(redisPrefix);
  });

  test('users on two nodes see each other and get messages in one order', async () => {
    const roomName = uniqueName('mn');
    const a = clientOn(0);
    const b = clientOn(1);
    const c = clientOn(1);
    await a.connect(roomOptions(roomName, 'a'));
    const bRoom = await b.connect(roomOptions(roomName, 'b'));
    assert.deepEqual(bRoom.participants.map((p) => p.userId).sort(), ['a', 'b']);
    await a.waitFor('joined', (e) => e.participant.userId === 'b');
    await c.connect(roomOptions(roomName, 'c'));
    await a.waitFor('joined', (e) => e.participant.userId === 'c');
    await b.waitFor('joined', (e) => e.participant.userId === 'c');

    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < 5; i++) {
      for (const [id, client] of [
        ['a', a],
        ['b', b],
        ['c', c],
      ] as const) {
        sends.push(client.client.room!.sendMessage(`${id}#${i}`));
      }
    }
    sends.push(
      a.client.sendRealtimeMessage({
        roomName,
        message: 'rest',
        sender: { userId: 'sys', name: 'S' },
      }),
    );
    await Promise.all(sends);
    const lists = await Promise.all([a, b, c].map((x) => x.waitForMessages(16)));
    const order = lists[0]!.map((m) => `${m.seq}:${m.message}`);
    for (const list of lists)
      assert.deepEqual(
        list.map((m) => `${m.seq}:${m.message}`),
        order,
      );
  });

  test('a socket killed on one node resumes on the other; nobody sees left/joined', async () => {
    const roomName = uniqueName('mn_resume');
    const a = clientOn(0);
    const b = clientOn(1, { reconnect: { initialDelayMs: 20 } });
    await a.connect(roomOptions(roomName, 'a'));
    const room = await b.connect(roomOptions(roomName, 'b'));
    await a.waitFor('joined', (e) => e.participant.userId === 'b');
    const sid = room.localParticipant.sid;

    // The balancer now sends b to node 0.
    b.rewriteUrl = (url) => {
      const u = new URL(url);
      u.port = String(nodes[0]!.port);
      return u.toString();
    };
    b.offline = true;
    b.socket.terminate();
    await b.waitFor('reconnecting');
    // Sent on node 0 while b has no socket: it reaches b only through the resume's replay.
    await a.client.room!.sendMessage('while away');
    b.offline = false;
    await b.waitFor('reconnected');
    assert.equal(b.client.room!.localParticipant.sid, sid);
    await b.client.room!.sendMessage('marker');
    await a.waitFor('message', (e) => e.message.message === 'marker');
    await b.waitFor('message', (e) => e.message.message === 'marker');
    assert.deepEqual(
      b.messages().map((m) => m.message),
      ['while away', 'marker'],
    );
    assert.equal(
      a.events.filter(
        (e) => (e.kind === 'left' || e.kind === 'joined') && e.participant.userId === 'b',
      ).length,
      1,
      a.describe(),
    );
  });

  test('DELETE on one node disconnects participants on both with ROOM_DELETED', async () => {
    const roomName = uniqueName('mn_delete');
    const a = clientOn(0);
    const b = clientOn(1);
    await a.connect(roomOptions(roomName, 'a'));
    await b.connect(roomOptions(roomName, 'b'));
    await clientOn(1, { apiKey: project.serverKey }).client.deleteRoom(roomName);
    for (const x of [a, b]) {
      const gone = await x.waitFor('disconnected');
      assert.equal(gone.reason, 'ROOM_DELETED');
    }
  });

  test('a node shuts down: its clients resume on the other node, nobody sees left/joined', async () => {
    const roomName = uniqueName('mn_failover');
    const stay = clientOn(0);
    const moving = clientOn(1, { reconnect: { initialDelayMs: 20 } });
    await stay.connect(roomOptions(roomName, 'stay'));
    const room = await moving.connect(roomOptions(roomName, 'moving'));
    await stay.waitFor('joined', (e) => e.participant.userId === 'moving');
    const sid = room.localParticipant.sid;
    // The balancer sends new connections to the surviving node.
    moving.rewriteUrl = (url) => {
      const u = new URL(url);
      u.port = String(nodes[0]!.port);
      return u.toString();
    };
    await stopNode(nodes[1]!);
    await moving.waitFor('reconnected');
    assert.equal(moving.client.room!.localParticipant.sid, sid);
    await moving.client.room!.sendMessage('after failover');
    await stay.waitFor('message', (e) => e.message.message === 'after failover');
    assert.equal(
      stay.events.filter(
        (e) => (e.kind === 'left' || e.kind === 'joined') && e.participant.userId === 'moving',
      ).length,
      1,
      stay.describe(),
    );
  });
});
