import { Worker } from 'node:worker_threads';
import type { Statement } from 'better-sqlite3';
import type { FastifyBaseLogger } from 'fastify';
import { CompiledQuery } from 'kysely';
import type { SharedState } from '../state/index.ts';
import type { Store } from '../storage/db.ts';
import { CandidateIndex, MAX_CANDIDATES } from './candidates.ts';
import {
  batchOutput,
  type ClickColumns,
  candidateKey,
  clickFingerprint,
  ID_CHARS,
  PLATFORM_CODES,
} from './click-batch.mjs';
import {
  type ClickPlatform,
  clickIdTime,
  findClickLine,
  INSERT_LOG,
  type LoggedClick,
  MAX_SPAN_MS,
  parseClickLog,
  UPSERT_DAY,
} from './click-log.ts';
import { packRecent, RECENT_MAX_PER_KEY, type Recalled, type RecentEntry } from './recent.mjs';

/** Clicks kept for a retry while the store refuses writes; beyond this, the oldest are dropped. */
const MAX_PENDING = 100_000;
/**
 * PostgreSQL's form of a batch's write: its log row and its day counts (three arrays) in one
 * statement, so one round trip and one implicit transaction. Four statements (begin, insert,
 * upsert, commit) cost PostgreSQL 0.6 µs of CPU per click in 2000-click batches, this one
 * prepared 0.4 (2026-11-27).
 */
const PG_WRITE_BATCH =
  'with log as (insert into link_click_log (first_ms, last_ms, clicks) values ($1, $2, $3)) insert into link_click_days (link_id, day, clicks) select * from unnest($4::text[], $5::text[], $6::bigint[]) on conflict (link_id, day) do update set clicks = link_click_days.clicks + excluded.clicks';

/** Log rows read at a time when candidates are put back at start; entries made records at once. */
const RESTORE_PAGE = 200;
const RESTORE_PACK = 10_000;
/** A batch starts this small and doubles as clicks come, up to the recorder's `maxBatch`. */
const FIRST_CAPACITY = 64;
/** Bytes of IP text a batch makes room for per click at first (an IPv6 address takes up to 45). */
const IP_BYTES = 24;

/**
 * Clicks on their way to the store, column by column (see `ClickColumns` in click-batch.mjs):
 * a click is a few numbers in typed arrays, its link and user agent an index into the batch's
 * tables of distinct ones, and its IP bytes. So a queued click leaves nothing for the garbage
 * collector on the redirect's thread (strings and an object per click, held for up to
 * `maxDelayMs`, were copied by every young-generation collection in that time), unless it
 * brings a user agent the batch has not seen.
 */
class Batch implements ClickColumns {
  size = 0;
  firstMs = Number.POSITIVE_INFINITY;
  lastMs = Number.NEGATIVE_INFINITY;
  ids: Uint8Array;
  times: Float64Array;
  lifetimes: Float64Array;
  link: Uint32Array;
  platform: Uint8Array;
  ip: Uint32Array;
  agent: Uint32Array;
  projects: string[] = [];
  linkIds: string[] = [];
  agents: string[] = [];
  /** The IPs' bytes and each one's end, with room to grow (see `ipText`, `ipEnds`). */
  private ipTextRoom: Uint8Array;
  private ipEndsRoom: Uint32Array;
  private linkIndex = new Map<string, number>();
  private agentIndex = new Map<string, number>();
  /** IPs written so far, their bytes, and the last one (a click from it shares its entry). */
  private ipCount = 0;
  private ipBytes = 0;
  private lastIp: string | null = null;

  constructor(private capacity = FIRST_CAPACITY) {
    this.ipTextRoom = new Uint8Array(capacity * IP_BYTES);
    this.ipEndsRoom = new Uint32Array(capacity);
    this.ids = new Uint8Array(capacity * ID_CHARS);
    this.times = new Float64Array(capacity);
    this.lifetimes = new Float64Array(capacity);
    this.link = new Uint32Array(capacity);
    this.platform = new Uint8Array(capacity);
    this.ip = new Uint32Array(capacity);
    this.agent = new Uint32Array(capacity);
  }

