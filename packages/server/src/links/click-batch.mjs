// @ts-check
/**
 * A batch of clicks as the recorder keeps it (columns, see {@link ClickColumns}) and what it is
 * written as (log text, day counts, match candidates, each click's fingerprint), shared by the
 * main thread and the click writer thread. Plain JavaScript for the writer thread's sake: Node 20
 * does not hand the TypeScript loader to worker threads. Types: click-batch.d.mts.
 */
import { createHmac, hash } from 'node:crypto';
import { CandidateRecords, hashAfter, hashHigh, hashLanes } from './candidate-records.mjs';

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
 * The deferred-match candidate key of a mobile click (see candidates.ts).
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

/**
 * The first line of a batch's log text in the compact form (see click-log.ts), which every
 * batch is written in since 2026-11-27: this marker, then each of the batch's links as its
 * project id and link id, all tab-separated.
 */
export const LOG_HEADER = '#2';

/** A click's platform as a compact log line writes it, by platform code. */
export const PLATFORM_LETTERS = /** @type {const} */ (['d', 'a', 'i', 'b']);

const DAY_MS = 86_400_000;
const CLICK_ID_PREFIX = new TextEncoder().encode('clk_');
const encoder = new TextEncoder();

/**
 * A batch of clicks, column by column: typed arrays indexed by click (the first `size` entries),
 * small tables of the distinct links and user agents they point into, and the IPs as bytes. The
 * redirect's thread fills it without making an object per click; this is also what it sends the
 * writer thread.
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
 *   ipText: Uint8Array,
 *   ipEnds: Uint32Array,
 *   agents: string[],
 * }} ClickColumns
 *
 * `ids`: each click id's {@link ID_CHARS} characters after `clk_`, Latin-1, back to back.
 * `lifetimes`: how long a mobile click stays a deferred-match candidate (ms); 0 for others.
 * `link`: an index into `projects` and `linkIds`; `agent`: into `agents`.
 * `ip`: an index into the IPs written in `ipText` (UTF-8, back to back; IP `k` ends at
 * `ipEnds[k]`). A click whose IP is the previous click's shares its entry; others have one of
 * their own, even for an IP seen earlier in the batch (see {@link batchOutput}). Bytes, not
 * strings: an IP string from a proxy's header is a slice that keeps the whole header value
 * alive, and strings held for a batch's 100 ms were most of what every young-generation
 * collection of the redirect's thread copied (some 200 KB of 320 KB each time under traffic
 * from many visitors).
 */

/**
 * The batch's IPs as strings, each distinct one once, and each entry of `ipEnds`' place among
 * them.
 * @param {ClickColumns} c
 */
function distinctIps(c) {
  const text = Buffer.from(c.ipText.buffer, c.ipText.byteOffset, c.ipText.byteLength);
  /** @type {string[]} */
  const ips = [];
  /** @type {Map<string, number>} */
  const index = new Map();
  const of = new Uint32Array(c.ipEnds.length);
  let start = 0;
  for (let k = 0; k < c.ipEnds.length; k++) {
    const end = c.ipEnds[k];
    const ip = text.toString('utf8', start, end);
    start = end;
    let at = index.get(ip);
    if (at === undefined) {
      at = ips.push(ip) - 1;
      index.set(ip, at);
    }
    of[k] = at;
  }
  return { ips, of };
}

/**
 * What a batch is written as, computed off the redirect's thread (each click's fingerprint
 * included):
 * - `rows`: its `link_click_log` text in the compact form (see click-log.ts): a line naming the
 *   batch's links, then one line per click (its id's ULID, its link's place in the first line,
 *   its platform's letter, its fingerprint), some 55 bytes where a line with the ids and time
 *   written out took 140;
 * - `days`: its clicks counted per link and UTC day: link id, `YYYY-MM-DD`, count;
 * - `candidates`: its mobile clicks as deferred-match candidates, as the binary records
 *   `RecentRing.remember` (recent.mjs) takes (candidate-records.mjs: the candidate key's hash,
 *   time, expiry and `clickId linkId`), in an `ArrayBuffer` of their own. Only the last
 *   `keepPerKey` of a key are among them: a key keeps no more members than that (the newest),
 *   so older ones of the same batch would be forgotten at once. One visitor clicking again and
 *   again (or many behind one address and browser) then costs the node `keepPerKey` entries per
 *   batch, not one per click.
 * A visitor's fingerprint is computed once per batch: clicks carry their IP and user agent as
 * indexes into the batch's tables, so repeated pairs are found by number.
 * @param {ClickColumns} c
 * @param {string} key from {@link fingerprintKey}
 * @param {number} keepPerKey see `RECENT_MAX_PER_KEY` (recent.mjs)
 * @returns {{ rows: string, days: [string, string, number][], candidates: Uint8Array }}
 */
