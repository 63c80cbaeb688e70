import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
/** Random bytes for 256 ids, drawn at once: a CSPRNG call per id cost more than a redirect. */
const pool = Buffer.alloc(256 * 10);
let poolAt = pool.length;

/**
 * A time-sortable id with a type prefix (`prj_…`, `key_…`): a ULID (48-bit millisecond time +
 * 80 random bits, Crockford base32) after the prefix.
 */
export function newId(prefix: string, nowMs = Date.now()): string {
  let time = '';
  let t = nowMs;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  const bytes = pool.subarray(poolAt, poolAt + 10);
  poolAt += 10;
  let rand = '';
  let acc = 0;
  let bits = 0;
  for (const b of bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      rand += CROCKFORD[(acc >> bits) & 31];
    }
  }
  return `${prefix}_${time}${rand}`;
}

/** The time (ms since the epoch) an id from {@link newId} carries: its ULID's first 48 bits. */
export function idTime(id: string): number {
  const at = id.indexOf('_') + 1;
  let ms = 0;
  for (let i = at; i < at + 10; i++) ms = ms * 32 + CROCKFORD.indexOf(id[i]);
  return ms;
}