  add(
    id: string,
    projectId: string,
    linkId: string,
    platform: ClickPlatform,
    ip: string,
    userAgent: string,
    ms: number,
    lifetimeMs: number,
  ) {
    if (this.size === this.capacity) this.grow();
    const i = this.size++;
    const base = i * ID_CHARS;
    for (let c = 0; c < ID_CHARS; c++) this.ids[base + c] = id.charCodeAt(4 + c);
    this.times[i] = ms;
    this.lifetimes[i] = lifetimeMs;
    this.platform[i] = PLATFORM_CODES[platform];
    let link = this.linkIndex.get(linkId);
    if (link === undefined) {
      link = this.linkIds.push(linkId) - 1;
      this.projects.push(projectId);
      this.linkIndex.set(linkId, link);
    }
    this.link[i] = link;
    if (ip !== this.lastIp) this.addIp(ip);
    this.ip[i] = this.ipCount - 1;
    this.agent[i] = intern(userAgent, this.agents, this.agentIndex);
    if (ms < this.firstMs) this.firstMs = ms;
    if (ms > this.lastMs) this.lastMs = ms;
  }

  get ipText() {
    return this.ipTextRoom.subarray(0, this.ipBytes);
  }

  get ipEnds() {
    return this.ipEndsRoom.subarray(0, this.ipCount);
  }

  /** Writes `ip` as the batch's next IP entry (UTF-8; IPs are ASCII, written a byte a time). */
  private addIp(ip: string) {
    // 3 bytes per UTF-16 unit at most.
    const room = this.ipBytes + ip.length * 3;
    if (room > this.ipTextRoom.length) {
      const grown = new Uint8Array(Math.max(this.ipTextRoom.length * 2, room));
      grown.set(this.ipTextRoom.subarray(0, this.ipBytes));
      this.ipTextRoom = grown;
    }
    const text = this.ipTextRoom;
    let at = this.ipBytes;
    for (let c = 0; c < ip.length; c++) {
      const code = ip.charCodeAt(c);
      if (code > 0x7f) {
        at = this.ipBytes + Buffer.from(text.buffer).write(ip, this.ipBytes, 'utf8');
        break;
      }
      text[at++] = code;
    }
    this.ipBytes = at;
    this.ipEndsRoom[this.ipCount++] = at;
    this.lastIp = ip;
  }

  /** Its columns cut to its size: what the writer thread is sent (a copy). */
  columns(): ClickColumns {
    const n = this.size;
    return {
      size: n,
      firstMs: this.firstMs,
      lastMs: this.lastMs,
      ids: this.ids.slice(0, n * ID_CHARS),
      times: this.times.slice(0, n),
      lifetimes: this.lifetimes.slice(0, n),
      link: this.link.slice(0, n),
      platform: this.platform.slice(0, n),
      ip: this.ip.slice(0, n),
      agent: this.agent.slice(0, n),
      projects: this.projects,
      linkIds: this.linkIds,
      ipText: this.ipTextRoom.slice(0, this.ipBytes),
      ipEnds: this.ipEndsRoom.slice(0, this.ipCount),
      agents: this.agents,
    };
  }

  private grow() {
    this.capacity *= 2;
    const grown = <T extends Uint8Array | Uint32Array | Float64Array>(a: T, per = 1): T => {
      const b = new (a.constructor as new (n: number) => T)(this.capacity * per);
      b.set(a);
      return b;
    };
    this.ids = grown(this.ids, ID_CHARS);
    this.times = grown(this.times);
    this.lifetimes = grown(this.lifetimes);
    this.link = grown(this.link);
    this.platform = grown(this.platform);
    this.ip = grown(this.ip);
    this.agent = grown(this.agent);
    this.ipEndsRoom = grown(this.ipEndsRoom);
  }
}

