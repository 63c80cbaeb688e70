import type { SvcRoomRole } from '@svc/protocol';
import type { LiveParticipant, LiveRoom } from '../room-store.ts';
import type { RoomClaims } from '../rooms.ts';
import { revokeBreakoutAdmin, syncBreakoutAccess } from './breakout.ts';
import { type CommandContext, type CommandGroup, refuse } from './command.ts';
import { type ControllerState, participantByUser, roleOf, syncHostFlags } from './state.ts';

type Emit = CommandContext['emit'];

/**
 * Roles: one host at most, co-hosts, participants. Queries are answered from the snapshot and
 * events; changes are the host's. `transferHost` makes the former host a co-host.
 */
export const roleCommands: CommandGroup = {
  'room.update_settings': {
    kind: 'locked',
    who: 'host',
    run(ctx, data) {
      const { ctl } = ctx;
      ctl.settings = {
        waitingRoom: data.waitingRoom ?? ctl.settings.waitingRoom,
        hostSuccession: data.hostSuccession ?? ctl.settings.hostSuccession,
      };
      ctx.emit('room.settings_changed', { settings: ctl.settings, by: ctx.claims.userId });
      if (!ctl.settings.waitingRoom) {
        // Turning the waiting room off admits everyone in it.
        for (const w of ctl.waiting) {
          ctl.admitted.push(w.userId);
          ctx.emit('waiting.approved', { userId: w.userId, by: ctx.claims.userId });
        }
        ctl.waiting = [];
      }
      return {};
    },
  },
  'role.transfer_host': {
    kind: 'locked',
    who: 'host',
    async run(ctx, { userId }) {
      const target = participantByUser(ctx.room, userId);
      if (!target) return refuse('participant_not_found');
      if (userId === ctx.claims.userId)
        return refuse('invalid_target', 'You are the host already.');
      const { ctl } = ctx;
      const previous = roleOf(ctl, userId);
      ctl.hostUserId = userId;
      ctl.coHosts = ctl.coHosts.filter((u) => u !== userId);
      ctl.coHosts.push(ctx.claims.userId);
      syncHostFlags(ctx.room, ctl);
      const by = ctx.claims.userId;
      ctx.emit('role.changed', {
        userId,
        role: 'host',
        previousRole: previous,
        by,
        reason: 'TRANSFER',
      });
      ctx.emit('role.changed', {
        userId: by,
        role: 'cohost',
        previousRole: 'host',
        by,
        reason: 'TRANSFER',
      });
      // The main room's admins are admitted to (and co-hosts in) every breakout room.
      await syncBreakoutAccess(ctx);
      return {};
    },
  },
  'role.promote': {
    kind: 'locked',
    who: 'host',
    async run(ctx, { userId }) {
      if (!participantByUser(ctx.room, userId)) return refuse('participant_not_found');
      const role = roleOf(ctx.ctl, userId);
      if (role === 'host') return refuse('invalid_target', 'The host cannot be made a co-host.');
      if (role === 'cohost') return {};
      ctx.ctl.coHosts.push(userId);
      ctx.emit('role.changed', {
        userId,
        role: 'cohost',
        previousRole: 'participant',
        by: ctx.claims.userId,
        reason: 'PROMOTED',
      });
      // The main room's admins are admitted to (and co-hosts in) every breakout room.
      await syncBreakoutAccess(ctx);
      return {};
    },
  },
  'role.demote': {
    kind: 'locked',
    who: 'host',
    async run(ctx, { userId }) {
      const { ctl } = ctx;
      // A co-host visiting a breakout room has left the main room but keeps the role there.
      const visiting = ctl.breakoutAdmins?.includes(userId) ?? false;
      if (!participantByUser(ctx.room, userId) && !visiting) return refuse('participant_not_found');
      const role = roleOf(ctl, userId);
      if (role === 'host') return refuse('invalid_target', 'Transfer the host role instead.');
      if (role === 'participant' && !visiting) return {};
      ctl.coHosts = ctl.coHosts.filter((u) => u !== userId);
      revokeBreakoutAdmin(ctl, userId);
      if (role === 'cohost') {
        ctx.emit('role.changed', {
          userId,
          role: 'participant',
          previousRole: 'cohost',
          by: ctx.claims.userId,
          reason: 'DEMOTED',
        });
      }
      // Breakout rooms stop admitting the user as an admin and demote it there.
      await syncBreakoutAccess(ctx);
      return {};
    },
  },
};

/**
 * The role of a participant who just joined: a host token makes its holder the host when the room
 * has none present, else a co-host (a room never has two hosts). A rejoin keeps the user's role.
 */
