// @ts-check
/**
 * The click writer thread (SQLite files only): receives batches of clicks from the main thread
 * and writes each in one transaction on its own connection — the batch's `link_click_log` row
 * and its per-link, per-day counts — so that the redirects' event loop never waits on SQLite.
 * It also computes each click's fingerprint, in a tight loop over the batch, rather than the
 * redirect doing it between requests. Plain JavaScript: Node 20 does not hand the TypeScript
 * loader (`--import tsx`) to worker threads.
 *
 * workerData: `{ file, insertLog, upsertDay, fingerprintKey }`.
 * In: `{ id, batch }` (the batch's columns, see `ClickColumns` in click-batch.mjs), or `'close'`.
 * Out: `{ id, candidates }` once written (the mobile clicks as match candidates, packed for
 * `SharedState.remember`), or `{ id, error }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { batchOutput } from './click-batch.mjs';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const { file, insertLog, upsertDay, fingerprintKey } =
  /** @type {{ file: string, insertLog: string, upsertDay: string, fingerprintKey: string }} */ (
    workerData
  );
const db = new SQLite(file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
const insert = db.prepare(insertLog);
const upsert = db.prepare(upsertDay);
const writeBatch = db.transaction(
  (
    /** @type {number} */ firstMs,
    /** @type {number} */ lastMs,
    /** @type {string} */ rows,
    /** @type {[string, string, number][]} */ days,
  ) => {
    insert.run(firstMs, lastMs, rows);
    for (const day of days) upsert.run(...day);
  },
);

/** @typedef {{ id: number, batch: import('./click-batch.mjs').ClickColumns } | 'close'} Message */

port.on('message', (/** @type {Message} */ message) => {
  if (message === 'close') {
    db.close();
    port.close();
    return;
  }
  try {
    const { batch } = message;
    const { rows, days, candidates } = batchOutput(batch, fingerprintKey);
    writeBatch(batch.firstMs, batch.lastMs, rows, days);
    port.postMessage({ id: message.id, candidates });
  } catch (err) {
    port.postMessage({ id: message.id, error: String(err) });
  }
});
