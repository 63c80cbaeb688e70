// @ts-check
/**
 * The click writer thread (SQLite files only): receives batches of clicks from the main thread
 * and writes each batch in one transaction on its own connection, so that the redirects' event
 * loop never waits on SQLite. Plain JavaScript: Node 20 does not hand the TypeScript loader
 * (`--import tsx`) to worker threads.
 *
 * workerData: `{ file, insert }`, the SQLite file and the INSERT text (one `?` per column).
 * In: `{ id, rows }`, `rows` one string, a click per line and its columns separated by tabs (no
 * column can contain either); the last column (claimed_at) is always null. Or `'close'`.
 * Out: `{ id }` once written, or `{ id, error }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import SQLite from 'better-sqlite3';

const port = /** @type {import('node:worker_threads').MessagePort} */ (parentPort);
const { file, insert: insertSql } = /** @type {{ file: string, insert: string }} */ (workerData);
const db = new SQLite(file);
db.pragma('busy_timeout = 5000');
db.pragma('synchronous = NORMAL');
const insert = db.prepare(insertSql);
const writeBatch = db.transaction((/** @type {string[]} */ lines) => {
  for (const line of lines) insert.run(...line.split('\t'), null);
});

port.on('message', (/** @type {{ id: number, rows: string } | 'close'} */ message) => {
  if (message === 'close') {
    db.close();
    port.close();
    return;
  }
  try {
    writeBatch(message.rows.split('\n'));
    port.postMessage({ id: message.id });
  } catch (err) {
    port.postMessage({ id: message.id, error: String(err) });
  }
});
