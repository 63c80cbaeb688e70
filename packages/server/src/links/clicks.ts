import { Worker } from 'node:worker_threads';
import type { Statement } from 'better-sqlite3';
import type { FastifyBaseLogger } from 'fastify';
import { CompiledQuery } from 'kysely';
import type { Recalled, RecentEntry, SharedState } from '../state/index.ts';
import { RECENT_MAX_PER_KEY } from '../state/state.ts';
import type { Store } from '../storage/db.ts';
import {
  type ClickPlatform,
  candidateKey,
  clickIdTime,
  clickLine,
  DAY_MS,
  dayText,
  findClickLine,
  INSERT_LOG,
  type LoggedClick,
  MAX_SPAN_MS,
  parseClickLine,
  UPSERT_DAY,
} from './click-log.ts';

/** Clicks kept for a retry while the store refuses writes; beyond this, the oldest are dropped. */
const MAX_PENDING = 100_000;
/** PostgreSQL's form of the two statements (numbered parameters, arrays for the day counts). */
const PG_INSERT_LOG = 'insert into link_click_log (first_ms, last_ms, clicks) values ($1, $2, $3)';
const PG_UPSERT_DAYS =
  'insert into link_click_days (link_id, day, clicks) select * from unnest($1::text[], $2::text[], $3::bigint[]) on conflict (link_id, day) do update set clicks = link_click_days.clicks + excluded.clicks';

/** One link's clicks on one day, counted in a batch. */
interface DayCount {
  linkId: string;
  day: number;
  n: number;
}

/** Clicks on their way to the store: one log row, its day counts and its match candidates. */
interface Batch {
  lines: string[];
  firstMs: number;
  lastMs: number;
  counts: Map<string, DayCount>;
  candidates: RecentEntry[];
  logged: boolean;
  remembered: boolean;
}

function emptyBatch(): Batch {
  return {
    lines: [],
    firstMs: Number.POSITIVE_INFINITY,
    lastMs: Number.NEGATIVE_INFINITY,
    counts: new Map(),
    candidates: [],
    logged: false,
    remembered: false,
  };
}

/** A batch's day counts as rows: link id, `YYYY-MM-DD`, count. */
function dayRows(batch: Batch): [string, string, number][] {
  return [...batch.counts.values()].map((c) => [c.linkId, dayText(c.day), c.n]);
}

/**
 * Records redirect clicks off the redirect's path. A click is appended to the current batch, and
 * the batch is written at most `maxDelayMs` later (at once when `maxBatch` clicks wait, or when
 * it would span more than a minute), as:
 * - one `link_click_log` row holding every click of the batch as a line (see click-log.ts): the
 *   durable record, read back by click id for install-referrer matches;
 * - its clicks counted per link and day in `link_click_days` (what stats read), in the same
 *   transaction;
 * - its mobile clicks remembered in the shared state (in process, or Redis for a fleet) under
 *   their fingerprint for the project's match window: the candidates of deferred matching.
 *
 * A click costs the redirect a line and a few counters, not an indexed row: that is how a
 * redirect keeps up with a bare HTTP answer. Readers that need every click this node served
 * (deferred matching, stats) call `flush()` first; other nodes see a click once it is written,
 * at most `maxDelayMs` after the redirect. A crash loses at most the last `maxDelayMs` of clicks.
 *
 * Where the log rows go: a SQLite file (the embedded default) through a writer thread with its
 * own connection, so the redirects' event loop never waits on SQLite; in-memory SQLite (one
 * connection only) in process; PostgreSQL in one transaction per batch.
 */
export class ClickRecorder {
  private current = emptyBatch();
  /** Batches flushed but not (fully) written yet, oldest first. */
  private pending: Batch[] = [];
  private pendingClicks = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private sqlite: { insertLog: Statement; upsertDay: Statement } | undefined;
  private writer: ClickWriterThread | null = null;
  private useThread: boolean;
  private closed = false;
  /** The day count the last click went to (most clicks in a batch go to a few hot links). */
  private lastCount: DayCount | null = null;

  constructor(
    private store: Store,
    private state: SharedState,
    private log: FastifyBaseLogger,
    private maxDelayMs = 100,
    private maxBatch = 2000,
  ) {
    this.useThread = store.sqlite !== undefined && !store.sqlite.memory;
  }

