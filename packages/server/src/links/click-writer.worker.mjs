// @ts-check
/**
 * The click writer thread (SQLite files only): receives batches of clicks from the main thread
 * and writes each in one transaction on its own connection — the batch's `link_click_log` row
 * and its per-link, per-day counts — so that the redirects' event loop never waits on SQLite.
 * Plain JavaScript: Node 20 does not hand the TypeScript loader (`--import tsx`) to worker
 * threads.
 *
 * workerData: `{ file, insertLog, upsertDay }`, the SQLite file and the two statements.
 * In: `{ id, batch: { firstMs, lastMs, rows, days } }` (`days`: `[linkId, 'YYYY-MM-DD', n]`),
 * or `'close'`.
 * Out: `{ id }` once written, or `{ id, error }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const { file, insertLog, upsertDay } =
  /** @type {{ file: string, insertLog: string, upsertDay: string }} */ (workerData);
const db = new SQLite(file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
const insert = db.prepare(insertLog);
const upsert = db.prepare(upsertDay);
const writeBatch = db.transaction(
  (
    /** @type {{ firstMs: number, lastMs: number, rows: string, days: [string, string, number][] }} */ batch,
  ) => {
    insert.run(batch.firstMs, batch.lastMs, batch.rows);
    for (const day of batch.days) upsert.run(...day);
  },
);

port.on('message', (/** @type {{ id: number, batch: any } | 'close'} */ message) => {
  if (message === 'close') {
    db.close();
    port.close();
    return;
  }
  try {
    writeBatch(message.batch);
    port.postMessage({ id: message.id });
  } catch (err) {
    port.postMessage({ id: message.id, error: String(err) });
  }
});
