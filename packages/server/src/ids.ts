import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const DIGITS = Array.from(CROCKFORD, (c) => c.charCodeAt(0));
/** Random bytes for 256 ids, drawn at once: a CSPRNG call per id cost more than a redirect. */
const pool = Buffer.alloc(256 * 10);
let poolAt = pool.length;
/** The character codes of the id being made (reused: ids are made one at a time). */
const codes: number[] = [];

/**
 * A time-sortable id with a type prefix (`prj_…`, `key_…`): a ULID (48-bit millisecond time +
 * 80 random bits, Crockford base32) after the prefix. Made as one flat string from its
 * character codes: built by concatenation, an id is a tree of a dozen string pieces in V8, all
 * kept alive (and copied by every young-generation collection) for as long as the id is held,
 * as a queued click's or a deferred-match candidate's is.
 */
export function newId(prefix: string, nowMs = Date.now()): string {
  codes.length = 0;
  for (let i = 0; i < prefix.length; i++) codes.push(prefix.charCodeAt(i));
  codes.push(0x5f); // _
  const at = codes.length;
  let t = nowMs;
  for (let i = 9; i >= 0; i--) {
    codes[at + i] = DIGITS[t % 32];
    t = Math.floor(t / 32);
  }
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  let acc = 0;
  let bits = 0;
  for (let i = poolAt; i < poolAt + 10; i++) {
    acc = ((acc << 8) | pool[i]) & 0xfff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      codes.push(DIGITS[(acc >> bits) & 31]);
    }
  }
  poolAt += 10;
  return String.fromCharCode(...codes);
}

/** The time (ms since the epoch) an id from {@link newId} carries: its ULID's first 48 bits. */
export function idTime(id: string): number {
  const at = id.indexOf('_') + 1;
  let ms = 0;
  for (let i = at; i < at + 10; i++) ms = ms * 32 + CROCKFORD.indexOf(id[i]);
  return ms;
}
