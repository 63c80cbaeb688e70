import { type CommandGroup, refuse } from './command.ts';

/**
 * The waiting room (room setting `waitingRoom`): joiners who are not host or co-host wait until a
 * host or co-host approves or rejects them, or until `SVC_REALTIME_WAITING_TIMEOUT_MS`. Every
 * decision is a room event, so every admin's list stays the same. The waiting connection is told
 * by its node (`session.admitted` then `session.joined`, or `session.closed` with
 * `WAITING_REJECTED` / `WAITING_TIMEOUT`).
 */
export const waitingCommands: CommandGroup = {
  'waiting.approve': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { userId }) {
      if (!ctx.ctl.waiting.some((w) => w.userId === userId)) return refuse('waiting_not_found');
      ctx.ctl.waiting = ctx.ctl.waiting.filter((w) => w.userId !== userId);
      if (!ctx.ctl.admitted.includes(userId)) ctx.ctl.admitted.push(userId);
      ctx.emit('waiting.approved', { userId, by: ctx.claims.userId });
      return {};
    },
  },
  'waiting.reject': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { userId, reason }) {
      if (!ctx.ctl.waiting.some((w) => w.userId === userId)) return refuse('waiting_not_found');
      ctx.ctl.waiting = ctx.ctl.waiting.filter((w) => w.userId !== userId);
      ctx.emit('waiting.rejected', {
        userId,
        by: ctx.claims.userId,
        ...(reason !== undefined ? { reason } : {}),
      });
      return {};
    },
  },
};
