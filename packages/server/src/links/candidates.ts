import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { SharedState } from '../state/index.ts';
import { unavailableDependency } from '../unavailable.ts';
import { type Recalled, RecentRing } from './recent.mjs';

/** Candidates a node keeps at most, by default (about 120 bytes each; oldest dropped first). */
export const MAX_CANDIDATES = 1_000_000;
/** How long a recall waits for the other nodes' answers before it goes on without them. */
export const ASK_TIMEOUT_MS = 1000;

const ASK_CHANNEL = 'links:candidates:ask';
const replyChannel = (node: string) => `links:candidates:reply:${node}`;

interface Ask {
  /** The asking node and its question's number. */
  node: string;
  id: number;
  key: string;
  sinceMs: number;
  limit: number;
}

interface Reply {
  id: number;
  found: [member: string, ms: number][];
}

interface Waiting {
  /** Answers expected: unknown (Infinity) until the question's `publish` has counted the nodes. */
  expected: number;
  answers: Reply['found'][];
  done: () => void;
}

/** Where a node keeps candidates besides its own ring: a recorder's click writer thread. */
export interface CandidateSource {
  /** Writes the recorder's queued clicks (and so keeps their candidates). */
  flush(): Promise<void>;
  /** A key's candidates it holds, as {@link RecentRing.recall} answers. */
  recall(key: string, sinceMs: number, limit: number): Promise<Recalled[]>;
}

/**
 * Deferred-match candidates (a mobile click's click id and link under its fingerprint key, for
 * the project's window), kept in the memory of the node that served the click: a
 * {@link RecentRing} of typed arrays, held by the recorder's click writer thread (or, for a
 * recorder writing in process, by this index). A recall asks every node over the shared state's
 * pub/sub (this one included, through the same path) and merges their answers.
 *
 * Why not in the shared store: clicks come thousands of times more often than app installs.
 * Writing every mobile click into Redis cost Redis about 2 µs of CPU per click (a script per
 * batch, a hash field per visitor), and the redirect's node the batch's transfer; asking every
 * node costs one message and one answer per node, on an install only. A node that starts puts
 * back the candidates of the clicks still inside a window from the click log (the store that
 * every node shares), so a restart or a rolling deploy loses none; a node that stops for good
 * takes its candidates with it until another node starts. Referrer (`unique`) matches read
 * the log, never this.
 *
 * A node is a shared state: one index per state object ({@link CandidateIndex.of}), which every
 * recorder on it shares, as they share its connection (`publish` then counts the nodes that
 * listen, so a recall knows how many answers to wait for). A node that does not answer within
 * {@link ASK_TIMEOUT_MS} is left out.
 */
export class CandidateIndex {
  private static byState = new WeakMap<SharedState, CandidateIndex>();
  private ring: RecentRing;
  private node = randomBytes(8).toString('hex');
  private nextId = 1;
  private waiting = new Map<number, Waiting>();
  private unsubscribe: (() => Promise<void>)[] = [];
  /** The recorders attached: their queued clicks are written, then their candidates read. */
  private sources = new Set<CandidateSource>();
  private listening: Promise<void> | null = null;

  /**
   * The index of the node `state` stands for, made on first use.
   * @param max candidates kept at most (the first caller's bound holds)
   * @param timeoutMs how long a recall waits for answers
   */
  static of(
    state: SharedState,
    log: FastifyBaseLogger,
    max = MAX_CANDIDATES,
    timeoutMs = ASK_TIMEOUT_MS,
  ): CandidateIndex {
    let index = CandidateIndex.byState.get(state);
    if (!index) {
      index = new CandidateIndex(state, log, max, timeoutMs);
      CandidateIndex.byState.set(state, index);
    }
    return index;
  }

  private constructor(
    private state: SharedState,
    private log: FastifyBaseLogger,
    max: number,
    private timeoutMs: number,
  ) {
    this.ring = new RecentRing(max);
  }

  /**
   * Attaches a recorder: its queued clicks are written before this node answers, so that an
   * answer covers every click the node has served, and the candidates it holds are part of the
   * answer. The first one attached starts the node answering questions (its own included);
   * resolves with a detach, and the last one detached stops it and forgets the candidates.
   */
  async attach(source: CandidateSource): Promise<() => Promise<void>> {
    this.sources.add(source);
    this.listening ??= Promise.all([
      this.state.subscribe(ASK_CHANNEL, (message) => void this.answer(message)),
      this.state.subscribe(replyChannel(this.node), (message) => this.collect(message)),
    ]).then((unsubscribe) => {
      this.unsubscribe = unsubscribe;
    });
    await this.listening;
    return async () => {
      if (!this.sources.delete(source) || this.sources.size > 0) return;
      await this.listening;
      this.listening = null;
      await Promise.all(this.unsubscribe.map((u) => u().catch(() => {})));
      this.unsubscribe = [];
      for (const w of this.waiting.values()) w.done();
      this.ring.clear();
      CandidateIndex.byState.delete(this.state);
    };
  }

