import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiError } from '../../src/http/problem.ts';
import { closeDueBreakouts } from '../../src/realtime/controller/breakout.ts';
import type { BreakoutEntry, ControllerState } from '../../src/realtime/controller/state.ts';

const breakout = (id: string, closesAt: number | null): BreakoutEntry => ({
  id,
  name: id,
  roomName: `main.br-${id}`,
  userIds: [],
  closesAt,
  rid: `rm_${id}`,
});

/**
 * A main room with a breakout room due at 1 s and one not closing, whose deletes fail as `fail`
 * says. Each `sweep` is one sweeper pass at `now`; the controller state goes through JSON between
 * passes, as it does through the shared state (another node may run the next pass).
 */
function mainRoom(fail: (attempt: number) => Error | null) {
  let ctl = { breakouts: [breakout('a', 1_000), breakout('b', null)] } as Pick<
    ControllerState,
    'breakouts' | 'closed'
  >;
  const deletes: string[] = [];
  const forgotten: string[] = [];
  const warnings: string[] = [];
  const emitted: unknown[] = [];
  const rooms = {
    async deleteRoom(projectId: string, roomName: string) {
      deletes.push(`${projectId}/${roomName}`);
      const err = fail(deletes.length);
      if (err) throw err;
    },
    async forgetClosedBreakout(rid: string, roomName: string) {
      forgotten.push(`${rid}/${roomName}`);
    },
    log: { warn: (_obj: object, msg: string) => warnings.push(msg) },
  };
  return {
    deletes,
    forgotten,
    warnings,
    emitted,
    get ctl() {
      return ctl;
    },
    async sweep(now: number) {
      const after: (() => Promise<void>)[] = [];
      closeDueBreakouts({
        ctl,
        now,
        emit: (type: string, data: unknown) => emitted.push({ type, data }),
        after: (fn: () => Promise<void>) => after.push(fn),
        room: { projectId: 'p1', rid: 'rm_main' },
        rooms,
      } as unknown as Parameters<typeof closeDueBreakouts>[0]);
      ctl = JSON.parse(JSON.stringify(ctl));
      for (const fn of after) await fn();
    },
  };
}

test('a due breakout room closes: the event, the entry gone, its room deleted once', async () => {
  const main = mainRoom(() => null);
  await main.sweep(999);
  assert.deepEqual(main.deletes, []);
  await main.sweep(1_000);
  assert.deepEqual(main.emitted, [{ type: 'breakout.closed', data: { breakoutIds: ['a'] } }]);
  assert.deepEqual(
    main.ctl.breakouts.map((b) => b.id),
    ['b'],
  );
  assert.deepEqual(main.deletes, ['p1/main.br-a']);
  assert.deepEqual(main.forgotten, ['rm_main/main.br-a']);
  assert.deepEqual(main.warnings, []);
});

test('a failed delete stays in the main room and is tried again by the next sweeps, with backoff', async () => {
  const main = mainRoom((n) => (n <= 2 ? new Error('the shared state timed out') : null));
  await main.sweep(1_000);
  assert.equal(main.deletes.length, 1);
  assert.equal(main.warnings.length, 1);
  assert.deepEqual(main.ctl.closed, [{ roomName: 'main.br-a', dueAt: 1_500, attempts: 1 }]);
  await main.sweep(1_499);
  assert.equal(main.deletes.length, 1, 'not before its backoff');
  await main.sweep(1_500);
  assert.equal(main.deletes.length, 2);
  assert.equal(main.ctl.closed?.[0]?.dueAt, 2_500);
  await main.sweep(2_500);
  assert.deepEqual(main.deletes, ['p1/main.br-a', 'p1/main.br-a', 'p1/main.br-a']);
  assert.deepEqual(main.forgotten, ['rm_main/main.br-a']);
  assert.deepEqual(main.emitted.length, 1, 'closed is said once');
});

test('a room whose record is gone counts as deleted', async () => {
  const main = mainRoom(() => new ApiError('room_not_found'));
  await main.sweep(1_000);
  assert.deepEqual(main.forgotten, ['rm_main/main.br-a']);
  assert.deepEqual(main.warnings, []);
});

test('a delete that keeps failing is given up after 25 attempts, waiting at most 30 s between', async () => {
  const main = mainRoom(() => new Error('down'));
  let now = 1_000;
  const waits: number[] = [];
  for (let pass = 0; pass < 40 && main.ctl.closed?.length !== 0; pass++) {
    await main.sweep(now);
    const next = main.ctl.closed?.[0]?.dueAt;
    if (next !== undefined) waits.push(next - now);
    now = next ?? now;
  }
  assert.equal(main.deletes.length, 25);
  assert.deepEqual(main.ctl.closed, []);
  assert.equal(Math.max(...waits), 30_000);
  assert.match(main.warnings.at(-1) ?? '', /given up/);
  assert.deepEqual(main.forgotten, []);
});
