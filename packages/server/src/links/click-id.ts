import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CROCKFORD_BYTES = Buffer.from(CROCKFORD, 'latin1');
/** Ids whose random parts are drawn and written at once. */
const BLOCK = 256;
/** Random characters of an id: 80 bits, five to a character. */
const RANDOM_CHARS = 16;
const bits = Buffer.alloc(BLOCK * 10);
const chars = Buffer.alloc(BLOCK * RANDOM_CHARS);
/** The random parts of the block's ids, back to back, and the next one to hand out. */
let block = '';
let next = BLOCK;
let lastMs = -1;
/** `clk_` and the time characters of `lastMs`. */
let prefix = '';

/**
 * A click id: `clk_` + a ULID (48-bit millisecond time + 80 random bits, Crockford base32), the
 * same shape as `newId('clk', nowMs)`. Unguessable: it is what the install referrer carries.
 *
 * It runs on every redirect, so the random parts are made 256 at a time: one call to the CSPRNG
 * and one string for the block, which each id takes a slice of (no copy), after the time
 * characters of its millisecond, worked out once per millisecond. The random bytes and their
 * characters are overwritten once the block's string is made; the ids it holds are those the
 * next redirects will carry, as the CSPRNG's block of bytes held them before.
 */
export function newClickId(nowMs: number): string {
  if (next === BLOCK) refill();
  if (nowMs !== lastMs) {
    let t = nowMs;
    let time = '';
    for (let i = 0; i < 10; i++) {
      time = CROCKFORD[t % 32] + time;
      t = Math.floor(t / 32);
    }
    prefix = `clk_${time}`;
    lastMs = nowMs;
  }
  const at = next++ * RANDOM_CHARS;
  return prefix + block.slice(at, at + RANDOM_CHARS);
}

/** Draws the next block: five random bytes become eight characters. */
function refill() {
  randomFillSync(bits);
  for (let o = 0, c = 0; o < bits.length; o += 5, c += 8) {
    const b0 = bits[o];
    const b1 = bits[o + 1];
    const b2 = bits[o + 2];
    const b3 = bits[o + 3];
    const b4 = bits[o + 4];
    chars[c] = CROCKFORD_BYTES[b0 >> 3];
    chars[c + 1] = CROCKFORD_BYTES[((b0 & 7) << 2) | (b1 >> 6)];
    chars[c + 2] = CROCKFORD_BYTES[(b1 >> 1) & 31];
    chars[c + 3] = CROCKFORD_BYTES[((b1 & 1) << 4) | (b2 >> 4)];
    chars[c + 4] = CROCKFORD_BYTES[((b2 & 15) << 1) | (b3 >> 7)];
    chars[c + 5] = CROCKFORD_BYTES[(b3 >> 2) & 31];
    chars[c + 6] = CROCKFORD_BYTES[((b3 & 3) << 3) | (b4 >> 5)];
    chars[c + 7] = CROCKFORD_BYTES[b4 & 31];
  }
  block = chars.toString('latin1');
  bits.fill(0);
  chars.fill(0);
  next = 0;
}
