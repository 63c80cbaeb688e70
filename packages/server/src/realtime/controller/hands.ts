import { type CommandGroup, refuse } from './command.ts';
import { isAdmin } from './state.ts';

/** Raised hands, stamped with server time and listed in server order. */
export const handCommands: CommandGroup = {
  'hand.raise': {
    kind: 'locked',
    who: 'anyone',
    run(ctx) {
      const userId = ctx.claims.userId;
      const raised = ctx.ctl.hands.find((h) => h.userId === userId);
      if (raised) return { ack: { raisedAt: raised.raisedAt } };
      const hand = { userId, raisedAt: ctx.now };
      ctx.ctl.hands.push(hand);
      ctx.emit('hand.raised', hand);
      return { ack: { raisedAt: hand.raisedAt } };
    },
  },
  'hand.lower': {
    kind: 'locked',
    who: 'anyone',
    run(ctx, data) {
      const self = ctx.claims.userId;
      const userId = data.userId ?? self;
      if (userId !== self && !isAdmin(ctx.ctl, self)) return refuse('cohost_required');
      if (!ctx.ctl.hands.some((h) => h.userId === userId)) return {};
      ctx.ctl.hands = ctx.ctl.hands.filter((h) => h.userId !== userId);
      ctx.emit('hand.lowered', { userId, by: userId === self ? null : self });
      return {};
    },
  },
};