/** The index of `value` in `table`, added when new. */
function intern(value: string, table: string[], index: Map<string, number>): number {
  let at = index.get(value);
  if (at === undefined) {
    at = table.push(value) - 1;
    index.set(value, at);
  }
  return at;
}

/**
 * Records redirect clicks off the redirect's path. A click is appended to the current batch, and
 * the batch is written at most `maxDelayMs` later (at once when `maxBatch` clicks wait, or when
 * it would span more than a minute), as:
 * - one `link_click_log` row holding every click of the batch as a line (see click-log.ts): the
 *   durable record, read back by click id for install-referrer matches;
 * - its clicks counted per link and day in `link_click_days` (what stats read), in the same
 *   transaction;
 * - its mobile clicks remembered in this node's memory under their fingerprint for the
 *   project's match window: the candidates of deferred matching, which a match asks every
 *   node for (see candidates.ts).
 *
 * A click costs the redirect a few numbers in the batch's columns, not an indexed row: that is
 * how a redirect keeps up with a bare HTTP answer. Readers that need every click this node served
 * (deferred matching, stats) call `flush()` first; other nodes see a click once it is written,
 * at most `maxDelayMs` after the redirect. A crash loses at most the last `maxDelayMs` of clicks.
 *
 * How: a SQLite file (the embedded default) and PostgreSQL through a writer thread with its own
 * connection, which also computes the batch's fingerprints, so that the redirects' event loop
 * neither waits on the store nor hashes; in-memory SQLite (one connection only) in process, as
 * is everything when the thread cannot start.
 */
export class ClickRecorder {
  private current = new Batch();
  /** Batches flushed but not (fully) written yet, oldest first. */
  private pending: Batch[] = [];
  private pendingClicks = 0;
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private sqlite: { insertLog: Statement; upsertDay: Statement } | undefined;
  private writer: ClickWriterThread | null = null;
  private useThread: boolean;
  private closed = false;
  /** This node's match candidates; a recall asks every node (see candidates.ts). */
  private index: CandidateIndex;
  private detach: (() => Promise<void>) | null = null;
  /** The match window `start` was given, and the latest click time seen (for a restore). */
  private windowMs = 0;
  private latestMs = Number.NEGATIVE_INFINITY;
  /** Whether `start` has put back the candidates (a thread that fails later has them again). */
  private restored = false;
  /** Candidates being put back after a thread failed: answers wait for them. */
  private restoring: Promise<unknown> = Promise.resolve();

  /**
   * @param fingerprintKey from `fingerprintKey(server secret)` (click-batch.mjs): each click's
   *   fingerprint is computed here, in batches, rather than on the redirect's path.
   */
  constructor(
    private store: Store,
    state: SharedState,
    private fingerprintKey: string,
    private log: FastifyBaseLogger,
    private maxDelayMs = 100,
    private maxBatch = 2000,
    private maxCandidates = MAX_CANDIDATES,
  ) {
    this.index = CandidateIndex.of(state, log, maxCandidates);
    // In-memory SQLite has one connection only: its clicks are written in process.
    this.useThread = store.postgres !== undefined || (!!store.sqlite && !store.sqlite.memory);
  }

  /**
   * Queues one click, with the IP and user agent its fingerprint is made of (a header value,
   * which never holds a newline). `matchWindowMs` is how long a mobile click stays a
   * deferred-match candidate (the project's window); desktop and bot clicks never are.
   */
  record(
    id: string,
    projectId: string,
    linkId: string,
    platform: ClickPlatform,
    ip: string,
    userAgent: string,
    ms: number,
    matchWindowMs: number,
  ) {
    let b = this.current;
    if (b.size > 0 && (ms - b.firstMs > MAX_SPAN_MS || b.lastMs - ms > MAX_SPAN_MS)) {
      void this.flush();
      b = this.current;
    }
    const mobile = platform === 'android' || platform === 'ios';
    b.add(id, projectId, linkId, platform, ip, userAgent, ms, mobile ? matchWindowMs : 0);
    if (ms > this.latestMs) this.latestMs = ms;
    if (b.size >= this.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs);
  }

