// Hostile input over every route of the OpenAPI document and every realtime frame type, against
// a real server process: malformed JSON, wrong types, prototype names, NUL, lone surrogates,
// unstorable date-times, huge and non-finite numbers, deep nesting. Nothing may answer 500, store
// a value that breaks a later read, or end the process.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CLIENT_REQUEST_TYPES, CONTROLLER_REQUEST_TYPES, isErrorCode } from '@svc/protocol';
import {
  fillPath,
  operations,
  type ResourceIds,
  sample,
  validBodies,
} from '../fixtures/operations.ts';
import { type NodeProcess, spawnNode } from '../fixtures/spawn-node.ts';
import {
  BACKENDS,
  DATABASE_URL,
  deleteRedisPrefix,
  dropSchemas,
  REDIS_URL,
  uniqueName,
} from '../helpers.ts';
import { RtClient } from '../realtime/rt-helpers.ts';

const ids = (env: Env): ResourceIds => ({
  projectId: env.spare.id,
  keyId: env.spare.keyId,
  webhookId: env.spare.webhookId,
  linkId: env.linkId,
  slug: env.slug,
  roomName: env.roomName,
});

/** A value sent as raw JSON text (e.g. `1e309`, which JSON.stringify cannot write). */
class Raw {
  constructor(readonly text: string) {}
}

const LONG = 'x'.repeat(70_000);
const HOSTILE_VALUES: unknown[] = [
  'Infinity',
  '1e309',
  '-1e309',
  new Raw('1e309'),
  new Raw('-1e309'),
  -1,
  new Raw('9007199254740993'),
  1.5,
  '\u0000',
  'a\u0000b',
  // A lone surrogate; date-times that pass RFC 3339 but name no storable instant.
  'a\ud800',
  '9999-12-31T23:59:59-23:59',
  '2016-12-31T23:59:60Z',
  '__proto__',
  'constructor',
  'toString',
  {},
  [],
  null,
  true,
  LONG,
];
const FRAME_VALUES = HOSTILE_VALUES.filter((v) => v !== LONG).concat('y'.repeat(8000));
const HOSTILE_QUERY = [
  'Infinity',
  '1e309',
  '-1e309',
  'NaN',
  '-1',
  '1.5',
  '%00',
  'a%00b',
  '__proto__',
  'toString',
  '%FF',
  '9999-12-31T23:59:59-23:59',
  '2016-12-31T23:59:60Z',
  'x'.repeat(5000),
];
const HOSTILE_PARAMS = [
  '__proto__',
  'constructor',
  'toString',
  '%00',
  'a%00b',
  '%FF',
  'x'.repeat(300),
];
const PROTO_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];

