import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { DATABASE_URL, deleteRedisPrefix, REDIS_URL, uniqueName } from '../helpers.ts';
import { RtClient } from './rt-helpers.ts';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

interface Node {
  child: ChildProcess;
  base: string;
  ws: string;
}

function startNode(env: Record<string, string>): Promise<Node> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'packages/server/test/realtime/node-process.ts'],
    {
      cwd: ROOT,
      env: { SVC_MEDIA: 'off', ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk) => {
      out += chunk.toString();
      const m = /READY (\d+)/.exec(out);
      if (m) {
        resolve({
          child,
          base: `http://127.0.0.1:${m[1]}`,
          ws: `ws://127.0.0.1:${m[1]}/v1/realtime/ws`,
        });
      }
    });
    child.once('exit', (code) => reject(new Error(`node exited with ${code}`)));
  });
}

const multi = DATABASE_URL && REDIS_URL;

describe('realtime across two server processes (postgres+redis)', { skip: !multi }, () => {
  const schema = uniqueName('t');
  const prefix = `${uniqueName('test')}:`;
  const adminToken = randomBytes(16).toString('hex');
  let n1: Node;
  let n2: Node;
  let project: { id: string; serverKey: string };
  const open: RtClient[] = [];

  const call = async (node: Node, method: string, path: string, body?: unknown, auth?: string) => {
    const res = await fetch(`${node.base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${auth ?? project.serverKey}`,
        ...(auth ? {} : { 'x-project-id': project.id }),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: res.status === 204 ? null : await res.json() };
  };
  const connect = async (
    node: Node,
    room: string,
    userId: string,
    extra: Record<string, unknown> = {},
  ) => {
    const { participant, ...rest } = extra as { participant?: object };
    const t = await call(node, 'POST', '/v1/realtime/token', {
      roomName: room,
      liveType: 'VIDEO_CONFERENCE',
      participant: { userId, name: userId, ...participant },
      ...rest,
    });
    assert.equal(t.status, 200, JSON.stringify(t.body));
    const c = await RtClient.open(`${node.ws}?room=${room}&access_token=${t.body.token}`);
    open.push(c);
    return c;
  };

  before(async () => {
    const env = {
      SVC_REDIS_PREFIX: prefix,
      TEST_PG_SCHEMA: schema,
      TEST_ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'warn',
      SVC_BOOTSTRAP: 'false',
      SVC_SECRET: randomBytes(32).toString('hex'),
      SVC_REALTIME_SWEEP_INTERVAL_MS: '20',
      SVC_REALTIME_DEPARTURE_GRACE_MS: '3000',
    };
    n1 = await startNode(env);
    n2 = await startNode(env);
    const p = await call(n1, 'POST', '/v1/admin/projects', { name: 'multi' }, adminToken);
    const k = await call(
      n2,
      'POST',
      `/v1/admin/projects/${p.body.id}/keys`,
      { type: 'server' },
      adminToken,
    );
    project = { id: p.body.id, serverKey: k.body.key };
  });

  after(async () => {
    for (const c of open) c.ws.terminate();
    for (const node of [n1, n2]) {
      if (!node) continue;
      const exited = new Promise((r) => node.child.once('exit', r));
      node.child.kill('SIGTERM');
      await exited;
    }
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    await client.query(`drop schema if exists ${schema} cascade`);
    await client.end();
    await deleteRedisPrefix(prefix);
  });

  test('clients on different nodes see each other and one message order', async () => {
    const a = await connect(n1, 'mn-1', 'alice');
    await a.join();
    const b = await connect(n2, 'mn-1', 'bob');
    await b.join();
    assert.deepEqual(b.snapshot.participants.map((p: any) => p.userId).sort(), ['alice', 'bob']);
    await a.waitType('participant.joined', (f) => f.data.participant.userId === 'bob');
    const c = await connect(n2, 'mn-1', 'carol');
    await c.join();
    await a.waitType('participant.joined', (f) => f.data.participant.userId === 'carol');
    const clients = [a, b, c];
    for (let i = 0; i < 10; i++) {
      for (const [k, cl] of clients.entries())
        cl.send({ id: `m${i}`, type: 'message.send', data: { message: `${k}:${i}` } });
    }
    await call(n1, 'POST', '/v1/realtime/rooms/mn-1/messages', {
      message: 'api',
      sender: { userId: 's', name: 'S' },
    });
    const orders = await Promise.all(
      clients.map(async (cl) => {
        await cl.wait(() => cl.events('message.received').length >= 31);
        return cl.events('message.received').map((f) => `${f.seq}|${f.data.message}`);
      }),
    );
    assert.equal(orders[0]!.length, 31);
    assert.deepEqual(orders[1], orders[0]);
    assert.deepEqual(orders[2], orders[0]);
    const parts = await call(n2, 'GET', '/v1/realtime/rooms/mn-1/participants');
    assert.equal(parts.body.items.length, 3);
    const info = await call(n1, 'GET', '/v1/realtime/rooms/mn-1');
    assert.equal(info.body.numParticipants, 3);
    assert.equal(info.body.status, 'ACTIVE');
  });

  test('a session dropped on one node resumes on the other without churn', async () => {
    const a = await connect(n1, 'mn-2', 'alice');
    await a.join();
    const b = await connect(n2, 'mn-2', 'bob');
    await b.join();
    await a.waitType('participant.joined', (f) => f.data.participant.userId === 'bob');
    const { sessionId, resumeToken } = b.snapshot;
    const lastSeq = b.lastSeq;
    await b.drop();
    const sent = await a.request('message.send', { message: 'missed' });
    const b2 = await RtClient.open(b.url.replace(n2.ws, n1.ws));
    open.push(b2);
    const ack = await b2.request('session.resume', { sessionId, resumeToken, lastSeq });
    assert.equal(ack.type, 'ack', JSON.stringify(ack));
    const replayed = await b2.waitType('message.received');
    assert.equal(replayed.seq, sent.data.seq);
    await b2.request('message.send', { message: 'back' });
    await a.waitType('message.received', (f) => f.data.message === 'back');
    assert.equal(a.events('participant.left').length, 0);
  });

  test('a resume on one node while the old socket is open on the other ends the old socket', async () => {
    const a = await connect(n1, 'mn-takeover', 'alice');
    await a.join();
    const c = await connect(n1, 'mn-takeover', 'carol');
    await c.join();
    await a.waitType('participant.joined', (f) => f.data.participant.userId === 'carol');
    const { sessionId, resumeToken } = c.snapshot;
    const c2 = await RtClient.open(c.url.replace(n1.ws, n2.ws));
    open.push(c2);
    const ack = await c2.request('session.resume', { sessionId, resumeToken, lastSeq: c.lastSeq });
    assert.equal(ack.type, 'ack', JSON.stringify(ack));
    const closed = await c.waitType('session.closed');
    assert.equal(closed.data.reason, 'DUPLICATE_IDENTITY');
    assert.equal((await c.closed).code, 4006);
    // A normal close of the old socket (here after its end) does not take the session away.
    c.close(1000);
    await c2.request('message.send', { message: 'still here' });
    await a.waitType('message.received', (f) => f.data.message === 'still here');
    await a.request('message.send', { message: 'to carol' });
    await c2.waitType('message.received', (f) => f.data.message === 'to carol');
    assert.equal(a.events('participant.left').length, 0);
    const parts = await call(n1, 'GET', '/v1/realtime/rooms/mn-takeover/participants');
    const carol = parts.body.items.find((p: any) => p.userId === 'carol');
    assert.equal(carol.sid, sessionId);
    assert.equal(carol.connected, true);
  });

  test('the same user on the other node replaces the first; DELETE on one node reaches all', async () => {
    const a = await connect(n1, 'mn-3', 'alice');
    await a.join();
    const b = await connect(n1, 'mn-3', 'bob');
    await b.join();
    const b2 = await connect(n2, 'mn-3', 'bob');
    await b2.join();
    assert.equal((await b.closed).code, 4006);
    const left = await a.waitType('participant.left');
    assert.equal(left.data.reason, 'DUPLICATE_IDENTITY');
    const del = await call(n2, 'DELETE', '/v1/realtime/rooms/mn-3');
    assert.equal(del.status, 204);
    for (const cl of [a, b2]) {
      const closed = await cl.waitType('session.closed');
      assert.equal(closed.data.reason, 'ROOM_DELETED');
      assert.equal((await cl.closed).code, 4007);
    }
  });

  test('a second waiting connection of a user on the other node replaces the first (4006)', async () => {
    const h = await connect(n1, 'mn-wait2', 'host', { participant: { isHost: true } });
    await h.join();
    assert.equal((await h.request('room.update_settings', { waitingRoom: true })).type, 'ack');
    const first = await connect(n1, 'mn-wait2', 'guest');
    assert.equal((await first.request('session.join')).data.status, 'waiting');
    await h.waitType('waiting.joined');
    const second = await connect(n2, 'mn-wait2', 'guest');
    assert.equal((await second.request('session.join')).data.status, 'waiting');
    // The earlier connection does not keep waiting on an entry that is no longer its own.
    const closed = await first.waitType('session.closed');
    assert.equal(closed.data.reason, 'DUPLICATE_IDENTITY');
    assert.equal((await first.closed).code, 4006);
    assert.equal((await h.request('waiting.approve', { userId: 'guest' })).type, 'ack');
    await second.waitType('session.admitted');
    const snap = await second.waitType('session.joined');
    assert.deepEqual(snap.data.participants.map((p: any) => p.userId).sort(), ['guest', 'host']);
    assert.equal(h.events('waiting.joined').length, 1);
    assert.equal(h.events('waiting.left').length, 0);
  });

  test('DELETE of a main room on one node ends its breakout rooms on the other', async () => {
    const h = await connect(n1, 'mn-brdel', 'host', { participant: { isHost: true } });
    await h.join();
    const u = await connect(n2, 'mn-brdel', 'u');
    await u.join();
    const created = await h.request('breakout.create', { name: 'B', userIds: ['u'] });
    assert.equal(created.type, 'ack', JSON.stringify(created));
    const inBreakout = await connect(n2, created.data.roomName, 'u');
    await inBreakout.join();
    assert.equal((await call(n1, 'DELETE', '/v1/realtime/rooms/mn-brdel')).status, 204);
    for (const cl of [h, inBreakout]) {
      const closed = await cl.waitType('session.closed');
      assert.equal(closed.data.reason, 'ROOM_DELETED');
      assert.equal((await cl.closed).code, 4007);
    }
    const info = await call(n2, 'GET', `/v1/realtime/rooms/${created.data.roomName}`);
    assert.equal(info.body.status, 'ENDED');
  });

  test('a guest waiting on one node is admitted when the host joins on the other', async () => {
    const g = await connect(n1, 'mn-4', 'guest', { canJoinWithNoHost: false });
    assert.equal((await g.request('session.join')).data.status, 'waiting');
    const h = await connect(n2, 'mn-4', 'host', { participant: { isHost: true } });
    await h.join();
    await g.waitType('session.admitted');
    const snap = await g.waitType('session.joined');
    assert.equal(snap.data.participants.length, 2);
  });
});
