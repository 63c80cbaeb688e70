import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closeDueBreakouts } from '../../src/realtime/controller/breakout.ts';
import type { BreakoutEntry } from '../../src/realtime/controller/state.ts';

const breakout = (id: string, closesAt: number | null): BreakoutEntry => ({
  id,
  name: id,
  roomName: `main.br-${id}`,
  userIds: [],
  closesAt,
  rid: `rm_${id}`,
});

/** Runs closeDueBreakouts on a room whose deletes fail `failures` times; returns the attempts made. */
async function close(failures: number, deletes: number, tick: (ms: number) => void) {
  const attempts: string[] = [];
  const emitted: unknown[] = [];
  const after: (() => Promise<void>)[] = [];
  const ctl = { breakouts: [breakout('a', 1_000), breakout('b', null)] };
  let left = failures;
  closeDueBreakouts({
    ctl,
    now: 1_000,
    emit: (type: string, data: unknown) => emitted.push({ type, data }),
    after: (fn: () => Promise<void>) => after.push(fn),
    room: { projectId: 'p1' },
    rooms: {
      async deleteRoom(projectId: string, roomName: string) {
        attempts.push(`${projectId}/${roomName}`);
        if (left-- > 0) throw new Error('the shared state timed out');
      },
    },
  } as unknown as Parameters<typeof closeDueBreakouts>[0]);
  for (const fn of after) await fn();
  // Each retry waits on a timer: let the failed attempt settle, then move the clock past it, for
  // up to 20 turns or until one attempt more than expected was made.
  for (let turns = 0; turns < 20 && attempts.length < deletes + 1; turns++) {
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
    tick(10_000);
  }
  return { attempts, emitted, ctl };
}

test('a due breakout room closes: the event, the entry gone, its room deleted once', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { attempts, emitted, ctl } = await close(0, 1, (ms) => t.mock.timers.tick(ms));
  assert.deepEqual(emitted, [{ type: 'breakout.closed', data: { breakoutIds: ['a'] } }]);
  assert.deepEqual(
    ctl.breakouts.map((b) => b.id),
    ['b'],
  );
  assert.deepEqual(attempts, ['p1/main.br-a']);
});

test('a closed breakout room whose delete fails is deleted again until it succeeds', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { attempts } = await close(2, 3, (ms) => t.mock.timers.tick(ms));
  assert.deepEqual(attempts, ['p1/main.br-a', 'p1/main.br-a', 'p1/main.br-a']);
});

test('a delete that keeps failing is given up after its attempts', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { attempts } = await close(100, 6, (ms) => t.mock.timers.tick(ms));
  assert.equal(attempts.length, 6);
});
