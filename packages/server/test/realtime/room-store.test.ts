import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  type LiveRoom,
  MemoryRoomStore,
  type RoomStore,
  type StoredRoomEvent,
} from '../../src/realtime/room-store.ts';
import { RedisRoomStore } from '../../src/realtime/room-store-redis.ts';
import type { RedisState } from '../../src/state/redis.ts';
import { BACKENDS, freshState, uniqueName } from '../helpers.ts';

const room = (rid: string, sids: string[] = []): LiveRoom => ({
  rid,
  projectId: 'prj_1',
  roomName: 'r',
  liveType: 'VIDEO_CALL',
  maxParticipants: 10,
  canJoinWithNoHost: true,
  metadata: null,
  createdAtMs: 0,
  participants: sids.map((sid) => ({
    sid,
    userId: sid,
    name: sid,
    isHost: false,
    joinedAtMs: 0,
    resumeTokenHash: 'x',
    nodeId: 'n',
    connId: 'c',
    connected: true,
    disconnectedAtMs: null,
  })),
  emptySinceMs: null,
  startedAtMs: null,
});

for (const backend of BACKENDS) {
  describe(`RoomStore (${backend.state})`, () => {
    let store: RoomStore;
    let shared: ReturnType<typeof freshState>;
    before(() => {
      shared = freshState(backend.state);
      store =
        backend.state === 'memory'
          ? new MemoryRoomStore(() => 1000, 10)
          : new RedisRoomStore(shared.state as RedisState, () => 1000, 10);
    });
    after(async () => {
      await store.close();
      await shared.drop();
    });

    test('commits number events 1, 2, 3… and followers see them in order', async () => {
      const rid = uniqueName('rm');
      const seen: StoredRoomEvent[] = [];
      const unfollow = await store.follow(rid, (e) => seen.push(e));
      const first = await store.withLock(rid, (tx) =>
        tx.commit(room(rid, ['a']), [{ type: 'participant.joined', data: { n: 1 } }], 5000),
      );
      assert.equal(first.lastSeq, 1);
      const second = await store.withLock(rid, async (tx) => {
        const loaded = await tx.load();
        assert.equal(loaded?.participants[0]?.sid, 'a');
        return tx.commit(
          loaded,
          [
            { type: 'room.metadata_changed', data: { metadata: 'm' } },
            { type: 'participant.left', data: { n: 2 } },
          ],
          null,
        );
      });
      assert.deepEqual(
        second.events.map((e) => e.seq),
        [2, 3],
      );
      const msg = await store.appendIfMember(rid, 'a', {
        type: 'message.received',
        data: { message: 'hi' },
      });
      assert.equal(msg?.seq, 4);
      assert.deepEqual(JSON.parse(msg!.frame), {
        type: 'message.received',
        seq: 4,
        ts: 1000,
        data: { message: 'hi' },
      });
      await new Promise<void>((resolve) => {
        const check = () => (seen.length >= 4 ? resolve() : setTimeout(check, 5));
        check();
      });
      assert.deepEqual(
        seen.map((e) => e.seq),
        [1, 2, 3, 4],
      );
      assert.deepEqual(
        seen.map((e) => e.type),
        ['participant.joined', 'room.metadata_changed', 'participant.left', 'message.received'],
      );
      assert.equal(seen[3]!.frame, msg!.frame);
      await unfollow();
      assert.deepEqual(
        (await store.readAfter(rid, 2))?.map((e) => e.seq),
        [3, 4],
      );
      assert.deepEqual(await store.readAfter(rid, 4), []);
      assert.equal(await store.readAfter(rid, 9), null, 'beyond the last seq');
    });

    test('appendIfMember refuses non-members and missing rooms', async () => {
      const rid = uniqueName('rm');
      assert.equal(await store.appendIfMember(rid, null, { type: 'x', data: {} }), null);
      await store.withLock(rid, (tx) => tx.commit(room(rid, ['a']), [], null));
      assert.equal(await store.appendIfMember(rid, 'b', { type: 'x', data: {} }), null);
      assert.ok(await store.appendIfMember(rid, null, { type: 'x', data: {} }));
      await store.withLock(rid, (tx) =>
        tx.commit(null, [{ type: 'room.deleted', data: {} }], null),
      );
      assert.equal(await store.appendIfMember(rid, 'a', { type: 'x', data: {} }), null);
      assert.equal(await store.peek(rid), null);
    });

    test('events that left the buffer cannot be replayed', async () => {
      const rid = uniqueName('rm');
      await store.withLock(rid, (tx) => tx.commit(room(rid, ['a']), [], null));
      for (let i = 0; i < 400; i++)
        await store.appendIfMember(rid, 'a', { type: 'm', data: { i } });
      assert.equal(await store.readAfter(rid, 0), null);
      assert.deepEqual(
        (await store.readAfter(rid, 398))?.map((e) => e.seq),
        [399, 400],
      );
    });

    test('the lock serialises commands on one room', async () => {
      const rid = uniqueName('rm');
      const order: string[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => {
        release = r;
      });
      const first = store.withLock(rid, async () => {
        order.push('first:start');
        await gate;
        order.push('first:end');
      });
      await new Promise((r) => setTimeout(r, 20));
      const second = store.withLock(rid, async () => {
        order.push('second');
      });
      // Give a broken lock the time to let the second command in before the first ends.
      await new Promise((r) => setTimeout(r, 50));
      release();
      await Promise.all([first, second]);
      assert.deepEqual(order, ['first:start', 'first:end', 'second']);
    });

    test('due rooms are listed once their time has come', async () => {
      const rid = uniqueName('rm');
      await store.withLock(rid, (tx) => tx.commit(room(rid), [], 2000));
      assert.ok(!(await store.dueRooms(1999, 100)).includes(rid));
      assert.ok((await store.dueRooms(2000, 100)).includes(rid));
      await store.withLock(rid, (tx) => tx.commit(room(rid), [], null));
      assert.ok(!(await store.dueRooms(10_000, 100)).includes(rid));
    });

    if (backend.state === 'redis') {
      test('a commit after the lock was lost is refused (fencing)', async () => {
        const rid = uniqueName('rm');
        const redis = (shared.state as RedisState).redis;
        await assert.rejects(
          store.withLock(rid, async (tx) => {
            await redis.del(`${shared.prefix}rt:{${rid}}:lock`);
            await tx.commit(room(rid), [{ type: 'x', data: {} }], null);
          }),
          /LOCK_LOST/,
        );
        assert.equal(await store.peek(rid), null);
      });
    }
  });
}