function deep(depth: number) {
  return `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}
const HOSTILE_BODIES = [
  '{',
  '[]',
  'null',
  '"text"',
  '1e309',
  deep(5000),
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
];

/** Serialises `value`, writing Raw values as their text. */
function toJson(value: unknown): string {
  const marks: string[] = [];
  const text = JSON.stringify(value, (_k, v) => {
    if (v instanceof Raw) {
      marks.push(v.text);
      return `@@RAW${marks.length - 1}@@`;
    }
    return v;
  });
  return text.replace(/"@@RAW(\d+)@@"/g, (_m, i) => marks[Number(i)]!);
}

/** Every leaf path of a plain JSON object (nested objects included, arrays as a whole). */
function leafPaths(value: unknown, prefix: string[] = []): string[][] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [prefix];
  const keys = Object.keys(value);
  if (keys.length === 0) return [prefix];
  return keys.flatMap((k) => leafPaths((value as Record<string, unknown>)[k], [...prefix, k]));
}

function withValue(base: unknown, at: string[], value: unknown): unknown {
  if (at.length === 0) return value;
  const copy = { ...(base as Record<string, unknown>) };
  copy[at[0]!] = withValue(copy[at[0]!], at.slice(1), value);
  return copy;
}

interface Env {
  node: NodeProcess;
  adminToken: string;
  /** The project product routes run in, and a second one the admin routes may change at will. */
  project: { id: string; serverKey: string };
  spare: { id: string; keyId: string; webhookId: string };
  linkId: string;
  slug: string;
  roomName: string;
  cleanup: () => Promise<void>;
}

async function call(
  env: Env,
  method: string,
  url: string,
  body?: string,
  contentType = 'application/json',
) {
  const admin = url.startsWith('/v1/admin');
  const headers: Record<string, string> = admin
    ? { authorization: `Bearer ${env.adminToken}` }
    : { authorization: `Bearer ${env.project.serverKey}`, 'x-project-id': env.project.id };
  if (body !== undefined) headers['content-type'] = contentType;
  const res = await fetch(`${env.node.url}${url}`, { method, headers, body, redirect: 'manual' });
  const text = await res.text();
  return { status: res.status, type: res.headers.get('content-type') ?? '', text };
}

async function start(backend: (typeof BACKENDS)[number]): Promise<Env> {
  const adminToken = `admin_${randomBytes(16).toString('hex')}`;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-fuzz-'));
  const schema = uniqueName('fuzz');
  const prefix = `${uniqueName('fuzz')}:`;
  const env: Record<string, string> = {
    SVC_ADMIN_TOKEN: adminToken,
    SVC_SECRET: `secret_${randomBytes(16).toString('hex')}`,
    DATA_DIR: dir,
    SVC_SERVER_KEY_RATE_LIMIT: '1000000',
    SVC_REALTIME_RATE_PER_SEC: '100000',
    SVC_REALTIME_RATE_BURST: '100000',
    SVC_WEBHOOK_ALLOW_PRIVATE: 'true',
  };
  if (backend.db === 'postgres') {
    env.DATABASE_URL = DATABASE_URL!;
    env.SVC_PG_SCHEMA = schema;
    env.REDIS_URL = REDIS_URL!;
    env.SVC_REDIS_PREFIX = prefix;
  } else {
    env.DATABASE_URL = '';
    env.REDIS_URL = '';
  }
  const node = await spawnNode(env);
  const partial = { node, adminToken } as Env;
  const json = async (method: string, url: string, body?: unknown) => {
    const res = await call(partial, method, url, body === undefined ? undefined : toJson(body));
    assert.ok(res.status < 300, `${method} ${url} → ${res.status} ${res.text}`);
    return JSON.parse(res.text);
  };
  const project = await json('POST', '/v1/admin/projects', { name: 'fuzz' });
  const server = await json('POST', `/v1/admin/projects/${project.id}/keys`, { type: 'server' });
  partial.project = { id: project.id, serverKey: server.key };
  const spare = await json('POST', '/v1/admin/projects', { name: 'spare' });
  const spareKey = await json('POST', `/v1/admin/projects/${spare.id}/keys`, { type: 'client' });
  const webhook = await json('POST', `/v1/admin/projects/${spare.id}/webhooks`, {
    url: 'http://127.0.0.1:9/svc',
  });
  partial.spare = { id: spare.id, keyId: spareKey.id, webhookId: webhook.id };
  const link = await json('POST', '/v1/sdk/links', { url: 'https://example.com/start' });
  partial.linkId = link.id;
  partial.slug = link.slug;
  partial.roomName = 'fuzz-room';
  await json('POST', '/v1/realtime/rooms', {
    roomName: partial.roomName,
    liveType: 'VIDEO_CONFERENCE',
  });
  partial.cleanup = async () => {
    await node.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    if (backend.db === 'postgres') {
      await dropSchemas(schema);
      await deleteRedisPrefix(prefix);
    }
  };
  return partial;
}

for (const backend of BACKENDS) {
  describe(`fuzz (${backend.name})`, () => {
    let env: Env;
    const failures: string[] = [];
    let requests = 0;

    before(async () => {
      env = await start(backend);
    });
    after(async () => {
      await env?.cleanup();
    });

    async function expectHandled(what: string, method: string, url: string, body?: string) {
      requests += 1;
      const res = await call(env, method, url, body);
      // A server without a media engine answers a valid recording start 503 media_unavailable.
      const mediaOff = res.status === 503 && res.text.includes('"code":"media_unavailable"');
      if (res.status >= 500 && !mediaOff)
        failures.push(`${what}: ${res.status} ${res.text.slice(0, 200)}`);
      else if (res.status >= 400) {
        let code: unknown;
        try {
          code = JSON.parse(res.text).code;
        } catch {}
        // Short links answer people: their 404 is a page, not a problem document.
        const page =
          url.startsWith('/l/') && res.status === 404 && res.type.startsWith('text/html');
        if (!page && (!res.type.startsWith('application/problem+json') || !isErrorCode(code)))
          failures.push(
            `${what}: ${res.status} without a registry problem: ${res.text.slice(0, 200)}`,
          );
      }
    }

    test('every route survives hostile bodies, queries and path parameters', async () => {
      const doc = JSON.parse((await call(env, 'GET', '/openapi.json')).text);
      const ops = operations(doc);
      assert.ok(ops.length >= 40, `only ${ops.length} operations in the OpenAPI document`);
      const bodies = validBodies(ids(env));
      // Routes that delete are fuzzed through their parameters only, never with a valid id.
      for (const op of ops) {
        const key = `${op.method} ${op.route}`;
        const url = fillPath(ids(env), op.route);
        if (op.body && op.method !== 'DELETE') {
          const base = bodies[key] ?? sample(op.body);
          for (const text of HOSTILE_BODIES)
            await expectHandled(`${key} body ${text.slice(0, 30)}`, op.method, url, text);
          // Every member the schema declares (optional ones too), on top of the valid body.
          const seen = new Set<string>();
          const paths = [...leafPaths(base), ...leafPaths(sample(op.body))].filter((p) => {
            const k = p.join('.');
            if (seen.has(k)) return false;
            seen.add(k);
            return true;
          });
          for (const at of paths) {
            for (const value of HOSTILE_VALUES) {
              const body = toJson(withValue(base, at, value));
              await expectHandled(
                `${key} body.${at.join('.')}=${toJson(value).slice(0, 30)}`,
                op.method,
                url,
                body,
              );
            }
          }
          for (const name of PROTO_NAMES) {
            await expectHandled(
              `${key} body key ${name}`,
              op.method,
              url,
              toJson({ ...(base as object), [name]: { x: 1 } }),
            );
          }
        }
        if (op.method === 'GET') {
          for (const q of op.query) {
            for (const value of HOSTILE_QUERY) {
              await expectHandled(
                `${key} ?${q.name}=${value.slice(0, 30)}`,
                'GET',
                `${url}?${q.name}=${value}`,
              );
            }
          }
          await expectHandled(`${key} ?__proto__`, 'GET', `${url}?__proto__=1&constructor=2&q=%00`);
        }
        for (const name of op.pathParams) {
          for (const value of HOSTILE_PARAMS) {
            const hostile = op.route.replace(`{${name}}`, value);
            const other = fillPath(ids(env), hostile);
            const body = op.body ? toJson(bodies[key] ?? sample(op.body)) : undefined;
            await expectHandled(`${key} {${name}}=${value.slice(0, 30)}`, op.method, other, body);
          }
        }
      }
      assert.deepEqual(failures, [], `${failures.length} of ${requests} requests mishandled`);
    });

    test('after the fuzz, every list and the redirect still answer and the process is up', async () => {
      assert.equal(env.node.child.exitCode, null);
      for (const url of [
        '/v1/sdk/links',
        '/v1/realtime/rooms',
        `/v1/realtime/rooms/${env.roomName}/participants`,
        '/v1/verify/logs',
        '/v1/verify/stats',
        '/v1/admin/projects',
        `/v1/admin/projects/${env.spare.id}/keys`,
        `/v1/admin/projects/${env.spare.id}/webhooks`,
        `/v1/admin/projects/${env.project.id}/keys`,
        '/readyz',
      ]) {
        const res = await call(env, 'GET', url);
        assert.equal(res.status, 200, `${url}: ${res.text.slice(0, 300)}`);
      }
      // The fuzz may have renamed the link (a PATCH of its slug): redirect by its current slug.
      const link = JSON.parse((await call(env, 'GET', `/v1/sdk/links/${env.linkId}`)).text);
      const redirect = await call(env, 'GET', `/l/${link.slug}`);
      assert.ok(redirect.status >= 300 && redirect.status < 400, `redirect ${redirect.status}`);
    });

    test('every frame type survives hostile frames, before and after joining', async () => {
      const tokenRes = await call(
        env,
        'POST',
        '/v1/realtime/token',
        toJson({
          roomName: env.roomName,
          liveType: 'VIDEO_CONFERENCE',
          participant: { userId: 'fuzzer', name: 'Fuzzer' },
        }),
      );
      const { token } = JSON.parse(tokenRes.text);
      const wsUrl = `${env.node.url.replace('http', 'ws')}/v1/realtime/ws?access_token=${token}`;
      const client = await RtClient.open(wsUrl);
      let n = 0;
      /** Sends a hostile frame, then a ping: the ping's pong proves the socket and node live on. */
      const probe = async (frame: string) => {
        client.send(frame);
        const id = `p${n++}`;
        client.send({ id, type: 'ping' });
        await client.wait((f) => f.type === 'pong' && f.id === id, 10_000);
      };
      const types = [
        ...CLIENT_REQUEST_TYPES,
        ...CONTROLLER_REQUEST_TYPES,
        'app.fuzz',
        ...PROTO_NAMES,
      ];
      const frames = (type: string) => [
        toJson({ id: 'f', type }),
        toJson({ id: 'f', type, data: null }),
        toJson({ id: 'f', type, data: [] }),
        toJson({ id: 'f', type, data: 'x' }),
        // Under the frame size limit (a larger frame closes the socket by design).
        ...FRAME_VALUES.map((v) =>
          toJson({
            id: 'f',
            type,
            data: { message: v, metadata: v, lastSeq: v, sessionId: v, resumeToken: v, x: v },
          }),
        ),
        `{"id":"f","type":"${type}","data":${deep(5000)}}`,
        `{"id":"f","type":"${type}","data":{"__proto__":{"x":1}}}`,
      ];
      // Before joining: everything but a well-formed join (which would join).
      for (const type of types.filter((t) => t !== 'session.join')) {
        for (const f of frames(type)) await probe(f);
      }
      for (const f of frames('session.join').slice(1)) await probe(f);
      for (const id of PROTO_NAMES) await probe(toJson({ id, type: id }));
      await probe('{');
      await probe('[]');
      const ack = await client.join();
      assert.equal(ack.type, 'ack');
      for (const type of types) {
        if (type === 'session.leave') continue;
        for (const f of frames(type)) await probe(f);
      }
      // The session still works: a message goes out and comes back in the room's order.
      const sent = await client.request('message.send', { message: 'still here' });
      assert.equal(sent.type, 'ack', JSON.stringify(sent));
      await client.waitType('message.received', (f) => f.data?.message === 'still here');
      await client.close();
      assert.equal(env.node.child.exitCode, null);
      const rooms = await call(env, 'GET', '/v1/realtime/rooms');
      assert.equal(rooms.status, 200, rooms.text);
    });
  });
}
