import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { CONTROLLER_REQUEST_TYPES, CONTROLLER_REQUESTS, type RoomSnapshot } from '@svc/protocol';
import { SvcRoom, SvcRoomController } from '../src/index.ts';

const vectors = (name: string) =>
  JSON.parse(readFileSync(new URL(`../../protocol/vectors/${name}`, import.meta.url), 'utf8'));

test('request vectors: the schemas accept every valid one and refuse every invalid one', () => {
  const v = vectors('controller-requests.json');
  const schemas = CONTROLLER_REQUESTS as Record<string, TSchema>;
  for (const { type, data } of v.valid) {
    assert.ok(Object.hasOwn(schemas, type), type);
    assert.equal(
      TypeCompiler.Compile(schemas[type]!).Check(data),
      true,
      `${type} ${JSON.stringify(data)}`,
    );
  }
  for (const { type, data } of v.invalid) {
    assert.equal(
      TypeCompiler.Compile(schemas[type]!).Check(data),
      false,
      `${type} ${JSON.stringify(data)}`,
    );
  }
  const covered = new Set(v.valid.map((x: { type: string }) => x.type));
  for (const type of CONTROLLER_REQUEST_TYPES)
    assert.ok(covered.has(type), `no valid vector for ${type}`);
});

test('mirror vector: snapshot + events give the expected state', () => {
  const v = vectors('controller-mirror.json');
  const person = (userId: string) => ({
    sid: `PA_${userId}`,
    userId,
    name: userId,
    isHost: userId === v.snapshot.hostUserId,
    joinedAt: '2026-01-01T00:00:00.000Z',
    connected: true,
  });
  const snapshot: RoomSnapshot = {
    sessionId: `PA_${v.self}`,
    resumeToken: 'x',
    room: {
      roomName: 'r',
      liveType: 'VIDEO_CONFERENCE',
      status: 'ACTIVE',
      maxParticipants: 10,
      numParticipants: v.participants.length,
      canJoinWithNoHost: true,
      metadata: null,
      createdAt: '2026-01-01T00:00:00.000Z',
    },
    self: person(v.self),
    participants: v.participants.map(person),
    departureGraceMs: 1000,
  } as RoomSnapshot;
  const room = new SvcRoom(snapshot, { request: async () => ({}) });
  const controller = new SvcRoomController({
    room,
    connect: async () => room,
    _switchRoom: async () => room,
    answerInvitation: async () => {},
  });
  const options = {
    roomName: 'r',
    liveType: 'VIDEO_CONFERENCE' as const,
    participant: { userId: v.self, name: v.self },
  };
  controller._snapshot(v.snapshot, v.seq, options);
  for (const e of v.events) controller._event(room, e.type, e.data, e.seq, e.ts);
  const state = controller.state.value as unknown as Record<string, unknown>;
  for (const [key, want] of Object.entries(v.expect)) {
    const got =
      key === 'media'
        ? [...(state.media as { userId: string }[])].sort((a, b) =>
            a.userId.localeCompare(b.userId),
          )
        : state[key];
    assert.deepEqual(got, want, key);
  }
  const poll = controller.state.value.polls.find((p) => p.id === v.expectPoll.id)!;
  assert.equal(poll.totalVotes, v.expectPoll.totalVotes);
  assert.deepEqual(poll.results, v.expectPoll.results);
  // The participants' host flags follow the host role.
  assert.deepEqual(
    room.participants.filter((p) => p.isHost).map((p) => p.userId),
    [v.expect.hostUserId],
  );
  assert.equal(controller.isHost(), true);
  assert.equal(controller.isCoHost('h'), true);
});
