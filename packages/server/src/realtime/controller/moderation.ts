import { revokeBreakoutAdmin, syncBreakoutAccess } from './breakout.ts';
import { type CommandGroup, refuse } from './command.ts';
import { participantByUser, roleOf } from './state.ts';

/**
 * Participants: spotlight (room-wide, hosts and co-hosts), kick with a ban for the token's
 * lifetime, and each participant's own shared state (background effect, accessibility).
 * Pinning is local to each client and never reaches the server.
 */
export const moderationCommands: CommandGroup = {
  'participant.spotlight': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { userId }) {
      if (!participantByUser(ctx.room, userId)) return refuse('participant_not_found');
      if (ctx.ctl.spotlight.includes(userId)) return {};
      ctx.ctl.spotlight.push(userId);
      ctx.emit('spotlight.changed', { userIds: ctx.ctl.spotlight, by: ctx.claims.userId });
      return {};
    },
  },
  'participant.unspotlight': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { userId }) {
      if (!ctx.ctl.spotlight.includes(userId)) return {};
      ctx.ctl.spotlight = ctx.ctl.spotlight.filter((u) => u !== userId);
      ctx.emit('spotlight.changed', { userIds: ctx.ctl.spotlight, by: ctx.claims.userId });
      return {};
    },
  },
  'participant.kick': {
    kind: 'locked',
    who: 'admin',
    async run(ctx, { userId, reason }) {
      const target = participantByUser(ctx.room, userId);
      if (!target) return refuse('participant_not_found');
      if (userId === ctx.claims.userId) return refuse('invalid_target', 'Leave instead.');
      const targetRole = roleOf(ctx.ctl, userId);
      if (targetRole === 'host') return refuse('invalid_target', 'The host cannot be kicked.');
      if (targetRole === 'cohost' && ctx.role !== 'host') return refuse('host_required');
      const untilMs =
        target.tokenExpiresAtMs ?? ctx.now + ctx.svc.config.realtime.tokenTtlSeconds * 1000;
      ctx.ctl.bans = ctx.ctl.bans.filter((b) => b.userId !== userId && b.untilMs > ctx.now);
      ctx.ctl.bans.push({ userId, untilMs });
      ctx.remove(target, 'KICKED', {
        by: ctx.claims.userId,
        ...(reason !== undefined ? { message: reason } : {}),
      });
      // The ban holds in the breakout rooms too: they stop admitting the user.
      revokeBreakoutAdmin(ctx.ctl, userId);
      for (const b of ctx.ctl.breakouts) b.userIds = b.userIds.filter((u) => u !== userId);
      await syncBreakoutAccess(ctx);
      return {};
    },
  },
  'participant.update_state': {
    kind: 'locked',
    who: 'anyone',
    run(ctx, data) {
      const userId = ctx.claims.userId;
      let entry = ctx.ctl.states.find((s) => s.userId === userId);
      if (!entry) {
        entry = { userId, background: { type: 'none' }, accessibility: {} };
        ctx.ctl.states.push(entry);
      }
      if (data.background) entry.background = data.background;
      if (data.accessibility) entry.accessibility = data.accessibility;
      ctx.emit('participant.state_changed', entry);
      return {};
    },
  },
};