export function assignJoinRole(
  room: LiveRoom,
  ctl: ControllerState,
  joined: LiveParticipant,
  claims: RoomClaims,
  emit: Emit,
) {
  const hostPresent =
    ctl.hostUserId !== null && room.participants.some((p) => p.userId === ctl.hostUserId);
  if (!hostPresent && ctl.hostUserId !== null) ctl.hostUserId = null;
  if (claims.isHost && ctl.hostUserId === null) {
    const previousRole = roleOf(ctl, claims.userId);
    ctl.hostUserId = claims.userId;
    ctl.coHosts = ctl.coHosts.filter((u) => u !== claims.userId);
    emit('role.changed', {
      userId: claims.userId,
      role: 'host',
      previousRole,
      by: null,
      reason: 'JOINED',
    });
  } else if (
    claims.isHost &&
    ctl.hostUserId !== claims.userId &&
    !ctl.coHosts.includes(claims.userId)
  ) {
    ctl.coHosts.push(claims.userId);
    emit('role.changed', {
      userId: claims.userId,
      role: 'cohost',
      previousRole: 'participant',
      by: null,
      reason: 'JOINED',
    });
  }
  syncHostFlags(room, ctl);
  return joined;
}

/**
 * After participants left for good: their co-host role ends, and when the host left, the
 * longest-present co-host becomes host, else (with `hostSuccession`) the earliest participant.
 */
export function succeedHost(
  room: LiveRoom,
  ctl: ControllerState,
  leftUserIds: string[],
  emit: Emit,
) {
  const present = new Set(room.participants.map((p) => p.userId));
  ctl.coHosts = ctl.coHosts.filter((u) => present.has(u));
  if (ctl.hostUserId === null || !leftUserIds.includes(ctl.hostUserId)) return;
  if (present.has(ctl.hostUserId)) return;
  ctl.hostUserId = null;
  if (ctl.settings.hostSuccession) {
    // Participants are kept in join order: the first co-host found has been present longest.
    const next =
      room.participants.find((p) => ctl.coHosts.includes(p.userId)) ?? room.participants[0];
    if (next) {
      const previousRole: SvcRoomRole = roleOf(ctl, next.userId);
      ctl.hostUserId = next.userId;
      ctl.coHosts = ctl.coHosts.filter((u) => u !== next.userId);
      emit('role.changed', {
        userId: next.userId,
        role: 'host',
        previousRole,
        by: null,
        reason: 'SUCCESSION',
      });
    }
  }
  syncHostFlags(room, ctl);
}

/**
 * In a breakout room whose admin list changed (`previousAdmins` before): whoever lost the main
 * room's role loses its role here (`DEMOTED`, `by: null`); when that was the host, the co-host
 * present longest becomes host; present users who gained the role become co-hosts (host when the
 * room has none).
 */
export function syncBreakoutRoles(
  room: LiveRoom,
  ctl: ControllerState,
  previousAdmins: string[],
  emit: Emit,
) {
  const admins = ctl.breakoutOf?.admins ?? [];
  let hostDemoted = false;
  for (const userId of previousAdmins.filter((u) => !admins.includes(u))) {
    const role = roleOf(ctl, userId);
    if (role === 'participant') continue;
    if (role === 'host') {
      ctl.hostUserId = null;
      hostDemoted = true;
    }
    ctl.coHosts = ctl.coHosts.filter((u) => u !== userId);
    emit('role.changed', {
      userId,
      role: 'participant',
      previousRole: role,
      by: null,
      reason: 'DEMOTED',
    });
  }
  const next = hostDemoted && room.participants.find((p) => ctl.coHosts.includes(p.userId));
  if (next) {
    ctl.hostUserId = next.userId;
    ctl.coHosts = ctl.coHosts.filter((u) => u !== next.userId);
    emit('role.changed', {
      userId: next.userId,
      role: 'host',
      previousRole: 'cohost',
      by: null,
      reason: 'SUCCESSION',
    });
  }
  // Only those who gained the role: a co-host demoted here by this room's host stays demoted.
  const gained = admins.filter((u) => !previousAdmins.includes(u));
  for (const p of room.participants) {
    if (!gained.includes(p.userId) || roleOf(ctl, p.userId) !== 'participant') continue;
    const role = ctl.hostUserId === null ? 'host' : 'cohost';
    if (role === 'host') ctl.hostUserId = p.userId;
    else ctl.coHosts.push(p.userId);
    emit('role.changed', {
      userId: p.userId,
      role,
      previousRole: 'participant',
      by: null,
      reason: 'PROMOTED',
    });
  }
  syncHostFlags(room, ctl);
}
