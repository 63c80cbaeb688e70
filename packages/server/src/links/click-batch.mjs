// @ts-check
/**
 * A batch of clicks as the recorder keeps it (columns, see {@link ClickColumns}) and what it is
 * written as (log text, day counts, match candidates, each click's fingerprint), shared by the
 * main thread and the click writer thread. Plain JavaScript for the writer thread's sake: Node 20
 * does not hand the TypeScript loader to worker threads. Types: click-batch.d.mts.
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
 * The deferred-match candidate key of a mobile click (see `SharedState.remember`).
 * @param {string} projectId
 * @param {string} platform
 * @param {string} fingerprint
 */
export function candidateKey(projectId, platform, fingerprint) {
  return `links:fp:${projectId}:${platform}:${fingerprint}`;
}

/** A click's platform as a batch's `platform` column holds it (see {@link PLATFORM_CODES}). */
export const PLATFORMS = /** @type {const} */ (['desktop', 'android', 'ios', 'bot']);

/** The code of each platform in a batch's `platform` column. */
export const PLATFORM_CODES = { desktop: 0, android: 1, ios: 2, bot: 3 };

/** Characters of a click id after its `clk_` prefix (a ULID). */
export const ID_CHARS = 26;

const DAY_MS = 86_400_000;

/**
 * A batch of clicks, column by column: typed arrays indexed by click (the first `size` entries),
 * and small tables of the distinct links, IPs and user agents they point into. The redirect's
 * thread fills it without making an object per click; this is also what it sends the writer
 * thread.
 * @typedef {{
 *   size: number,
 *   firstMs: number,
 *   lastMs: number,
 *   ids: Uint8Array,
 *   times: Float64Array,
 *   lifetimes: Float64Array,
 *   link: Uint32Array,
 *   platform: Uint8Array,
 *   ip: Uint32Array,
 *   agent: Uint32Array,
 *   projects: string[],
 *   linkIds: string[],
 *   ips: string[],
 *   agents: string[],
 * }} ClickColumns
 *
 * `ids`: each click id's {@link ID_CHARS} characters after `clk_`, Latin-1, back to back.
 * `lifetimes`: how long a mobile click stays a deferred-match candidate (ms); 0 for others.
 * `link`: an index into `projects` and `linkIds`; `ip`, `agent`: into `ips`, `agents`.
 */

/**
 * What a batch is written as, computed off the redirect's thread (each click's fingerprint
 * included):
 * - `rows`: its `link_click_log` text, one line per click (see click-log.ts);
 * - `days`: its clicks counted per link and UTC day: link id, `YYYY-MM-DD`, count;
 * - `candidates`: its mobile clicks as deferred-match candidates, packed as
 *   `SharedState.remember` takes them: candidate key, time, lifetime and `clickId linkId`.
 * @param {ClickColumns} c
 * @param {string} key from {@link fingerprintKey}
 * @returns {{ rows: string, days: [string, string, number][], candidates: string }}
 */
export function batchOutput(c, key) {
  const ids = Buffer.from(c.ids.buffer, c.ids.byteOffset, c.ids.byteLength);
  /** @type {Map<number, [string, string, number]>} */
  const counts = new Map();
  let rows = '';
  let candidates = '';
  for (let i = 0; i < c.size; i++) {
    const id = `clk_${ids.toString('latin1', i * ID_CHARS, (i + 1) * ID_CHARS)}`;
    const link = c.link[i];
    const projectId = c.projects[link];
    const linkId = c.linkIds[link];
    const platform = PLATFORMS[c.platform[i]];
    const ms = c.times[i];
    const fingerprint = clickFingerprint(key, c.ips[c.ip[i]], c.agents[c.agent[i]]);
    rows += `${i === 0 ? '' : '\n'}${id}\t${projectId}\t${linkId}\t${platform}\t${fingerprint}\t${ms}`;
    const day = Math.floor(ms / DAY_MS);
    const dayKey = link * 1e6 + day;
    const count = counts.get(dayKey);
    if (count) count[2]++;
    else counts.set(dayKey, [linkId, new Date(day * DAY_MS).toISOString().slice(0, 10), 1]);
    if (platform === 'android' || platform === 'ios') {
      candidates += `${candidateKey(projectId, platform, fingerprint)}\t${ms}\t${c.lifetimes[i]}\t${id} ${linkId}\n`;
    }
  }
  return { rows, days: [...counts.values()], candidates };
}
