// @ts-check
/**
 * A node's deferred-match candidates in memory: {@link RecentRing}. Plain JavaScript, as the
 * click writer thread holds the ring (Node 20 does not hand the TypeScript loader to worker
 * threads). Types: recent.d.mts.
 */
import { CandidateRecords, hashHigh, hashText, RECORD_HEAD } from './candidate-records.mjs';

/**
 * One member remembered under a key (`member`), with its time (`ms`, milliseconds since the
 * epoch: what `recall` filters and orders by) and how long after it it may be forgotten.
 * @typedef {{ key: string, member: string, ms: number, ttlMs: number }} RecentEntry
 */

/**
 * Entries as the records {@link RecentRing.remember} takes (see candidate-records.mjs): how
 * candidates are put back from the log, and how tests write them.
 */
/**
 * @param {RecentEntry[]} entries
 * @returns {Uint8Array}
 */
export function packRecent(entries) {
  const records = new CandidateRecords(entries.length * 96);
  for (const e of entries) records.add(e.key, e.ms, e.ttlMs, e.member);
  return records.finish();
}

/** A remembered member and its time. @typedef {{ member: string, ms: number }} Recalled */

/** Members kept per key at most (the newest); older ones are forgotten first. */
export const RECENT_MAX_PER_KEY = 50;

/** Members up to this many bytes are kept inline (a click candidate's is 61). */
const INLINE_MEMBER = 64;
/**
 * A node's deferred-match candidates (see candidates.ts): remembered entries in arrival
 * order in a ring of typed arrays, found through a table from each key's hash to its newest entry,
 * each entry pointing to the previous one under the same hash.
 *
 * Why not an object per entry: a deferred-match candidate lives for the project's window (an
 * hour by default), so under load every entry outlives the young generation; objects, strings
 * and lists per entry made the garbage collector copy and mark each of them, on the thread that
 * answers redirects. Here an entry is a few numbers and its member's bytes, and the collector
 * sees a handful of arrays, whatever the count.
 *
 * The arrays are made once, for the bound, at the first entry: about 100 bytes per entry of
 * the bound (the default bound, a million, reserves some 110 MB of address space), which the
 * operating system backs with memory only as entries arrive. A ring that grew as it filled
 * copied every entry and relinked every chain at each step; and each step's new arrays counted
 * as fresh memory to V8, which answered with a full collection of the heap every second or so
 * until the ring was full (measured under load from new visitors: 8 to 13 full collections in
 * 17 s, against 2 with no ring).
 *
 * A key is kept as a 64-bit hash, not as text: two keys with the same hash would share their
 * members. Keys here hold a keyed SHA-256 fingerprint, so that is as likely as guessing it.
 */
export class RecentRing {
  /** @param {number} max how many entries are kept at most (the oldest are forgotten first) */
  constructor(max) {
    if (!(max >= 1)) throw new RangeError('the bound must be at least 1');
    /** @readonly */
    this.max = max;
    /** Members longer than {@link INLINE_MEMBER} bytes, by sequence number. @type {Map<number, string>} */
    this.long = new Map();
    this.clear();
    /** The `nowMs` of the latest write: entries expired by then are not recalled. */
    this.now = Number.NEGATIVE_INFINITY;
  }

  get size() {
    return this.tail - this.head;
  }

  /**
   * Remembers the candidates of `records` (see candidate-records.mjs), in their order, then
   * forgets what has expired by `nowMs` or is beyond the bound, oldest arrival first. Numbers
   * and bytes copied, nothing parsed or hashed.
   * @param {Uint8Array} records
   * @param {number} nowMs
   */
  remember(records, nowMs) {
    this.now = nowMs;
    const view = new DataView(records.buffer, records.byteOffset, records.byteLength);
    const end = records.length;
    let at = 0;
    while (at < end) {
      const memberStart = at + RECORD_HEAD;
      const memberEnd = memberStart > end ? end + 1 : memberStart + view.getUint16(at + 24, true);
      if (memberEnd > end) throw new Error('malformed entry');
      const ms = view.getFloat64(at + 8, true);
      const expires = view.getFloat64(at + 16, true);
      if (!(expires >= ms)) throw new Error('malformed entry');
      const lo = view.getUint32(at, true);
      this.add(lo, view.getUint32(at + 4, true), ms, expires, records, memberStart, memberEnd);
      at = memberEnd;
    }
    this.forget(nowMs);
  }

