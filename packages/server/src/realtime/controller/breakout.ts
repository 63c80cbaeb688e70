import { MAX_BREAKOUT_ROOMS } from '@svc/protocol';
import { ApiError } from '../../http/problem.ts';
import { newId } from '../../ids.ts';
import { type CommandContext, type CommandGroup, type ControllerRooms, refuse } from './command.ts';
import {
  type BreakoutEntry,
  type ClosedBreakout,
  type ControllerState,
  isAdmin,
  participantByUser,
} from './state.ts';

/**
 * Who holds a role in the breakout rooms: the main room's host and co-hosts, and those who held the
 * role when they left the main room for a breakout room (see `ControllerState.breakoutAdmins`).
 */
export function breakoutAdminsOf(ctl: ControllerState) {
  const current = [...(ctl.hostUserId ? [ctl.hostUserId] : []), ...ctl.coHosts];
  return [...new Set([...(ctl.breakoutAdmins ?? []), ...current])];
}

/** Takes a user's breakout-room role away (a demotion or a kick in the main room). */
export function revokeBreakoutAdmin(ctl: ControllerState, userId: string) {
  ctl.breakoutAdmins = (ctl.breakoutAdmins ?? []).filter((u) => u !== userId);
}

/** The names of a main room's breakout rooms: the open ones and the closed ones not yet deleted. */
export function breakoutRoomNames(ctl: ControllerState | undefined): string[] {
  if (!ctl) return [];
  return [...ctl.breakouts.map((b) => b.roomName), ...(ctl.closed ?? []).map((c) => c.roomName)];
}

/** A breakout room's lists: who may join, and who holds a role there. */
export interface BreakoutAccess {
  rid: string;
  allowed: string[];
  admins: string[];
}

/**
 * The lists of breakout rooms (all of them by default), derived from the main room's state. Call
 * it inside the main room's commit: it records the current admins in `breakoutAdmins`.
 */
export function breakoutAccess(
  ctl: ControllerState,
  only: BreakoutEntry[] = ctl.breakouts,
): BreakoutAccess[] {
  const admins = breakoutAdminsOf(ctl);
  ctl.breakoutAdmins = admins;
  return only.map((b) => ({
    rid: b.rid,
    allowed: [...new Set([...b.userIds, ...admins])],
    admins,
  }));
}

/** Replaces the lists of breakout rooms; each demotes there whoever lost the role. */
export async function pushBreakoutAccess(rooms: ControllerRooms, access: BreakoutAccess[]) {
  await Promise.all(access.map((a) => rooms.setBreakoutAllowed(a.rid, a.allowed, a.admins)));
}

/**
 * Brings breakout rooms (all by default) up to date with the main room's assignments and roles
 * before the command's events go out: called under the main room's lock after every change of
 * either, so no breakout room admits anyone or grants a role from a stale list.
 */
export async function syncBreakoutAccess(ctx: CommandContext, only?: BreakoutEntry[]) {
  await pushBreakoutAccess(ctx.rooms, breakoutAccess(ctx.ctl, only));
}

/**
 * Whether `userId` is in the main room for a breakout assignment: a participant of the main room,
 * a user assigned to one of its breakout rooms, or an admin visiting them (both are there, not in
 * the main room).
 */
const inMainRoom = (ctx: CommandContext, userId: string) =>
  participantByUser(ctx.room, userId) !== undefined ||
  ctx.ctl.breakouts.some((b) => b.userIds.includes(userId)) ||
  breakoutAdminsOf(ctx.ctl).includes(userId);

/** Tells every breakout room (its participants are there, not in the main room). */
function toBreakouts(ctx: CommandContext, rooms: BreakoutEntry[], type: string, data: unknown) {
  ctx.after(async () => {
    await Promise.all(rooms.map((b) => ctx.rooms.appendEvent(b.rid, type, data)));
  });
}

/**
 * Breakout rooms: real rooms linked to the main room (`<main>.br-<n>`). Hosts and co-hosts create,
 * assign, move, broadcast and close them. A participant may join only the breakout room it is
 * assigned to; the main room's host and co-hosts may join any (and are co-hosts there). A move is
 * an event for the moved user's client, which switches rooms; closing starts a countdown
 * (`breakout.closing` in the main room and the breakout rooms), after which the breakout rooms are
 * deleted and their participants return to the main room.
 */
