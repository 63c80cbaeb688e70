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
/** Characters of a fingerprint (see {@link clickFingerprint}). */
const FINGERPRINT_CHARS = 22;
/** Tables indexed by visitor or candidate key are used up to this many entries; maps beyond. */
const DENSE_MAX = 1 << 16;
const NEWLINE = 10;
const TAB = 9;
const PLATFORM_LETTER_CODES = PLATFORM_LETTERS.map((letter) => letter.charCodeAt(0));
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
  /** @type {Map<number, [string, string, number]>} */
  const counts = new Map();
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
  /**
   * Visitors (distinct IP and user agent) numbered as they first come, and each one's
   * fingerprint: through a table of every IP and agent pair when it is small (it is, but for a
   * batch of many IPs and many agents), else a map.
   */
  const pairs = ips.length * agents;
  const visitorTable = pairs <= DENSE_MAX ? new Int32Array(pairs).fill(-1) : null;
  /** @type {Map<number, number>} */
  const visitorMap = new Map();
  /** @type {string[]} */
  const fingerprints = [];
  /** Each click's visitor. */
  const clickVisitor = new Uint32Array(c.size);
  /**
   * Each mobile click's candidate key as a number (visitor, project, platform), -1 for others:
   * numbers count clicks per key through a table (or a map), where the key's text (some 80
   * characters) would be hashed per click. The text is made only for the keys' hashes.
   */
  const clickKeys = new Float64Array(c.size);
  let mobile = 0;
  for (let i = 0; i < c.size; i++) {
    const ip = ipOf[c.ip[i]];
    const pair = ip * agents + c.agent[i];
    let visitor = visitorTable ? visitorTable[pair] : (visitorMap.get(pair) ?? -1);
    if (visitor === -1) {
      visitor = fingerprints.push(clickFingerprint(key, ips[ip], c.agents[c.agent[i]])) - 1;
      if (visitorTable) visitorTable[pair] = visitor;
      else visitorMap.set(pair, visitor);
    }
    clickVisitor[i] = visitor;
    const platform = c.platform[i];
    if (platform === PLATFORM_CODES.android || platform === PLATFORM_CODES.ios) {
      clickKeys[i] = (visitor * projects + linkProject[c.link[i]]) * 2 + (platform & 1);
      mobile++;
    } else {
      clickKeys[i] = -1;
    }
  }
  /** Each candidate key's clicks in the batch, then those still to come. */
  const keys = fingerprints.length * projects * 2;
  const perKeyTable = keys <= DENSE_MAX ? new Int32Array(keys) : null;
  /** @type {Map<number, number>} */
  const perKeyMap = new Map();
  for (let i = 0; i < c.size; i++) {
    const k = clickKeys[i];
    if (k === -1) continue;
    if (perKeyTable) perKeyTable[k]++;
    else perKeyMap.set(k, (perKeyMap.get(k) ?? 0) + 1);
  }
  let header = LOG_HEADER;
  for (let l = 0; l < c.linkIds.length; l++) header += `\t${c.projects[l]}\t${c.linkIds[l]}`;
  /**
   * The click lines, written as bytes (every value in them is ASCII) and made text once: a
   * line as a template string made a handful of strings per click for the collector.
   * `\t{link's place}\t` per link, made once.
   */
  const linkPlaces = c.linkIds.map((_, l) => Buffer.from(`\t${l}\t`, 'latin1'));
  const lines = Buffer.allocUnsafe(
    c.size * (1 + ID_CHARS + 2 + FINGERPRINT_CHARS) +
      linkPlaces.reduce((most, place) => Math.max(most, place.length), 0) * c.size,
  );
  let end = 0;
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
    const fingerprint = fingerprints[clickVisitor[i]];
    // The click's time is its id's: the redirect makes both from one clock reading.
    lines[end++] = NEWLINE;
    for (let j = i * ID_CHARS; j < (i + 1) * ID_CHARS; j++) lines[end++] = c.ids[j];
    const place = linkPlaces[link];
    for (let j = 0; j < place.length; j++) lines[end++] = place[j];
    lines[end++] = PLATFORM_LETTER_CODES[c.platform[i]];
    lines[end++] = TAB;
    for (let j = 0; j < FINGERPRINT_CHARS; j++) lines[end++] = fingerprint.charCodeAt(j);
    const day = Math.floor(ms / DAY_MS);
    const dayKey = link * 1e6 + day;
    const count = counts.get(dayKey);
    if (count) count[2]++;
    else counts.set(dayKey, [linkId, new Date(day * DAY_MS).toISOString().slice(0, 10), 1]);
    const k = clickKeys[i];
    if (k !== -1) {
      const toCome = perKeyTable ? perKeyTable[k]-- : /** @type {number} */ (perKeyMap.get(k));
      if (!perKeyTable) perKeyMap.set(k, toCome - 1);
      if (toCome <= keepPerKey) {
        // The key's hash and the member's bytes (`clk_{id} {link id}`) written as they are, not
        // as text to be encoded and hashed.
        const prefix = (k % (projects * 2)) * 2;
        if (lanesMade[prefix / 2] === 0) {
          hashLanes(candidateKey(c.projects[link], PLATFORMS[c.platform[i]], ''), lanes, prefix);
          lanesMade[prefix / 2] = 1;
        }
        const lo = hashAfter(lanes, prefix, fingerprint);
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
  const rows = header + lines.toString('latin1', 0, end);
  return { rows, days: [...counts.values()], candidates: candidates.finish() };
}