  /**
   * Queues one click. `matchWindowMs` is how long a mobile click stays a deferred-match candidate
   * (the project's window); desktop and bot clicks are never candidates.
   */
  record(
    id: string,
    projectId: string,
    linkId: string,
    platform: ClickPlatform,
    fingerprint: string,
    ms: number,
    matchWindowMs: number,
  ) {
    let b = this.current;
    if (b.lines.length > 0 && (ms - b.firstMs > MAX_SPAN_MS || b.lastMs - ms > MAX_SPAN_MS)) {
      void this.flush();
      b = this.current;
    }
    b.lines.push(clickLine(id, projectId, linkId, platform, fingerprint, ms));
    if (ms < b.firstMs) b.firstMs = ms;
    if (ms > b.lastMs) b.lastMs = ms;
    const day = Math.floor(ms / DAY_MS);
    let count = this.lastCount;
    if (count === null || count.linkId !== linkId || count.day !== day) {
      const key = `${linkId}\t${day}`;
      count = b.counts.get(key) ?? null;
      if (count === null) {
        count = { linkId, day, n: 0 };
        b.counts.set(key, count);
      }
      this.lastCount = count;
    }
    count.n++;
    if (platform === 'android' || platform === 'ios') {
      b.candidates.push({
        key: candidateKey(projectId, platform, fingerprint),
        member: `${id} ${linkId}`,
        ms,
        ttlMs: matchWindowMs,
      });
    }
    if (b.lines.length >= this.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs);
  }

  /** Resolves once every click queued before the call is written (or kept for a retry). */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.current.lines.length > 0) {
      this.pending.push(this.current);
      this.pendingClicks += this.current.lines.length;
      this.current = emptyBatch();
      this.lastCount = null;
      this.dropBeyondBound();
    }
    // Batches kept from a failed write are tried again too.
    if (this.pending.length > 0) this.writing = this.writing.then(() => this.drain());
    return this.writing;
  }

  /** The click `clickId` names, from the log; null when there is none (or it is malformed). */
  async find(clickId: string): Promise<LoggedClick | null> {
    const ms = clickIdTime(clickId);
    if (ms === null) return null;
    const rows = await this.store.db
      .selectFrom('link_click_log')
      .select('clicks')
      .where('first_ms', '>=', ms - MAX_SPAN_MS)
      .where('first_ms', '<=', ms)
      .where('last_ms', '>=', ms)
      .execute();
    for (const row of rows) {
      const click = findClickLine(row.clicks, clickId);
      if (click) return click;
    }
    return null;
  }

  /**
   * The project's mobile clicks on `platform` with this fingerprint since `sinceMs`, claimed or
   * not, newest first (at most the newest 50): click id, link id and time.
   */
  async candidates(
    projectId: string,
    platform: 'android' | 'ios',
    fingerprint: string,
    sinceMs: number,
    limit = RECENT_MAX_PER_KEY,
  ): Promise<{ clickId: string; linkId: string; ms: number }[]> {
    const found: Recalled[] = await this.state.recall(
      candidateKey(projectId, platform, fingerprint),
      sinceMs,
      limit,
    );
    return found.map(({ member, ms }) => {
      const space = member.indexOf(' ');
      return { clickId: member.slice(0, space), linkId: member.slice(space + 1), ms };
    });
  }

  /**
   * Puts back the match candidates of the mobile clicks logged since `sinceMs`: for in-process
   * state after a restart (Redis keeps its own). `ttlMs` is their lifetime from their click.
   */
  async restoreCandidates(sinceMs: number, nowMs: number, ttlMs: number) {
    const rows = await this.store.db
      .selectFrom('link_click_log')
      .select('clicks')
      .where('last_ms', '>=', sinceMs)
      .execute();
    const entries: RecentEntry[] = [];
    for (const row of rows) {
      for (const line of row.clicks.split('\n')) {
        const click = parseClickLine(line);
        if ((click.platform === 'android' || click.platform === 'ios') && click.ms >= sinceMs) {
          entries.push({
            key: candidateKey(click.projectId, click.platform, click.fingerprint),
            member: `${click.id} ${click.linkId}`,
            ms: click.ms,
            ttlMs,
          });
        }
      }
    }
    entries.sort((a, b) => a.ms - b.ms);
    await this.state.remember(entries, nowMs);
    return entries.length;
  }

  /** Deletes log rows whose every click is older than `beforeMs`. */
  async prune(beforeMs: number) {
    await this.store.db.deleteFrom('link_click_log').where('last_ms', '<', beforeMs).execute();
  }

  /** Writes what is queued and stops the writer thread. */
  async close() {
    await this.flush();
    // No retries once closed: a store that is down at shutdown must not keep the process alive.
    this.closed = true;
    if (this.pendingClicks > 0) {
      this.log.error({ dropped: this.pendingClicks }, 'link clicks dropped at shutdown');
      this.pending = [];
      this.pendingClicks = 0;
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.writer?.close();
    this.writer = null;
  }

  private dropBeyondBound() {
    // The oldest after the first, which may be being written right now.
    while (this.pendingClicks > MAX_PENDING && this.pending.length > 2) {
      const [dropped] = this.pending.splice(1, 1);
      this.pendingClicks -= dropped.lines.length;
      this.log.error({ dropped: dropped.lines.length }, 'link clicks dropped: too many waiting');
    }
  }

  /** Writes the pending batches in order; on a failure, keeps the rest and tries again later. */
  private async drain() {
    while (this.pending.length > 0) {
      const batch = this.pending[0];
      try {
        if (!batch.remembered) {
          await this.state.remember(batch.candidates, batch.lastMs);
          batch.remembered = true;
        }
        if (!batch.logged) {
          await this.writeLog(batch);
          batch.logged = true;
        }
      } catch (err) {
        // The store is down or busy: keep the clicks (up to a bound) and try again later.
        this.log.error(
          { err, clicks: batch.lines.length, waiting: this.pendingClicks },
          'link clicks not written; will retry',
        );
        if (!this.closed) this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs * 10);
        return;
      }
      if (this.pending[0] === batch) this.pending.shift();
      this.pendingClicks -= batch.lines.length;
    }
  }

  private async writeLog(batch: Batch) {
    const rows = batch.lines.join('\n');
    if (this.useThread) await this.writeInThread(batch, rows);
    else if (this.store.sqlite) this.writeSqlite(batch, rows);
    else await this.writePostgres(batch, rows);
  }

  private async writeInThread(batch: Batch, rows: string) {
    if (!this.writer) {
      this.writer = new ClickWriterThread(this.store.sqlite!.name, (err) => {
        // The thread could not start or died: write in process from now on.
        this.log.error({ err }, 'click writer thread failed; writing clicks in process');
        this.useThread = false;
        this.writer = null;
      });
    }
    await this.writer.write({
      firstMs: batch.firstMs,
      lastMs: batch.lastMs,
      rows,
      days: dayRows(batch),
    });
  }

  private writeSqlite(batch: Batch, rows: string) {
    const sqlite = this.store.sqlite!;
    this.sqlite ??= {
      insertLog: sqlite.prepare(INSERT_LOG),
      upsertDay: sqlite.prepare(UPSERT_DAY),
    };
    const { insertLog, upsertDay } = this.sqlite;
    sqlite.transaction(() => {
      insertLog.run(batch.firstMs, batch.lastMs, rows);
      for (const day of dayRows(batch)) upsertDay.run(...day);
    })();
  }

  private async writePostgres(batch: Batch, rows: string) {
    const days = dayRows(batch);
    await this.store.db.transaction().execute(async (tx) => {
      await tx.executeQuery(CompiledQuery.raw(PG_INSERT_LOG, [batch.firstMs, batch.lastMs, rows]));
      await tx.executeQuery(
        CompiledQuery.raw(PG_UPSERT_DAYS, [
          days.map((d) => d[0]),
          days.map((d) => d[1]),
          days.map((d) => d[2]),
        ]),
      );
    });
  }
}

