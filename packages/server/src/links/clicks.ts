import type { FastifyBaseLogger } from 'fastify';
import { CompiledQuery } from 'kysely';
import type { Store } from '../storage/db.ts';
import type { LinkClicksTable } from './tables.ts';

const CHUNK_ROWS = 200;
const COLUMNS = [
  'id',
  'project_id',
  'link_id',
  'platform',
  'fingerprint',
  'created_at',
  'claimed_at',
] as const;

/**
 * Writes redirect clicks in batches, off the redirect's path: a click is queued and the queue
 * is written at most `maxDelayMs` later (or at once when `maxBatch` rows wait). Readers that need
 * every click this node served (deferred matching, stats) call `flush()` first. Other nodes see a
 * click once it is written, at most `maxDelayMs` after the redirect; an app install takes far
 * longer. A crash loses at most the clicks of the last `maxDelayMs`.
 */
export class ClickRecorder {
  private queue: LinkClicksTable[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();
  /** The multi-row INSERT text per row count, compiled once by Kysely for the store's dialect. */
  private statements = new Map<number, string>();

  constructor(
    private store: Store,
    private log: FastifyBaseLogger,
    private maxDelayMs = 100,
    private maxBatch = 1000,
  ) {}

  record(click: LinkClicksTable) {
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
    const batch = this.queue;
    this.queue = [];
    this.writing = this.writing.then(() => this.write(batch));
    return this.writing;
  }

  private insert(rows: LinkClicksTable[]): CompiledQuery {
    let text = this.statements.get(rows.length);
    if (text === undefined) {
      // Compiled from rows in COLUMNS order, so the parameters below line up with the text.
      const ordered = rows.map(
        (row) => Object.fromEntries(COLUMNS.map((c) => [c, row[c]])) as unknown as LinkClicksTable,
      );
      text = this.store.db.insertInto('link_clicks').values(ordered).compile().sql;
      this.statements.set(rows.length, text);
    }
    const parameters: unknown[] = [];
    for (const row of rows) for (const column of COLUMNS) parameters.push(row[column]);
    return CompiledQuery.raw(text, parameters);
  }

  private async write(batch: LinkClicksTable[]) {
    for (let i = 0; i < batch.length; i += CHUNK_ROWS) {
      const chunk = batch.slice(i, i + CHUNK_ROWS);
      try {
        await this.store.db.executeQuery(this.insert(chunk));
      } catch {
        // A link deleted since its click fails its row's foreign key and so the whole chunk:
        // write the rows one by one and drop only the ones that cannot be written.
        for (const row of chunk) {
          try {
            await this.store.db.insertInto('link_clicks').values(row).execute();
          } catch (err) {
            this.log.warn({ err, linkId: row.link_id }, 'link click dropped');
          }
        }
      }
    }
  }
}
