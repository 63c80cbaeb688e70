import { REACTION_NAMES } from '@svc/protocol';
import type { RoomStore } from '../room-store.ts';
import { type CommandGroup, refuse, withinRate } from './command.ts';

const NAMES: ReadonlySet<string> = new Set(REACTION_NAMES);
const graphemes = new Intl.Segmenter('en', { granularity: 'grapheme' });
const PICTOGRAPHIC =
  /^(?:\p{Extended_Pictographic}|\p{Regional_Indicator}{2}|[#*0-9]\uFE0F?\u20E3)/u;

/** A reaction is one of REACTION_NAMES or exactly one emoji grapheme. */
export function isValidReaction(emoji: string) {
  if (NAMES.has(emoji)) return true;
  const parts = [...graphemes.segment(emoji)];
  return parts.length === 1 && PICTOGRAPHIC.test(emoji);
}

interface Pending {
  reactions: { userId: string; emoji: string; ts: number }[];
  timer: NodeJS.Timeout | null;
}

/**
 * Gathers each room's reactions on this node for `batchMs` and appends them as one
 * `reaction.batch` event, so a burst of reactions costs one frame per socket per batch.
 */
export class ReactionBatcher {
  private pending = new Map<string, Pending>();

  constructor(
    private store: RoomStore,
    private batchMs: number,
  ) {}

  add(rid: string, reaction: { userId: string; emoji: string; ts: number }) {
    let p = this.pending.get(rid);
    if (!p) {
      p = { reactions: [], timer: null };
      this.pending.set(rid, p);
    }
    p.reactions.push(reaction);
    if (this.batchMs === 0) return this.flush(rid);
    p.timer ??= setTimeout(() => void this.flush(rid), this.batchMs).unref();
  }

  async flush(rid: string) {
    const p = this.pending.get(rid);
    if (!p) return;
    this.pending.delete(rid);
    if (p.timer) clearTimeout(p.timer);
    await this.store
      .appendIfMember(rid, null, { type: 'reaction.batch', data: { reactions: p.reactions } })
      .catch(() => null);
  }

  async close() {
    await Promise.all([...this.pending.keys()].map((rid) => this.flush(rid)));
  }
}

/** Reactions: validated, rate limited per user, fanned out in batches (answered at once). */
export function reactionCommands(batcher: ReactionBatcher): CommandGroup {
  return {
    'reaction.send': {
      kind: 'direct',
      async run(ctx, { emoji }) {
        if (!isValidReaction(emoji)) return refuse('invalid_reaction');
        if (!(await withinRate(ctx, 'reaction', ctx.cfg.reactionRatePer10s, 10_000))) {
          return refuse('rate_limited', 'Too many reactions; slow down.');
        }
        void batcher.add(ctx.rid, { userId: ctx.claims.userId, emoji, ts: ctx.now });
        return {};
      },
    },
  };
}
