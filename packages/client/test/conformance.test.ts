import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { FormatRegistry, Kind, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import {
  CLIENT_REQUEST_TYPES,
  CONTROLLER_EVENT_TYPES,
  isTimestampInRange,
  ROOM_EVENT_TYPES,
} from '@svc/protocol';
import {
  CLIENT_DATA_SCHEMAS,
  ClientFrameSchema,
  REST_SCHEMAS,
  SERVER_FRAME_SCHEMAS,
} from '../../protocol/src/frames.ts';
import { SvcRoom, SvcRoomController } from '../src/index.ts';

/*
 * The one contract: packages/protocol/vectors/realtime.json holds every frame and REST body, valid
 * and invalid. This test holds the TypeScript side to it (the schemas accept exactly the valid
 * vectors, JSON round-trips unchanged, and every property of every schema appears in some valid
 * vector, so a protocol change fails here until the vectors follow it); the Kotlin library's
 * ConformanceTest holds the Android side to the same file.
 */

interface Vector {
  name: string;
  schema: string;
  valid: boolean;
  json: unknown;
}

const file = path.resolve(import.meta.dirname, '../../protocol/vectors/realtime.json');
const vectors: Vector[] = JSON.parse(fs.readFileSync(file, 'utf8')).vectors;

if (!FormatRegistry.Has('date-time')) {
  FormatRegistry.Set(
    'date-time',
    (v) =>
      /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v) &&
      isTimestampInRange(v),
  );
}

type ServerFrameType = keyof typeof SERVER_FRAME_SCHEMAS;

function serverSchema(json: unknown): TSchema | undefined {
  const type = (json as { type?: unknown })?.type;
  if (typeof type !== 'string') return undefined;
  if (type.startsWith('app.')) return SERVER_FRAME_SCHEMAS['app.*'];
  return SERVER_FRAME_SCHEMAS[type as ServerFrameType];
}

/** Whether the vector satisfies the protocol's schemas. */
function accepts(v: Vector): boolean {
  if (v.schema.startsWith('rest:')) {
    const schema = REST_SCHEMAS[v.schema.slice(5)];
    assert.ok(schema, `${v.name}: unknown schema ${v.schema}`);
    return Value.Check(schema, v.json);
  }
  if (v.schema === 'client-frame') {
    if (!Value.Check(ClientFrameSchema, v.json)) return false;
    const frame = v.json as { type: string; data?: unknown };
    const data = CLIENT_DATA_SCHEMAS[frame.type];
    if (!data) return frame.type.startsWith('app.');
    return Value.Check(data, frame.data ?? {});
  }
  if (v.schema === 'server-frame') {
    const schema = serverSchema(v.json);
    return schema !== undefined && Value.Check(schema, v.json);
  }
  assert.fail(`${v.name}: unknown schema kind ${v.schema}`);
}

/** Every property path a schema declares (`a.b`, `items[].c`), objects and arrays walked. */
function declaredPaths(schema: TSchema, prefix = ''): string[] {
  const kind = schema[Kind];
  if (kind === 'Object') {
    return Object.entries(schema.properties as Record<string, TSchema>).flatMap(([key, sub]) => [
      prefix + key,
      ...declaredPaths(sub, `${prefix}${key}.`),
    ]);
  }
  if (kind === 'Array') return declaredPaths(schema.items as TSchema, `${prefix.slice(0, -1)}[].`);
  return [];
}

/** Every property path present in a JSON value. */
function presentPaths(json: unknown, prefix = ''): string[] {
  if (Array.isArray(json))
    return json.flatMap((item) => presentPaths(item, `${prefix.slice(0, -1)}[].`));
  if (json && typeof json === 'object') {
    return Object.entries(json).flatMap(([key, sub]) => [
      prefix + key,
      ...presentPaths(sub, `${prefix}${key}.`),
    ]);
  }
  return [];
}

test('the schemas accept every valid vector and refuse every invalid one', () => {
  for (const v of vectors) assert.equal(accepts(v), v.valid, `${v.name} (${v.schema})`);
});

test('valid vectors survive parse and re-serialization unchanged', () => {
  for (const v of vectors.filter((x) => x.valid)) {
    const text = JSON.stringify(v.json);
    assert.deepEqual(JSON.parse(text), v.json, v.name);
    assert.equal(JSON.stringify(JSON.parse(text)), text, v.name);
  }
});

