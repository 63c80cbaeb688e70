import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
// Random bytes drawn from the CSPRNG in blocks: one call per 409 ids instead of one per id,
// which matters on the redirect path (a click id per request).
const pool = Buffer.alloc(4096);
let offset = pool.length;

/**
 * A click id: `clk_` + a ULID (48-bit millisecond time + 80 random bits, Crockford base32), the
 * same shape as `newId('clk', nowMs)`. Unguessable: it is what the install referrer carries.
 */
export function newClickId(nowMs: number): string {
  if (offset + 10 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  let time = '';
  let t = nowMs;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let rand = '';
  let acc = 0;
  let bits = 0;
  for (let i = offset; i < offset + 10; i++) {
    acc = (acc << 8) | pool[i];
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      rand += CROCKFORD[(acc >> bits) & 31];
    }
  }
  // Used bytes are overwritten so that no id's randomness stays in memory for the next ones.
  pool.fill(0, offset, offset + 10);
  offset += 10;
  return `clk_${time}${rand}`;
}
