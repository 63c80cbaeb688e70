// @ts-check
/**
 * The click writer thread (a SQLite file or PostgreSQL): receives batches of clicks from the main
 * thread and writes each in one transaction on its own connection — the batch's `link_click_log`
 * row and its per-link, per-day counts — so that the redirects' event loop never waits on the
 * store.
 * It also computes each click's fingerprint, in a tight loop over the batch, rather than the
 * redirect doing it between requests, and holds the node's deferred-match candidates (the ring
 * of recent.mjs): a written batch's mobile clicks go into it here, so that the redirects' thread
 * does no work for them at all. Plain JavaScript: Node 20 does not hand the TypeScript loader
 * (`--import tsx`) to worker threads.
 *
 * workerData: `{ target, statements, fingerprintKey, keepPerKey, maxCandidates }` (see `Data`
 * below; for SQLite the log's insert and the day counts' upsert, for PostgreSQL one statement
 * that writes both).
 * In, each with an `id`, handled one at a time in order (so a recall sees every batch sent
 * before it):
 * - `{ id, batch }`: the batch's columns (see `ClickColumns` in click-batch.mjs) to write, and
 *   its mobile clicks to keep as candidates once written;
 * - `{ id, remember: records, nowMs }`: candidates to keep (the records `RecentRing.remember`
 *   takes: those put back from the log at start);
 * - `{ id, recall: { key, sinceMs, limit } }`: a key's candidates;
 * - `'close'`.
 * Out: `{ id }` once done, with `found` (`[member, ms][]`) for a recall, or `{ id, error }`; a
 * written batch whose candidates could not be kept answers `{ id, notKept }` (the reason).
 */
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { batchOutput } from './click-batch.mjs';
import { RecentRing } from './recent.mjs';

/**
 * @typedef {{ sqlite: string } | { postgres: { url: string, schema?: string, timeoutMs: number } }} Target
 * @typedef {{
 *   target: Target,
 *   statements: { insertLog: string, upsertDay: string } | { writeBatch: string },
 *   fingerprintKey: string,
 *   keepPerKey: number,
 *   maxCandidates: number,
 * }} Data
 * @typedef {{
 *   write(firstMs: number, lastMs: number, rows: string, days: [string, string, number][]):
 *     void | Promise<void>,
 *   close(): void | Promise<void>,
 * }} Writer
 */

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const { target, statements, fingerprintKey, keepPerKey, maxCandidates } = /** @type {Data} */ (
  workerData
);
const ring = new RecentRing(maxCandidates);

/**
 * One transaction per batch on a connection of its own to the SQLite file.
 * @param {string} file
 * @returns {Writer}
 */
function sqliteWriter(file) {
  if (!('insertLog' in statements)) throw new Error('SQLite statements expected');
  const { insertLog, upsertDay } = statements;
  const db = new SQLite(file);
  db.pragma('busy_timeout = 5000');
  db.pragma('synchronous = NORMAL');
  const insert = db.prepare(insertLog);
  const upsert = db.prepare(upsertDay);
  const write = db.transaction(
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
  return { write, close: () => db.close() };
}

/**
 * One statement per batch, prepared once per connection, on a connection of its own to
 * PostgreSQL (in the store's schema); the day counts go as three arrays. Connecting and the
 * statement have the store's deadline; a connection that breaks or misses it is closed and
 * replaced on the next batch (the main thread keeps the batch and sends it again).
 * @param {{ url: string, schema?: string, timeoutMs: number }} where
 * @returns {Writer}
 */
function postgresWriter({ url, schema, timeoutMs }) {
  if (!('writeBatch' in statements)) throw new Error('the PostgreSQL statement expected');
  const { writeBatch } = statements;
  const pool = new pg.Pool({
    connectionString: url,
    max: 1,
    options: schema ? `-c search_path=${schema}` : undefined,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
    keepAlive: true,
  });
  // An idle connection that fails is dropped by the pool; the next batch opens another.
  pool.on('error', () => {});
  return {
    async write(firstMs, lastMs, rows, days) {
      const client = await pool.connect();
      // A connection that ends while checked out but between queries is reported as an 'error'
      // on the client (fatal without a listener); the query then fails on its own.
      /** @type {Error | null} */
      let broken = null;
      const onError = (/** @type {Error} */ err) => {
        broken = err;
      };
      client.on('error', onError);
      try {
        await client.query({
          name: 'svc_link_click_batch',
          text: writeBatch,
          values: [
            firstMs,
            lastMs,
            rows,
            days.map((d) => d[0]),
            days.map((d) => d[1]),
            days.map((d) => d[2]),
          ],
        });
        client.off('error', onError);
        client.release(broken ?? undefined);
      } catch (err) {
        client.off('error', onError);
        // A statement PostgreSQL refused leaves no transaction open and the connection usable;
        // anything else (a broken connection) discards it.
        client.release(
          broken ?? (err instanceof pg.DatabaseError ? undefined : /** @type {Error} */ (err)),
        );
        throw err;
      }
    },
    close: () => pool.end(),
  };
}

const writer = 'sqlite' in target ? sqliteWriter(target.sqlite) : postgresWriter(target.postgres);

/**
 * @typedef {{ id: number, batch: import('./click-batch.mjs').ClickColumns }
 *   | { id: number, remember: Uint8Array, nowMs: number }
 *   | { id: number, recall: { key: string, sinceMs: number, limit: number } }
 *   | 'close'} Message
 */

/** @param {Message} message */
async function handle(message) {
  if (message === 'close') {
    await writer.close();
    ring.clear();
    port.close();
    return;
  }
  try {
    if ('batch' in message) {
      const { batch } = message;
      const { rows, days, candidates } = batchOutput(batch, fingerprintKey, keepPerKey);
      await writer.write(batch.firstMs, batch.lastMs, rows, days);
      try {
        ring.remember(candidates, batch.lastMs);
      } catch (err) {
        // The batch is written; only its probable matches are lost.
        port.postMessage({ id: message.id, notKept: String(err) });
        return;
      }
      port.postMessage({ id: message.id });
    } else if ('remember' in message) {
      ring.remember(message.remember, message.nowMs);
      port.postMessage({ id: message.id });
    } else {
      const { key, sinceMs, limit } = message.recall;
      const found = ring.recall(key, sinceMs, limit).map((r) => [r.member, r.ms]);
      port.postMessage({ id: message.id, found });
    }
  } catch (err) {
    port.postMessage({ id: message.id, error: String(err) });
  }
}

// One message at a time, in order (a PostgreSQL write waits on the network).
let queue = Promise.resolve();
port.on('message', (/** @type {Message} */ message) => {
  queue = queue.then(() => handle(message));
});