test('every property of every schema appears in a valid vector', () => {
  const groups = new Map<string, { schema: TSchema; vectors: unknown[] }>();
  for (const [name, schema] of Object.entries(REST_SCHEMAS)) {
    groups.set(`rest:${name}`, { schema, vectors: [] });
  }
  for (const [type, schema] of Object.entries(SERVER_FRAME_SCHEMAS)) {
    groups.set(`server:${type}`, { schema, vectors: [] });
  }
  for (const v of vectors.filter((x) => x.valid)) {
    if (v.schema.startsWith('rest:')) groups.get(v.schema)!.vectors.push(v.json);
    if (v.schema === 'server-frame') {
      const type = (v.json as { type: string }).type;
      groups.get(`server:${type.startsWith('app.') ? 'app.*' : type}`)!.vectors.push(v.json);
    }
  }
  for (const [name, { schema, vectors: jsons }] of groups) {
    assert.ok(jsons.length > 0, `no valid vector for ${name}`);
    const present = new Set(jsons.flatMap((j) => presentPaths(j)));
    const missing = declaredPaths(schema).filter((p) => !present.has(p));
    assert.deepEqual(missing, [], `${name}: properties without a vector`);
  }
  for (const [type, schema] of Object.entries(CLIENT_DATA_SCHEMAS)) {
    const jsons = vectors
      .filter(
        (v) => v.valid && v.schema === 'client-frame' && (v.json as { type: string }).type === type,
      )
      .map((v) => (v.json as { data?: unknown }).data ?? {});
    assert.ok(jsons.length > 0, `no valid vector for the client request ${type}`);
    const present = new Set(jsons.flatMap((j) => presentPaths(j)));
    assert.deepEqual(
      declaredPaths(schema).filter((p) => !present.has(p)),
      [],
      `${type}: properties without a vector`,
    );
  }
});

test('the vectors cover every frame type the protocol defines, with invalid cases', () => {
  const frameTypes = new Set(Object.keys(SERVER_FRAME_SCHEMAS));
  for (const type of ROOM_EVENT_TYPES)
    assert.ok(frameTypes.has(type), `no frame schema for ${type}`);
  for (const type of CLIENT_REQUEST_TYPES)
    assert.ok(CLIENT_DATA_SCHEMAS[type], `no data schema for ${type}`);
  assert.ok(vectors.some((v) => v.schema === 'client-frame' && !v.valid));
  assert.ok(vectors.some((v) => v.schema === 'server-frame' && !v.valid));
  for (const name of Object.keys(REST_SCHEMAS)) {
    assert.ok(
      vectors.some((v) => v.schema === `rest:${name}` && !v.valid),
      `no invalid vector for ${name}`,
    );
  }
});

/*
 * Controller events (packages/protocol/vectors/controller-events.json): the server frames of every
 * controller event type. The Kotlin ConformanceTest parses and re-serializes the valid ones with its
 * types and refuses the invalid ones; here the file must cover every event type the protocol
 * defines, and @svc/client's mirror must take every valid frame in order.
 */
test('controller event vectors cover every controller event type and feed the mirror', () => {
  const events: Vector[] = JSON.parse(
    fs.readFileSync(
      path.resolve(import.meta.dirname, '../../protocol/vectors/controller-events.json'),
      'utf8',
    ),
  ).vectors;
  const valid = events
    .filter((v) => v.valid)
    .map((v) => v.json as { type: string; seq: number; ts: number; data: unknown });
  const types = new Set<string>(CONTROLLER_EVENT_TYPES);
  for (const f of valid) assert.ok(types.has(f.type), `${f.type} is not a controller event`);
  for (const type of CONTROLLER_EVENT_TYPES)
    assert.ok(
      valid.some((f) => f.type === type),
      `no valid vector for ${type}`,
    );
  assert.ok(
    events.some((v) => !v.valid),
    'invalid controller event vectors',
  );
  const person = (userId: string) => ({
    sid: `PA_${userId}`,
    userId,
    name: userId,
    isHost: userId === 'h',
    joinedAt: '2026-01-01T00:00:00.000Z',
    connected: true,
  });
  const room = new SvcRoom(
    {
      sessionId: 'PA_ann',
      resumeToken: 'x',
      room: {
        roomName: 'standup',
        liveType: 'VIDEO_CONFERENCE',
        status: 'ACTIVE',
        maxParticipants: 10,
        numParticipants: 3,
        canJoinWithNoHost: true,
        metadata: null,
        createdAt: '2026-01-01T00:00:00.000Z',
      },
      self: person('ann'),
      participants: ['h', 'ann', 'bob'].map(person),
      departureGraceMs: 1000,
    } as never,
    { request: async () => ({}) },
  );
  const controller = new SvcRoomController({
    room,
    connect: async () => room,
    _switchRoom: async () => room,
    answerInvitation: async () => {},
  });
  controller.autoJoinBreakoutRooms = false;
  controller._snapshot(undefined, 100, {
    roomName: 'standup',
    liveType: 'VIDEO_CONFERENCE',
    participant: { userId: 'ann', name: 'ann' },
  });
  const seen: string[] = [];
  controller.onEvent = (e) => seen.push(e.type);
  for (const f of valid) controller._event(room, f.type, f.data, f.seq, f.ts);
  assert.deepEqual(
    seen,
    valid.map((f) => f.type),
  );
  assert.equal(controller.state.value.seq, valid.at(-1)!.seq);
});
