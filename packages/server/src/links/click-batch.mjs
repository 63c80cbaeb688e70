// @ts-check
/**
 * The click fingerprint, shared by the main thread (deferred matching looks a visitor up by it)
 * and the click writer thread (which computes it for each click of a batch, off the redirect's
 * path). Plain JavaScript for the writer thread's sake: Node 20 does not hand the TypeScript
 * loader to worker threads. Types: click-batch.d.mts.
 */
import { createHmac, hash } from 'node:crypto';

/**
 * The fingerprint key, derived from the server secret so that the secret itself is never hashed
 * next to user data.
 * @param {string} secret
 */
export function fingerprintKey(secret) {
  return createHmac('sha256', secret).update('svc links click fingerprint v1').digest('base64url');
}

/**
 * SHA-256 of (key, IP, user agent), its first 22 base64url characters (132 bits): matchable, but
 * without the server secret neither reversible to an IP nor comparable across installations. An
 * IPv4-mapped IPv6 address counts as its IPv4 address. One-shot `hash()` straight to text rather
 * than an HMAC object or a Buffer: it runs once per click.
 * @param {string} key from {@link fingerprintKey}
 * @param {string} ip
 * @param {string} userAgent
 */
export function clickFingerprint(key, ip, userAgent) {
  const v4 = ip.startsWith('::ffff:') && ip.includes('.') ? ip.slice(7) : ip.toLowerCase();
  return hash('sha256', `${key}\0${v4}\0${userAgent}`, 'base64url').slice(0, 22);
}

/**
 * A batch's `link_click_log` text: per click, its head (`id`, `project_id`, `link_id`,
 * `platform`), its fingerprint and its time in ms, tab-separated; one line per click (see
 * click-log.ts).
 * @param {string[]} heads
 * @param {string[]} fingerprints
 * @param {number[]} times
 */
export function batchRows(heads, fingerprints, times) {
  let rows = '';
  for (let i = 0; i < heads.length; i++) {
    rows += `${i === 0 ? '' : '\n'}${heads[i]}\t${fingerprints[i]}\t${times[i]}`;
  }
  return rows;
}

/**
 * The deferred-match candidate key of a mobile click (see `SharedState.remember`).
 * @param {string} projectId
 * @param {string} platform
 * @param {string} fingerprint
 */
export function candidateKey(projectId, platform, fingerprint) {
  return `links:fp:${projectId}:${platform}:${fingerprint}`;
}

/**
 * A batch's mobile clicks as deferred-match candidates, packed as `SharedState.remember` takes
 * them: per click, its candidate key, time, lifetime and `clickId linkId`, tab-separated, one
 * line each.
 * @param {string[]} heads see {@link batchRows}
 * @param {string[]} fingerprints
 * @param {number[]} times
 * @param {number[]} mobile the positions of the mobile clicks in the batch
 * @param {number[]} lifetimes how long each of them stays a candidate (ms)
 */
export function candidateLines(heads, fingerprints, times, mobile, lifetimes) {
  let packed = '';
  for (let j = 0; j < mobile.length; j++) {
    const i = mobile[j];
    const [id, projectId, linkId, platform] = heads[i].split('\t');
    packed += `${candidateKey(projectId, platform, fingerprints[i])}\t${times[i]}\t${lifetimes[j]}\t${id} ${linkId}\n`;
  }
  return packed;
}
