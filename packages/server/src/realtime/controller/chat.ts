import { TYPING_THROTTLE_MS, TYPING_TTL_MS } from '@svc/protocol';
import { type CommandGroup, refuse, withinRate } from './command.ts';

/**
 * Chat and typing. A chat message is a room event (its `seq` is its order), appended without the
 * room's lock after a per-user rate check, and kept in the room's bounded history
 * (`SVC_REALTIME_CHAT_HISTORY`), which joiners get in their snapshot. Typing indicators live in
 * the room state: `typing.start` is broadcast at most once per 2 s per user, and the server
 * expires an indicator 3 s after its last broadcast (`typing.stopped`, reason `EXPIRED`).
 */
export const chatCommands: CommandGroup = {
  'chat.send': {
    kind: 'direct',
    async run(ctx, { text }) {
      if (!(await withinRate(ctx, 'chat', ctx.cfg.chatRatePer10s, 10_000))) {
        return refuse('rate_limited', 'Too many chat messages; slow down.');
      }
      const { userId, name } = ctx.claims;
      const ev = await ctx.store.appendIfMember(ctx.rid, ctx.sid, {
        type: 'chat.message',
        data: { text, from: { userId, name, sid: ctx.sid } },
        ...(ctx.cfg.chatHistory > 0 ? { history: ctx.cfg.chatHistory } : {}),
      });
      if (!ev) return refuse('not_joined');
      return { ack: { seq: ev.seq } };
    },
  },
  'typing.start': {
    kind: 'locked',
    who: 'anyone',
    run(ctx) {
      const userId = ctx.claims.userId;
      const entry = ctx.ctl.typing.find((t) => t.userId === userId);
      if (entry && ctx.now - entry.sentAtMs < TYPING_THROTTLE_MS) return {};
      const expiresAt = ctx.now + TYPING_TTL_MS;
      if (entry) Object.assign(entry, { expiresAt, sentAtMs: ctx.now });
      else ctx.ctl.typing.push({ userId, expiresAt, sentAtMs: ctx.now });
      ctx.emit('typing.started', { userId, expiresAt });
      return {};
    },
  },
  'typing.stop': {
    kind: 'locked',
    who: 'anyone',
    run(ctx) {
      const userId = ctx.claims.userId;
      if (!ctx.ctl.typing.some((t) => t.userId === userId)) return {};
      ctx.ctl.typing = ctx.ctl.typing.filter((t) => t.userId !== userId);
      ctx.emit('typing.stopped', { userId, reason: 'STOPPED' });
      return {};
    },
  },
};