/** What the writer thread writes in one transaction. */
interface ThreadBatch {
  firstMs: number;
  lastMs: number;
  /** The batch's lines, joined by newlines. */
  rows: string;
  days: [string, string, number][];
}

/** The main thread's side of `click-writer.worker.mjs`. */
class ClickWriterThread {
  private worker: Worker;
  private nextId = 1;
  private pending = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();

  constructor(file: string, onFailure: (err: Error) => void) {
    this.worker = new Worker(new URL('./click-writer.worker.mjs', import.meta.url), {
      workerData: { file, insertLog: INSERT_LOG, upsertDay: UPSERT_DAY },
    });
    // It keeps the process alive only while a batch is being written.
    this.worker.unref();
    this.worker.on('message', (m: { id: number; error?: string }) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (this.pending.size === 0) this.worker.unref();
      if (m.error === undefined) p?.resolve();
      else p?.reject(new Error(m.error));
    });
    const fail = (err: Error) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      onFailure(err);
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => {
      if (this.pending.size > 0) fail(new Error(`click writer exited (${code})`));
    });
  }

  write(batch: ThreadBatch): Promise<void> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, batch });
    });
  }

  async close() {
    this.worker.ref();
    this.worker.postMessage('close');
    await new Promise((resolve) => this.worker.once('exit', resolve));
  }
}
