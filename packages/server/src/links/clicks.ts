import { Worker } from 'node:worker_threads';
import type { Transaction } from 'better-sqlite3';
import type { FastifyBaseLogger } from 'fastify';
import { CompiledQuery } from 'kysely';
import type { Store } from '../storage/db.ts';
import type { LinkClicksTable } from './tables.ts';

/** The `link_clicks` columns, in the order a queued click carries its values. */
const CLICK_COLUMNS = [
  'id',
  'project_id',
  'link_id',
  'platform',
  'fingerprint',
  'created_at',
  'claimed_at',
] as const;

/** A click as queued: its values in {@link CLICK_COLUMNS} order (no object per click). */
type ClickRow = [
  id: string,
  projectId: string,
  linkId: string,
  platform: LinkClicksTable['platform'],
  fingerprint: string,
  createdAt: string,
  claimedAt: null,
];

/**
 * PostgreSQL: one statement text for any number of rows. The batch goes as one text parameter,
 * the queued lines as they are, and the server splits it: no array parameters to build and
 * escape per click. claimed_at, the last column, is always null.
 */
const PG_SPLIT_COLUMNS = CLICK_COLUMNS.slice(0, -1)
  .map((_, i) => `split_part(line, E'\\t', ${i + 1})`)
  .join(', ');
const PG_INSERT = `insert into link_clicks (${CLICK_COLUMNS.join(', ')}) select ${PG_SPLIT_COLUMNS}, null from unnest(string_to_array($1::text, E'\\n')) as line`;
const PG_CHUNK_ROWS = 5000;
/** One click, every column a parameter. */
const INSERT = `insert into link_clicks (${CLICK_COLUMNS.join(', ')}) values (${CLICK_COLUMNS.map(() => '?').join(', ')})`;
/** Clicks kept for a retry while the store refuses writes; beyond this, the oldest are dropped. */
const MAX_PENDING = 100_000;

/**
 * Writes redirect clicks in batches, off the redirect's path: a click is queued and the queue
 * is written at most `maxDelayMs` later (or at once when `maxBatch` rows wait). Readers that need
 * every click this node served (deferred matching, stats) call `flush()` first. Other nodes see a
 * click once it is written, at most `maxDelayMs` after the redirect; an app install takes far
 * longer. A crash loses at most the clicks of the last `maxDelayMs`.
 *
 * Where the batches go:
 * - a SQLite file (the embedded default): a writer thread with its own connection, one
 *   transaction per batch, so the redirects' event loop never waits on SQLite;
 * - in-memory SQLite (one connection only): a prepared INSERT in one transaction, in process;
 * - PostgreSQL: one `INSERT … SELECT FROM unnest(…)` per batch, the same text every time.
 */
export class ClickRecorder {
  /** Queued clicks, each one line: its columns tab-separated (no value holds a tab or newline). */
  private queue: string[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private sqliteBatch: Transaction<(rows: ClickRow[]) => void> | undefined;
  private writer: ClickWriterThread | null = null;
  private useThread: boolean;
  private closed = false;

  constructor(
    private store: Store,
    private log: FastifyBaseLogger,
    private maxDelayMs = 100,
    private maxBatch = 2000,
  ) {
    this.useThread = store.sqlite !== undefined && !store.sqlite.memory;
  }

  record(
    id: string,
    projectId: string,
    linkId: string,
    platform: ClickRow[3],
    fingerprint: string,
    createdAt: string,
  ) {
    this.queue.push(`${id}\t${projectId}\t${linkId}\t${platform}\t${fingerprint}\t${createdAt}`);
    if (this.queue.length >= this.maxBatch) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs);
  }

  /** Resolves once every click queued before the call is in the store. */
  flush(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.queue.length === 0) return this.writing;
    const batch = this.queue;
    this.queue = [];
    this.writing = this.writing.then(() => this.write(batch));
    return this.writing;
  }

  /** Writes what is queued and stops the writer thread. */
  async close() {
    await this.flush();
    // No retries once closed: a store that is down at shutdown must not keep the process alive.
    this.closed = true;
    if (this.queue.length > 0) {
      this.log.error({ dropped: this.queue.length }, 'link clicks dropped at shutdown');
      this.queue = [];
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.writer?.close();
    this.writer = null;
  }

  private async write(batch: string[]) {
    try {
      if (this.useThread) await this.writeInThread(batch);
      else if (this.store.sqlite) this.writeSqlite(batch);
      else await this.writePostgres(batch);
    } catch (err) {
      // The store is down or busy: keep the clicks (up to a bound) and try again later.
      const kept = batch.concat(this.queue).slice(-MAX_PENDING);
      const dropped = batch.length + this.queue.length - kept.length;
      this.queue = kept;
      this.log.error({ err, clicks: batch.length, dropped }, 'link clicks not written; will retry');
      if (!this.closed) this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs * 10);
    }
  }

  private async writeInThread(batch: string[]) {
    if (!this.writer) {
      this.writer = new ClickWriterThread(this.store.sqlite!.name, (err) => {
        // The thread could not start or died: write in process from now on.
        this.log.error({ err }, 'click writer thread failed; writing clicks in process');
        this.useThread = false;
        this.writer = null;
      });
    }
    await this.writer.write(batch.join('\n'));
  }

  private writeSqlite(batch: string[]) {
    const sqlite = this.store.sqlite!;
    if (!this.sqliteBatch) {
      const insert = sqlite.prepare<ClickRow>(INSERT);
      this.sqliteBatch = sqlite.transaction((rows: ClickRow[]) => {
        for (const row of rows) insert.run(...row);
      });
    }
    this.sqliteBatch(batch.map(toRow));
  }

  private async writePostgres(batch: string[]) {
    for (let i = 0; i < batch.length; i += PG_CHUNK_ROWS) {
      const lines = batch.slice(i, i + PG_CHUNK_ROWS).join('\n');
      await this.store.db.executeQuery(CompiledQuery.raw(PG_INSERT, [lines]));
    }
  }
}

/** A queued line back to its column values. */
function toRow(line: string): ClickRow {
  const [id, projectId, linkId, platform, fingerprint, createdAt] = line.split('\t');
  return [id, projectId, linkId, platform as ClickRow[3], fingerprint, createdAt, null];
}

/** The main thread's side of `click-writer.worker.mjs`. */
class ClickWriterThread {
  private worker: Worker;
  private nextId = 1;
  private pending = new Map<number, { resolve: () => void; reject: (err: Error) => void }>();

  constructor(file: string, onFailure: (err: Error) => void) {
    this.worker = new Worker(new URL('./click-writer.worker.mjs', import.meta.url), {
      workerData: { file, insert: INSERT },
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

  /** Sends a batch as one string: a click per line, columns tab-separated. */
  write(rows: string): Promise<void> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) this.worker.ref();
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, rows });
    });
  }

  async close() {
    this.worker.ref();
    this.worker.postMessage('close');
    await new Promise((resolve) => this.worker.once('exit', resolve));
  }
}