export function batchOutput(c, key, keepPerKey) {
  const ids = Buffer.from(c.ids.buffer, c.ids.byteOffset, c.ids.byteLength);
  /** @type {Map<number, [string, string, number]>} */
  const counts = new Map();
  /** Fingerprints by visitor (IP index and user-agent index). @type {Map<number, string>} */
  const fingerprints = new Map();
  /** Each click's fingerprint. @type {string[]} */
  const clickFingerprints = new Array(c.size);
  /**
   * Each mobile click's candidate key as a number (visitor, project, platform), -1 for others:
   * a number is hashed for free, where the key's text (some 80 characters) would be hashed per
   * click. The text is made only for the candidates handed over.
   */
  const clickKeys = new Float64Array(c.size);
  /** Each candidate key's clicks in the batch, then those still to come. @type {Map<number, number>} */
  const perKey = new Map();
  /** Each link's project as an index into the batch's distinct projects. */
  const linkProject = new Uint32Array(c.linkIds.length);
  /** @type {Map<string, number>} */
  const projectIndex = new Map();
  for (let l = 0; l < c.linkIds.length; l++) {
    let p = projectIndex.get(c.projects[l]);
    if (p === undefined) {
      p = projectIndex.size;
      projectIndex.set(c.projects[l], p);
    }
    linkProject[l] = p;
  }
  const projects = projectIndex.size;
  const agents = c.agents.length;
  const { ips, of: ipOf } = distinctIps(c);
  let mobile = 0;
  for (let i = 0; i < c.size; i++) {
    const ip = ipOf[c.ip[i]];
    const visitor = ip * agents + c.agent[i];
    let fingerprint = fingerprints.get(visitor);
    if (fingerprint === undefined) {
      fingerprint = clickFingerprint(key, ips[ip], c.agents[c.agent[i]]);
      fingerprints.set(visitor, fingerprint);
    }
    clickFingerprints[i] = fingerprint;
    const platform = c.platform[i];
    if (platform === PLATFORM_CODES.android || platform === PLATFORM_CODES.ios) {
      // Below 2n³ for a batch of n clicks (n² visitors, n projects, 2 platforms): exact up to
      // n = 160,000, and a batch holds 2000.
      const k = (visitor * projects + linkProject[c.link[i]]) * 2 + (platform & 1);
      clickKeys[i] = k;
      perKey.set(k, (perKey.get(k) ?? 0) + 1);
      mobile++;
    } else {
      clickKeys[i] = -1;
    }
  }
  let rows = LOG_HEADER;
  for (let l = 0; l < c.linkIds.length; l++) rows += `\t${c.projects[l]}\t${c.linkIds[l]}`;
  // Room for every mobile click's record (a click candidate's is 87 bytes).
  const candidates = new CandidateRecords(mobile * 96);
  /**
   * The hash lanes of each candidate key's prefix (`links:fp:{project}:{platform}:`), by project
   * and platform, made when first needed: a key's hash then reads only its fingerprint.
   */
  const lanes = new Int32Array(projects * 4);
  const lanesMade = new Uint8Array(projects * 2);
  /** Each link's id as a member ends (` {link id}`, UTF-8), made when first needed. */
  const linkTails = /** @type {(Uint8Array | undefined)[]} */ (new Array(c.linkIds.length));
  for (let i = 0; i < c.size; i++) {
    const link = c.link[i];
    const linkId = c.linkIds[link];
    const ms = c.times[i];
    // The click's time is its id's: the redirect makes both from one clock reading.
    rows += `\n${ids.toString('latin1', i * ID_CHARS, (i + 1) * ID_CHARS)}\t${link}\t${PLATFORM_LETTERS[c.platform[i]]}\t${clickFingerprints[i]}`;
    const day = Math.floor(ms / DAY_MS);
    const dayKey = link * 1e6 + day;
    const count = counts.get(dayKey);
    if (count) count[2]++;
    else counts.set(dayKey, [linkId, new Date(day * DAY_MS).toISOString().slice(0, 10), 1]);
    const k = clickKeys[i];
    if (k !== -1) {
      const toCome = /** @type {number} */ (perKey.get(k));
      perKey.set(k, toCome - 1);
      if (toCome <= keepPerKey) {
        // The key's hash and the member's bytes (`clk_{id} {link id}`) written as they are, not
        // as text to be encoded and hashed.
        const prefix = (k % (projects * 2)) * 2;
        if (lanesMade[prefix / 2] === 0) {
          hashLanes(candidateKey(c.projects[link], PLATFORMS[c.platform[i]], ''), lanes, prefix);
          lanesMade[prefix / 2] = 1;
        }
        const lo = hashAfter(lanes, prefix, clickFingerprints[i]);
        let tail = linkTails[link];
        if (tail === undefined) {
          tail = encoder.encode(` ${linkId}`);
          linkTails[link] = tail;
        }
        const length = CLICK_ID_PREFIX.length + ID_CHARS + tail.length;
        let at = candidates.open(length);
        const out = candidates.bytes;
        for (let j = 0; j < CLICK_ID_PREFIX.length; j++) out[at++] = CLICK_ID_PREFIX[j];
        for (let j = i * ID_CHARS; j < (i + 1) * ID_CHARS; j++) out[at++] = c.ids[j];
        for (let j = 0; j < tail.length; j++) out[at++] = tail[j];
        candidates.close(lo, hashHigh(), ms, c.lifetimes[i], length);
      }
    }
  }
  return { rows, days: [...counts.values()], candidates: candidates.finish() };
}
