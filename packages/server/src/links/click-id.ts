import { randomFillSync } from 'node:crypto';

const CROCKFORD = Buffer.from('0123456789ABCDEFGHJKMNPQRSTVWXYZ', 'latin1');
// Random bytes drawn from the CSPRNG in blocks: one call per 409 ids instead of one per id,
// which matters on the redirect path (a click id per request).
const pool = Buffer.alloc(4096);
let offset = pool.length;
/** `clk_` + 10 time characters + 16 random ones, written in place and read as one string. */
const out = Buffer.from(`clk_${'0'.repeat(26)}`, 'latin1');
let lastMs = -1;

/**
 * A click id: `clk_` + a ULID (48-bit millisecond time + 80 random bits, Crockford base32), the
 * same shape as `newId('clk', nowMs)`. Unguessable: it is what the install referrer carries.
 */
export function newClickId(nowMs: number): string {
  if (offset + 10 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  if (nowMs !== lastMs) {
    let t = nowMs;
    for (let i = 13; i >= 4; i--) {
      out[i] = CROCKFORD[t % 32];
      t = Math.floor(t / 32);
    }
    lastMs = nowMs;
  }
  // 80 random bits as 16 five-bit characters: two 40-bit halves, each exact in a double.
  for (let half = 0; half < 2; half++) {
    const o = offset + half * 5;
    let bits = pool[o] * 2 ** 32 + pool.readUInt32BE(o + 1);
    for (let i = 21 + half * 8; i >= 14 + half * 8; i--) {
      out[i] = CROCKFORD[bits % 32];
      bits = Math.floor(bits / 32);
    }
  }
  // Used bytes are overwritten so that no id's randomness stays in memory for the next ones
  // (a loop: ten bytes cost less than a call into Buffer#fill).
  for (let i = offset; i < offset + 10; i++) pool[i] = 0;
  offset += 10;
  return out.toString('latin1', 0, 30);
}
