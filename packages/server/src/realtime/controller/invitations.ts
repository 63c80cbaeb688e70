import {
  INVITATION_TIMEOUT_BOUNDS_MS,
  type SvcInvitation,
  type SvcInvitationOutcome,
} from '@svc/protocol';
import { newId } from '../../ids.ts';
import { type CommandContext, type CommandGroup, refuse } from './command.ts';

/** Webhook + room event for an invitation's change (webhooks let the app ring devices). */
function announce(
  ctx: Pick<CommandContext, 'emit' | 'after' | 'svc' | 'room' | 'now'>,
  invitation: SvcInvitation,
  userId: string | null,
  outcome: SvcInvitationOutcome,
) {
  ctx.emit('invitation.updated', { invitationId: invitation.id, userId, outcome, invitation });
  webhook(ctx, 'invitation.updated', { invitation, userId, outcome });
}

function webhook(
  ctx: Pick<CommandContext, 'after' | 'svc' | 'room' | 'now'>,
  type: string,
  data: Record<string, unknown>,
) {
  const { room, svc, now } = ctx;
  ctx.after(() =>
    svc.events.emit({
      projectId: room.projectId,
      type,
      data: { roomName: room.roomName, roomId: room.rid, ...data },
      orderingKey: `room:${room.projectId}:${room.roomName}`,
      occurredAtMs: now,
    }),
  );
}

const finished = (inv: SvcInvitation) => inv.invitees.every((i) => i.outcome !== 'pending');

function answer(ctx: CommandContext, invitationId: string, outcome: SvcInvitationOutcome) {
  const inv = ctx.ctl.invitations.find((i) => i.id === invitationId);
  if (!inv) return refuse('invitation_not_found');
  const me = inv.invitees.find((i) => i.userId === ctx.claims.userId);
  if (!me) return refuse('not_invited');
  if (me.outcome !== 'pending') return refuse('invitation_closed');
  me.outcome = outcome;
  announce(ctx, inv, me.userId, outcome);
  if (finished(inv)) ctx.ctl.invitations = ctx.ctl.invitations.filter((i) => i !== inv);
  return {};
}

/**
 * Invitations (ringing). The server keeps each invitation in the inviting room, times it out
 * (default 30 s, 5–180 s) and records one outcome per invitee. An invitee who is not in the room
 * hears of it through the project's webhook `invitation.created` (the app's backend rings the
 * user's devices), then opens the room's signaling channel with its own token and answers with
 * `invitation.accept` / `invitation.decline` before `session.join`. Every change is a room event
 * and an `invitation.updated` webhook, so the user's other devices stop ringing.
 */
export const invitationCommands: CommandGroup = {
  'invitation.send': {
    kind: 'locked',
    who: 'anyone',
    run(ctx, data) {
      const self = ctx.claims.userId;
      const userIds = [...new Set(data.userIds)].filter((u) => u !== self);
      if (userIds.length === 0) return refuse('invalid_target', 'Invite someone else.');
      if (ctx.ctl.invitations.length >= 100) return refuse('limit_reached');
      const { min, max } = INVITATION_TIMEOUT_BOUNDS_MS;
      const timeoutMs = Math.min(max, Math.max(min, data.timeoutMs ?? ctx.cfg.invitationTimeoutMs));
      const invitation: SvcInvitation = {
        id: newId('inv', ctx.now),
        roomName: ctx.room.roomName,
        from: { userId: self, name: ctx.claims.name },
        invitees: userIds.map((userId) => ({ userId, outcome: 'pending' })),
        createdAt: ctx.now,
        expiresAt: ctx.now + timeoutMs,
        ...(data.metadata !== undefined ? { metadata: data.metadata } : {}),
      };
      ctx.ctl.invitations.push(invitation);
      ctx.emit('invitation.created', { invitation });
      webhook(ctx, 'invitation.created', { invitation });
      return { ack: { invitationId: invitation.id, expiresAt: invitation.expiresAt } };
    },
  },
  'invitation.accept': {
    kind: 'locked',
    who: 'anyone',
    beforeJoin: true,
    run: (ctx, { invitationId }) => answer(ctx, invitationId, 'accepted'),
  },
  'invitation.decline': {
    kind: 'locked',
    who: 'anyone',
    beforeJoin: true,
    run: (ctx, { invitationId, busy }) => answer(ctx, invitationId, busy ? 'busy' : 'declined'),
  },
  'invitation.cancel': {
    kind: 'locked',
    who: 'anyone',
    run(ctx, { invitationId }) {
      const inv = ctx.ctl.invitations.find((i) => i.id === invitationId);
      if (!inv) return refuse('invitation_not_found');
      if (inv.from.userId !== ctx.claims.userId)
        return refuse('not_invited', 'Only the inviter may cancel.');
      for (const i of inv.invitees) if (i.outcome === 'pending') i.outcome = 'cancelled';
      ctx.ctl.invitations = ctx.ctl.invitations.filter((i) => i !== inv);
      announce(ctx, inv, null, 'cancelled');
      return {};
    },
  },
};

/** Ends invitations whose ring time is over (`timed_out` for every invitee still pending). */
export function expireInvitations(
  ctx: Pick<CommandContext, 'emit' | 'after' | 'svc' | 'room' | 'now' | 'ctl'>,
) {
  const due = ctx.ctl.invitations.filter((i) => i.expiresAt <= ctx.now);
  if (due.length === 0) return;
  ctx.ctl.invitations = ctx.ctl.invitations.filter((i) => i.expiresAt > ctx.now);
  for (const inv of due) {
    for (const i of inv.invitees) if (i.outcome === 'pending') i.outcome = 'timed_out';
    announce(ctx, inv, null, 'timed_out');
  }
}

/** An inviter who leaves for good cancels their invitations still ringing. */
export function cancelInvitationsOf(
  ctx: Pick<CommandContext, 'emit' | 'after' | 'svc' | 'room' | 'now' | 'ctl'>,
  userIds: string[],
) {
  const mine = ctx.ctl.invitations.filter((i) => userIds.includes(i.from.userId));
  if (mine.length === 0) return;
  ctx.ctl.invitations = ctx.ctl.invitations.filter((i) => !mine.includes(i));
  for (const inv of mine) {
    for (const i of inv.invitees) if (i.outcome === 'pending') i.outcome = 'cancelled';
    announce(ctx, inv, null, 'cancelled');
  }
}
