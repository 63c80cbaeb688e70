import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 32 random bytes need 43 base62 digits; a CRC32 needs 6. */
const RANDOM_LENGTH = 43;
const CHECKSUM_LENGTH = 6;

export const CLIENT_KEY_PREFIX = 'svc_pk_';
export const SERVER_KEY_PREFIX = 'svc_sk_';
const KEY_LENGTH = CLIENT_KEY_PREFIX.length + RANDOM_LENGTH + CHECKSUM_LENGTH;
const FORMAT = /^svc_(pk|sk)_([0-9A-Za-z]{43})([0-9A-Za-z]{6})$/;
/** Legacy keys: `svc_` then neither `pk_` nor `sk_`, no checksum. */
const LEGACY_FORMAT = /^svc_(?!pk_|sk_)[0-9A-Za-z_-]{8,190}$/;

function toBase62(value: bigint, length: number): string {
  let out = '';
  let v = value;
  while (v > 0n) {
    out = BASE62[Number(v % 62n)] + out;
    v /= 62n;
  }
  return out.padStart(length, '0');
}

function checksum(randomPart: string): string {
  return toBase62(BigInt(crc32(randomPart)), CHECKSUM_LENGTH);
}

/** Makes a new key: prefix, 32 random bytes in base62, then a base62 CRC32 of the random part. */
export function generateKey(type: 'client' | 'server'): string {
  const random = toBase62(BigInt(`0x${randomBytes(32).toString('hex')}`), RANDOM_LENGTH);
  return (type === 'client' ? CLIENT_KEY_PREFIX : SERVER_KEY_PREFIX) + random + checksum(random);
}

export type ParsedKey = { ok: true; type: 'client' | 'server' | 'legacy' } | { ok: false };

/**
 * Checks a presented key's shape and checksum without any store lookup: a key that fails here
 * cannot exist, so the store is never queried for it.
 */
export function parseKey(key: string): ParsedKey {
  if (key.length === KEY_LENGTH) {
    const m = FORMAT.exec(key);
    if (m) {
      if (checksum(m[2]) !== m[3]) return { ok: false };
      return { ok: true, type: m[1] === 'pk' ? 'client' : 'server' };
    }
  }
  if (LEGACY_FORMAT.test(key)) return { ok: true, type: 'legacy' };
  return { ok: false };
}

/** True for a well-formed legacy key (for import). */
export function isLegacyKey(key: string): boolean {
  return LEGACY_FORMAT.test(key);
}

/** SHA-256 hex: the only form in which keys are stored. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The parts of a key that may be shown: a display prefix and the last four characters. */
export function displayParts(key: string): { prefix: string; last4: string } {
  const typed = key.startsWith(CLIENT_KEY_PREFIX) || key.startsWith(SERVER_KEY_PREFIX);
  return { prefix: key.slice(0, typed ? 11 : 8), last4: key.slice(-4) };
}