  /**
   * Keeps candidates in this index's own ring, as the records {@link RecentRing.remember} takes:
   * those of a recorder that writes in process, a batch's or, at start, those put back from the
   * log (oldest first).
   */
  remember(records: Uint8Array, nowMs: number) {
    this.ring.remember(records, nowMs);
  }

  /**
   * A key's members whose time is at least `sinceMs`, on every node, newest first (the latest
   * arrival first among equal times), at most `limit`; a member held by several nodes (put back
   * from the log by each) once.
   */
  async recall(key: string, sinceMs: number, limit: number): Promise<Recalled[]> {
    const id = this.nextId++;
    const waiting: Waiting = { expected: Number.POSITIVE_INFINITY, answers: [], done: () => {} };
    const finished = new Promise<void>((resolve) => {
      waiting.done = resolve;
    });
    this.waiting.set(id, waiting);
    const timer = setTimeout(() => {
      this.log.warn(
        { expected: waiting.expected, answered: waiting.answers.length },
        'deferred match: some nodes did not answer in time',
      );
      waiting.done();
    }, this.timeoutMs);
    try {
      const ask: Ask = { node: this.node, id, key, sinceMs, limit };
      try {
        waiting.expected = await this.state.publish(ASK_CHANNEL, JSON.stringify(ask));
      } catch (err) {
        if (!unavailableDependency(err)) throw err;
        // The other nodes cannot be asked: this node's candidates are the answer.
        this.log.warn({ err }, 'deferred match: shared state unavailable, this node only');
        waiting.answers = [await this.held(key, sinceMs, limit)];
        waiting.expected = 1;
      }
      if (waiting.answers.length >= waiting.expected) waiting.done();
      await finished;
    } finally {
      clearTimeout(timer);
      this.waiting.delete(id);
    }
    return newestOnce(
      waiting.answers.map((found) => found.map(([member, ms]) => ({ member, ms }))),
    ).slice(0, limit);
  }

  /** Answers another node's question (or this node's own) from this node's candidates. */
  private async answer(message: string) {
    try {
      const ask = JSON.parse(message) as Ask;
      const found = await this.held(ask.key, ask.sinceMs, ask.limit);
      const reply: Reply = { id: ask.id, found };
      await this.state.publish(replyChannel(ask.node), JSON.stringify(reply));
    } catch (err) {
      this.log.warn({ err }, 'deferred match: a question could not be answered');
    }
  }

  /** What this node holds for a key: its ring's and its recorders' (their queued clicks written first). */
  private async held(key: string, sinceMs: number, limit: number): Promise<Reply['found']> {
    const sources = [...this.sources];
    await Promise.all(sources.map((s) => s.flush().catch(() => {})));
    const held = await Promise.all(
      sources.map((s) =>
        s.recall(key, sinceMs, limit).catch((err) => {
          this.log.warn({ err }, 'deferred match: a recorder could not be asked');
          return [];
        }),
      ),
    );
    const found = newestOnce([this.ring.recall(key, sinceMs, limit), ...held]);
    return found.slice(0, limit).map((r) => [r.member, r.ms]);
  }

  private collect(message: string) {
    let reply: Reply;
    try {
      reply = JSON.parse(message) as Reply;
    } catch {
      this.log.warn('deferred match: an answer that is not JSON was ignored');
      return;
    }
    const waiting = this.waiting.get(reply?.id);
    if (!waiting || !Array.isArray(reply.found)) return;
    waiting.answers.push(
      reply.found.filter(
        (e) => Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'number',
      ),
    );
    if (waiting.answers.length >= waiting.expected) waiting.done();
  }
}

/** Lists of candidates merged: newest first, a member found in several lists once. */
function newestOnce(lists: Recalled[][]): Recalled[] {
  const merged = new Map<string, number>();
  for (const found of lists) for (const r of found) merged.set(r.member, r.ms);
  return [...merged].map(([member, ms]) => ({ member, ms })).sort((a, b) => b.ms - a.ms);
}
