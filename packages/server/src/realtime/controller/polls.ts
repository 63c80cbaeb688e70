import { createHash } from 'node:crypto';
import { POLL_LIMITS } from '@svc/protocol';
import { newId } from '../../ids.ts';
import { type CommandGroup, refuse } from './command.ts';
import { type PollState, pollCounts, pollView } from './state.ts';

/**
 * The key a vote is stored under: the user id, or for an anonymous poll a hash of poll and user
 * (one answer per user is still enforced, and the state never names the voter).
 */
export function voterKey(poll: Pick<PollState, 'id' | 'anonymous'>, userId: string) {
  return poll.anonymous
    ? createHash('sha256').update(`${poll.id}\n${userId}`).digest('base64url')
    : userId;
}

/**
 * Polls: hosts and co-hosts create and end them; everyone answers once. Results follow the
 * poll's visibility: `live` (counts and the new vote in every `poll.updated`), `after_vote` (to
 * each voter, in the answer's ack and `poll.get`), `after_end` (in `poll.ended`). The creator
 * always sees them. Polls stay in the room's state (and its snapshot) for the room's lifetime.
 */
export const pollCommands: CommandGroup = {
  'poll.create': {
    kind: 'locked',
    who: 'admin',
    run(ctx, data) {
      if (ctx.ctl.polls.length >= POLL_LIMITS.perRoom) return refuse('limit_reached');
      const poll: PollState = {
        id: newId('poll', ctx.now),
        question: data.question,
        options: data.options,
        anonymous: data.anonymous ?? false,
        visibility: data.visibility ?? 'live',
        createdBy: ctx.claims.userId,
        createdAt: ctx.now,
        endedAt: null,
        votes: [],
      };
      ctx.ctl.polls.push(poll);
      ctx.emit('poll.created', { poll: pollView(poll, null, null) });
      return { ack: { pollId: poll.id } };
    },
  },
  'poll.respond': {
    kind: 'locked',
    who: 'anyone',
    run(ctx, { pollId, option }) {
      const poll = ctx.ctl.polls.find((p) => p.id === pollId);
      if (!poll) return refuse('poll_not_found');
      if (poll.endedAt !== null) return refuse('poll_ended');
      if (option >= poll.options.length) return refuse('poll_option_invalid');
      const key = voterKey(poll, ctx.claims.userId);
      if (poll.votes.some((v) => v.voter === key)) return refuse('already_voted');
      poll.votes.push({ voter: key, option });
      // The change only: the counts and the one new vote (a full voter list in every update
      // would make a poll's updates O(n²) on the wire and in the room's replay buffer).
      ctx.emit('poll.updated', {
        pollId,
        totalVotes: poll.votes.length,
        ...(poll.visibility === 'live'
          ? {
              results: { counts: pollCounts(poll), totalVotes: poll.votes.length },
              ...(poll.anonymous ? {} : { vote: { userId: key, option } }),
            }
          : {}),
      });
      return { ack: { poll: pollView(poll, ctx.claims.userId, key) } };
    },
  },
  'poll.end': {
    kind: 'locked',
    who: 'admin',
    run(ctx, { pollId }) {
      const poll = ctx.ctl.polls.find((p) => p.id === pollId);
      if (!poll) return refuse('poll_not_found');
      if (poll.endedAt !== null) return refuse('poll_ended');
      poll.endedAt = ctx.now;
      ctx.emit('poll.ended', { poll: pollView(poll, null, null) });
      return {};
    },
  },
  'poll.get': {
    kind: 'locked',
    who: 'anyone',
    readOnly: true,
    run(ctx, { pollId }) {
      const poll = ctx.ctl.polls.find((p) => p.id === pollId);
      if (!poll) return refuse('poll_not_found');
      const userId = ctx.claims.userId;
      return { ack: { poll: pollView(poll, userId, voterKey(poll, userId)) } };
    },
  },
};