  /**
   * Starts answering the other nodes' match questions (and this node's own), then puts back
   * the match candidates of the clicks logged in the last `windowMs` (the longest match window
   * of any project), newest first up to the node's bound: the candidates of clicks served
   * before this node started, by itself or by a node that has stopped. Resolves with how many.
   */
  async start(nowMs: number, windowMs: number) {
    this.windowMs = windowMs;
    this.latestMs = Math.max(this.latestMs, nowMs);
    this.detach ??= await this.index.attach({
      flush: async () => {
        await this.flush();
        await this.restoring;
      },
      recall: (key, sinceMs, limit) => this.recallHeld(key, sinceMs, limit),
    });
    const count = await this.restoreCandidates(nowMs - windowMs, nowMs, windowMs);
    this.restored = true;
    return count;
  }

  /** Resolves once every click queued before the call is written (or kept for a retry). */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.current.size > 0) {
      this.pending.push(this.current);
      this.pendingClicks += this.current.size;
      // Sized for as many clicks as the last one held, so that a busy batch does not grow.
      this.current = new Batch(
        Math.max(FIRST_CAPACITY, 2 ** Math.ceil(Math.log2(this.current.size))),
      );
      this.dropBeyondBound();
    }
    // Batches kept from a failed write are tried again too.
    if (this.pending.length > 0) this.writing = this.writing.then(() => this.drain());
    return this.writing;
  }

  /** The fingerprint of a visitor, as clicks carry it. */
  fingerprint(ip: string, userAgent: string) {
    return clickFingerprint(this.fingerprintKey, ip, userAgent);
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
   * not, newest first (at most the newest 50), from every node: click id, link id and time.
   */
  async candidates(
    projectId: string,
    platform: 'android' | 'ios',
    fingerprint: string,
    sinceMs: number,
    limit = RECENT_MAX_PER_KEY,
  ): Promise<{ clickId: string; linkId: string; ms: number }[]> {
    const found = await this.index.recall(
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
   * Puts back the match candidates of the mobile clicks logged since `sinceMs`, the newest
   * first up to the node's bound (read a page of log rows at a time, newest first). `ttlMs` is
   * their lifetime from their click. Resolves with how many.
   */
  private async restoreCandidates(sinceMs: number, nowMs: number, ttlMs: number) {
    const entries: RecentEntry[] = [];
    let beforeSeq: number | null = null;
    while (entries.length < this.maxCandidates) {
      let query = this.store.db
        .selectFrom('link_click_log')
        .select(['seq', 'clicks'])
        .where('last_ms', '>=', sinceMs)
        // A batch spans at most MAX_SPAN_MS: the index on first_ms bounds the rows read.
        .where('first_ms', '>=', sinceMs - MAX_SPAN_MS)
        .orderBy('seq', 'desc')
        .limit(RESTORE_PAGE);
      if (beforeSeq !== null) query = query.where('seq', '<', beforeSeq);
      const rows = await query.execute();
      for (const row of rows) {
        for (const click of parseClickLog(row.clicks)) {
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
      if (rows.length < RESTORE_PAGE) break;
      beforeSeq = Number(rows[rows.length - 1].seq);
    }
    // Oldest first, as clicks arrive: beyond the bound, the oldest are the ones forgotten.
    entries.sort((a, b) => a.ms - b.ms);
    const kept = entries.slice(-this.maxCandidates);
    for (let i = 0; i < kept.length; i += RESTORE_PACK) {
      await this.keep(packRecent(kept.slice(i, i + RESTORE_PACK)), nowMs);
    }
    return kept.length;
  }

  /**
   * Keeps candidates where this recorder's are held: in its writer thread, or in the node's
   * index when it writes in process (or the thread has failed).
   */
  private async keep(records: Uint8Array, nowMs: number) {
    if (this.useThread) {
      try {
        await this.thread().remember(records, nowMs);
        return;
      } catch (err) {
        if (this.useThread) throw err;
      }
    }
    this.index.remember(records, nowMs);
  }

  /** A key's candidates this recorder's writer thread holds (none when it writes in process). */
  private async recallHeld(key: string, sinceMs: number, limit: number): Promise<Recalled[]> {
    if (!this.useThread || !this.writer) return [];
    return this.writer.recall(key, sinceMs, limit);
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
    await this.detach?.();
    this.detach = null;
  }

  private dropBeyondBound() {
    // The oldest after the first, which may be being written right now.
    while (this.pendingClicks > MAX_PENDING && this.pending.length > 2) {
      const [dropped] = this.pending.splice(1, 1);
      this.pendingClicks -= dropped.size;
      this.log.error({ dropped: dropped.size }, 'link clicks dropped: too many waiting');
    }
  }

  /** Writes the pending batches in order; on a failure, keeps the rest and tries again later. */
  private async drain() {
    while (this.pending.length > 0) {
      const batch = this.pending[0];
      let candidates: Uint8Array | null;
      try {
        candidates = await this.writeLog(batch);
      } catch (err) {
        // The store is down or busy: keep the clicks (up to a bound) and try again later.
        this.log.error(
          { err, clicks: batch.size, waiting: this.pendingClicks },
          'link clicks not written; will retry',
        );
        if (!this.closed) this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs * 10);
        return;
      }
      if (this.pending[0] === batch) this.pending.shift();
      this.pendingClicks -= batch.size;
      if (candidates === null) continue;
      try {
        this.index.remember(candidates, batch.lastMs);
      } catch (err) {
        this.candidatesNotKept(err, batch.size);
      }
    }
  }

  /** Logged, not retried: the batch is written; only its probable matches are lost. */
  private candidatesNotKept(err: unknown, clicks: number) {
    this.log.error({ err, clicks }, 'link click candidates not kept');
  }

  /**
   * Writes the batch's log row and day counts. Its candidates are kept by the writer thread;
   * written in process, they are returned (candidate-records.mjs) for the node's index.
   */
  private async writeLog(batch: Batch): Promise<Uint8Array | null> {
    if (this.useThread) {
      const notKept = await this.thread().write(batch.columns());
      if (notKept !== undefined) this.candidatesNotKept(new Error(notKept), batch.size);
      return null;
    }
    const { rows, days, candidates } = batchOutput(batch, this.fingerprintKey, RECENT_MAX_PER_KEY);
    if (this.store.sqlite) this.writeSqlite(batch, rows, days);
    else await this.writePostgres(batch, rows, days);
    return candidates;
  }

  /** The writer thread, started on first use. */
  private thread(): ClickWriterThread {
    if (!this.writer) {
      const target: WriterTarget = this.store.postgres
        ? { postgres: this.store.postgres }
        : { sqlite: this.store.sqlite!.name };
      this.writer = new ClickWriterThread(target, this.fingerprintKey, this.maxCandidates, (err) =>
        this.threadFailed(err),
      );
    }
    return this.writer;
  }

  /**
   * The thread could not start or died: clicks are written in process from now on, and the
   * candidates it held are put back from the log into the node's index.
   */
  private threadFailed(err: Error) {
    this.log.error({ err }, 'click writer thread failed; writing clicks in process');
    this.useThread = false;
    this.writer = null;
    // Before that, `start`'s own restore puts them in the index (see `keep`).
    if (this.closed || !this.restored) return;
    const now = this.latestMs;
    this.restoring = this.restoreCandidates(now - this.windowMs, now, this.windowMs).catch(
      (restoreErr) => this.log.error({ err: restoreErr }, 'link click candidates not put back'),
    );
  }

  private writeSqlite(batch: Batch, rows: string, days: [string, string, number][]) {
    const sqlite = this.store.sqlite!;
    this.sqlite ??= {
      insertLog: sqlite.prepare(INSERT_LOG),
      upsertDay: sqlite.prepare(UPSERT_DAY),
    };
    const { insertLog, upsertDay } = this.sqlite;
    sqlite.transaction(() => {
      insertLog.run(batch.firstMs, batch.lastMs, rows);
      for (const day of days) upsertDay.run(...day);
    })();
  }

  private async writePostgres(batch: Batch, rows: string, days: [string, string, number][]) {
    await this.store.db.executeQuery(
      CompiledQuery.raw(PG_WRITE_BATCH, [
        batch.firstMs,
        batch.lastMs,
        rows,
        days.map((d) => d[0]),
        days.map((d) => d[1]),
        days.map((d) => d[2]),
      ]),
    );
  }
}

/** Where the writer thread writes: a SQLite file, or PostgreSQL (in the store's schema). */
type WriterTarget =
  | { sqlite: string }
  | { postgres: { url: string; schema?: string; timeoutMs: number } };

/** What the writer thread answers (see click-writer.worker.mjs). */
interface WriterReply {
  id: number;
  error?: string;
  notKept?: string;
  found?: [member: string, ms: number][];
}

/** The main thread's side of `click-writer.worker.mjs`. */
class ClickWriterThread {
  private worker: Worker;
  private nextId = 1;
  private closing = false;
  private failed = false;
  private pending = new Map<
    number,
    { resolve: (reply: WriterReply) => void; reject: (err: Error) => void }
  >();

  constructor(
    target: WriterTarget,
    fingerprintKey: string,
    maxCandidates: number,
    onFailure: (err: Error) => void,
  ) {
    const postgres = 'postgres' in target;
    this.worker = new Worker(new URL('./click-writer.worker.mjs', import.meta.url), {
      workerData: {
        target,
        statements: postgres
          ? { writeBatch: PG_WRITE_BATCH }
          : { insertLog: INSERT_LOG, upsertDay: UPSERT_DAY },
        fingerprintKey,
        keepPerKey: RECENT_MAX_PER_KEY,
        maxCandidates,
      },
    });
    // It keeps the process alive only while it has work.
    this.worker.unref();
    this.worker.on('message', (m: WriterReply) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (this.pending.size === 0) this.worker.unref();
      if (m.error === undefined) p?.resolve(m);
      else p?.reject(new Error(m.error));
    });
    const fail = (err: Error) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      onFailure(err);
    };
    this.worker.on('error', (err) => {
      this.failed = true;
      fail(err);
    });
    // Exiting without being asked to, idle or not, is a failure too: nothing would answer.
    this.worker.on('exit', (code) => {
      if (!this.closing && !this.failed) fail(new Error(`click writer exited (${code})`));
    });
  }

  /**
   * Writes a batch; its candidates stay in the thread. Resolves with why they could not be
   * kept, if they could not (the batch is written all the same).
   */
  async write(batch: ClickColumns): Promise<string | undefined> {
    return (await this.request({ batch })).notKept;
  }

  /** Keeps candidates (records, see candidate-records.mjs) in the thread's ring. */
  async remember(records: Uint8Array, nowMs: number): Promise<void> {
    await this.request({ remember: records, nowMs }, [records.buffer as ArrayBuffer]);
  }

  /** A key's candidates in the thread's ring, after every batch sent before. */
  async recall(key: string, sinceMs: number, limit: number): Promise<Recalled[]> {
    const { found } = await this.request({ recall: { key, sinceMs, limit } });
    return (found ?? []).map(([member, ms]) => ({ member, ms }));
  }

  private request(message: object, transfer: ArrayBuffer[] = []): Promise<WriterReply> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, ...message }, transfer);
    });
  }

  async close() {
    this.closing = true;
    this.worker.ref();
    this.worker.postMessage('close');
    await new Promise((resolve) => this.worker.once('exit', resolve));
  }
}
