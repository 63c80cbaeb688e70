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
 * In: `{ id, batch }` (see `ThreadBatch` in clicks.ts), or `'close'`.
 * Out: `{ id, candidates }` once written (the mobile clicks as match candidates, packed for
 * `SharedState.remember`), or `{ id, error }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import { batchRows, candidateLines, clickFingerprint } from './click-batch.mjs';

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

/**
 * @typedef {{ firstMs: number, lastMs: number, heads: string, ips: string, userAgents: string,
 *   times: number[], mobile: number[], lifetimes: number[], days: [string, string, number][] }} Batch
 */

port.on('message', (/** @type {{ id: number, batch: Batch } | 'close'} */ message) => {
  if (message === 'close') {
    db.close();
    port.close();
    return;
  }
  try {
    const { batch } = message;
    const heads = batch.heads.split('\n');
    const ips = batch.ips.split('\n');
    const userAgents = batch.userAgents.split('\n');
    const fingerprints = heads.map((_, i) =>
      clickFingerprint(fingerprintKey, ips[i], userAgents[i]),
    );
    writeBatch(
      batch.firstMs,
      batch.lastMs,
      batchRows(heads, fingerprints, batch.times),
      batch.days,
    );
    port.postMessage({
      id: message.id,
      candidates: candidateLines(heads, fingerprints, batch.times, batch.mobile, batch.lifetimes),
    });
  } catch (err) {
    port.postMessage({ id: message.id, error: String(err) });
  }
});
