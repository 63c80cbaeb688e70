import type { Transaction } from 'better-sqlite3';
import type { FastifyBaseLogger } from 'fastify';
import { CompiledQuery } from 'kysely';
import type { Store } from '../storage/db.ts';
import type { LinkClicksTable } from './tables.ts';

const COLUMNS = [
  'id',
  'project_id',
  'link_id',
  'platform',
  'fingerprint',
  'created_at',
  'claimed_at',
] as const;
/** A click as queued: its values in {@link COLUMNS} order (no object per click). */
export type ClickRow = [
  id: string,
  projectId: string,
  linkId: string,
  platform: LinkClicksTable['platform'],
  fingerprint: string,
  createdAt: string,
  claimedAt: null,
];
/** PostgreSQL: one statement text for any number of rows (seven array parameters). */
const PG_INSERT = `insert into link_clicks (${COLUMNS.join(', ')}) select * from unnest(${COLUMNS.map((_, i) => `$${i + 1}::text[]`).join(', ')})`;
const PG_CHUNK_ROWS = 5000;
/** Clicks kept for a retry while the store refuses writes; beyond this, the oldest are dropped. */
const MAX_PENDING = 100_000;

/**
 * Writes redirect clicks in batches, off the redirect's path: a click is queued and the queue
 * is written at most `maxDelayMs` later (or at once when `maxBatch` rows wait). Readers that need
 * every click this node served (deferred matching, stats) call `flush()` first. Other nodes see a
 * click once it is written, at most `maxDelayMs` after the redirect; an app install takes far
 * longer. A crash loses at most the clicks of the last `maxDelayMs`.
 *
 * SQLite runs one prepared single-row INSERT per click inside one transaction per batch;
 * PostgreSQL gets one `INSERT … SELECT FROM unnest(…)` per batch, the same text every time.
 */
export class ClickRecorder {
  private queue: ClickRow[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  private sqliteBatch: Transaction<(rows: ClickRow[]) => void> | undefined;

  constructor(
    private store: Store,
    private log: FastifyBaseLogger,
    private maxDelayMs = 100,
    private maxBatch = 2000,
  ) {}

  record(click: ClickRow) {
    this.queue.push(click);
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

  private async write(batch: ClickRow[]) {
    try {
      if (this.store.sqlite) this.writeSqlite(batch);
      else await this.writePostgres(batch);
    } catch (err) {
      // The store is down or busy: keep the clicks (up to a bound) and try again later.
      const kept = batch.concat(this.queue).slice(-MAX_PENDING);
      const dropped = batch.length + this.queue.length - kept.length;
      this.queue = kept;
      this.log.error({ err, clicks: batch.length, dropped }, 'link clicks not written; will retry');
      this.timer ??= setTimeout(() => void this.flush(), this.maxDelayMs * 10);
    }
  }

  private writeSqlite(batch: ClickRow[]) {
    const sqlite = this.store.sqlite!;
    if (!this.sqliteBatch) {
      const insert = sqlite.prepare<ClickRow>(
        `insert into link_clicks (${COLUMNS.join(', ')}) values (${COLUMNS.map(() => '?').join(', ')})`,
      );
      this.sqliteBatch = sqlite.transaction((rows: ClickRow[]) => {
        for (const row of rows) insert.run(...row);
      });
    }
    this.sqliteBatch(batch);
  }

  private async writePostgres(batch: ClickRow[]) {
    for (let i = 0; i < batch.length; i += PG_CHUNK_ROWS) {
      const chunk = batch.slice(i, i + PG_CHUNK_ROWS);
      const columns = COLUMNS.map((_, c) => chunk.map((row) => row[c]));
      await this.store.db.executeQuery(CompiledQuery.raw(PG_INSERT, columns));
    }
  }
}