export const breakoutCommands: CommandGroup = {
  'breakout.create': {
    kind: 'locked',
    who: 'admin',
    async run(ctx, { name, userIds }) {
      if (ctx.ctl.breakouts.length >= MAX_BREAKOUT_ROOMS) return refuse('limit_reached');
      if (ctx.ctl.breakoutOf)
        return refuse('invalid_target', 'A breakout room has no breakout rooms.');
      const id = newId('br', ctx.now);
      const roomName = `${ctx.room.roomName.slice(0, 96)}.br-${id.slice(-10).toLowerCase()}`;
      const assigned = [...new Set(userIds)];
      if (assigned.some((u) => !inMainRoom(ctx, u))) return refuse('participant_not_found');
      const entry: BreakoutEntry = {
        id,
        name,
        roomName,
        userIds: assigned,
        closesAt: null,
        rid: '',
      };
      const { allowed, admins } = breakoutAccess(ctx.ctl, [entry])[0]!;
      entry.rid = await ctx.rooms.openBreakout(ctx.room, roomName, id, allowed, admins);
      // Assigned users leave their former breakout rooms, which stop admitting them.
      const left = ctx.ctl.breakouts.filter((b) => b.userIds.some((u) => assigned.includes(u)));
      for (const b of left) b.userIds = b.userIds.filter((u) => !assigned.includes(u));
      await syncBreakoutAccess(ctx, left);
      ctx.ctl.breakouts.push(entry);
      const { rid: _, ...breakout } = entry;
      ctx.emit('breakout.created', { breakout });
      return { ack: { breakoutId: id, roomName } };
    },
  },
  'breakout.move': {
    kind: 'locked',
    who: 'admin',
    async run(ctx, { userId, breakoutId }) {
      const target =
        breakoutId === null ? null : ctx.ctl.breakouts.find((b) => b.id === breakoutId);
      if (target === undefined) return refuse('breakout_not_found');
      if (!inMainRoom(ctx, userId)) return refuse('participant_not_found');
      const changed = ctx.ctl.breakouts.filter((b) => b === target || b.userIds.includes(userId));
      for (const b of changed) b.userIds = b.userIds.filter((u) => u !== userId);
      target?.userIds.push(userId);
      // Before the event goes out: the moved client joins the target as soon as it hears of the
      // move, and the rooms it was assigned to no longer admit it.
      await syncBreakoutAccess(ctx, changed);
      const data = {
        userId,
        breakoutId,
        roomName: target ? target.roomName : ctx.room.roomName,
        by: ctx.claims.userId,
      };
      ctx.emit('breakout.moved', data);
      toBreakouts(ctx, ctx.ctl.breakouts, 'breakout.moved', data);
      return {};
    },
  },
  'breakout.join': {
    kind: 'locked',
    who: 'anyone',
    readOnly: true,
    run(ctx, { breakoutId }) {
      const b = ctx.ctl.breakouts.find((x) => x.id === breakoutId);
      if (!b) return refuse('breakout_not_found');
      if (!b.userIds.includes(ctx.claims.userId) && !isAdmin(ctx.ctl, ctx.claims.userId)) {
        return refuse('breakout_not_assigned');
      }
      return { ack: { roomName: b.roomName } };
    },
  },
  'breakout.close': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { breakoutId, countdownMs }) {
      const closing = breakoutId
        ? ctx.ctl.breakouts.filter((b) => b.id === breakoutId)
        : ctx.ctl.breakouts.filter((b) => b.closesAt === null);
      if (breakoutId && closing.length === 0) return refuse('breakout_not_found');
      if (closing.length === 0) return {};
      const closesAt = ctx.now + (countdownMs ?? ctx.cfg.breakoutCountdownMs);
      for (const b of closing) b.closesAt = closesAt;
      const data = { breakoutIds: closing.map((b) => b.id), closesAt };
      ctx.emit('breakout.closing', data);
      toBreakouts(ctx, closing, 'breakout.closing', data);
      return { ack: { closesAt } };
    },
  },
  'breakout.broadcast': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { message }) {
      const data = { message, from: { userId: ctx.claims.userId, name: ctx.claims.name } };
      ctx.emit('breakout.broadcast', data);
      toBreakouts(ctx, ctx.ctl.breakouts, 'breakout.broadcast', data);
      return {};
    },
  },
};

/** The longest wait between two deletes of a closed breakout room. */
const MAX_DELETE_BACKOFF_MS = 30_000;
/** Deletes tried before a closed breakout room is given up (about ten minutes of failures). */
const DELETE_ATTEMPTS = 25;

/**
 * Closes the breakout rooms whose countdown is over (called by the sweeper, under the main room's
 * lock) and deletes them, their participants returning to the main room when their room ends. A
 * closed room stays in the main room's `closed` list until its delete succeeds: a delete that fails
 * (the shared state or the database is down) is tried again by whichever node sweeps the main room
 * next, after 0.5, 1, 2… s (at most 30 s), so neither an outage nor a node's death strands the
 * breakout room's participants.
 */
export function closeDueBreakouts(
  ctx: Pick<CommandContext, 'ctl' | 'now' | 'emit' | 'after' | 'room' | 'rooms'>,
) {
  const { ctl, now } = ctx;
  const due = ctl.breakouts.filter((b) => b.closesAt !== null && b.closesAt <= now);
  if (due.length > 0) {
    ctl.breakouts = ctl.breakouts.filter((b) => !due.includes(b));
    ctx.emit('breakout.closed', { breakoutIds: due.map((b) => b.id) });
    ctl.closed = [
      ...(ctl.closed ?? []),
      ...due.map((b) => ({ roomName: b.roomName, dueAt: now, attempts: 0 })),
    ];
  }
  const { projectId, rid } = ctx.room;
  const pending: ClosedBreakout[] = [];
  for (const c of ctl.closed ?? []) {
    if (c.dueAt > now) {
      pending.push(c);
      continue;
    }
    if (c.attempts >= DELETE_ATTEMPTS) {
      ctx.rooms.log.warn(
        { roomName: c.roomName, attempts: c.attempts },
        'realtime: a closed breakout room could not be deleted; given up',
      );
      continue;
    }
    c.attempts++;
    c.dueAt = now + Math.min(250 * 2 ** c.attempts, MAX_DELETE_BACKOFF_MS);
    pending.push(c);
    const { roomName, attempts } = c;
    ctx.after(async () => {
      try {
        await ctx.rooms.deleteRoom(projectId, roomName).catch((err: unknown) => {
          // A room whose record is gone has nothing left to end.
          if (!(err instanceof ApiError && err.code === 'room_not_found')) throw err;
        });
        await ctx.rooms.forgetClosedBreakout(rid, roomName);
      } catch (err) {
        ctx.rooms.log.warn(
          { err, roomName, attempts },
          'realtime: deleting a closed breakout room failed',
        );
      }
    });
  }
  ctl.closed = pending;
}
