import type { LinkAppPlatform } from '@svc/protocol';
import type { RecentMember, RecentSets, SharedState } from '../state/index.ts';

/** Candidates a key keeps at most: its newest. One visitor clicking again and again costs no more. */
export const CANDIDATES_PER_KEY = 50;

/** A mobile click that an app's first open may be matched to (deferred deep linking). */
export interface Candidate {
  clickId: string;
  linkId: string;
  /** The click's time, ms since the epoch. */
  ms: number;
}

/**
 * Where deferred-match candidates live between a click and the app's first open: the shared
 * state's recent sets, so in Redis for a fleet (every node sees every node's clicks) and in
 * process otherwise. A mobile click is a member `clickId linkId` under the key of its project,
 * platform and visitor's fingerprint, kept for its project's match window. Claims are not kept
 * here (the SQL store's `link_click_claims` decides them).
 */
export class CandidateStore {
  private sets: RecentSets;
  /** True when the candidates outlive this process; else a node puts them back at start. */
  readonly durable: boolean;

  /** @param max candidates kept at most in process (`SVC_LINKS_MAX_CANDIDATES`) */
  constructor(state: SharedState, max: number) {
    this.sets = state.recentSets('links:cand', { keep: CANDIDATES_PER_KEY, maxMembers: max });
    this.durable = this.sets.durable;
  }

  /** Adds candidates (from {@link candidate}), oldest first; `nowMs` is the clock's time. */
  add(candidates: RecentMember[], nowMs: number) {
    return this.sets.add(candidates, nowMs);
  }

  /** The key's candidates from `sinceMs` to `untilMs`, newest first, at most `limit`. */
  async recall(key: string, sinceMs: number, untilMs: number, limit = CANDIDATES_PER_KEY) {
    const found = await this.sets.recent(key, sinceMs, untilMs, limit);
    return found.map(({ member, ms }): Candidate => {
      const [clickId, linkId] = member.split(' ');
      return { clickId, linkId, ms };
    });
  }
}

/** A visitor's key in a project, for one app platform. Joined, not concatenated: one flat
 * string, not a tree of pieces for an in-process store to keep (and collect) all window long. */
export function candidateKey(projectId: string, platform: LinkAppPlatform, fingerprint: string) {
  return [projectId, platform, fingerprint].join(':');
}

/** A click as a candidate under `key`, kept `ttlMs` (its project's match window). */
export function candidate(
  key: string,
  clickId: string,
  linkId: string,
  ms: number,
  ttlMs: number,
): RecentMember {
  return { key, member: [clickId, linkId].join(' '), ms, ttlMs };
}
