// @ts-check
/**
 * Match candidates as binary records, the form a batch hands to a node's candidate ring
 * (recent.mjs): per candidate, its key's 64-bit hash (two 32-bit halves), its time and expiry
 * (ms, 64-bit floats), its member's length (16 bits) and the member's UTF-8 bytes, little-endian,
 * back to back. The writer thread makes them, so that the redirects' thread only copies numbers
 * and bytes into the ring: no text to build, encode, parse or hash there. Plain JavaScript for
 * the writer thread's sake (Node 20 does not hand the TypeScript loader to worker threads).
 * Types: candidate-records.d.mts.
 */

/** Bytes of a record before its member. */
export const RECORD_HEAD = 26;
/** Members up to this many UTF-8 bytes (a click candidate's is 61). */
export const MAX_MEMBER = 0xffff;

/** The high half of the last {@link hashBytes} or {@link hashText}. */
let high = 0;

/** The high half of the last hash computed. */
export function hashHigh() {
  return high;
}

/**
 * A 64-bit hash of `bytes[start, end)`, from two FNV-1a lanes with different seeds and
 * multipliers, each through Murmur3's finaliser: returns the low half; {@link hashHigh} the high
 * one (no allocation per call).
 * @param {Uint8Array} bytes
 * @param {number} start
 * @param {number} end
 */
export function hashBytes(bytes, start, end) {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = start; i < end; i++) {
    const c = bytes[i];
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  high = finish(b);
  return finish(a);
}

const encoder = new TextEncoder();

/**
 * {@link hashBytes} of the UTF-8 bytes of `text`, read from its characters when it is ASCII
 * (keys are: ids and a base64url fingerprint).
 * @param {string} text
 */
export function hashText(text) {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x7f) {
      const bytes = encoder.encode(text);
      return hashBytes(bytes, 0, bytes.length);
    }
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  high = finish(b);
  return finish(a);
}

/**
 * The hash of a key made of a prefix and `text` (ASCII), from the prefix's lanes
 * ({@link hashLanes}): the prefix's bytes are hashed once for many keys. Returns the low half;
 * {@link hashHigh} the high one.
 * @param {Int32Array | Uint32Array} lanes
 * @param {number} at where the prefix's two lanes are in `lanes`
 * @param {string} text
 */
export function hashAfter(lanes, at, text) {
  let a = lanes[at];
  let b = lanes[at + 1];
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  high = finish(b);
  return finish(a);
}

/**
 * The two lanes of the hash after the bytes of `prefix` (ASCII), for {@link hashAfter}, written
 * to `lanes` at `at`.
 * @param {string} prefix
 * @param {Int32Array | Uint32Array} lanes
 * @param {number} at
 */
export function hashLanes(prefix, lanes, at) {
  let a = 0x811c9dc5;
  let b = 0x9747b28c;
  for (let i = 0; i < prefix.length; i++) {
    const c = prefix.charCodeAt(i);
    if (c > 0x7f) throw new RangeError('not ASCII');
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  lanes[at] = a;
  lanes[at + 1] = b;
}

/** @param {number} h */
function finish(h) {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Records written one after another into a growing buffer. */
export class CandidateRecords {
  /** @param {number} capacity bytes to start with */
  constructor(capacity = 4096) {
    this.bytes = new Uint8Array(Math.max(64, capacity));
    this.view = new DataView(this.bytes.buffer);
    this.length = 0;
  }

  /**
   * Adds a candidate: `member` under `key`, at `ms`, kept `ttlMs`.
   * @param {string} key
   * @param {number} ms
   * @param {number} ttlMs
   * @param {string} member
   */
  add(key, ms, ttlMs, member) {
    const lo = hashText(key);
    const hi = high;
    const start = this.open(member.length * 3);
    const bytes = this.bytes;
    let n = 0;
    for (; n < member.length; n++) {
      const c = member.charCodeAt(n);
      if (c > 0x7f) break;
      bytes[start + n] = c;
    }
    if (n < member.length) n = encoder.encodeInto(member, bytes.subarray(start)).written;
    if (n > MAX_MEMBER) throw new RangeError('member too long');
    this.close(lo, hi, ms, ttlMs, n);
  }

  /**
   * Starts a record whose member the caller writes itself, at most `memberBytes` long, into
   * `this.bytes` from the offset returned; {@link close} ends it.
   * @param {number} memberBytes
   */
  open(memberBytes) {
    this.reserve(RECORD_HEAD + memberBytes);
    return this.length + RECORD_HEAD;
  }

  /**
   * Ends the record {@link open} started: its key's hash, time, lifetime and member length.
   * @param {number} lo
   * @param {number} hi
   * @param {number} ms
   * @param {number} ttlMs
   * @param {number} memberLength
   */
  close(lo, hi, ms, ttlMs, memberLength) {
    const at = this.length;
    const view = this.view;
    view.setUint32(at, lo, true);
    view.setUint32(at + 4, hi, true);
    view.setFloat64(at + 8, ms, true);
    view.setFloat64(at + 16, ms + ttlMs, true);
    view.setUint16(at + 24, memberLength, true);
    this.length = at + RECORD_HEAD + memberLength;
  }

  /** The records written, in an `ArrayBuffer` of their own (so it can be transferred). */
  finish() {
    return this.bytes.slice(0, this.length);
  }

  /** @param {number} more */
  reserve(more) {
    if (this.length + more <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + more));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
    this.view = new DataView(grown.buffer);
  }
}