  /**
   * A key's members whose time is at least `sinceMs`, newest first, at most `limit`.
   * @param {string} key
   * @param {number} sinceMs
   * @param {number} limit
   * @returns {Recalled[]}
   */
  recall(key, sinceMs, limit) {
    const lo = hashText(key);
    const hi = hashHigh();
    /** @type {Recalled[]} */
    const found = [];
    let kept = 0;
    let next = this.newest.length === 0 ? 0 : this.newest[lo & (this.newest.length - 1)];
    // Latest arrival first; the newest RECENT_MAX_PER_KEY arrivals of the key are its members.
    while (next > this.head && kept < RECENT_MAX_PER_KEY) {
      const seq = next - 1;
      const slot = seq % this.max;
      if (this.hashHi[slot] === hi && this.hashLo[slot] === lo) {
        kept++;
        if (this.times[slot] >= sinceMs && this.expires[slot] > this.now) {
          found.push({ member: this.member(seq, slot), ms: this.times[slot] });
        }
      }
      next = this.prev[slot];
    }
    // Newest first by time; a stable sort keeps the latest arrival first among equal times.
    return found.sort((a, b) => b.ms - a.ms).slice(0, limit);
  }

  /** Forgets every entry and lets go of the arrays (made again at the next entry). */
  clear() {
    /** Sequence numbers: the oldest entry kept, and the next one to be written. */
    this.head = 0;
    this.tail = 0;
    // Entry `seq` is in slot `seq % max`; the arrays are made by `allocate` at the first entry.
    this.hashHi = new Uint32Array(0);
    this.hashLo = new Uint32Array(0);
    this.times = new Float64Array(0);
    this.expires = new Float64Array(0);
    /** The previous entry in the same bucket, as its sequence number + 1 (0: none). */
    this.prev = new Float64Array(0);
    this.memberLength = new Uint8Array(0);
    this.members = new Uint8Array(0);
    this.long.clear();
    /**
     * The newest entry of each bucket (the low bits of the key's hash), as its sequence number
     * + 1 (0: none), a bucket per entry of the bound or more. Keys sharing a bucket share its
     * chain, and `recall` tells them apart by the whole hash. An entry that names a forgotten
     * one is stale, which the chain's walk sees (`seq < head`). Zero for none, so that a new
     * table is not written before it is used.
     */
    this.newest = new Float64Array(0);
  }

  /**
   * Adds one entry: its key's hash, times, and its member `bytes[memberStart, memberEnd)`.
   * @param {number} lo
   * @param {number} hi
   * @param {number} ms
   * @param {number} expiresMs
   * @param {Uint8Array} bytes
   * @param {number} memberStart
   * @param {number} memberEnd
   */
  add(lo, hi, ms, expiresMs, bytes, memberStart, memberEnd) {
    if (this.size === this.max) this.drop();
    if (this.newest.length === 0) this.allocate();
    const seq = this.tail++;
    const slot = seq % this.max;
    const bucket = lo & (this.newest.length - 1);
    this.hashHi[slot] = hi;
    this.hashLo[slot] = lo;
    this.times[slot] = ms;
    this.expires[slot] = expiresMs;
    this.prev[slot] = this.newest[bucket];
    this.newest[bucket] = seq + 1;
    const length = memberEnd - memberStart;
    if (length <= INLINE_MEMBER) {
      const members = this.members;
      const base = slot * INLINE_MEMBER;
      for (let i = 0; i < length; i++) members[base + i] = bytes[memberStart + i];
      this.memberLength[slot] = length;
    } else {
      this.memberLength[slot] = 0;
      this.long.set(seq, utf8(bytes, memberStart, memberEnd));
    }
  }

  /** The ring's arrays, for the bound: zeroed memory that nothing writes before it is used. */
  allocate() {
    const n = this.max;
    this.hashHi = new Uint32Array(n);
    this.hashLo = new Uint32Array(n);
    this.times = new Float64Array(n);
    this.expires = new Float64Array(n);
    this.prev = new Float64Array(n);
    this.memberLength = new Uint8Array(n);
    this.members = new Uint8Array(n * INLINE_MEMBER);
    this.newest = new Float64Array(2 ** Math.ceil(Math.log2(n)));
  }

  /**
   * @param {number} seq
   * @param {number} slot
   * @returns {string}
   */
  member(seq, slot) {
    const long = this.long.get(seq);
    if (long !== undefined) return long;
    const base = slot * INLINE_MEMBER;
    return utf8(this.members, base, base + this.memberLength[slot]);
  }

  /**
   * Forgets, oldest arrival first, what has expired or is beyond the bound. An entry that lives
   * longer than one that came after it holds the later one's room until it goes (it is no longer
   * recalled meanwhile): lifetimes are a lower bound on memory, the count is the upper one.
   * @param {number} nowMs
   */
  forget(nowMs) {
    while (this.size > 0 && this.expires[this.head % this.max] <= nowMs) this.drop();
  }

  /** Forgets the oldest entry. */
  drop() {
    const seq = this.head++;
    if (this.long.size > 0) this.long.delete(seq);
  }
}

/**
 * @param {Uint8Array} bytes
 * @param {number} start
 * @param {number} end
 */
function utf8(bytes, start, end) {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('utf8');
}
